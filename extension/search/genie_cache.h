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

#include "storage/dsm.h"
#include "utils/relcache.h"

#include "service/genie_service.h"
#include "storage/genie_storage.h"

extern int	genie_cache_size_mb;

typedef struct GenieCachedIndex
{
	Oid			index_oid;
	GenieRelFile node;
	uint64		stamp;
	GenieEncoding encoding;
	int32		n_objects;
	int32		n_main_objects;
	GenieObjectEntry *objects;	/* n_objects entries, main then pending */
	void	   *owner;			/* the cache slot */

	/*
	 * The main postings: the genie service holds them (main_key says which
	 * version) when genie is preloaded and the service runs; otherwise, or
	 * when the service is away, main_index is this backend's copy (NULL
	 * until then).  Set predicates (genie_set_scan.c) read the postings
	 * themselves, so they make this copy also while the service runs.
	 */
	GenieServiceKey main_key;
	int32		split_length;
	genie_index *main_index;
	genie_index *pending_index;

	/*
	 * With a genie service without a GPU: the service's copy of the main
	 * postings in shared memory, which main_index then reads in place
	 * (genie_shared_postings.c), mapped until the entry is freed or the
	 * service lets go of that copy; NULL when not mapped.  share_refused:
	 * the service holds this version in its own memory, so searches go to
	 * it.
	 */
	dsm_segment *main_shared;
	bool		share_refused;

	/*
	 * The engines serving this version, made by genie_search.c when it first
	 * searches it (for the genie.device in engine_setting, -1 before) and
	 * freed with the entry (device memory included).
	 */
	genie_engine *main_engine;
	genie_engine *pending_engine;
	int			engine_setting;
	uint64		engine_devices;		/* genie.devices and genie.placement it was made for */
	int			engine_placement;
	int			engine_dropped; /* GPUs its device group dropped, said in a WARNING */

	/*
	 * The stored values of every object of this version (values_kind says
	 * which: the strings of an index of genie_ngram_ops with store_strings,
	 * the vectors of genie_vector_ops, of value_dim elements, or the codes of
	 * genie_bit_ops, of value_dim bits), read when
	 * a search first needs them (genie_cache_values.h), NULL until then.
	 * Their GPU copies live and die with them.  excluded, made with them
	 * (excluded_ready), says which objects a scan must skip, so that a scan
	 * does not rebuild it (and the GPU can keep its device copy).
	 */
	bool		values_stored;
	GenieValuesKind values_kind;
	GenieValueSet values;
	int32		value_dim;		/* 0: no vector or code yet */
	uint8	   *excluded;		/* by object: dead or NULL; NULL when none is */
	bool		excluded_ready;

	/*
	 * With the genie service, which holds the main objects' values: the
	 * pending objects' alone (by pending position), and the main objects a
	 * scan skips (excluded_main_ready says whether it was made).
	 */
	GenieValueSet pending_values;
	int32	   *excluded_main;
	int32		n_excluded_main;
	bool		excluded_main_ready;

	/*
	 * The permutation index (genie_permutation.c), read when a search
	 * first needs it (permutation_ready): every object's row, main ones
	 * from the pages and pending ones computed, with their GPU copy, and
	 * the permutants' values; permutants 0 when none are chosen.
	 */
	bool		permutation_ready;
	int32		permutants;
	genie_permutation_rows *permutation_rows;
	GenieValueSet permutant_values;

	/*
	 * The List of Clusters of the main objects (genie_clusters.c), read when
	 * a range query or an exact vector kNN that may read it
	 * (genie.cluster_list_knn) first needs it (clusters_ready); NULL when
	 * the index keeps none.
	 */
	bool		clusters_ready;
	genie_cluster_list *cluster_list;
	Size		cluster_list_bytes; /* of it, in bytes; counted in bytes (a search's row copy grows it) */

	/*
	 * The rows a batch found visible by the visibility map, remembered for
	 * the next batches while the map says their pages did not change
	 * (genie_visibility.c); NULL until a batch makes it.  In the entry's
	 * memory, counted in bytes.
	 */
	struct GenieAllVisibleMemo *all_visible_memo;
	bool		all_visible_memo_refused;	/* too large, or no memory, at the last try */
	Size		bytes;
	uint64		last_used;
} GenieCachedIndex;

/*
 * Whether this backend holds main postings of the index (of some version):
 * for the planner, which then need not charge for reading them.
 */
extern bool genie_cache_holds_main(Oid index_oid);

/* The entry of the index's current version, loading it when there is none. */
extern GenieCachedIndex *genie_cache_get(Relation index);

/*
 * The main postings of the entry's version for this backend: read again from
 * the index (which the caller has locked) when main_index is NULL.  An
 * error when the main postings changed since the entry was read (a merge
 * or compaction in between): the statement may be retried.
 */
extern void genie_cache_load_main(GenieCachedIndex *entry);

/*
 * Maps the genie service's shared copy of the entry's main postings as its
 * main_index (genie_shared_postings.c), when genie.shared_postings is on, the
 * service has no usable GPU and genie.device is not gpu: true when the
 * entry reads it, so this backend searches the postings itself on its CPU
 * engine, with no copy of its own.  False leaves the search to the
 * service (which may hold them in its own memory, or have dropped the
 * version since it answered: the next search asks again).
 */
extern bool genie_cache_share_main(GenieCachedIndex *entry);

/*
 * Hands the entry's main postings to the genie service, reading them from
 * the index; the service's outcome.
 */
extern GenieServiceOutcome genie_cache_ship_main(GenieCachedIndex *entry, genie_error *err);

/* The service key of an index's content. */
extern void genie_cache_make_key(Relation index, const GenieIndexContent *content,
								 GenieServiceKey *key);

/*
 * A pinned entry stays valid (not freed) when it is evicted or invalidated;
 * unpin in a PG_FINALLY or memory context callback so that aborts unpin too.
 */
/*
 * Runs read(index, meta, arg) for chains the entry loads after its main
 * content (the permutation index, the List of Clusters): with the index's
 * content lock share-held and, on a standby, its metapage share-locked (a
 * replayed merge could free the chains mid-read), once the metapage is
 * checked to be still of the entry's version (else the version-gone error,
 * a serialization failure).
 */
typedef void (*GenieVersionRead) (Relation index, const GenieMetaPageData *meta, void *arg);
extern void genie_cache_read_version(GenieCachedIndex *entry, GenieVersionRead read, void *arg);

extern void genie_cache_pin(GenieCachedIndex *entry);
extern void genie_cache_unpin(GenieCachedIndex *entry);

#endif							/* GENIE_CACHE_H */
