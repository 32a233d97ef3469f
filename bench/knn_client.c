/*
 * knn_client: a client's batch of query vectors sent to genie three ways,
 * as an application sends them (libpq, one connection, parameters of the
 * extended protocol), and the round trip of each as the client sees it
 * (sending, parsing, planning, searching; building the parameter is not
 * counted):
 *   text    genie_knn(index, $1::real[], k), $1 the array as text;
 *   binary  the same, $1 in the binary array format (array_recv);
 *   bytes   genie_knn_bytes(index, $1, dim, k), $1 a binary bytea of the
 *           vectors' float32 values in this host's order (little-endian on
 *           x86 and ARM, what genie_knn_bytes reads; numpy's tobytes()).
 * The queries are the first QUERIES images of a Fashion-MNIST idx file
 * (pixel values as floats, as bench/vector_copy.py loads them: whole
 * numbers, so the text form is shorter and quicker to parse than of
 * arbitrary floats).  Each way's
 * rows are checked equal (an md5 of every row) before timing; then ROUNDS
 * rounds of one statement each way, in turn; prints each way's median,
 * least and greatest wall time (ms, count(*) over the rows) and the query
 * rate.
 *
 * With SINGLE=N in the environment, also single statements, as an
 * application sends one query at a time: SELECT id FROM <the index's
 * table> ORDER BY <its column> <-> q LIMIT k for each of the first N
 * queries, four ways:
 *   literal   q an array literal in the statement's text (PQexec);
 *   text      q the parameter $1, as text (parsed and planned every time);
 *   binary    q the parameter, in the binary array format;
 *   prepared  the binary parameter to a statement prepared once.
 * Every way's ids (in order) are checked equal; then ROUNDS rounds of the
 * N statements each way, in turn; ms a statement (the round's wall time
 * over N), median, least and greatest.
 *
 *   knn_client CONNINFO INDEX IDX_FILE [QUERIES 10000] [K 10] [ROUNDS 5]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define FLOAT4OID 700

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void
put_be32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a, y = *(const double *) b;

	return (x > y) - (x < y);
}

/* One statement with one parameter; its first value (exits on an error). */
static char *
run(PGconn *conn, const char *sql, const char *value, int length, int format, unsigned int type)
{
	const char *values[1] = {value};
	int			lengths[1] = {length};
	int			formats[1] = {format};
	Oid			types[1] = {type};
	PGresult   *res = PQexecParams(conn, sql, 1, types, values, lengths, formats, 0);
	char	   *out;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "knn_client: %s", PQerrorMessage(conn));
		exit(1);
	}
	out = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	return out;
}

/* A 64-bit FNV-1a hash of s, continued from h. */
static uint64_t
fnv(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char) *s) * 1099511628211ULL;
	return h;
}

/*
 * One single statement the given way (0 literal, 1 text, 2 binary, 3
 * prepared) for query q; its ids folded into *hash.
 */
static void
single(PGconn *conn, int way, const char *literal_sql, const char *param_sql, const char *text,
	   const unsigned char *binary, int binary_len, uint64_t *hash)
{
	const char *values[1] = {way == 1 ? text : (const char *) binary};
	int			lengths[1] = {way == 1 ? 0 : binary_len};
	int			formats[1] = {way == 1 ? 0 : 1};
	Oid			types[1] = {way == 1 ? 0 : 1021};	/* float4[] */
	PGresult   *res;

	if (way == 0)
		res = PQexec(conn, literal_sql);
	else if (way == 3)
		res = PQexecPrepared(conn, "genie_single", 1, values, lengths, formats, 0);
	else
		res = PQexecParams(conn, param_sql, 1, types, values, lengths, formats, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "knn_client: %s", PQerrorMessage(conn));
		exit(1);
	}
	for (int r = 0; r < PQntuples(res); r++)
		*hash = fnv(fnv(*hash, PQgetvalue(res, r, 0)), ",");
	*hash = fnv(*hash, ";");
	PQclear(res);
}

