/*-------------------------------------------------------------------------
 *
 * genie_cache.c
 *	  Per-backend cache of decoded genie indexes and the engines serving
 *	  them (the GPU engine keeps its copy in device memory).
 *
 * An entry is valid while the index's relfilenode and metapage stamp are
 * unchanged; any change of content bumps the stamp, so a stale entry is
 * never used.  Entries are evicted least recently used first when the cache
 * outgrows genie.cache_size, and dropped on relcache invalidation (DROP
 * INDEX, REINDEX).  A scan pins the entry it uses so that an invalidation in
 * the middle of the scan cannot free it; the pin is released by the scan's
 * memory context callback, which also runs on abort.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "genie_am.h"

typedef struct CacheSlot
{
	GenieCachedIndex *entry;
	MemoryContext cxt;			/* holds the entry and its objects array */
	int			pins;
	bool		detached;		/* invalidated while pinned: free at unpin */
	int			device_setting; /* genie.device the engine was made for */
} CacheSlot;

#define GENIE_CACHE_MAX_ENTRIES 64

static CacheSlot *slots[GENIE_CACHE_MAX_ENTRIES];
static int	n_slots = 0;
static uint64 use_clock = 0;
static bool cache_initialized = false;
static bool said_cpu_fallback = false;

/* Frees a slot, also one that an error left half-built. */
static void
free_slot(CacheSlot *slot)
{
	GenieCachedIndex *e = slot->entry;

	if (e != NULL)
	{
		genie_engine_free(e->main_engine);	/* device memory included */
		genie_engine_free(e->pending_engine);
		genie_index_free(e->main_index);
		genie_index_free(e->pending_index);
	}
	if (slot->cxt != NULL)
		MemoryContextDelete(slot->cxt);
	free(slot);
}

static void
remove_slot(int i)
{
	CacheSlot *slot = slots[i];

	slots[i] = slots[--n_slots];
	if (slot->pins > 0)
		slot->detached = true;
	else
		free_slot(slot);
}

static void
relcache_callback(Datum arg, Oid relid)
{
	for (int i = n_slots - 1; i >= 0; i--)
	{
		if (relid == InvalidOid || slots[i]->entry->index_oid == relid)
			remove_slot(i);
	}
}

void
genie_cache_init(void)
{
	if (cache_initialized)
		return;
	CacheRegisterRelcacheCallback(relcache_callback, (Datum) 0);
	cache_initialized = true;
}

static CacheSlot *
slot_of(GenieCachedIndex *entry)
{
	return (CacheSlot *) entry->owner;
}

void
genie_cache_pin(GenieCachedIndex *entry)
{
	slot_of(entry)->pins++;
}

void
genie_cache_unpin(GenieCachedIndex *entry)
{
	CacheSlot  *slot = slot_of(entry);

	Assert(slot->pins > 0);
	if (--slot->pins == 0 && slot->detached)
		free_slot(slot);
}

/* ---- engines ---- */

/*
 * Creates an engine; returns NULL when a GPU was asked for and none is
 * usable, if allow_unavailable.  genie.device_memory_limit bounds device
 * memory only, so CPU engines get no budget.
 */
static genie_engine *
make_engine(genie_engine_kind kind, bool allow_unavailable)
{
	genie_engine_options options;
	genie_engine *engine;
	genie_error err;
	genie_status status;

	memset(&options, 0, sizeof(options));
	options.threads = genie_cpu_threads;
	if (kind == GENIE_ENGINE_GPU)
		options.memory_budget_bytes = (uint64) genie_device_memory_limit_mb * 1024 * 1024;
	status = genie_engine_create(kind, &options, &engine, &err);
	if (status == GENIE_DEVICE_UNAVAILABLE && allow_unavailable)
		return NULL;
	if (status != GENIE_OK)
		genie_report_error(&err, "genie");
	return engine;
}

/* The engine that genie.device asks for, saying once per backend when auto falls back. */
static genie_engine *
make_main_engine(void)
{
	genie_engine *engine;
	genie_build_info build;

	switch (genie_device_setting)
	{
		case GENIE_DEVICE_SETTING_CPU:
			return make_engine(GENIE_ENGINE_CPU, false);
		case GENIE_DEVICE_SETTING_GPU:
			return make_engine(GENIE_ENGINE_GPU, false);
		default:
			engine = make_engine(GENIE_ENGINE_GPU, true);
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
			return make_engine(GENIE_ENGINE_CPU, false);
	}
}

static void
upload(genie_engine *engine, genie_index *index)
{
	genie_error err;

	GENIE_CHECK(genie_engine_upload(engine, index, &err), &err, "genie");
}

/* ---- loading ---- */

