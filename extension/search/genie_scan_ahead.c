/*-------------------------------------------------------------------------
 *
 * genie_scan_ahead.c
 *	  A batch's first queries scanned while the backend reads the rest
 *	  (genie_scan_ahead.h).
 *
 * genie_knn_from of 10,000 Fashion-MNIST rows spent about 20 ms reading
 * its query rows (the cursor, then decompressing them on every core) and
 * then 30 ms in the engine, one after the other (bench/latency.md).  Here
 * one thread of the backend's own runs the engine on each piece of rows as
 * soon as the backend has read it, so the engine's time hides behind the
 * reading but for the last piece (on the CPU engine too, whose scans share
 * the cores with the reading: bench/latency.md has both).  The visibility
 * checks still run once,
 * over the whole batch's rows, after the reading (checking each piece's
 * rows apart pinned the same heap pages once per piece, which cost more
 * than it hid).
 *
 * The thread calls the C API alone (genie_value_set_scan, as the genie
 * service's runners do), on copies of the pieces' vectors (malloc'd: the
 * reader's buffer grows by repalloc and may move), with the entry's set
 * and flags, which the caller's pin keeps.  A copy scanned is used again
 * for a later piece: a fresh one for every piece faulted its pages in
 * while the reader's threads wrote theirs, and the reading took the
 * longer (bench/latency.md).  Its signals are
 * blocked from its start, so they all go to the backend's thread.  Its
 * cancel reads QueryCancelPending and ProcDiePending (statement_timeout
 * sets the first) and the scan ahead's own stop, which
 * genie_scan_ahead_end sets on every way out.  Each piece's rows are
 * exactly what a scan of the whole batch gives its queries (the engines
 * answer each query alone), so the rounds after the first, the widening
 * for invisible rows, search as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "port/atomics.h"

#include "genie_utils.h"
#include "search/genie_cache_values.h"
#include "search/genie_scan_ahead.h"
#include "service/genie_service_client.h"
#include "profile/genie_explain.h"
#include "profile/genie_profile.h"

/* A piece's copy of its vectors: malloc'd, used again once scanned. */
typedef struct AheadRoom
{
	float	   *vectors;
	Size		floats;
} AheadRoom;

/* One piece of the batch: malloc'd, the thread's until the backend joins it. */
typedef struct AheadPiece
{
	AheadRoom	room;			/* the copy, given back to spare once scanned */
	int			n;
	genie_status status;
	GenieValueFound found;		/* when status is GENIE_OK, until taken */
	genie_error err;
} AheadPiece;

struct GenieScanAhead
{
	/* what every scan reads, set before the thread starts */
	const GenieValueSet *set;
	const uint8 *excluded;
	genie_engine_kind device;
	genie_engine_options options;
	int32		k;				/* the first round's k' */
	int			dim;

	pthread_t	thread;
	bool		started;		/* and not joined */
	pthread_mutex_t mutex;
	pthread_cond_t wake;
	/* under mutex */
	AheadPiece **pieces;
	int			n_pieces;
	int			room;
	bool		closed;			/* no piece follows */
	AheadRoom	spare[GENIE_SCAN_AHEAD_SPARE];	/* the copies scanned, for the next pieces */
	int			n_spare;

	pg_atomic_uint32 stop;		/* the scans left are skipped, the one under way cancelled */
	bool		failed;			/* (the backend's) a piece was not added */
	int			n_queries;		/* (the backend's) the rows added */
	bool		taken;			/* the rows went to the caller */
	int			reading_threads;	/* the caller's, while it reads */
};

/*
 * Whether the scans run on a GPU: genie.device = gpu, or auto with the GPU
 * a search would use usable (the CUDA probe is made once a process).
 */
static bool
scans_on_gpu(genie_engine_kind device, int ordinal)
{
	genie_device_info devices[17];
	size_t		count = 0;
	genie_error err;

	if (device != GENIE_ENGINE_AUTO)
		return device == GENIE_ENGINE_GPU;
	if (genie_list_devices(devices, lengthof(devices), &count, &err) != GENIE_OK)
		return false;
	for (size_t i = 0; i < count && i < lengthof(devices); i++)
		if (devices[i].kind == GENIE_DEVICE_GPU && devices[i].ordinal == ordinal)
			return devices[i].usable != 0;
	return false;
}

/* The scans' cancel: the backend's interrupts, or the scan ahead stopped. */
static int
ahead_cancelled(void *arg)
{
	GenieScanAhead *ahead = arg;

	return pg_atomic_read_u32(&ahead->stop) != 0 || QueryCancelPending || ProcDiePending;
}

