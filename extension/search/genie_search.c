/*-------------------------------------------------------------------------
 *
 * genie_search.c
 *	  Searching a genie index (see genie_search.h): engine choice, the
 *	  out-of-memory fallback, main-plus-pending merge, and the visible top k
 *	  of a batch.
 *
 * Policy lives here and nowhere else:
 *	- genie.device = cpu runs the CPU engine; gpu the GPU engine, an error
 *	  without a usable GPU; auto the GPU when one is usable, else the CPU
 *	  with one NOTICE per backend.
 *	- A GPU that runs out of memory even after multiple loading (the engine
 *	  splits the objects into parts itself) hands the batch to the CPU with a
 *	  NOTICE, unless genie.device = gpu, which makes it an error.  The same
 *	  holds for genie_similar's verification.
 *	- The pending list is always counted by the CPU engine (it is small, and
 *	  changes with every insert); the main and pending top k are merged by
 *	  the core (genie_results_merge), as one engine over all objects would
 *	  rank them.
 *	- Every engine gets genie_cancel_requested, so that a cancel or
 *	  statement_timeout stops a long search within the engines' polling
 *	  interval.
 *	- With genie preloaded, the main postings are searched by the genie
 *	  service (genie_service.h), which applies the same rules to each
 *	  request's genie.device; a backend then never initialises CUDA.  When
 *	  the service is away (restarting), auto and cpu search in-process on
 *	  the CPU engine (auto with one NOTICE) and gpu is an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"

#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "search/genie_search.h"
#include "search/genie_visibility.h"
#include "profile/genie_explain.h"
#include "storage/genie_content.h"
#include "service/genie_service.h"
#include "service/genie_service_client.h"
#include "profile/genie_profile.h"

int			genie_gpu_set_min_postings = 16384;

static bool said_cpu_fallback = false;
static bool said_service_away = false;

/* ---- engines ---- */

static genie_engine_kind ran_engine = GENIE_ENGINE_CPU;
static bool ran_by_service = false;
static bool ran_shared = false;

void
genie_search_ran_on(genie_engine_kind engine, bool by_service)
{
	ran_engine = engine;
	ran_by_service = by_service;
	ran_shared = false;
}

void
genie_search_count(int nq, int64 k, int64 rows)
{
	genie_explain_search(nq, k, rows, ran_engine, ran_by_service, ran_shared);
}

/* The options of an engine of this backend: cancel and statement_timeout stop it. */
static void
engine_options(genie_engine_kind kind, genie_engine_options *options)
{
	genie_search_engine_options(kind, genie_cancel_requested, NULL, options);
}

/*
 * Creates an engine with index uploaded; returns NULL when a GPU was asked
 * for and none is usable, if allow_unavailable.
 */
static genie_engine *
make_engine(genie_engine_kind kind, genie_index *index, bool allow_unavailable)
{
	genie_engine_options options;
	genie_engine *engine;
	genie_error err;
	genie_status status;

	engine_options(kind, &options);
	status = genie_engine_create(kind, &options, &engine, &err);
	if (status == GENIE_DEVICE_UNAVAILABLE && allow_unavailable)
		return NULL;
	if (status != GENIE_OK)
		genie_report_error(&err, "genie");
	status = genie_engine_upload(engine, index, &err);
	if (status != GENIE_OK)
	{
		genie_engine_free(engine);
		genie_report_error(&err, "genie");
	}
	return engine;
}

