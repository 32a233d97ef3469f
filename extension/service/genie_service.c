/*-------------------------------------------------------------------------
 *
 * genie_service.c
 *	  The genie service's shared control area, the registration of its
 *	  worker, and the SQL functions that show what it does (see
 *	  genie_service.h for the protocol).
 *
 * Everything here exists only when genie is in shared_preload_libraries:
 * the control area is sized from MaxBackends in the shmem request hook,
 * and the worker is registered with a restart time, so that the postmaster
 * starts it again whenever it exits with an error (terminated, a GPU
 * failure).  Without preloading genie_service_shared stays NULL and
 * backends search in-process.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "service/genie_service.h"

bool		genie_shared_postings = true;
double		genie_batch_window_ms = 0.2;
GenieServiceShared *genie_service_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size
shared_size(void)
{
	return add_size(offsetof(GenieServiceShared, slots),
					mul_size(sizeof(GenieServiceSlot), MaxBackends));
}

static void
genie_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
	RequestNamedLWLockTranche("genie service", 1);
}

static void
genie_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	genie_service_shared = ShmemInitStruct("genie service", shared_size(), &found);
	if (!found)
	{
		memset(genie_service_shared, 0, shared_size());
		SpinLockInit(&genie_service_shared->mutex);
		genie_service_shared->stats_lock = &(GetNamedLWLockTranche("genie service"))->lock;
		genie_service_shared->n_slots = MaxBackends;
		pg_atomic_init_u64(&genie_service_shared->shared_dropped, 0);
		for (int i = 0; i < MaxBackends; i++)
		{
			genie_service_shared->slots[i].segment = DSM_HANDLE_INVALID;
			pg_atomic_init_u32(&genie_service_shared->slots[i].wake_word, 0);
			pg_atomic_init_u32(&genie_service_shared->slots[i].sleeping, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
genie_service_register(void)
{
	BackgroundWorker worker;

	DefineCustomRealVariable("genie.batch_window",
							 "How long the genie service waits for more queries to batch together.",
							 "Only while queries keep arriving: a request that finds the service "
							 "idle runs at once.  0 batches only what arrived while the previous "
							 "batch ran.",
							 &genie_batch_window_ms,
							 0.2, 0.0, 100.0,
							 PGC_SIGHUP, GUC_UNIT_MS,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("genie.shared_postings",
							 "Whether backends search a genie service's shared copy of an index's "
							 "postings themselves when the service has no usable GPU.",
							 "The service then keeps each version's main postings in shared memory, "
							 "one copy for the server, and a backend maps it and searches it on its "
							 "own CPU engine instead of sending each search to the service.  Off: "
							 "every search goes to the service, as on a server with a GPU.",
							 &genie_shared_postings,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	if (!process_shared_preload_libraries_in_progress)
		return;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = genie_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = genie_shmem_startup;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	/* exits with an error (terminated, a GPU failure) are restarted after this */
	worker.bgw_restart_time = 1;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "genie");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "genie_service_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "genie service");
	snprintf(worker.bgw_type, BGW_MAXLEN, "genie service");
	RegisterBackgroundWorker(&worker);
}

bool
genie_service_configured(void)
{
	return genie_service_shared != NULL;
}

bool
genie_service_attach(void)
{
	return genie_service_shared != NULL;
}

bool
genie_service_keys_equal(const GenieServiceKey *a, const GenieServiceKey *b)
{
	return a->database == b->database && a->backend == b->backend &&
		GenieRelFileEquals(a->node, b->node) &&
		a->postings_head == b->postings_head && a->main_version == b->main_version &&
		a->n_main_objects == b->n_main_objects &&
		a->n_keywords == b->n_keywords && a->n_postings == b->n_postings;
}

/* ---- SQL ---- */

PG_FUNCTION_INFO_V1(genie_service_status);

/* One row: whether the service runs, its pid, the GPU it found, totals. */
Datum
genie_service_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[8];
	bool		nulls[8] = {false};
	GenieServiceShared *sh = genie_service_shared;
	int64		host = 0,
				device = 0;
	int			resident = 0;
	char		reason[sizeof(sh->gpu_reason)];

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	values[0] = BoolGetDatum(sh != NULL);
	if (sh == NULL)
	{
		for (int i = 1; i < 8; i++)
			nulls[i] = true;
		PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
	}

	SpinLockAcquire(&sh->mutex);
	values[1] = BoolGetDatum(sh->ready);
	values[2] = Int32GetDatum(sh->pid);
	nulls[2] = !sh->ready;
	values[3] = BoolGetDatum(sh->gpu_usable);
	nulls[4] = sh->gpu_usable || sh->gpu_reason[0] == '\0';
	strlcpy(reason, sh->gpu_reason, sizeof(reason));
	SpinLockRelease(&sh->mutex);
	values[4] = CStringGetTextDatum(reason);

	LWLockAcquire(sh->stats_lock, LW_SHARED);
	for (int i = 0; i < sh->n_stats; i++)
	{
		if (!sh->stats[i].resident)
			continue;
		if (sh->stats[i].content == GENIE_SERVED_POSTINGS)
			resident++;
		host += sh->stats[i].host_bytes;
		device += sh->stats[i].device_bytes;
	}
	LWLockRelease(sh->stats_lock);
	values[5] = Int32GetDatum(resident);
	values[6] = Int64GetDatum(host);
	values[7] = Int64GetDatum(device);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

PG_FUNCTION_INFO_V1(genie_service_stats);

/* A row per index version and engine the service holds or served. */
Datum
genie_service_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceIndexStats *copy;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	if (sh == NULL)
		return (Datum) 0;

	LWLockAcquire(sh->stats_lock, LW_SHARED);
	n = sh->n_stats;
	copy = palloc(sizeof(GenieServiceIndexStats) * Max(n, 1));
	memcpy(copy, sh->stats, sizeof(GenieServiceIndexStats) * n);
	LWLockRelease(sh->stats_lock);

	for (int i = 0; i < n; i++)
	{
		GenieServiceIndexStats *s = &copy[i];
		Datum		values[16];
		bool		nulls[16] = {false};

		values[0] = ObjectIdGetDatum(s->key.database);
		values[1] = ObjectIdGetDatum(s->index_oid);
		values[2] = CStringGetTextDatum(s->engine == GENIE_ENGINE_GPU ? "gpu" : "cpu");
		values[3] = BoolGetDatum(s->resident);
		values[4] = Int32GetDatum(s->key.n_main_objects);
		values[5] = Int64GetDatum(s->host_bytes);
		values[6] = Int64GetDatum(s->device_bytes);
		values[7] = Int64GetDatum(s->loads);
		values[8] = Int64GetDatum(s->batches);
		values[9] = Int64GetDatum(s->requests);
		values[10] = Int64GetDatum(s->queries);
		values[11] = Float8GetDatum(s->batches > 0 ? (double) s->queries / s->batches : 0.0);
		values[12] = Int64GetDatum(s->max_batch_queries);
		values[13] = Float8GetDatum(s->requests > 0 ? s->queue_wait_ms / s->requests : 0.0);
		values[14] = Float8GetDatum(s->engine_ms);
		values[15] = CStringGetTextDatum(s->content == GENIE_SERVED_STRINGS ? "strings"
										 : s->content == GENIE_SERVED_VECTORS ? "vectors"
										 : s->content == GENIE_SERVED_CODES ? "codes" : "postings");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