/* SINGLE=n: single statements of the first n queries, four ways (see the top). */
static void
single_statements(PGconn *conn, const char *index, const float *vectors, int dim, int n, int k, int rounds)
{
	const char *names[4] = {"literal", "text", "binary", "prepared"};
	char		sql[512], param_sql[512];
	char	  **texts = malloc(sizeof(char *) * n), **literals = malloc(sizeof(char *) * n);
	unsigned char **binaries = malloc(sizeof(unsigned char *) * n);
	int			binary_len = 20 + dim * 8;
	char	   *table, *column;
	uint64_t	hashes[4];
	double	   *ms[4];
	PGresult   *res;

	snprintf(sql, sizeof(sql),
			 "SELECT quote_ident(c.relname), quote_ident(a.attname) FROM pg_index i "
			 "JOIN pg_class c ON c.oid = i.indrelid "
			 "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
			 "WHERE i.indexrelid = '%s'::regclass", index);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
	{
		fprintf(stderr, "knn_client: no table for %s: %s", index, PQerrorMessage(conn));
		exit(1);
	}
	table = strdup(PQgetvalue(res, 0, 0));
	column = strdup(PQgetvalue(res, 0, 1));
	PQclear(res);
	snprintf(param_sql, sizeof(param_sql), "SELECT id FROM %s ORDER BY %s <-> $1::real[] LIMIT %d", table, column, k);
	for (int q = 0; q < n; q++)
	{
		char	   *p = texts[q] = malloc((size_t) dim * 5 + 3);
		unsigned char *b = binaries[q] = malloc(binary_len);

		*p++ = '{';
		for (int j = 0; j < dim; j++)
			p += sprintf(p, j ? ",%d" : "%d", (int) vectors[(size_t) q * dim + j]);
		*p++ = '}';
		*p = '\0';
		literals[q] = malloc(strlen(texts[q]) + 256);
		sprintf(literals[q], "SELECT id FROM %s ORDER BY %s <-> '%s'::real[] LIMIT %d", table, column, texts[q], k);
		put_be32(b, 1);
		put_be32(b + 4, 0);
		put_be32(b + 8, FLOAT4OID);
		put_be32(b + 12, dim);
		put_be32(b + 16, 1);
		for (int j = 0; j < dim; j++)
		{
			uint32_t	bits;

			memcpy(&bits, &vectors[(size_t) q * dim + j], 4);
			put_be32(b + 20 + j * 8, 4);
			put_be32(b + 20 + j * 8 + 4, bits);
		}
	}
	{
		Oid			types[1] = {1021};
		char		prep[512];

		snprintf(prep, sizeof(prep), "SELECT id FROM %s ORDER BY %s <-> $1 LIMIT %d", table, column, k);
		res = PQprepare(conn, "genie_single", prep, 1, types);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
		{
			fprintf(stderr, "knn_client: %s", PQerrorMessage(conn));
			exit(1);
		}
		PQclear(res);
	}
	/* the ids of every way, in order, and a first pass of each (warm) */
	for (int w = 0; w < 4; w++)
	{
		hashes[w] = 14695981039346656037ULL;
		for (int q = 0; q < n; q++)
			single(conn, w, literals[q], param_sql, texts[q], binaries[q], binary_len, &hashes[w]);
		ms[w] = malloc(sizeof(double) * rounds);
	}
	printf("== single statements: %d queries, SELECT id FROM %s ORDER BY %s <-> q LIMIT %d; ids %s (fnv %016llx)\n",
		   n, table, column, k,
		   hashes[0] == hashes[1] && hashes[0] == hashes[2] && hashes[0] == hashes[3] ? "equal" : "DIFFER",
		   (unsigned long long) hashes[0]);
	if (hashes[0] != hashes[1] || hashes[0] != hashes[2] || hashes[0] != hashes[3])
		exit(1);
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < 4; w++)
		{
			double		t0 = now_ms();
			uint64_t	h = 0;

			for (int q = 0; q < n; q++)
				single(conn, w, literals[q], param_sql, texts[q], binaries[q], binary_len, &h);
			ms[w][r] = (now_ms() - t0) / n;
		}
	printf("%-9s %10s %10s %10s %14s\n", "way", "median_ms", "min_ms", "max_ms", "statements/s");
	for (int w = 0; w < 4; w++)
	{
		double		med;

		qsort(ms[w], rounds, sizeof(double), cmp_double);
		med = rounds % 2 ? ms[w][rounds / 2] : (ms[w][rounds / 2 - 1] + ms[w][rounds / 2]) / 2;
		printf("%-9s %10.3f %10.3f %10.3f %14.0f\n", names[w], med, ms[w][0], ms[w][rounds - 1], 1e3 / med);
	}
}

