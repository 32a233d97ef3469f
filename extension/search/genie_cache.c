/*-------------------------------------------------------------------------
 *
 * genie_cache.c
 *	  Per-backend cache of decoded genie indexes.  Which engines serve an
 *	  entry, and how a search runs on them, is genie_search.c's business;
 *	  the cache only frees them with the entry.
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

#include "access/genam.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "search/genie_cache.h"
#include "search/genie_search_device.h"
#include "search/genie_shared_postings.h"
#include "storage/genie_content.h"
#include "service/genie_service_client.h"
#include "types/genie_type.h"
#include "profile/genie_profile.h"

typedef struct CacheSlot
{
	GenieCachedIndex *entry;
	MemoryContext cxt;			/* holds the entry and its objects array */
	int			pins;
	bool		detached;		/* invalidated while pinned: free at unpin */
} CacheSlot;

#define GENIE_CACHE_MAX_ENTRIES 64

static CacheSlot *slots[GENIE_CACHE_MAX_ENTRIES];
static int	n_slots = 0;
static uint64 use_clock = 0;
static bool cache_initialized = false;

int			genie_cache_size_mb = 1024;

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
		/* after the index and engine that read it */
		if (e->main_shared != NULL)
			genie_shared_postings_release(e->main_shared);
		genie_index_free(e->pending_index);
		genie_value_set_free(&e->values);	/* its GPU copy included */
		genie_value_set_free(&e->pending_values);
		genie_permutation_rows_free(e->permutation_rows);	/* its GPU copy included */
		genie_value_set_free(&e->permutant_values);
		genie_cluster_list_free(e->cluster_list);
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

static void
cache_init(void)
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

void
genie_cache_make_key(Relation index, const GenieIndexContent *content, GenieServiceKey *key)
{
	memset(key, 0, sizeof(*key));
	key->database = MyDatabaseId;
	key->node = GENIE_REL_FILE(index);
	/* temporary relfilenodes are unique only within their backend */
	key->backend = GENIE_LOCAL_BACKEND(RelationUsesLocalBuffers(index));
	key->postings_head = content->postings_head;
	key->main_version = content->main_version;
	key->n_main_objects = content->n_main_objects;
	key->n_keywords = content->n_keywords;
	key->n_postings = content->n_postings;
}

static void
build_main_index(GenieCachedIndex *e, const GenieIndexContent *content)
{
	genie_index_options options;
	genie_error err;

	memset(&options, 0, sizeof(options));
	options.split_length = e->split_length;
	GENIE_CHECK(genie_index_create_from_postings(content->n_main_objects, content->n_keywords,
												 content->keywords, content->keyword_offsets,
												 content->postings, &options,
												 &e->main_index, &err),
				&err, "genie: loading the index");
	e->bytes += genie_index_memory_bytes(e->main_index);
}

static GenieServiceOutcome
ship_main(GenieCachedIndex *e, const GenieIndexContent *content, genie_error *err)
{
	return genie_service_load(&e->main_key, e->index_oid, e->split_length, content->keywords,
							  content->keyword_offsets, content->postings, err);
}

/*
 * Reads the index into a new slot.  With the genie service running, the
 * main postings are read only when the service does not hold this version
 * yet, and then handed to it; this backend keeps a copy only when the
 * service is away (or cannot take it).
 */
