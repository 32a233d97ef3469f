/*-------------------------------------------------------------------------
 *
 * genie_scan_ahead.c
 *	  A batch's first queries scanned while the backend reads the rest
 *	  (genie_scan_ahead.h).
 *
 * genie_knn_from of 10,000 Fashion-MNIST rows spent about 20 ms reading
 * its query rows (the cursor, then decompressing them on every core) and
 * then 30 ms in the engine, one after the other (bench/latency.md).  Here
 * a thread of the backend's own runs the engine on each piece of rows as
 * soon as the backend has read it, so the engine's time hides behind the
 * reading but for the last piece.  The visibility checks still run once,
 * over the whole batch's rows, after the reading (checking each piece's
 * rows apart pinned the same heap pages once per piece, which cost more
 * than it hid).
 *
 * The thread calls the C API alone (genie_value_set_scan, as the genie
 * service's runners do), on copies of the pieces' vectors (malloc'd: the
 * reader's buffer grows by repalloc and may move; a stored array expanded
 * in place is scanned where it lies, genie_scan_ahead_add_kept), with the entry's set
 * and flags, which the caller's pin keeps.  A copy scanned is used again
 * for a later piece: a fresh copy for every piece faulted its pages in
 * while the reader's threads wrote theirs, and the reading took the longer
 * (bench/latency.md); and the reader waits while GENIE_AHEAD_QUEUED pieces
 * are not scanned yet, so that slow scans (the CPU engine's) never hold a
 * second copy of the whole batch.
 *
 * The thread's signals are blocked from its start, so they all go to the
 * backend's thread.  Its cancel reads QueryCancelPending and ProcDiePending
 * (statement_timeout sets the first) and the scan ahead's own stop, which
 * genie_scan_ahead_end sets on every way out of an ERROR; a FATAL exit
 * skips that, so a before_shmem_exit callback stops and joins every thread
 * still running before the process (and the CUDA runtime) goes.  Each piece's
 * rows are exactly what a scan of the whole batch gives its queries (the
 * engines answer each query alone), so the rounds after the first, the
 * widening for invisible rows, search as before.
 *
 * With the genie service there is no thread: each piece is a request to
 * the service (GenieServicePieces), sent when it is added and answered
 * while the backend reads the next, so the service's search hides behind
 * the reading in the same way (genie_knn of a stored array took as long
 * again through the service as in-process before, bench/latency.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/ipc.h"

#include "genie_utils.h"
#include "search/genie_cache_values.h"
#include "search/genie_scan_ahead.h"
#include "search/genie_search_device.h"
#include "service/genie_service_client.h"
#include "service/genie_service_scan.h"
#include "profile/genie_explain.h"
#include "profile/genie_profile.h"

/* The pieces added and not scanned yet at most: the reader waits beyond. */
#define GENIE_AHEAD_QUEUED	4

/* A piece's copy of its vectors: malloc'd, used again once scanned. */
typedef struct AheadCopy
{
	float	   *vectors;
	Size		floats;
} AheadCopy;

/* One piece of the batch: malloc'd, the thread's until the backend joins it. */
typedef struct AheadPiece
{
	AheadCopy	copy;			/* given back to spare once scanned; none for kept vectors */
	const float *vectors;		/* what is scanned: the copy's, or the caller's kept ones */
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
	int			dim;			/* the entry's */
	int			cores;			/* the cores genie.cpu_threads gives a search */

	pthread_t	thread;
	bool		started;		/* and not joined */
	pthread_mutex_t mutex;
	pthread_cond_t wake;		/* the thread: a piece, or closed */
	pthread_cond_t scanned;		/* the reader: a piece scanned */
	/* under mutex */
	AheadPiece **pieces;
	int			n_pieces;
	int			pieces_room;
	int			n_scanned;
	bool		closed;			/* no piece follows */
	bool		stop;			/* the pieces left are skipped, the one under way cancelled */
	bool		on_gpu;			/* the scans run on a GPU (auto: known after the first) */
	AheadCopy	spare[GENIE_AHEAD_QUEUED];	/* the copies scanned, for the next pieces */
	int			n_spare;

	/* through the genie service: the pieces' requests (no thread) */
	bool		through_service;
	GenieServicePieces service;
	GenieCachedIndex *entry;
	int			n_sent;			/* the pieces sent */

	/* the backend's */
	bool		failed;			/* a piece was not added */
	int			n_queries;		/* the rows added */
	bool		taken;			/* the rows went to the caller */
	GenieScanAhead *next;		/* in the backend's running list */
};

