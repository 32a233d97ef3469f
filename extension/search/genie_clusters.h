/*-------------------------------------------------------------------------
 *
 * genie_clusters.h
 *	  The List of Clusters (seed 004) of an index that stores its values
 *	  (genie_clusters.c): its chain made at build and merge, loaded into
 *	  the cache for range queries and the exact vector kNN.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_CLUSTERS_H
#define GENIE_CLUSTERS_H

#include "search/genie_cache.h"
#include "storage/genie_content.h"

/*
 * At build, once the metapage holds the values chain: with WITH
 * (cluster_list = on), lists the main objects and writes the chain (no
 * WAL: the build logs every page after).  Errors for an index that cannot
 * have one.
 */
extern void genie_clusters_build(Relation index, int16 encoding_kind, bool values_stored);

/* The list's fields of an unlogged index's empty metapage (its init fork). */
extern void genie_clusters_build_empty(Relation index, int16 encoding_kind, bool values_stored,
									   GenieMetaPageData *meta);

/*
 * At a merge, under the exclusive content lock, with before (the old
 * metapage), content (its values read) and the objects' new ids: the list
 * of the live objects, built again as the build does, into meta's fields
 * (a WAL-logged chain); *old_chain receives the chain to free once the
 * metapage points past it (none: no pages).
 */
extern void genie_clusters_merge(Relation index, const GenieMetaPageData *before,
								 const GenieIndexContent *content, const int32 *new_ids,
								 int32 n_live, GenieMetaPageData *meta, GenieChain *old_chain);

/*
 * The entry's List of Clusters of its main objects, read once (a version
 * since gone is a serialization failure); NULL when the index keeps none.
 */
extern const genie_cluster_list *genie_cache_clusters(GenieCachedIndex *entry);

/*
 * Hands the entry's main values to the genie service with its List of
 * Clusters in the stored form its pages hold (the worker checks it as it
 * loads it), as genie_cache_ship_values does: the callback the searches
 * through the service load a version with.
 */
extern GenieServiceOutcome genie_clusters_ship_values(GenieCachedIndex *entry, genie_error *err);

/*
 * After a search of the entry's list (NULL: none): the copy of the rows in
 * its order that its first CPU search made is counted in the cache's bytes.
 */
extern void genie_clusters_count_bytes(GenieCachedIndex *entry, const genie_cluster_list *list);

#endif							/* GENIE_CLUSTERS_H */
