/*
 * genie_expand.c's pglz and lz4 expanders against PostgreSQL's
 * pglz_decompress and liblz4's LZ4_decompress_safe (the server's, looked up
 * at run time), on Fashion-MNIST's 10,000 test images as one real[] array's
 * bytes (31 MB, the batch of bench/batch-ab's vectors kinds) and on
 * synthetic float arrays; each value compressed as the server compresses a
 * stored value (pglz's default strategy, one lz4 block).  Every expansion is
 * checked byte for byte against the input, ours in pieces of PIECE bytes as
 * genie_query_array.c asks.  Built and run by bench/expand-bench.
 *
 *   expand_bench IDX_FILE [ROUNDS] [PIECE] [MUTATIONS] [THREADS...]
 *
 * THREADS: also genie_expand_parallel.c's pglz expander on that many
 * threads (each a list's), in cuts of GENIE_EXPAND_PART_BYTES a thread
 * (the first of GENIE_EXPAND_FIRST_PART_BYTES) as genie_query_array.c
 * asks, the threads started for each step (the server keeps a pool: a
 * little faster).
 *
 * MUTATIONS > 0: also expands that many copies of each compressed value
 * with random bytes changed (built with -fsanitize=address by
 * bench/expand-bench FUZZ=N): corrupt data must be refused or expanded
 * within the output, never read or written outside, and each copy
 * accepted exactly when the library accepts it (pglz_decompress asked for
 * the whole value; LZ4_decompress_safe giving the value's size), with the
 * same bytes.
 */
#include "postgres_fe.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include "common/pg_lzcompress.h"
#include "functions/genie_expand.h"
#include "functions/genie_expand_parallel.h"

typedef int (*Lz4Compress) (const char *src, char *dst, int size, int capacity);
typedef int (*Lz4Decompress) (const char *src, char *dst, int size, int capacity);
typedef int (*Lz4Bound) (int size);

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* cuts expanded on threads, and those given back to the expansion in order */
static int	cuts_parallel;
static int	cuts_refused;

typedef struct Team
{
	int			n;
	void		(*body) (int64 i, void *arg);
	void	   *arg;
	int			next;			/* the next i, taken under the lock */
	pthread_mutex_t lock;
} Team;

static void *
team_main(void *arg)
{
	Team	   *team = arg;

	for (;;)
	{
		int			i;

		pthread_mutex_lock(&team->lock);
		i = team->next++;
		pthread_mutex_unlock(&team->lock);
		if (i >= team->n)
			return NULL;
		team->body(i, team->arg);
	}
}

/* A GenieExpandRun: threads - 1 started, the caller the last. */
static bool
run_on_threads(int n, int threads, void (*body) (int64 i, void *arg), void *arg)
{
	Team		team = {n, body, arg, 0, PTHREAD_MUTEX_INITIALIZER};
	pthread_t	started[64];
	int			nstarted = 0;

	while (nstarted < Min(threads, n) - 1 && nstarted < 64 &&
		   pthread_create(&started[nstarted], NULL, team_main, &team) == 0)
		nstarted++;
	team_main(&team);
	for (int t = 0; t < nstarted; t++)
		pthread_join(started[t], NULL);
	return true;
}

/*
 * Ours in pieces of piece bytes (pglz on threads threads when more than
 * one); false on corrupt data or a short value.
 */
static bool
expand_ours(bool lz4, const char *comp, int clen, char *out, int rawlen, size_t piece, int threads)
{
	GenieExpand s;

	s.sp = (const unsigned char *) comp;
	s.srcend = s.sp + clen;
	s.dest = (unsigned char *) out;
	s.dp = s.dest;
	s.destend = s.dest + rawlen;
	for (size_t upto = piece; s.dp < s.destend; upto += piece)
	{
		if (!lz4 && threads > 1 && (size_t) (s.dp - s.dest) < upto)
		{
			/* (the rest in order once it could not go all the way, as genie_query_array.c) */
			if (genie_expand_pglz_parallel(&s, threads * (s.dp == s.dest ? GENIE_EXPAND_FIRST_PART_BYTES
														  : GENIE_EXPAND_PART_BYTES),
										   threads, run_on_threads))
				cuts_parallel++;
			else
			{
				cuts_refused++;
				threads = 1;
			}
		}
		if (!(lz4 ? genie_expand_lz4(&s, upto) : genie_expand_pglz(&s, upto)))
			return false;
		/* the input ended short of the piece: a truncated value (as genie_query_array_read sees it) */
		if (s.dp < s.destend && (Size) (s.dp - s.dest) < upto)
			return false;
	}
	return s.sp == s.srcend;
}