/* The scans ahead whose thread runs, for the proc_exit callback. */
static GenieScanAhead *running = NULL;

/* n query vectors of dim elements, as a batch. */
static GenieValueBatch
vector_batch(const float *vectors, int n, int dim)
{
	GenieValueBatch batch;

	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_VECTORS;
	batch.n = n;
	batch.vectors = vectors;
	batch.dim = dim;
	return batch;
}

/* The scans' cancel: the backend's interrupts, or the scan ahead stopped. */
static int
ahead_cancelled(void *arg)
{
	GenieScanAhead *ahead = arg;
	bool		stop;

	pthread_mutex_lock(&ahead->mutex);
	stop = ahead->stop;
	pthread_mutex_unlock(&ahead->mutex);
	/* (a FATAL clears ProcDiePending before the exit begins) */
	return stop || QueryCancelPending || ProcDiePending || proc_exit_inprogress;
}

static void *
ahead_main(void *arg)
{
	GenieScanAhead *ahead = arg;

	for (int i = 0;; i++)
	{
		AheadPiece *piece = NULL;
		bool		stop;
		GenieValueBatch queries;

		pthread_mutex_lock(&ahead->mutex);
		while (i >= ahead->n_pieces && !ahead->closed)
			pthread_cond_wait(&ahead->wake, &ahead->mutex);
		if (i < ahead->n_pieces)
			piece = ahead->pieces[i];
		stop = ahead->stop;
		pthread_mutex_unlock(&ahead->mutex);
		if (piece == NULL)
			return NULL;
		if (stop)
			piece->status = GENIE_CANCELLED;
		else
		{
			queries = vector_batch(piece->vectors, piece->n, ahead->dim);
			piece->status = genie_value_set_scan(ahead->set, ahead->device, &ahead->options, &queries,
												 ahead->k, ahead->excluded, NULL, NULL, NULL,
												 GENIE_LIST_NEVER, &piece->found, &piece->err);
		}
		/* genie.device = auto: the first piece tells where the scans run; on a GPU they take half the cores */
		if (i == 0 && piece->status == GENIE_OK)
		{
			bool		on_gpu = genie_value_found_device(&piece->found) == GENIE_ENGINE_GPU;

			if (on_gpu)
				ahead->options.threads = Max(1, ahead->cores / 2);
			pthread_mutex_lock(&ahead->mutex);
			ahead->on_gpu = on_gpu;
			pthread_mutex_unlock(&ahead->mutex);
		}
		pthread_mutex_lock(&ahead->mutex);
		if (ahead->n_spare < GENIE_AHEAD_QUEUED && piece->copy.vectors != NULL)
		{
			ahead->spare[ahead->n_spare++] = piece->copy;
			piece->copy.vectors = NULL;
		}
		/* a failed piece: the batch is searched again as usual, so the rest would be wasted */
		if (piece->status != GENIE_OK)
			ahead->stop = true;
		ahead->n_scanned++;
		pthread_cond_signal(&ahead->scanned);
		pthread_mutex_unlock(&ahead->mutex);
	}
}

/* Lets the thread end after the pieces it has (all skipped when stop), and waits for it. */
static void
ahead_join(GenieScanAhead *ahead, bool stop)
{
	if (!ahead->started)
		return;
	pthread_mutex_lock(&ahead->mutex);
	ahead->closed = true;
	ahead->stop |= stop;
	pthread_cond_signal(&ahead->wake);
	pthread_mutex_unlock(&ahead->mutex);
	pthread_join(ahead->thread, NULL);
	ahead->started = false;
	for (GenieScanAhead **p = &running; *p != NULL; p = &(*p)->next)
		if (*p == ahead)
		{
			*p = ahead->next;
			break;
		}
}

/*
 * A FATAL exit skips the callers' PG_FINALLY: the threads still running
 * are stopped and joined first thing, before the transaction's abort, the
 * cache, and the process's (and the CUDA runtime's) teardown.
 */
static void
stop_running_at_exit(int code, Datum arg)
{
	while (running != NULL)
	{
		ahead_join(running, true);
		elog(DEBUG1, "genie: a scan ahead stopped at the backend's exit");
	}
}

/* A condition variable whose timed waits count on the monotonic clock. */
static bool
monotonic_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	bool		made;

	if (pthread_condattr_init(&attr) != 0)
		return false;
	made = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(cond, &attr) == 0;
	pthread_condattr_destroy(&attr);
	return made;
}