/* The engine genie.device asks for, saying once per backend when auto falls back. */
static genie_engine *
make_main_engine(genie_index *index)
{
	genie_engine *engine;
	genie_build_info build;

	/* preloaded, a backend searches in-process only while the service is away */
	if (genie_service_configured())
		return make_engine(GENIE_ENGINE_CPU, index, false);
	if (genie_search_device() == GENIE_ENGINE_CPU)
		return make_engine(GENIE_ENGINE_CPU, index, false);	/* genie.devices = none */
	switch (genie_device_setting)
	{
		case GENIE_DEVICE_SETTING_CPU:
			return make_engine(GENIE_ENGINE_CPU, index, false);
		case GENIE_DEVICE_SETTING_GPU:
			return make_engine(GENIE_ENGINE_GPU, index, false);
		default:
			engine = make_engine(GENIE_ENGINE_GPU, index, true);
			if (engine != NULL)
				return engine;
			if (!said_cpu_fallback)
			{
				said_cpu_fallback = true;
				genie_get_build_info(&build);
				ereport(NOTICE,
						(errmsg("genie is using the CPU engine: %s",
								build.with_cuda ? "no usable GPU was found"
								: "genie was built without CUDA"),
						 errhint("SELECT * FROM genie_devices() shows what genie can use.")));
			}
			return make_engine(GENIE_ENGINE_CPU, index, false);
	}
}

/* Whether the entry's engine was made for genie.device, genie.devices and genie.placement as they are. */
static bool
engine_current(const GenieCachedIndex *entry)
{
	return entry->engine_setting == genie_device_setting &&
		entry->engine_devices == genie_device_mask &&
		entry->engine_placement == genie_placement_setting;
}

/* Makes the entry's main engine for the current genie.device, replacing another. */
static void
ensure_main_engine(GenieCachedIndex *entry)
{
	if (entry->main_engine != NULL && engine_current(entry))
		return;
	genie_engine_free(entry->main_engine);	/* device memory included */
	entry->main_engine = NULL;
	entry->engine_setting = -1;
	genie_cache_load_main(entry);
	genie_profile_push(GENIE_PHASE_UPLOAD);
	entry->main_engine = make_main_engine(entry->main_index);
	genie_profile_pop();
	entry->engine_setting = genie_device_setting;
	entry->engine_devices = genie_device_mask;
	entry->engine_placement = genie_placement_setting;
	entry->engine_dropped = 0;
}

static void
ensure_pending_engine(GenieCachedIndex *entry)
{
	if (entry->pending_engine == NULL)
		entry->pending_engine = make_engine(GENIE_ENGINE_CPU, entry->pending_index, false);
}

int64
genie_search_match_set(GenieCachedIndex *entry, genie_set_predicate predicate,
					   const int32 *keywords, int n, int32 *out)
{
	int32	   *ids = NULL;
	int64		count = 0;
	genie_error err;
	genie_status status;

	if (genie_service_configured())
		return -1;
	if (genie_device_setting == GENIE_DEVICE_SETTING_GPU)
		ensure_main_engine(entry);
	else if (genie_device_setting != GENIE_DEVICE_SETTING_AUTO || entry->main_engine == NULL ||
			 !engine_current(entry))
		return -1;				/* auto does not make a GPU engine for a set scan */
	if (genie_engine_get_kind(entry->main_engine) != GENIE_ENGINE_GPU)
		return -1;
	genie_profile_push(GENIE_PHASE_ENGINE);
	status = genie_engine_match_set(entry->main_engine, entry->main_index, predicate, keywords, n,
									genie_gpu_set_min_postings, &ids, &count, &err);
	genie_profile_pop();
	/* exact either way: a GPU short of memory leaves the scan to the host */
	if (status == GENIE_DEVICE_OUT_OF_MEMORY)
		return -1;
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: matching a set on the GPU");
	if (count > 0)
		memcpy(out, ids, sizeof(int32) * count);
	genie_ids_free(ids);
	return count;
}

/*
 * The service is away: false for searching in-process (saying so once),
 * an error for genie.device = gpu.
 */
bool
genie_search_service_away(void)
{
	if (genie_device_setting == GENIE_DEVICE_SETTING_GPU)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the genie service is not running"),
				 errhint("The postmaster restarts it within seconds; retry, or set genie.device = 'auto' "
						 "to search on the CPU engine in-process meanwhile.")));
	if (!said_service_away && genie_device_setting == GENIE_DEVICE_SETTING_AUTO)
	{
		said_service_away = true;
		ereport(NOTICE,
				(errmsg("the genie service is not running: genie searches in-process on the CPU engine"),
				 errhint("The postmaster restarts the service; SELECT * FROM genie_service_status() shows it.")));
	}
	return false;
}

