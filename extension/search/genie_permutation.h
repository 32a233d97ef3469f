/*-------------------------------------------------------------------------
 *
 * genie_permutation.h
 *	  The permutation index (seed 001) of an index that stores its values
 *	  (genie_permutation.c): its pages made at build and merge, its rows
 *	  loaded into the cache, the rows of queries.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_PERMUTATION_H
#define GENIE_PERMUTATION_H

#include "search/genie_cache.h"
#include "storage/genie_content.h"

/* genie.text_search: how n-gram indexes that store their strings answer edit distances */
typedef enum GenieTextSearchSetting
{
	GENIE_TEXT_SEARCH_EXACT,	/* every stored string, exact */
	GENIE_TEXT_SEARCH_PERMUTATION	/* the permutation index's candidates re-ranked */
} GenieTextSearchSetting;

extern int	genie_text_search_setting;
extern double genie_permutation_fraction;

/*
 * Before a build's table scans: checks the permutants option (an error for an
 * index that cannot have them) and, when the rows will be computed on the
 * GPU, makes the backend's CUDA context on a thread during the scan.
 */
extern void genie_permutation_build_begin(Relation index, int16 encoding_kind, bool values_stored);

/*
 * At build, once the metapage holds the values chain: with WITH
 * (permutants = m), draws the permutants and writes both chains (no WAL:
 * the build logs every page after), or leaves them to the first merge
 * that finds m objects.  Errors for an index that cannot have them.
 */
extern void genie_permutation_build(Relation index, int16 encoding_kind, bool values_stored);

/*
 * At a merge, under the exclusive content lock, with before (the old
 * metapage), content (its values read) and the objects' new ids: the
 * permutation fields of the new metapage in meta (WAL-logged chains), the
 * live objects' rows (old rows kept, pending ones computed; an emptied
 * index drops its permutants); old_chains[0 .. 1] receive the chains to
 * free once the metapage points past them (empty ones: none).
 */
extern void genie_permutation_merge(Relation index, const GenieMetaPageData *before,
									const GenieIndexContent *content, const int32 *new_ids,
									int32 n_live, GenieMetaPageData *meta,
									GenieChain *old_chains);

/*
 * An error unless an index of encoding_kind (storing its values or not) can
 * have what a metric option asks (the permutation index, the List of
 * Clusters): a vector index, or an n-gram index that stores its strings.
 * written is the option as a user writes it, for the hint.
 */
extern void genie_check_metric_option(const char *option, const char *written,
									  int16 encoding_kind, bool values_stored);

/* The permutation fields of an unlogged index's empty metapage (its init fork). */
extern void genie_permutation_build_empty(Relation index, int16 encoding_kind, bool values_stored,
										  GenieMetaPageData *meta);

/*
 * The entry's permutation index, read once (a version since gone is a
 * serialization failure); false when the index has no permutants chosen:
 * it is searched exactly.
 */
extern bool genie_cache_permutations(GenieCachedIndex *entry);

/* The rows of queries (palloc'd, n x stride bytes) against the entry's permutants. */
extern uint8 *genie_permutation_query_rows(GenieCachedIndex *entry, const GenieValueBatch *queries);

/* How many candidates genie.permutation_fraction gives a search for k rows. */
extern int32 genie_permutation_candidate_count(GenieCachedIndex *entry, int32 k);

/*
 * Each query's `candidates` objects nearest by footrule, ascending by id:
 * the queries' rows (the query phase), then the selection on genie.device's
 * engine, the CPU engine when the GPU cannot (the engine phase).  The entry
 * has its permutations (genie_cache_permutations); the caller frees the
 * result with genie_permutation_candidates_free.
 */
extern genie_permutation_candidates *genie_permutation_choose(GenieCachedIndex *entry,
															  const GenieValueBatch *queries,
															  int32 candidates);

#endif							/* GENIE_PERMUTATION_H */