/*
 * Through the genie service, which answers the main objects (the pending
 * ones are scanned here at the finish, as genie_search_values does): the
 * pieces go to the service as they are added, each answered while the
 * backend reads the next.  The service's own process does the scans, so a
 * backend of one core gains as well.  NULL while the service is away (the
 * search then falls back as it says), with no main objects, or when a
 * piece's answer would be past what the service hands back (a k of
 * thousands: the search splits the batch).  Nothing of the entry is
 * loaded here.
 */
static GenieScanAhead *
begin_through_service(GenieCachedIndex *entry, int32 k)
{
	GenieScanAhead *ahead;
	GenieServicePieces pieces;
	int32		n_excluded;
	const int32 *excluded;
	int32		first_k = genie_search_first_k(k, entry->n_objects);
	int			piece = genie_scan_ahead_piece_rows(entry->value_dim);
	GenieValueBatch widest = vector_batch(NULL, piece, entry->value_dim);

	if (entry->n_main_objects == 0 || !genie_service_ready() ||
		genie_value_batch_bytes(&widest, 0, piece) +
		GENIE_SCAN_ANSWER_BYTES(piece, Min(first_k, entry->n_main_objects)) > GENIE_SERVICE_MAX_ANSWER_BYTES)
		return NULL;
	excluded = genie_cache_excluded_main(entry, &n_excluded);
	/* (EXPLAIN (ANALYZE) counts the queries read through a List of Clusters, as ask_values does) */
	genie_service_pieces_begin(&pieces, &entry->main_key, entry->index_oid, genie_device_setting,
							   first_k, genie_cluster_list_knn, genie_explain_analyzing, excluded,
							   n_excluded);
	/* (calloc'd last: nothing after it may raise an error before the caller has it) */
	ahead = calloc(1, sizeof(GenieScanAhead));
	if (ahead == NULL)
	{
		genie_service_pieces_end(&pieces);
		return NULL;
	}
	ahead->through_service = true;
	ahead->service = pieces;
	ahead->entry = entry;
	ahead->dim = entry->value_dim;
	ahead->k = first_k;
	return ahead;
}

GenieScanAhead *
genie_scan_ahead_begin(GenieCachedIndex *entry, int32 k)
{
	static bool exit_callback = false;
	genie_engine_kind device;
	int			cores;
	const GenieValueSet *set;
	GenieScanAhead *ahead;

	/* what genie_search_values would not answer by one exact scan */
	if (entry->values_kind != GENIE_VALUES_VECTORS || entry->n_objects == 0 ||
		entry->value_dim <= 0 || genie_search_approximate(GENIE_VALUES_VECTORS) ||
		genie_search_permutation(GENIE_VALUES_VECTORS))
		return NULL;
	if (genie_service_configured())
		return begin_through_service(entry, k);
	cores = genie_cpu_threads > 0 ? genie_cpu_threads : (int) Max(1, sysconf(_SC_NPROCESSORS_ONLN));
	/* one core: the reading and the scans would take turns on it anyway */
	if (cores < 2)
		return NULL;

	/*
	 * Loaded here, before the caller reads a row (a load may move to a new
	 * version).
	 */
	set = genie_cache_values(entry);
	device = genie_search_device();
	/* (as the search itself decides it) */
	if (genie_search_values_list(entry, GENIE_VALUES_VECTORS, device) != NULL)
		return NULL;

	ahead = calloc(1, sizeof(GenieScanAhead));
	if (ahead == NULL)
		return NULL;
	if (pthread_mutex_init(&ahead->mutex, NULL) != 0)
	{
		free(ahead);
		return NULL;
	}
	if (pthread_cond_init(&ahead->wake, NULL) != 0 || !monotonic_cond_init(&ahead->scanned))
	{
		/* (a condition variable that failed to initialise is not destroyed: glibc's never fail) */
		pthread_mutex_destroy(&ahead->mutex);
		free(ahead);
		return NULL;
	}
	ahead->set = set;
	ahead->excluded = entry->excluded;
	ahead->device = device;
	ahead->dim = entry->value_dim;
	ahead->k = genie_search_first_k(k, entry->n_objects);
	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								ahead_cancelled, ahead, &ahead->options);

	/*
	 * The cores genie.cpu_threads gives a search are split beside GPU scans:
	 * the reading takes half and the scans' host side (padding, uploads, the
	 * finish) the rest: on a 16-core GPU host, both on every core read
	 * 25-50% slower than the reading alone, and the statement gained
	 * 1.0-1.25x; at 8 each the reading kept its pace.  CPU scans, most of
	 * the work, keep every core (at one fewer they ran slower after the
	 * reading too), and the reading's expansions, a few ms a piece, take
	 * one thread beside them.  Under genie.device = auto the first piece
	 * runs as on the CPU and tells where the rest run (no CUDA probe here:
	 * it would make a context on every GPU of the host).
	 */
	ahead->cores = cores;
	ahead->on_gpu = device == GENIE_ENGINE_GPU;
	ahead->options.threads = ahead->on_gpu ? cores / 2 : cores;
	if (!exit_callback)
	{
		/* (registered in a transaction, after InitPostgres: runs before ShutdownPostgres) */
		before_shmem_exit(stop_running_at_exit, (Datum) 0);
		exit_callback = true;
	}
	return ahead;
}