int
main(int argc, char **argv)
{
	const char *names[3] = {"text", "binary", "bytes"};
	int			nq = argc > 4 ? atoi(argv[4]) : 10000;
	int			k = argc > 5 ? atoi(argv[5]) : 10;
	int			rounds = argc > 6 ? atoi(argv[6]) : 5;
	unsigned char header[16];
	int			dim;
	unsigned char *pixels;
	float	   *vectors;
	char	   *text, *p;
	unsigned char *binary;
	size_t		binary_len;
	char		sql[3][512], check[3][640];
	const char *value[3];
	int			length[3], format[3];
	unsigned int type[3];
	double	   *ms[3];
	FILE	   *f;
	PGconn	   *conn;

	if (argc < 4 || nq < 1 || k < 1 || rounds < 1)
	{
		fprintf(stderr, "usage: knn_client CONNINFO INDEX IDX_FILE [QUERIES] [K] [ROUNDS] (each at least 1)\n");
		return 2;
	}
	if ((f = fopen(argv[3], "rb")) == NULL || fread(header, 1, 16, f) != 16)
	{
		fprintf(stderr, "knn_client: cannot read %s\n", argv[3]);
		return 1;
	}
	dim = ((header[8] << 24) | (header[9] << 16) | (header[10] << 8) | header[11]) *
		((header[12] << 24) | (header[13] << 16) | (header[14] << 8) | header[15]);
	pixels = malloc((size_t) nq * dim);
	if (fread(pixels, 1, (size_t) nq * dim, f) != (size_t) nq * dim)
	{
		fprintf(stderr, "knn_client: %s has fewer than %d images\n", argv[3], nq);
		return 1;
	}
	fclose(f);
	vectors = malloc(sizeof(float) * nq * dim);
	for (size_t i = 0; i < (size_t) nq * dim; i++)
		vectors[i] = pixels[i];

	/* text: {{v,v,...},{...}} */
	text = malloc((size_t) nq * dim * 5 + nq * 3 + 3);
	p = text;
	*p++ = '{';
	for (int q = 0; q < nq; q++)
	{
		*p++ = '{';
		for (int j = 0; j < dim; j++)
			p += sprintf(p, j ? ",%d" : "%d", (int) vectors[(size_t) q * dim + j]);
		*p++ = '}';
		if (q + 1 < nq)
			*p++ = ',';
	}
	*p++ = '}';
	*p = '\0';
	/* binary array: ndim, has-nulls, element type, then each dimension's size and lower bound, then each element's length and big-endian value */
	binary_len = 20 + 8 + (size_t) nq * dim * 8;
	binary = malloc(binary_len);
	put_be32(binary, 2);
	put_be32(binary + 4, 0);
	put_be32(binary + 8, FLOAT4OID);
	put_be32(binary + 12, nq);
	put_be32(binary + 16, 1);
	put_be32(binary + 20, dim);
	put_be32(binary + 24, 1);
	for (size_t i = 0; i < (size_t) nq * dim; i++)
	{
		uint32_t	bits;

		memcpy(&bits, &vectors[i], 4);
		put_be32(binary + 28 + i * 8, 4);
		put_be32(binary + 28 + i * 8 + 4, bits);
	}

	snprintf(sql[0], sizeof(sql[0]), "SELECT count(*) FROM genie_knn('%s', $1::real[], %d)", argv[2], k);
	snprintf(sql[1], sizeof(sql[1]), "SELECT count(*) FROM genie_knn('%s', $1, %d)", argv[2], k);
	snprintf(sql[2], sizeof(sql[2]), "SELECT count(*) FROM genie_knn_bytes('%s', $1, %d, %d)", argv[2], dim, k);
	for (int w = 0; w < 3; w++)
		snprintf(check[w], sizeof(check[w]),
				 "SELECT md5(string_agg(query_no || ' ' || ctid || ' ' || distance, ',' ORDER BY query_no, distance, ctid)) FROM %s",
				 strstr(sql[w], "genie_knn"));
	value[0] = text, length[0] = 0, format[0] = 0, type[0] = 0;
	value[1] = (const char *) binary, length[1] = (int) binary_len, format[1] = 1, type[1] = 1021;	/* float4[] */
	value[2] = (const char *) vectors, length[2] = (int) (sizeof(float) * nq * dim), format[2] = 1, type[2] = 17;	/* bytea */

	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "knn_client: %s", PQerrorMessage(conn));
		return 1;
	}
	printf("== knn_client: %d queries of %d dimensions, k %d, %d rounds; parameters: text %zu bytes, binary array %zu bytes, bytea %zu bytes\n",
		   nq, dim, k, rounds, strlen(text), binary_len, sizeof(float) * nq * dim);
	{
		char	   *sums[3];

		char	   *count = run(conn, sql[2], value[2], length[2], format[2], type[2]);

		if (atol(count) < 1)
		{
			fprintf(stderr, "knn_client: the search found no rows\n");
			return 1;
		}
		for (int w = 0; w < 3; w++)
			sums[w] = run(conn, check[w], value[w], length[w], format[w], type[w]);
		printf("rows: %s %s\n", strcmp(sums[0], sums[1]) == 0 && strcmp(sums[0], sums[2]) == 0 ? "equal" : "DIFFER",
			   sums[0]);
		if (strcmp(sums[0], sums[1]) != 0 || strcmp(sums[0], sums[2]) != 0)
			return 1;
	}
	for (int w = 0; w < 3; w++)
		ms[w] = malloc(sizeof(double) * rounds);
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < 3; w++)
		{
			double		t0 = now_ms();

			free(run(conn, sql[w], value[w], length[w], format[w], type[w]));
			ms[w][r] = now_ms() - t0;
		}
	printf("%-7s %10s %10s %10s %14s %14s\n", "way", "median_ms", "min_ms", "max_ms", "queries/s", "text/way");
	{
		double		med[3];

		for (int w = 0; w < 3; w++)
		{
			qsort(ms[w], rounds, sizeof(double), cmp_double);
			med[w] = rounds % 2 ? ms[w][rounds / 2] : (ms[w][rounds / 2 - 1] + ms[w][rounds / 2]) / 2;
		}
		for (int w = 0; w < 3; w++)
			printf("%-7s %10.1f %10.1f %10.1f %14.0f %13.2fx\n", names[w], med[w], ms[w][0], ms[w][rounds - 1],
				   nq / (med[w] / 1e3), med[0] / med[w]);
	}
	if (getenv("SINGLE") != NULL && atoi(getenv("SINGLE")) > 0)
		single_statements(conn, argv[2], vectors, dim, atoi(getenv("SINGLE")) < nq ? atoi(getenv("SINGLE")) : nq,
						  k, rounds);
	PQfinish(conn);
	return 0;
}