static CacheSlot *
load_slot(Relation index)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	GenieIndexContent postings;
	genie_index_options options;
	genie_error err;
	CacheSlot  *slot;
	GenieCachedIndex *e;
	int32		n_pending;
	bool		service = genie_service_ready();

	/*
	 * In-process, the main postings of an index of stored values are read
	 * when a search first needs them (genie_cache_load_main): an exact scan
	 * of vectors or codes never does, and a new backend's first exact
	 * vector statement read LSH keywords it did not use.  Other indexes
	 * read them in the same pass as the objects.
	 */
	bool		keep_main = !service &&
		!genie_index_stores_values(index, genie_opclass_type(index));
	GenieServiceKey key;

	/* the share content lock keeps merges out while the pages are read */
	GENIE_CONTENT_LOCK_SHARE(index);
	genie_read_content(index, &content, keep_main);
	genie_cache_make_key(index, &content, &key);
	if (service && !genie_service_resident(&key, NULL))
	{
		GenieServiceKey postings_key;

		genie_read_main_postings(index, &postings);

		/*
		 * Read apart from the objects: on a standby, where the content lock
		 * keeps no replayed merge out, the two could be of two versions.
		 */
		genie_cache_make_key(index, &postings, &postings_key);
		if (!genie_service_keys_equal(&postings_key, &key))
		{
			GENIE_CONTENT_UNLOCK_SHARE(index);
			genie_main_version_gone(RelationGetRelationName(index));
		}
		content.keywords = postings.keywords;
		content.keyword_offsets = postings.keyword_offsets;
		content.postings = postings.postings;
	}
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
		e->node = GENIE_REL_FILE(index);
		e->stamp = content.stamp;
		e->encoding = content.encoding;
		e->n_objects = content.n_objects;
		e->n_main_objects = content.n_main_objects;
		e->values_stored = content.values_stored;
		e->values_kind = content.encoding.kind == GENIE_ENCODING_VECTOR ? GENIE_VALUES_VECTORS
			: content.encoding.kind == GENIE_ENCODING_CODE ? GENIE_VALUES_CODES
			: GENIE_VALUES_STRINGS;
		e->value_dim = content.vectors.dimensions;
		e->main_key = key;
		e->split_length = content.split_length;
		e->objects = MemoryContextAllocHuge(slot->cxt,
											sizeof(GenieObjectEntry) * Max(content.n_objects, 1));
		memcpy(e->objects, content.objects, sizeof(GenieObjectEntry) * content.n_objects);
		e->bytes = sizeof(GenieObjectEntry) * content.n_objects;

		/*
		 * A service that cannot take the version: this backend searches it.
		 * NOT_RESIDENT says another backend is handing it over: the search
		 * waits for that (genie_search_through_service), nothing to keep.
		 */
		if (content.postings != NULL && service)
		{
			GenieServiceOutcome outcome = ship_main(e, &content, &err);

			keep_main = outcome != GENIE_SERVICE_OK && outcome != GENIE_SERVICE_NOT_RESIDENT;
		}
		if (keep_main)
			build_main_index(e, &content);

		memset(&options, 0, sizeof(options));
		options.split_length = content.split_length;
		GENIE_CHECK(genie_index_create(content.pending_offsets, n_pending,
									   content.pending_keywords, &options,
									   &e->pending_index, &err),
					&err, "genie: loading the pending list");
		e->bytes += genie_index_memory_bytes(e->pending_index);
		e->engine_setting = -1;
	}
	PG_CATCH();
	{
		GENIE_CONTENT_UNLOCK_SHARE(index);
		free_slot(slot);
		PG_RE_THROW();
	}
	PG_END_TRY();
	GENIE_CONTENT_UNLOCK_SHARE(index);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	return slot;
}

/* Reads the entry's version of the main postings, or raises an error when it is gone. */
static void
read_main(GenieCachedIndex *entry, GenieIndexContent *content)
{
	Relation	index = index_open(entry->index_oid, NoLock);
	GenieServiceKey key;

	GENIE_CONTENT_LOCK_SHARE(index);
	PG_TRY();
	{
		genie_read_main_postings(index, content);
	}
	PG_FINALLY();
	{
		GENIE_CONTENT_UNLOCK_SHARE(index);
	}
	PG_END_TRY();
	genie_cache_make_key(index, content, &key);
	index_close(index, NoLock);
	if (!genie_service_keys_equal(&key, &entry->main_key))
		genie_main_version_gone(get_rel_name(entry->index_oid));
}

void
genie_cache_load_main(GenieCachedIndex *entry)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;

	if (entry->main_index != NULL)
		return;
	/* the service's copy where it shares one: no copy of this backend's */
	if (genie_service_configured() && genie_cache_share_main(entry))
		return;
	genie_profile_push(GENIE_PHASE_LOAD);
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	read_main(entry, &content);
	build_main_index(entry, &content);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	genie_profile_pop();
	/* the entry grew (the copy the service would have spared): keep the budget */
	evict_over_budget((CacheSlot *) entry->owner);
}

GenieServiceOutcome
genie_cache_ship_main(GenieCachedIndex *entry, genie_error *err)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	GenieServiceOutcome outcome;

	genie_profile_push(GENIE_PHASE_LOAD);
	read_main(entry, &content);
	outcome = ship_main(entry, &content, err);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	genie_profile_pop();
	return outcome;
}

/* ---- the genie service's shared copy of the main postings ---- */

static GenieServiceOutcome
ship_for_share(void *arg, genie_error *err)
{
	return genie_cache_ship_main((GenieCachedIndex *) arg, err);
}