static void *
ahead_main(void *arg)
{
	GenieScanAhead *ahead = arg;

	for (int i = 0;; i++)
	{
		AheadPiece *piece = NULL;
		GenieValueBatch queries;

		pthread_mutex_lock(&ahead->mutex);
		while (i >= ahead->n_pieces && !ahead->closed)
			pthread_cond_wait(&ahead->wake, &ahead->mutex);
		if (i < ahead->n_pieces)
			piece = ahead->pieces[i];
		pthread_mutex_unlock(&ahead->mutex);
		if (piece == NULL)
			return NULL;
		if (ahead_cancelled(ahead))
			piece->status = GENIE_CANCELLED;
		else
		{
			memset(&queries, 0, sizeof(queries));
			queries.kind = GENIE_VALUES_VECTORS;
			queries.n = piece->n;
			queries.vectors = piece->room.vectors;
			queries.dim = ahead->dim;
			piece->status = genie_value_set_scan(ahead->set, ahead->device, &ahead->options, &queries,
												 ahead->k, ahead->excluded, NULL, NULL, NULL,
												 GENIE_LIST_NEVER, &piece->found, &piece->err);
		}
		pthread_mutex_lock(&ahead->mutex);
		if (ahead->n_spare < GENIE_SCAN_AHEAD_SPARE)
		{
			ahead->spare[ahead->n_spare++] = piece->room;
			piece->room.vectors = NULL;
		}
		pthread_mutex_unlock(&ahead->mutex);
		/* a failed piece: the batch is searched again as usual, so the rest would be wasted */
		if (piece->status != GENIE_OK)
			pg_atomic_write_u32(&ahead->stop, 1);
	}
}

GenieScanAhead *
genie_scan_ahead_begin(GenieCachedIndex *entry, int dim, int32 k)
{
	genie_engine_kind device;
	GenieScanAhead *ahead;
	sigset_t	all,
				saved;

	/* what genie_search_values would not answer by one exact in-process scan */
	if (entry->values_kind != GENIE_VALUES_VECTORS || entry->n_objects == 0 ||
		entry->value_dim != dim || dim <= 0 || genie_search_approximate(GENIE_VALUES_VECTORS) ||
		genie_search_permutation(GENIE_VALUES_VECTORS) || genie_service_configured())
		return NULL;
	device = genie_search_device();
	if (genie_search_values_list(entry, GENIE_VALUES_VECTORS, device) != NULL)
		return NULL;

	ahead = calloc(1, sizeof(GenieScanAhead));
	if (ahead == NULL)
		return NULL;
	ahead->set = genie_cache_values(entry);
	ahead->excluded = entry->excluded;
	ahead->device = device;
	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								ahead_cancelled, ahead, &ahead->options);

	/*
	 * Beside GPU scans the reading takes half the cores and the scans' host
	 * side (padding, uploads, the finish) the rest: on a 16-core GPU host,
	 * both on every core read 25-50% slower than the reading alone, and
	 * the statement gained 1.0-1.25x; at 8 each the reading kept its pace.
	 * CPU scans keep every core: they are most of the work, and the reading
	 * beside them on every core cost nothing measurable on two cores
	 * (bench/latency.md).
	 */
	ahead->reading_threads = genie_cpu_threads;
	if (scans_on_gpu(device, ahead->options.device_ordinal))
	{
		int			cores = genie_cpu_threads > 0 ? genie_cpu_threads
			: (int) Max(1, sysconf(_SC_NPROCESSORS_ONLN));

		ahead->options.threads = Max(1, cores / 2);
		ahead->reading_threads = Max(1, cores - ahead->options.threads);
	}
	ahead->k = genie_search_first_k(k, entry->n_objects);
	ahead->dim = dim;
	pg_atomic_init_u32(&ahead->stop, 0);
	if (pthread_mutex_init(&ahead->mutex, NULL) != 0)
	{
		free(ahead);
		return NULL;
	}
	if (pthread_cond_init(&ahead->wake, NULL) != 0)
	{
		pthread_mutex_destroy(&ahead->mutex);
		free(ahead);
		return NULL;
	}
	/* the thread inherits this mask: no signal ever reaches it */
	if (sigfillset(&all) == 0 && pthread_sigmask(SIG_BLOCK, &all, &saved) == 0)
	{
		ahead->started = pthread_create(&ahead->thread, NULL, ahead_main, ahead) == 0;
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	}
	if (!ahead->started)
	{
		pthread_cond_destroy(&ahead->wake);
		pthread_mutex_destroy(&ahead->mutex);
		free(ahead);
		return NULL;
	}
	return ahead;
}

