/*-------------------------------------------------------------------------
 *
 * genie_search_values.h
 *	  The nearest stored values of each query (genie_search_values.c): by
 *	  edit distance over the strings of a genie_ngram_ops index with
 *	  store_strings (genie_similar, ORDER BY text <%> query), by Euclidean
 *	  distance over the vectors of a genie_vector_ops index (genie_knn,
 *	  ORDER BY v <-> query), by Hamming distance over the codes of a
 *	  genie_bit_ops index (genie_hamming_knn, ORDER BY code <-> query), one
 *	  path for all kinds.
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
	GENIE_VECTOR_SEARCH_LSH,	/* LSH candidates re-ranked: approximate */
	GENIE_VECTOR_SEARCH_PERMUTATION /* permutation index candidates re-ranked */
} GenieVectorSearchSetting;

extern int	genie_vector_search_setting;
extern int	genie_lsh_candidates;

/* genie.bit_search: how code indexes answer */
typedef enum GenieBitSearchSetting
{
	GENIE_BIT_SEARCH_EXACT,		/* every stored code, exact */
	GENIE_BIT_SEARCH_EWH		/* EWH candidates re-ranked: approximate */
} GenieBitSearchSetting;

extern int	genie_bit_search_setting;
extern int	genie_ewh_candidates;

/*
 * genie.cluster_list_knn: whether an exact vector kNN reads the index's
 * List of Clusters (a genie_list_use: auto, on, off)
 */
extern int	genie_cluster_list_knn;

/*
 * Whether the settings ask the approximate mode of this kind of values:
 * genie.vector_search = lsh for vectors, genie.bit_search = ewh for codes.
 */
extern bool genie_search_approximate(GenieValuesKind kind);

/*
 * Whether the settings ask the permutation index for this kind of values:
 * genie.vector_search = permutation, genie.text_search = permutation
 * (genie_permutation.h).
 */
extern bool genie_search_permutation(GenieValuesKind kind);

/*
 * The index's List of Clusters (its main objects; the pending ones are read
 * each) when an exact vector kNN on device may read it, as
 * genie.cluster_list_knn says: on reads it on the CPU engine whatever the
 * device, auto on the CPU engine alone (genie.device = gpu: not loaded);
 * else NULL.
 */
extern const genie_cluster_list *genie_search_values_list(GenieCachedIndex *entry,
														  GenieValuesKind kind,
														  genie_engine_kind device);
/*
 * The k nearest values of each query (queries->kind must be the entry's
 * values_kind) over every object of the entry's version that is not dead
 * or NULL, visible or not, in (distance, length, id) order: through the
 * genie service when genie is preloaded (its main values there, the
 * pending ones here, merged), else on the engine genie.device asks for,
 * the CPU when the GPU runs out of memory unless genie.device = gpu.
 * Exact, except with approximate (genie_search_approximate; approximate[q]
 * query q's match-count query from the type's approximate_query, an error
 * when one is NULL: the index has none): the top genie.lsh_candidates
 * (vectors) or genie.ewh_candidates (codes) by match count re-ranked by
 * distance.  With genie.vector_search or genie.text_search = permutation,
 * the permutation index's candidates (genie_permutation.h) re-ranked by
 * distance; exact where the index has no permutants.  Honours cancel.
 */
extern void genie_search_values(GenieCachedIndex *entry, const GenieValueBatch *queries,
								GenieQuery **approximate, int32 k, GenieValueRows *rows);

/*
 * The same restricted to rows of heap visible to snapshot: each query's k
 * nearest visible rows (fewer only when fewer rows have a value), with the
 * TIDs of their visible versions in tids (n_queries arrays, palloc'd);
 * searches again with a wider k for the queries whose nearest rows were
 * not all visible.  first (NULL: none) is genie_search_values' answer for
 * the whole batch at genie_search_first_k(k, entry->n_objects), searched
 * already (genie_scan_ahead.h); it is taken, as a round's rows.
 */
extern void genie_search_values_visible(GenieCachedIndex *entry, Relation heap,
										Snapshot snapshot, const GenieValueBatch *queries,
										GenieQuery **approximate, int32 k, GenieValueRows *first,
										GenieValueRows *rows, ItemPointerData **tids);

/*
 * The rows of queries (at genie_search_values' k) from the rows of the
 * main objects the genie service scanned (main_rows, in pieces:
 * genie_scan_ahead.c; engine and device_fallback its answers'): the search
 * noted as the service's, and the pending objects scanned here and merged
 * in, as genie_search_values gives them through the service; main_rows is
 * freed.
 */
extern void genie_search_values_from_service(GenieCachedIndex *entry, const GenieValueBatch *queries,
											 int32 k, genie_engine_kind engine, bool device_fallback,
											 GenieValueRows *main_rows, GenieValueRows *rows);

/*
 * Moves the C API's scans of consecutive pieces of one batch (parts[0 ..
 * n_parts), freed) into palloc'd rows, the lengths from lengths_of (NULL:
 * zero).
 */
extern void genie_value_rows_take(GenieValueFound *parts, int n_parts,
								  const GenieValueSet *lengths_of, GenieValueRows *rows);
/* Frees rows' arrays (a widening round's, before asking again). */
extern void genie_value_rows_free(GenieValueRows *rows);

#endif							/* GENIE_SEARCH_VALUES_H */