bool
genie_cache_share_main(GenieCachedIndex *entry)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieSharedOutcome outcome;

	/* also for a mapped copy: off (or a service with a GPU) sends every search to the service */
	if (!genie_shared_postings || genie_device_setting == GENIE_DEVICE_SETTING_GPU ||
		sh == NULL || sh->gpu_usable)
		return false;
	if (entry->main_shared != NULL)
		return true;
	if (entry->share_refused || entry->main_index != NULL || !genie_service_ready())
		return false;
	outcome = genie_shared_postings_map(&entry->main_key, entry->index_oid, entry->split_length,
										ship_for_share, entry, &entry->main_index,
										&entry->main_shared);
	/* the service keeps this version in its own memory: searches go to it */
	if (outcome == GENIE_SHARED_REFUSED)
		entry->share_refused = true;
	return outcome == GENIE_SHARED_MAPPED;
}

/* Lets go of the entry's mapping: its main_index and engine go with it. */
static void
unshare_main(GenieCachedIndex *entry)
{
	genie_engine_free(entry->main_engine);
	entry->main_engine = NULL;
	entry->engine_setting = -1;
	genie_index_free(entry->main_index);
	entry->main_index = NULL;
	genie_shared_postings_release(entry->main_shared);
	entry->main_shared = NULL;
}

bool
genie_cache_holds_main(Oid index_oid)
{
	for (int i = 0; i < n_slots; i++)
		if (slots[i]->entry->index_oid == index_oid && slots[i]->entry->main_index != NULL)
			return true;
	return false;
}

static GenieCachedIndex *
cache_get(Relation index)
{
	Oid			relid = RelationGetRelid(index);
	uint64		stamp;
	uint64		dropped;
	CacheSlot  *slot;

	cache_init();
	/* the service's memory is not held by copies it let go of, once not in use */
	if ((dropped = genie_shared_postings_stale()) != 0)
	{
		bool		all_checked = true;

		for (int i = 0; i < n_slots; i++)
		{
			GenieCachedIndex *e = slots[i]->entry;

			if (e->main_shared == NULL)
				continue;
			if (slots[i]->pins > 0)
				all_checked = false;
			else if (!genie_shared_postings_current(e->main_shared, &e->main_key))
				unshare_main(e);
		}
		if (all_checked)
			genie_shared_postings_checked(dropped);
	}
	stamp = genie_read_stamp(index);
	for (int i = 0; i < n_slots; i++)
	{
		GenieCachedIndex *e = slots[i]->entry;

		if (e->index_oid != relid)
			continue;
		if (e->stamp == stamp && GenieRelFileEquals(e->node, GENIE_REL_FILE(index)))
		{
			e->last_used = ++use_clock;
			return e;
		}
		remove_slot(i);
		break;
	}

	if (n_slots >= GENIE_CACHE_MAX_ENTRIES)
		evict_over_budget(NULL);
	genie_profile_push(GENIE_PHASE_LOAD);
	slot = load_slot(index);
	genie_profile_pop();
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

GenieCachedIndex *
genie_cache_get(Relation index)
{
	GenieCachedIndex *entry;

	genie_profile_push(GENIE_PHASE_CACHE);
	entry = cache_get(index);
	genie_profile_pop();
	return entry;
}

void
genie_cache_read_version(GenieCachedIndex *entry, GenieVersionRead read, void *arg)
{
	Relation	index = index_open(entry->index_oid, NoLock);
	GenieMetaPageData meta;
	/* the metapage held through the reads on a standby; volatile across PG_TRY */
	volatile Buffer metabuf = InvalidBuffer;

	GENIE_CONTENT_LOCK_SHARE(index);
	PG_TRY();
	{
		Buffer		held;

		/* (an error while it is locked: the abort releases the buffer's lock and pin) */
		genie_read_meta_for_content(index, &meta, &held);
		metabuf = held;
		if (meta.n_main_objects != entry->n_main_objects ||
			meta.main_version != entry->main_key.main_version)
			genie_main_version_gone(RelationGetRelationName(index));
		read(index, &meta, arg);
	}
	PG_FINALLY();
	{
		if (BufferIsValid(metabuf))
			UnlockReleaseBuffer(metabuf);
		GENIE_CONTENT_UNLOCK_SHARE(index);
	}
	PG_END_TRY();
	index_close(index, NoLock);
}