/* Says once per backend that auto found no usable GPU in the service. */
void
genie_search_note_engine(genie_engine_kind engine, bool device_fallback, const char *what)
{
	if (device_fallback)
		ereport(NOTICE,
				(errmsg("genie: the GPU ran out of memory; this %s ran on the CPU", what)));
	else if (engine == GENIE_ENGINE_CPU && genie_device_setting == GENIE_DEVICE_SETTING_AUTO &&
			 !said_cpu_fallback)
	{
		said_cpu_fallback = true;
		ereport(NOTICE,
				(errmsg("genie is using the CPU engine: %s", genie_service_shared->gpu_reason),
				 errhint("SELECT * FROM genie_service_status() shows what the genie service found.")));
	}
}

bool
genie_search_through_service(GenieCachedIndex *entry, GenieServiceAsk ask, GenieServiceShip ship,
							 void *arg, const char *held, const char *what)
{
	int			attempts = 0;
	TimestampTz other_since = 0;	/* another backend's hand-over seen since */

	for (;;)
	{
		genie_error err;
		genie_engine_kind engine;
		bool		device_fallback;
		GenieServiceOutcome outcome;

		if (!genie_service_ready())
			return genie_search_service_away();
		outcome = ask(entry, arg, &engine, &device_fallback, &err);
		if (outcome == GENIE_SERVICE_OK)
		{
			genie_search_ran_on(engine, true);
			genie_search_note_engine(engine, device_fallback, what);
			return true;
		}
		if (outcome == GENIE_SERVICE_ENGINE_ERROR)
			genie_report_error(&err, psprintf("genie: %s", what));
		if (outcome == GENIE_SERVICE_UNAVAILABLE)
			return genie_search_service_away();

		/*
		 * NOT_RESIDENT while another backend hands the version over: wait
		 * and ask again, without reading it all again.  The service drops a
		 * hand-over that stalls for a second (its backend died or moved
		 * on); after that this backend hands it over itself.
		 */
		if (other_since != 0 && genie_service_wait_handover(other_since))
			continue;
		other_since = 0;

		/* NOT_RESIDENT: hand the version over, and ask again */
		if (++attempts > 3)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("the genie service cannot keep %s of index \"%s\" in memory",
							held, get_rel_name(entry->index_oid)),
					 errhint("Raise genie.cache_size in the server's configuration.")));
		outcome = ship(entry, &err);
		if (outcome == GENIE_SERVICE_ENGINE_ERROR)
			genie_report_error(&err, psprintf("genie: handing %s to the genie service", held));
		/* as the backend says it when it reads the list itself (genie_clusters.c) */
		if (outcome == GENIE_SERVICE_CORRUPT)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" has a corrupt list of clusters",
							get_rel_name(entry->index_oid)),
					 errdetail("%s", err.message),
					 errhint("REINDEX the index.")));
		if (outcome == GENIE_SERVICE_UNAVAILABLE)
			return genie_search_service_away();
		if (outcome == GENIE_SERVICE_NOT_RESIDENT)
		{
			/* another backend is handing it over: wait for it (above) */
			attempts--;
			other_since = GetCurrentTimestamp();
		}
	}
}

/* A search of the main postings, as genie_search_through_service asks it. */
typedef struct PostingsAsk
{
	GenieQueryBatch *batch;
	int32		k;
	genie_results *out;			/* palloc'd arrays */
	GenieServiceOverlap *overlap;	/* or NULL */
} PostingsAsk;