static void
evict_over_budget(CacheSlot *keep)
{
	Size		budget = (Size) genie_cache_size_mb * 1024 * 1024;

	for (;;)
	{
		Size		total = 0;
		int			victim = -1;

		for (int i = 0; i < n_slots; i++)
		{
			total += slots[i]->entry->bytes;
			if (slots[i] != keep && slots[i]->pins == 0 &&
				(victim < 0 || slots[i]->entry->last_used < slots[victim]->entry->last_used))
				victim = i;
		}
		if ((total <= budget && n_slots < GENIE_CACHE_MAX_ENTRIES) || victim < 0)
			return;
		remove_slot(victim);
	}
}

static CacheSlot *
load_slot(Relation index)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	genie_index_options options;
	genie_error err;
	CacheSlot  *slot;
	GenieCachedIndex *e;
	int32		n_pending;

	/* the share content lock keeps merges out while the pages are read */
	GENIE_CONTENT_LOCK_SHARE(index);
	genie_read_content(index, &content);
	GENIE_CONTENT_UNLOCK_SHARE(index);
	n_pending = content.n_objects - content.n_main_objects;

	/*
	 * The slot and its context come first, so that from the first core/
	 * object on, every error path can free everything with free_slot.
	 */
	slot = calloc(1, sizeof(CacheSlot));
	if (slot == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	PG_TRY();
	{
		slot->cxt = AllocSetContextCreate(TopMemoryContext, "genie cached index",
										  ALLOCSET_SMALL_SIZES);
		e = MemoryContextAllocZero(slot->cxt, sizeof(GenieCachedIndex));
		slot->entry = e;
		e->owner = slot;
		e->index_oid = RelationGetRelid(index);
		e->node = index->rd_node;
		e->stamp = content.stamp;
		e->encoding = content.encoding;
		e->n_objects = content.n_objects;
		e->n_main_objects = content.n_main_objects;
		e->objects = MemoryContextAllocHuge(slot->cxt,
											sizeof(GenieObjectEntry) * Max(content.n_objects, 1));
		memcpy(e->objects, content.objects, sizeof(GenieObjectEntry) * content.n_objects);

		memset(&options, 0, sizeof(options));
		options.split_length = content.split_length;
		GENIE_CHECK(genie_index_create_from_postings(content.n_main_objects, content.n_keywords,
													 content.keywords, content.keyword_offsets,
													 content.postings, &options,
													 &e->main_index, &err),
					&err, "genie: loading the index");
		GENIE_CHECK(genie_index_create(content.pending_offsets, n_pending,
									   content.pending_keywords, &options,
									   &e->pending_index, &err),
					&err, "genie: loading the pending list");
		e->bytes = genie_index_memory_bytes(e->main_index) +
			genie_index_memory_bytes(e->pending_index) +
			sizeof(GenieObjectEntry) * content.n_objects;
		slot->device_setting = genie_device_setting;

		e->main_engine = make_main_engine();
		upload(e->main_engine, e->main_index);
		e->pending_engine = make_engine(GENIE_ENGINE_CPU, false);
		upload(e->pending_engine, e->pending_index);
	}
	PG_CATCH();
	{
		free_slot(slot);
		PG_RE_THROW();
	}
	PG_END_TRY();

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	return slot;
}

GenieCachedIndex *
genie_cache_get(Relation index)
{
	Oid			relid = RelationGetRelid(index);
	uint64		stamp;
	CacheSlot  *slot;

	genie_cache_init();
	stamp = genie_read_stamp(index);
	for (int i = 0; i < n_slots; i++)
	{
		GenieCachedIndex *e = slots[i]->entry;

		if (e->index_oid != relid)
			continue;
		if (e->stamp == stamp && RelFileNodeEquals(e->node, index->rd_node) &&
			slots[i]->device_setting == genie_device_setting)
		{
			e->last_used = ++use_clock;
			return e;
		}
		remove_slot(i);
		break;
	}

	if (n_slots >= GENIE_CACHE_MAX_ENTRIES)
		evict_over_budget(NULL);
	slot = load_slot(index);
	slot->entry->last_used = ++use_clock;
	if (n_slots >= GENIE_CACHE_MAX_ENTRIES)
	{
		/* everything is pinned: serve this one uncached */
		slot->detached = true;
		return slot->entry;
	}
	slots[n_slots++] = slot;
	evict_over_budget(slot);
	return slot->entry;
}

/* ---- searching ---- */

