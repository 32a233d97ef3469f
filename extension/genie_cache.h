/*-------------------------------------------------------------------------
 *
 * genie_cache.h
 *	  The per-backend cache of decoded genie indexes: the host copy of each
 *	  index version, as the engines read it, and the engines made for it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_CACHE_H
#define GENIE_CACHE_H

#include "postgres.h"

#include "storage/relfilenode.h"

#include "genie_storage.h"

extern int	genie_cache_size_mb;

typedef struct GenieCachedIndex
{
	Oid			index_oid;
	RelFileNode node;
	uint64		stamp;
	GenieEncoding encoding;
	int32		n_objects;
	int32		n_main_objects;
	GenieObjectEntry *objects;	/* n_objects entries, main then pending */
	void	   *owner;			/* the cache slot */
	genie_index *main_index;
	genie_index *pending_index;

	/*
	 * The engines serving this version, made by genie_search.c when it first
	 * searches it (for the genie.device in engine_setting, -1 before) and
	 * freed with the entry (device memory included).
	 */
	genie_engine *main_engine;
	genie_engine *pending_engine;
	int			engine_setting;
	Size		bytes;
	uint64		last_used;
} GenieCachedIndex;

/* The entry of the index's current version, loading it when there is none. */
extern GenieCachedIndex *genie_cache_get(Relation index);

/*
 * A pinned entry stays valid (not freed) when it is evicted or invalidated;
 * unpin in a PG_FINALLY or memory context callback so that aborts unpin too.
 */
extern void genie_cache_pin(GenieCachedIndex *entry);
extern void genie_cache_unpin(GenieCachedIndex *entry);

#endif							/* GENIE_CACHE_H */