static GenieServiceOutcome
ask_postings(GenieCachedIndex *entry, void *arg, genie_engine_kind *engine, bool *device_fallback,
			 genie_error *err)
{
	PostingsAsk *a = arg;
	genie_results *out = a->out;
	GenieServiceOutcome outcome;

	outcome = genie_service_search(&entry->main_key, entry->index_oid, genie_device_setting,
								   &a->batch->batch, a->k, out, engine, device_fallback,
								   a->overlap, err);
	if (outcome != GENIE_SERVICE_OK)
	{
		/* a part may have come back before the rest failed */
		if (out->query_offsets != NULL)
			pfree(out->query_offsets);
		if (out->objects != NULL)
			pfree(out->objects);
		if (out->scores != NULL)
			pfree(out->scores);
		memset(out, 0, sizeof(*out));
	}
	return outcome;
}

/*
 * The main postings' top k through the genie service, into *out (palloc'd
 * arrays); false when the service is away and the backend should search
 * in-process.  overlap (or NULL) runs while the service searches.
 */
static bool
search_through_service(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
					   genie_results *out, GenieServiceOverlap *overlap)
{
	PostingsAsk ask = {batch, k, out, overlap};

	return genie_search_through_service(entry, ask_postings, genie_cache_ship_main, &ask,
										"the postings", "search");
}

/* ---- searching ---- */

/*
 * The main postings on a CPU engine made for this one batch.  *results is
 * the caller's to free, also when this raises an error after setting it.
 */
static genie_status
search_main_on_cpu(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
				   genie_results **results, genie_error *err)
{
	genie_engine *volatile cpu = make_engine(GENIE_ENGINE_CPU, entry->main_index, false);
	volatile genie_status status = GENIE_INTERNAL_ERROR;

	PG_TRY();
	{
		status = genie_engine_search(cpu, &batch->batch, k, results, err);
	}
	PG_FINALLY();
	{
		genie_engine_free(cpu);
	}
	PG_END_TRY();
	return status;
}

static void
copy_results(const genie_results *r, GenieSearchResult *result)
{
	int64		n = r->query_offsets[r->n_queries];

	result->n_queries = r->n_queries;
	result->query_offsets = palloc_extended(sizeof(int64) * (r->n_queries + 1), MCXT_ALLOC_HUGE);
	result->objects = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	result->scores = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	memcpy(result->query_offsets, r->query_offsets, sizeof(int64) * (r->n_queries + 1));
	memcpy(result->objects, r->objects, sizeof(int32) * n);
	memcpy(result->scores, r->scores, sizeof(int32) * n);
}

/* The pending list's top k, as genie_search takes it. */
typedef struct PendingSearch
{
	GenieCachedIndex *entry;
	GenieQueryBatch *batch;
	int32		k;
	genie_results **results;	/* core-allocated, the caller frees it */
} PendingSearch;

static void
search_pending(PendingSearch *p)
{
	genie_error err;

	ensure_pending_engine(p->entry);
	GENIE_CHECK(genie_engine_search(p->entry->pending_engine, &p->batch->batch, p->k,
									p->results, &err),
				&err, "genie search of the pending list");
}

/* search_pending while the service searches (a GenieServiceOverlap) */
static void
search_pending_meanwhile(void *arg)
{
	genie_profile_push(GENIE_PHASE_PENDING);
	search_pending(arg);
	genie_profile_pop();
}

/*
 * What genie_search holds: core-allocated results, freed however it is
 * left, and the service's answer (palloc'd arrays).
 */
typedef struct SearchParts
{
	genie_results *main_results;
	genie_results *pending_results;
	genie_results *merged;
	genie_results service_results;
	bool		by_service;
} SearchParts;

