/*-------------------------------------------------------------------------
 *
 * genie_search_values.h
 *	  The nearest stored values of each query (genie_search_values.c): by
 *	  edit distance over the strings of a genie_ngram_ops index with
 *	  store_strings (genie_similar, ORDER BY text <%> query), by Euclidean
 *	  distance over the vectors of a genie_vector_ops index (genie_knn,
 *	  ORDER BY v <-> query), one path for both kinds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_VALUES_H
#define GENIE_SEARCH_VALUES_H

#include "search/genie_search.h"

/* genie.vector_search: how vector indexes answer */
typedef enum GenieVectorSearchSetting
{
	GENIE_VECTOR_SEARCH_EXACT,	/* every stored vector, exact */
	GENIE_VECTOR_SEARCH_LSH		/* LSH candidates re-ranked: approximate */
} GenieVectorSearchSetting;

extern int	genie_vector_search_setting;
extern int	genie_lsh_candidates;

/*
 * The k nearest values of each query (queries->kind must be the entry's
 * values_kind) over every object of the entry's version that is not dead
 * or NULL, visible or not, in (distance, length, id) order: through the
 * genie service when genie is preloaded (its main values there, the
 * pending ones here, merged), else on the engine genie.device asks for,
 * the CPU when the GPU runs out of memory unless genie.device = gpu.
 * Exact, except for vectors with lsh (genie.vector_search = lsh; lsh[q]
 * the queries' LSH keywords, GenieOrderBy.query, an error when one is
 * NULL: the index has none): the top genie.lsh_candidates by LSH match
 * count re-ranked.  Honours cancel.
 */
extern void genie_search_values(GenieCachedIndex *entry, const GenieValueBatch *queries,
								GenieQuery **lsh, int32 k, GenieValueRows *rows);

/*
 * The same restricted to rows of heap visible to snapshot: each query's k
 * nearest visible rows (fewer only when fewer rows have a value), with the
 * TIDs of their visible versions in tids (n_queries arrays, palloc'd);
 * searches again with a wider k for the queries whose nearest rows were
 * not all visible.
 */
extern void genie_search_values_visible(GenieCachedIndex *entry, Relation heap,
										Snapshot snapshot, const GenieValueBatch *queries,
										GenieQuery **lsh, int32 k, GenieValueRows *rows,
										ItemPointerData **tids);

/* Frees rows' arrays (a widening round's, before asking again). */
extern void genie_value_rows_free(GenieValueRows *rows);

#endif							/* GENIE_SEARCH_VALUES_H */
