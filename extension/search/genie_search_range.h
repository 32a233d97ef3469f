/*-------------------------------------------------------------------------
 *
 * genie_search_range.h
 *	  Range search of an index that stores its values
 *	  (genie_search_range.c): what genie_within and the range predicates'
 *	  index scans (v <@ genie_ball(q, r)) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_RANGE_H
#define GENIE_SEARCH_RANGE_H

#include "search/genie_cache.h"

/*
 * Every object of the entry's version within radius of each query (its
 * values, pending rows included; through its List of Clusters when the
 * index keeps one), dead and NULL ones left out, visible or not: the C
 * API's rows (the caller frees them with genie_range_results_free), by
 * (distance, object id) per query.  Vectors on genie.device's engine (the
 * CPU when the GPU runs out of memory unless genie.device = gpu), strings
 * on the CPU engine.  EXPLAIN (ANALYZE) counts the search.  permutation_ok:
 * the caller may have fewer rows (genie_within; never a predicate's index
 * scan, whose rows must be every row that satisfies it): under
 * genie.vector_search / genie.text_search = permutation an index that has
 * permutants reads only its candidates, and EXPLAIN (ANALYZE) reports their
 * recall against the exact search.
 */
extern genie_range_results *genie_search_range(GenieCachedIndex *entry, const GenieValueBatch *queries,
											   double radius, bool permutation_ok);

#endif							/* GENIE_SEARCH_RANGE_H */