static void
search_parts(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
			 GenieSearchResult *result, SearchParts *parts)
{
	genie_error err;
	genie_status status;
	const genie_results *main_part = &parts->service_results;
	bool		has_pending = entry->n_objects != entry->n_main_objects;
	PendingSearch pending = {entry, batch, k, &parts->pending_results};

	/*
	 * The pending list is searched by this backend while the service
	 * searches the main postings (with 10,000 pending documents it costs
	 * about as much as the round trip), or after the main search
	 * in-process.
	 */
	GenieServiceOverlap overlap = {search_pending_meanwhile, &pending, false};

	/* without a GPU in the service, its shared copy is searched here */
	if (genie_service_configured() && !genie_cache_share_main(entry))
		parts->by_service = search_through_service(entry, batch, k, &parts->service_results,
												   has_pending ? &overlap : NULL);
	if (!parts->by_service)
	{
		ensure_main_engine(entry);
		genie_profile_push(GENIE_PHASE_ENGINE);
		status = genie_engine_search(entry->main_engine, &batch->batch, k,
									 &parts->main_results, &err);
		genie_search_note_dropped_devices(entry->main_engine, &entry->engine_dropped);
		genie_search_ran_on(genie_engine_get_kind(entry->main_engine), false);
		if (genie_search_cpu_fallback(status, &err, "search"))
		{
			status = search_main_on_cpu(entry, batch, k, &parts->main_results, &err);
			genie_search_ran_on(GENIE_ENGINE_CPU, false);
		}
		ran_shared = entry->main_shared != NULL;
		genie_profile_pop();
		if (status != GENIE_OK)
			genie_report_error(&err, "genie search");
		main_part = parts->main_results;
	}

	if (!has_pending)
		copy_results(main_part, result);
	else
	{
		const genie_results *both[2];
		int32		part_first_object[2] = {0, entry->n_main_objects};

		/* the merge is charged to pending only where the search is too */
		if (!overlap.done)
		{
			genie_profile_push(GENIE_PHASE_PENDING);
			search_pending(&pending);
		}
		both[0] = main_part;
		both[1] = parts->pending_results;
		GENIE_CHECK(genie_results_merge(both, part_first_object, 2, k, &parts->merged, &err),
					&err, "genie search: merging the pending list");
		copy_results(parts->merged, result);
		if (!overlap.done)
			genie_profile_pop();
	}
}

static void
free_parts(SearchParts *parts)
{
	genie_results_free(parts->main_results);
	genie_results_free(parts->pending_results);
	genie_results_free(parts->merged);
	parts->main_results = parts->pending_results = parts->merged = NULL;
}

void
genie_search(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
			 GenieSearchResult *result)
{
	SearchParts parts;

	memset(&parts, 0, sizeof(parts));
	PG_TRY();
	{
		search_parts(entry, batch, k, result, &parts);
	}
	PG_CATCH();
	{
		free_parts(&parts);
		PG_RE_THROW();
	}
	PG_END_TRY();
	free_parts(&parts);
	genie_search_count(batch->batch.n_queries, k, result->query_offsets[batch->batch.n_queries]);
	/* the service's answer, palloc'd */
	if (parts.service_results.query_offsets != NULL)
		pfree(parts.service_results.query_offsets);
	if (parts.service_results.objects != NULL)
		pfree(parts.service_results.objects);
	if (parts.service_results.scores != NULL)
		pfree(parts.service_results.scores);
}

void
genie_search_free(GenieSearchResult *result)
{
	if (result->query_offsets != NULL)
		pfree(result->query_offsets);
	if (result->objects != NULL)
		pfree(result->objects);
	if (result->scores != NULL)
		pfree(result->scores);
	memset(result, 0, sizeof(*result));
}

#define GENIE_VERSION_ATTEMPTS	3

/* One run of a batch search on the index's current entry, pinned while it runs. */
static void
run_pinned(Relation index, GenieBatchSearch search, void *arg)
{
	GenieCachedIndex *entry = genie_cache_get(index);

	genie_cache_pin(entry);
	PG_TRY();
	{
		search(entry, arg);
	}
	PG_CATCH();
	{
		genie_cache_unpin(entry);
		PG_RE_THROW();
	}
	PG_END_TRY();
	genie_cache_unpin(entry);
}