int
genie_scan_ahead_reading_threads(GenieScanAhead *ahead)
{
	bool		scanning;

	/* before the first piece, and once the scans stopped, the reading has every thread */
	int			threads;

	/* the service scans in its own process */
	if (ahead->through_service)
		return genie_cpu_threads;
	pthread_mutex_lock(&ahead->mutex);
	scanning = ahead->started && !ahead->stop && !ahead->failed;
	threads = ahead->on_gpu ? ahead->cores - ahead->cores / 2 : 1;
	pthread_mutex_unlock(&ahead->mutex);
	return scanning ? threads : genie_cpu_threads;
}

/* The thread, at the first piece: false when it cannot start. */
static bool
ahead_start(GenieScanAhead *ahead)
{
	sigset_t	all,
				saved;

	/* the thread inherits this mask: no signal ever reaches it */
	if (sigfillset(&all) == 0 && pthread_sigmask(SIG_BLOCK, &all, &saved) == 0)
	{
		ahead->started = pthread_create(&ahead->thread, NULL, ahead_main, ahead) == 0;
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	}
	if (ahead->started)
	{
		ahead->next = running;
		running = ahead;
		elog(DEBUG1, "genie: a scan ahead started");
	}
	return ahead->started;
}

/*
 * genie_scan_ahead_add and _add_kept: the piece's vectors copied (copy),
 * or scanned where they are.
 */
static void
ahead_add(GenieScanAhead *ahead, const float *vectors, int n, int dim, bool copy)
{
	AheadPiece *piece;
	Size		floats = (Size) n * Max(dim, 0);
	bool		added = false;

	if (n <= 0 || ahead->failed)
		return;
	if (ahead->through_service)
	{
		GenieValueBatch piece = vector_batch(vectors, n, dim);

		/* (written into the request segment: no copy is kept) */
		if (dim != ahead->dim || !genie_service_pieces_add(&ahead->service, &piece))
			ahead->failed = true;
		else
		{
			ahead->n_sent++;
			ahead->n_queries += n;
		}
		return;
	}
	/* rows of another width: the search reports them, the scans are not for them */
	if (dim != ahead->dim || (!ahead->started && !ahead_start(ahead)))
	{
		ahead->failed = true;
		return;
	}
	/* at most GENIE_AHEAD_QUEUED pieces wait to be scanned; a cancel is seen within 20 ms */
	pthread_mutex_lock(&ahead->mutex);
	while (ahead->n_pieces - ahead->n_scanned >= GENIE_AHEAD_QUEUED && !ahead->stop)
	{
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 20 * 1000 * 1000;
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&ahead->scanned, &ahead->mutex, &until);
		if (INTERRUPTS_PENDING_CONDITION())
		{
			pthread_mutex_unlock(&ahead->mutex);
			CHECK_FOR_INTERRUPTS();
			pthread_mutex_lock(&ahead->mutex);
		}
	}
	if (ahead->stop)
	{
		/* a piece failed: the batch is searched as usual once read, so no more copies */
		pthread_mutex_unlock(&ahead->mutex);
		ahead->failed = true;
		return;
	}
	pthread_mutex_unlock(&ahead->mutex);
	/* a copy scanned already, large enough, or a new one */
	piece = calloc(1, sizeof(AheadPiece));
	if (piece != NULL && copy)
	{
		pthread_mutex_lock(&ahead->mutex);
		for (int i = 0; i < ahead->n_spare; i++)
			if (ahead->spare[i].floats >= floats)
			{
				piece->copy = ahead->spare[i];
				ahead->spare[i] = ahead->spare[--ahead->n_spare];
				break;
			}
		pthread_mutex_unlock(&ahead->mutex);
	}
	if (piece != NULL && copy && piece->copy.vectors == NULL)
	{
		piece->copy.vectors = malloc(sizeof(float) * floats);
		piece->copy.floats = floats;
	}
	if (piece != NULL && copy && piece->copy.vectors != NULL)
	{
		memcpy(piece->copy.vectors, vectors, sizeof(float) * floats);
		piece->vectors = piece->copy.vectors;
	}
	else if (piece != NULL && !copy)
		piece->vectors = vectors;
	if (piece != NULL && piece->vectors != NULL)
	{
		piece->n = n;
		pthread_mutex_lock(&ahead->mutex);
		if (ahead->n_pieces == ahead->pieces_room)
		{
			int			room = Max(ahead->pieces_room * 2, 16);
			AheadPiece **grown = realloc(ahead->pieces, sizeof(AheadPiece *) * room);

			if (grown != NULL)
			{
				ahead->pieces = grown;
				ahead->pieces_room = room;
			}
		}
		if (ahead->n_pieces < ahead->pieces_room)
		{
			ahead->pieces[ahead->n_pieces++] = piece;
			added = true;
			pthread_cond_signal(&ahead->wake);
		}
		pthread_mutex_unlock(&ahead->mutex);
	}
	if (!added)
	{
		/* no room for the piece: the batch is searched as usual once read */
		if (piece != NULL)
			free(piece->copy.vectors);
		free(piece);
		ahead->failed = true;
		pthread_mutex_lock(&ahead->mutex);
		ahead->stop = true;
		pthread_mutex_unlock(&ahead->mutex);
		return;
	}
	ahead->n_queries += n;
}