/*
 * Expands mutations copies of comp, each with 1 to 8 random bytes changed,
 * in pieces (ASan sees any access outside the buffers); the count refused.
 */
static int
mutate(bool lz4, const char *comp, int clen, int rawlen, size_t piece, int mutations, int threads,
	   Lz4Decompress lz4_decompress, int *differ, int *differ_library)
{
	char	   *copy = malloc(clen);
	char	   *out = malloc(rawlen);
	char	   *out_parallel = malloc(rawlen);
	char	   *out_library = malloc(rawlen);
	int			refused = 0;

	for (int m = 0; m < mutations; m++)
	{
		int			changes = 1 + rand() % 8;
		/* a truncated value too, now and then */
		int			len = m % 5 == 0 ? clen / 2 : clen;
		bool		ok;

		memcpy(copy, comp, clen);
		for (int c = 0; c < changes; c++)
			copy[rand() % clen] = (char) rand();
		ok = expand_ours(lz4, copy, len, out, rawlen, piece, 1);
		if (!ok)
			refused++;

		/*
		 * The library's answer: the server's (pglz_decompress, the whole
		 * value asked; lz4 as the server calls it, a value expanded to its
		 * size): accepted exactly when ours is, with the same bytes.
		 */
		if (!lz4 || lz4_decompress != NULL)
		{
			int			got = lz4 ? lz4_decompress(copy, out_library, len, rawlen)
				: pglz_decompress(copy, len, out_library, rawlen, true);

			if ((got == rawlen) != ok || (ok && memcmp(out, out_library, rawlen) != 0))
				(*differ_library)++;
		}
		/* on threads (given back to the order where it cannot): the same answer */
		if (!lz4 && threads > 1 &&
			(expand_ours(lz4, copy, len, out_parallel, rawlen, piece, threads) != ok ||
			 (ok && memcmp(out, out_parallel, rawlen) != 0)))
			(*differ)++;
	}
	free(copy);
	free(out);
	free(out_parallel);
	free(out_library);
	return refused;
}