void
genie_retry_on_version_gone(Relation index, GenieAttempt attempt, GenieAttempt moved, void *arg)
{
	if (IsInParallelMode())
	{
		attempt(arg);
		return;
	}
	for (int n = 1;; n++)
	{
		MemoryContext cxt = CurrentMemoryContext;
		ResourceOwner owner = CurrentResourceOwner;
		bool		last = n == GENIE_VERSION_ATTEMPTS;
		volatile bool again = false;

		/*
		 * The last attempt holds the content lock in share mode from moving
		 * to the current version to the end of its search.  A merge takes
		 * that lock exclusively, so none can renumber the pages under it:
		 * merges (VACUUM's, a full pending list's) wait for this one search
		 * instead of the statement failing.  Inserts take it in share mode
		 * and go on.  Taken here, not by the first attempt, because a
		 * search usually keeps its version and a merge should not wait on
		 * every search.  A heavyweight lock: a cancel still ends the wait.
		 */
		if (last)
			GENIE_CONTENT_LOCK_SHARE(index);
		if (n > 1 && moved != NULL)
			moved(arg);
		genie_content_version_gone = false;
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			attempt(arg);
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		PG_CATCH();
		{
			bool		gone = genie_content_version_gone;
			ErrorData  *edata;

			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			if (last)
				GENIE_CONTENT_UNLOCK_SHARE(index);
			if (!gone || edata->sqlerrcode != ERRCODE_T_R_SERIALIZATION_FAILURE || last)
				ReThrowError(edata);
			/* said at DEBUG1: what a test (or a curious administrator) can look for */
			ereport(DEBUG1,
					(errmsg_internal("genie: a search moves to its index's current version after attempt %d: %s",
									 n, edata->message)));
			FreeErrorData(edata);
			genie_explain_counts.moves++;
			again = true;		/* (a continue here would only leave PG_TRY's block) */
		}
		PG_END_TRY();
		if (!again)
		{
			if (last)
				GENIE_CONTENT_UNLOCK_SHARE(index);
			return;
		}
	}
}

/* A batch search run pinned on the current entry, as genie_retry_on_version_gone runs it. */
typedef struct BatchAttempt
{
	Relation	index;
	GenieBatchSearch search;
	void	   *arg;
} BatchAttempt;

static void
batch_attempt(void *arg)
{
	BatchAttempt *a = arg;

	run_pinned(a->index, a->search, a->arg);
}

void
genie_search_batch_retrying(Relation index, GenieBatchSearch search, void *arg)
{
	BatchAttempt a = {index, search, arg};

	/* each run gets the index's current entry itself: nothing to move */
	genie_retry_on_version_gone(index, batch_attempt, NULL, &a);
}

int32
genie_search_first_k(int32 k, int32 n_objects)
{
	return (int32) Min((int64) k, (int64) Max(n_objects, 1));
}

int32
genie_search_wider_k(int32 k, int32 n_objects)
{
	return (int32) Min((int64) k * 4, (int64) Max(n_objects, 1));
}

bool
genie_search_exhausted(const GenieSearchResult *result, int q, int32 k, int32 n_objects)
{
	/* fewer than k hits: every object with score >= 1 was returned */
	return result->query_offsets[q + 1] - result->query_offsets[q] < k || k >= n_objects;
}

/* ---- the visible top k of a batch ---- */