void
genie_scan_ahead_add(GenieScanAhead *ahead, const float *vectors, int n, int dim)
{
	ahead_add(ahead, vectors, n, dim, true);
}

void
genie_scan_ahead_add_kept(GenieScanAhead *ahead, const float *vectors, int n, int dim)
{
	ahead_add(ahead, vectors, n, dim, false);
}

/* genie_scan_ahead_finish through the service */
static bool
finish_through_service(GenieScanAhead *ahead, const float *vectors, int nq, GenieValueRows *first)
{
	GenieServicePieces *sp = &ahead->service;
	GenieValueBatch queries;
	GenieValueRows main_rows;

	/* no piece, or one not sent: the batch is searched as usual (a piece out is withdrawn at the end) */
	if (ahead->n_sent == 0 || ahead->failed)
		return false;
	if (!genie_service_pieces_finish(sp) || ahead->n_queries != nq || sp->n_answered != nq)
		return false;
	/* the rows are the caller's from here */
	main_rows = sp->rows;
	memset(&sp->rows, 0, sizeof(sp->rows));
	queries = vector_batch(vectors, nq, ahead->dim);
	genie_search_values_from_service(ahead->entry, &queries, ahead->k, sp->engine, sp->device_fallback,
									 &main_rows, first);
	if (sp->list_counts[0] > 0)
		genie_explain_list(sp->list_counts[0], sp->list_counts[1]);
	genie_explain_ahead(nq, ahead->n_sent);
	return true;
}

bool
genie_scan_ahead_finish(GenieScanAhead *ahead, const float *vectors, int nq, GenieValueRows *first)
{
	GenieValueFound *parts;

	if (ahead->through_service)
		return finish_through_service(ahead, vectors, nq, first);
	if (!ahead->started)
		return false;			/* no piece: the batch is searched as usual */
	genie_profile_push(GENIE_PHASE_ENGINE);
	ahead_join(ahead, false);
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
	genie_explain_ahead(nq, ahead->n_pieces);
	return true;
}

void
genie_scan_ahead_end(GenieScanAhead *ahead)
{
	if (ahead == NULL)
		return;
	if (ahead->through_service)
	{
		/* a piece still out is withdrawn */
		genie_service_pieces_end(&ahead->service);
		free(ahead);
		return;
	}
	ahead_join(ahead, true);
	for (int i = 0; i < ahead->n_pieces; i++)
	{
		AheadPiece *piece = ahead->pieces[i];

		free(piece->copy.vectors);
		if (piece->status == GENIE_OK && !ahead->taken)
			genie_value_found_free(&piece->found);
		free(piece);
	}
	free(ahead->pieces);
	for (int i = 0; i < ahead->n_spare; i++)
		free(ahead->spare[i].vectors);
	pthread_cond_destroy(&ahead->scanned);
	pthread_cond_destroy(&ahead->wake);
	pthread_mutex_destroy(&ahead->mutex);
	free(ahead);
}