int
main(int argc, char **argv)
{
	FILE	   *f;
	unsigned char header[16];
	int			n = 10000,
				dim = 784;
	unsigned char *pixels;
	int			rounds = argc > 2 ? Min(Max(atoi(argv[2]), 1), 64) : 5;
	size_t		piece = argc > 3 && atol(argv[3]) > 0 ? strtoul(argv[3], NULL, 10) : 1024 * 784 * 4;
	int			mutations = argc > 4 ? atoi(argv[4]) : 0;
	int			nthreads = Max(0, Min(argc - 5, 8));
	int			threads[8];
	void	   *lib = dlopen("liblz4.so.1", RTLD_NOW);
	Lz4Compress lz4_compress = lib ? (Lz4Compress) dlsym(lib, "LZ4_compress_default") : NULL;
	Lz4Decompress lz4_decompress = lib ? (Lz4Decompress) dlsym(lib, "LZ4_decompress_safe") : NULL;
	Lz4Bound	lz4_bound = lib ? (Lz4Bound) dlsym(lib, "LZ4_compressBound") : NULL;
	const char *names[] = {"fashion-mnist", "half-zeros", "cyclic"};
	bool		all_equal = true;

	if (argc < 2 || (f = fopen(argv[1], "rb")) == NULL || fread(header, 1, 16, f) != 16)
	{
		fprintf(stderr, "usage: expand_bench IDX_FILE [ROUNDS] [PIECE]\n");
		return 2;
	}
	pixels = malloc((size_t) n * dim);
	if (fread(pixels, 1, (size_t) n * dim, f) != (size_t) n * dim)
	{
		fprintf(stderr, "expand_bench: %s is short\n", argv[1]);
		return 2;
	}
	fclose(f);
	for (int t = 0; t < nthreads; t++)
		threads[t] = Min(Max(atoi(argv[5 + t]), 1), 64);
	printf("rounds %d (median), pieces of %zu bytes; liblz4 %s\n", rounds, piece, lz4_decompress ? "found" : "absent");
	printf("%-14s %-5s %10s %12s %12s %10s %10s\n", "data", "codec", "compressed", "library ms", "genie ms",
		   "library/genie", "genie GB/s");
	for (int variant = 0; variant < 3; variant++)
	{
		/* an array's header (40 bytes of a 2-D real[]), then the floats */
		int			rawlen = n * dim * 4 + 40;
		char	   *raw = calloc(1, rawlen);
		float	   *values = (float *) (raw + 40);
		char	   *out = malloc(rawlen);

		srand(7);
		for (int i = 0; i < n * dim; i++)
			values[i] = variant == 0 ? pixels[i] :
				variant == 1 ? (i % 2 ? (float) (rand() % 1000) : 0.0f) :
				(float) ((i * 5 + (i / dim) * 3) % 9);
		for (int codec = 0; codec < 2; codec++)
		{
			bool		lz4 = codec == 1;
			char	   *comp;
			int			clen;
			double		lib_ms[64],
						ours_ms[64];

			if (lz4 && (lz4_compress == NULL || lz4_bound == NULL))
				continue;
			comp = malloc(lz4 ? lz4_bound(rawlen) : PGLZ_MAX_OUTPUT(rawlen));
			clen = lz4 ? lz4_compress(raw, comp, rawlen, lz4_bound(rawlen))
				: pglz_compress(raw, rawlen, comp, PGLZ_strategy_default);
			if (clen <= 0)
			{
				printf("%-14s %-5s not compressed\n", names[variant], lz4 ? "lz4" : "pglz");
				free(comp);
				continue;
			}
			/* a round of each, the first not counted (the output's pages) */
			for (int r = 0; r <= rounds; r++)
			{
				double		t0,
							t1,
							t2;
				int			got;
				bool		ok;

				memset(out, 0xAB, rawlen);
				t0 = now_ms();
				got = lz4 ? lz4_decompress(comp, out, clen, rawlen)
					: pglz_decompress(comp, clen, out, rawlen, true);
				t1 = now_ms();
				if (got != rawlen || memcmp(out, raw, rawlen) != 0)
					all_equal = false;
				memset(out, 0xAB, rawlen);
				t2 = now_ms();
				ok = expand_ours(lz4, comp, clen, out, rawlen, piece, 1);
				if (r > 0)
				{
					lib_ms[r - 1] = t1 - t0;
					ours_ms[r - 1] = now_ms() - t2;
				}
				if (!ok || memcmp(out, raw, rawlen) != 0)
					all_equal = false;
			}
			{
				double		lib = median(lib_ms, rounds),
							ours = median(ours_ms, rounds);

				printf("%-14s %-5s %10d %12.1f %12.1f %12.2fx %10.2f\n", names[variant], lz4 ? "lz4" : "pglz",
					   clen, lib, ours, lib / ours, rawlen / ours / 1e6);
			}
			/* pglz on threads: against ours in order, the rounds of each thread count in turn */
			if (!lz4 && nthreads > 0)
			{
				double		par_ms[8][64];
				double		seq_ms[64];

				cuts_parallel = cuts_refused = 0;
				for (int r = 0; r <= rounds; r++)
				{
					double		t0;
					bool		ok;

					memset(out, 0xAB, rawlen);
					t0 = now_ms();
					ok = expand_ours(false, comp, clen, out, rawlen, piece, 1);
					if (r > 0)
						seq_ms[r - 1] = now_ms() - t0;
					if (!ok || memcmp(out, raw, rawlen) != 0)
						all_equal = false;
					for (int t = 0; t < nthreads; t++)
					{
						memset(out, 0xAB, rawlen);
						t0 = now_ms();
						ok = expand_ours(false, comp, clen, out, rawlen, piece, threads[t]);
						if (r > 0)
							par_ms[t][r - 1] = now_ms() - t0;
						if (!ok || memcmp(out, raw, rawlen) != 0)
							all_equal = false;
					}
				}
				{
					double		seq = median(seq_ms, rounds);

					for (int t = 0; t < nthreads; t++)
					{
						double		par = median(par_ms[t], rounds);

						printf("%-14s %-5s %2d threads: %6.1f ms, in order %6.1f ms: %5.2fx, %5.2f GB/s\n",
							   names[variant], "pglz", threads[t], par, seq, seq / par, rawlen / par / 1e6);
					}
					printf("%-14s %-5s cuts on threads %d, given back to the order %d\n", names[variant], "pglz",
						   cuts_parallel, cuts_refused);
				}
			}
			if (mutations > 0)
			{
				int			differ = 0;
				int			differ_library = 0;
				int			refused = mutate(lz4, comp, clen, rawlen, piece, mutations,
											 nthreads > 0 ? threads[nthreads - 1] : 1, lz4_decompress,
											 &differ, &differ_library);

				printf("%-14s %-5s %d mutated values expanded in bounds, %d refused as corrupt; the library "
					   "answered %d otherwise", names[variant], lz4 ? "lz4" : "pglz", mutations, refused,
					   differ_library);
				if (!lz4 && nthreads > 0)
					printf("; on %d threads %d answered otherwise", threads[nthreads - 1], differ);
				printf("\n");
				if (differ > 0 || differ_library > 0)
					all_equal = false;
			}
			free(comp);
		}
		free(raw);
		free(out);
	}
	free(pixels);
	printf("every expansion equal to its input: %s\n", all_equal ? "yes" : "NO");
	return all_equal ? 0 : 1;
}