void
genie_search_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
					 GenieQuery **queries, int nq, int32 k, GenieVisibleRows *rows)
{
	int		   *short_of_k = palloc(sizeof(int) * Max(nq, 1));	/* queries still short of k rows */
	int			n_short = nq;
	int32		kprime = genie_search_first_k(k, entry->n_objects);
	int64		capacity = Min(k, 1 << 20);
	ItemPointerData *found_tids = palloc(sizeof(ItemPointerData) * capacity);
	int32	   *found_scores = palloc(sizeof(int32) * capacity);
	GenieQuery **batch_queries = palloc(sizeof(GenieQuery *) * Max(nq, 1));
	GenieVisibility vs;

	genie_visibility_begin(&vs, entry, heap, snapshot, nq);
	memset(rows, 0, sizeof(GenieVisibleRows) * nq);
	for (int i = 0; i < nq; i++)
		short_of_k[i] = i;

	while (n_short > 0)
	{
		GenieQueryBatch batch;
		GenieSearchResult result;
		int			still = 0;

		for (int i = 0; i < n_short; i++)
			batch_queries[i] = queries[short_of_k[i]];
		genie_query_batch_init(&batch, batch_queries, n_short);
		genie_search(entry, &batch, kprime, &result);

		genie_profile_push(GENIE_PHASE_VISIBILITY);
		/* each query's first k rows are checked whatever they are */
		genie_visibility_check_ahead(&vs, entry, result.objects, result.query_offsets, n_short, k);
		for (int i = 0; i < n_short; i++)
		{
			GenieVisibleRows *out = &rows[short_of_k[i]];
			int64		n_found = 0;

			for (int64 h = result.query_offsets[i]; h < result.query_offsets[i + 1] && n_found < k; h++)
			{
				ItemPointerData tid;

				if (!genie_object_visible(&vs, entry, result.objects[h], &tid))
					continue;
				if (n_found == capacity)
				{
					capacity *= 2;
					found_tids = repalloc_huge(found_tids, sizeof(ItemPointerData) * capacity);
					found_scores = repalloc_huge(found_scores, sizeof(int32) * capacity);
				}
				found_tids[n_found] = tid;
				found_scores[n_found] = result.scores[h];
				n_found++;
			}

			if (n_found < k && !genie_search_exhausted(&result, i, kprime, entry->n_objects))
			{
				/* invisible or dead rows took places: ask again for more */
				short_of_k[still++] = short_of_k[i];
				continue;
			}
			out->n = n_found;
			if (n_found > 0)
			{
				out->tids = palloc_extended(sizeof(ItemPointerData) * n_found, MCXT_ALLOC_HUGE);
				out->scores = palloc_extended(sizeof(int32) * n_found, MCXT_ALLOC_HUGE);
				memcpy(out->tids, found_tids, sizeof(ItemPointerData) * n_found);
				memcpy(out->scores, found_scores, sizeof(int32) * n_found);
			}
			CHECK_FOR_INTERRUPTS();
		}
		genie_profile_pop();
		genie_search_free(&result);
		n_short = still;
		kprime = genie_search_wider_k(kprime, entry->n_objects);
	}

	genie_visibility_end(&vs);
}

/* ---- genie_similar's verification ---- */

void
genie_search_verify(GenieCachedIndex *entry, const genie_similar_batch *batch,
					genie_similar_verdict *verdict)
{
	genie_engine_options options;
	genie_engine_kind device;
	genie_error err;
	genie_status status;

	if (genie_service_configured() && genie_service_ready())
	{
		bool		device_fallback;
		GenieServiceOutcome outcome = genie_service_verify(genie_device_setting, batch, verdict,
														   &device_fallback, &err);

		if (outcome == GENIE_SERVICE_OK)
		{
			genie_search_note_engine(verdict->device, device_fallback, "verification");
			return;
		}
		if (outcome == GENIE_SERVICE_ENGINE_ERROR)
			genie_report_error(&err, "genie_similar: verifying candidates");
		(void) genie_search_service_away();
		device = GENIE_ENGINE_CPU;
	}
	else if (genie_service_configured())
	{
		(void) genie_search_service_away();
		device = GENIE_ENGINE_CPU;
	}
	else
	{
		ensure_main_engine(entry);
		device = genie_engine_get_kind(entry->main_engine) == GENIE_ENGINE_GPU
			? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU;
	}
	engine_options(device, &options);
	genie_profile_push(GENIE_PHASE_ENGINE);
	status = genie_similar_verify(batch, device, &options, verdict, &err);
	if (genie_search_cpu_fallback(status, &err, "verification"))
	{
		engine_options(GENIE_ENGINE_CPU, &options);
		status = genie_similar_verify(batch, GENIE_ENGINE_CPU, &options, verdict, &err);
	}
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, "genie_similar: verifying candidates");
}
