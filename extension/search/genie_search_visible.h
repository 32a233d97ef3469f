/*-------------------------------------------------------------------------
 *
 * genie_search_visible.h
 *	  The k nearest rows of each query of a batch that a snapshot sees.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_VISIBLE_H
#define GENIE_SEARCH_VISIBLE_H

#include "search/genie_search_values.h"

/*
 * genie_search_values restricted to rows of heap visible to snapshot: each query's k
 * nearest visible rows (fewer only when fewer rows have a value), with the
 * TIDs of their visible versions in tids (n_queries arrays, palloc'd);
 * searches again with a wider k for the queries whose nearest rows were
 * not all visible.
 */
extern void genie_search_values_visible(GenieCachedIndex *entry, Relation heap,
										Snapshot snapshot, const GenieValueBatch *queries,
										GenieQuery **approximate, int32 k, GenieValueRows *rows,
										ItemPointerData **tids);

#endif							/* GENIE_SEARCH_VISIBLE_H */