/* Copies results of one engine into per-query hit lists, offsetting ids. */
static void
copy_results(genie_results *r, int32 id_offset, int64 **offsets, int32 **objects, int32 **scores)
{
	int64		n = r->query_offsets[r->n_queries];

	*offsets = palloc_extended(sizeof(int64) * (r->n_queries + 1), MCXT_ALLOC_HUGE);
	*objects = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	*scores = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	memcpy(*offsets, r->query_offsets, sizeof(int64) * (r->n_queries + 1));
	for (int64 i = 0; i < n; i++)
	{
		(*objects)[i] = r->objects[i] + id_offset;
		(*scores)[i] = r->scores[i];
	}
}

/*
 * Runs a batch on one engine and copies the results into palloc'd memory;
 * the core-allocated results are freed even when the copy fails.
 */
static genie_status
search_engine(genie_engine *engine, GenieQueryBatch *batch, int32 k, int32 id_offset,
			  int64 **offsets, int32 **objects, int32 **scores, genie_error *err)
{
	genie_results *volatile r = NULL;
	genie_status status;

	status = genie_engine_search(engine, &batch->batch, k, (genie_results **) &r, err);
	if (status != GENIE_OK)
		return status;
	PG_TRY();
	{
		copy_results(r, id_offset, offsets, objects, scores);
	}
	PG_FINALLY();
	{
		genie_results_free(r);
	}
	PG_END_TRY();
	return GENIE_OK;
}

/* The main postings searched by a CPU engine made for this one batch. */
static genie_status
search_on_cpu(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k, int64 **offsets,
			  int32 **objects, int32 **scores, genie_error *err)
{
	genie_engine *cpu = make_engine(GENIE_ENGINE_CPU, false);
	volatile genie_status status = GENIE_INTERNAL_ERROR;

	PG_TRY();
	{
		upload(cpu, entry->main_index);
		status = search_engine(cpu, batch, k, 0, offsets, objects, scores, err);
	}
	PG_FINALLY();
	{
		genie_engine_free(cpu);
	}
	PG_END_TRY();
	return status;
}

void
genie_cache_search(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
				   GenieSearchResult *result)
{
	int			nq = batch->batch.n_queries;
	int64	   *main_offsets;
	int32	   *main_objects;
	int32	   *main_scores;
	genie_error err;
	genie_status status;
	int64		total = 0;

	status = search_engine(entry->main_engine, batch, k, 0, &main_offsets, &main_objects,
						   &main_scores, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && genie_device_setting != GENIE_DEVICE_SETTING_GPU)
	{
		/*
		 * The GPU engine already split the work into parts that fit (multiple
		 * loading); when even that fails, the CPU engine answers this batch.
		 */
		ereport(NOTICE,
				(errmsg("genie: the GPU ran out of memory; this search runs on the CPU"),
				 errdetail("%s", err.message)));
		status = search_on_cpu(entry, batch, k, &main_offsets, &main_objects, &main_scores,
							   &err);
	}
	if (status != GENIE_OK)
		genie_report_error(&err, "genie search");

	result->n_queries = nq;
	if (entry->n_objects == entry->n_main_objects)
	{
		result->query_offsets = main_offsets;
		result->objects = main_objects;
		result->scores = main_scores;
		return;
	}

	{
		int64	   *pend_offsets;
		int32	   *pend_objects;
		int32	   *pend_scores;

		if (search_engine(entry->pending_engine, batch, k, entry->n_main_objects,
						  &pend_offsets, &pend_objects, &pend_scores, &err) != GENIE_OK)
			genie_report_error(&err, "genie search of the pending list");

		result->query_offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
		result->objects = palloc_extended(sizeof(int32) * Max(main_offsets[nq] + pend_offsets[nq], 1),
										  MCXT_ALLOC_HUGE);
		result->scores = palloc_extended(sizeof(int32) * Max(main_offsets[nq] + pend_offsets[nq], 1),
										 MCXT_ALLOC_HUGE);
		result->query_offsets[0] = 0;
		for (int q = 0; q < nq; q++)
		{
			int64		a = main_offsets[q];
			int64		b = pend_offsets[q];
			int64		n = 0;

			/* both lists are ordered by score desc, then id asc; pending ids are larger */
			while (n < k && (a < main_offsets[q + 1] || b < pend_offsets[q + 1]))
			{
				bool		take_main;

				if (a >= main_offsets[q + 1])
					take_main = false;
				else if (b >= pend_offsets[q + 1])
					take_main = true;
				else
					take_main = main_scores[a] >= pend_scores[b];
				if (take_main)
				{
					result->objects[total] = main_objects[a];
					result->scores[total] = main_scores[a++];
				}
				else
				{
					result->objects[total] = pend_objects[b];
					result->scores[total] = pend_scores[b++];
				}
				total++;
				n++;
			}
			result->query_offsets[q + 1] = total;
		}
	}
}