void
genie_scan_ahead_add(GenieScanAhead *ahead, const float *vectors, int n)
{
	AheadPiece *piece;
	bool		added = false;

	if (n <= 0 || ahead->failed)
		return;
	piece = calloc(1, sizeof(AheadPiece));
	if (piece != NULL)
	{
		Size		floats = (Size) n * ahead->dim;

		/* a copy scanned already, large enough, else a new one */
		pthread_mutex_lock(&ahead->mutex);
		for (int i = 0; i < ahead->n_spare; i++)
			if (ahead->spare[i].floats >= floats)
			{
				piece->room = ahead->spare[i];
				ahead->spare[i] = ahead->spare[--ahead->n_spare];
				break;
			}
		pthread_mutex_unlock(&ahead->mutex);
		if (piece->room.vectors == NULL)
		{
			piece->room.vectors = malloc(sizeof(float) * floats);
			piece->room.floats = floats;
		}
	}
	if (piece != NULL && piece->room.vectors != NULL)
	{
		memcpy(piece->room.vectors, vectors, sizeof(float) * (Size) n * ahead->dim);
		piece->n = n;
		pthread_mutex_lock(&ahead->mutex);
		if (ahead->n_pieces == ahead->room)
		{
			int			room = Max(ahead->room * 2, 16);
			AheadPiece **grown = realloc(ahead->pieces, sizeof(AheadPiece *) * room);

			if (grown != NULL)
			{
				ahead->pieces = grown;
				ahead->room = room;
			}
		}
		if (ahead->n_pieces < ahead->room)
		{
			ahead->pieces[ahead->n_pieces++] = piece;
			added = true;
			pthread_cond_signal(&ahead->wake);
		}
		pthread_mutex_unlock(&ahead->mutex);
	}
	if (!added)
	{
		/* no room for the copy: the batch is searched as usual once read */
		if (piece != NULL)
			free(piece->room.vectors);
		free(piece);
		ahead->failed = true;
		pg_atomic_write_u32(&ahead->stop, 1);
		return;
	}
	ahead->n_queries += n;
}

/* Lets the thread end after the pieces it has, and waits for it. */
static void
ahead_join(GenieScanAhead *ahead)
{
	if (!ahead->started)
		return;
	pthread_mutex_lock(&ahead->mutex);
	ahead->closed = true;
	pthread_cond_signal(&ahead->wake);
	pthread_mutex_unlock(&ahead->mutex);
	pthread_join(ahead->thread, NULL);
	ahead->started = false;
}

int
genie_scan_ahead_reading_threads(const GenieScanAhead *ahead)
{
	return ahead->reading_threads;
}

bool
genie_scan_ahead_finish(GenieScanAhead *ahead, int nq, GenieValueRows *first)
{
	GenieValueFound *parts;

	genie_profile_push(GENIE_PHASE_ENGINE);
	ahead_join(ahead);
	genie_profile_pop();
	if (ahead->failed || ahead->n_queries != nq || nq == 0)
		return false;
	for (int i = 0; i < ahead->n_pieces; i++)
		if (ahead->pieces[i]->status != GENIE_OK)
		{
			/* a cancel is the statement's error; any other, the usual search reports */
			CHECK_FOR_INTERRUPTS();
			return false;
		}
	parts = palloc(sizeof(GenieValueFound) * ahead->n_pieces);
	for (int i = 0; i < ahead->n_pieces; i++)
		parts[i] = ahead->pieces[i]->found;
	ahead->taken = true;
	genie_search_ran_on(genie_value_found_device(&parts[0]), false);
	genie_value_rows_take(parts, ahead->n_pieces, NULL, first);
	pfree(parts);
	genie_search_count(nq, ahead->k, first->offsets[nq]);
	genie_explain_ahead(nq, ahead->n_pieces);
	return true;
}

void
genie_scan_ahead_end(GenieScanAhead *ahead)
{
	if (ahead == NULL)
		return;
	pg_atomic_write_u32(&ahead->stop, 1);
	ahead_join(ahead);
	for (int i = 0; i < ahead->n_pieces; i++)
	{
		AheadPiece *piece = ahead->pieces[i];

		free(piece->room.vectors);
		if (piece->status == GENIE_OK && !ahead->taken)
			genie_value_found_free(&piece->found);
		free(piece);
	}
	free(ahead->pieces);
	for (int i = 0; i < ahead->n_spare; i++)
		free(ahead->spare[i].vectors);
	pthread_cond_destroy(&ahead->wake);
	pthread_mutex_destroy(&ahead->mutex);
	free(ahead);
}
