/*-------------------------------------------------------------------------
 *
 * genie_query_array.h
 *	  A batch's queries as one stored real[][] (genie_query_array.c):
 *	  genie_knn's array argument, when it is a table's value stored out of
 *	  line (pglz or lz4 compressed, or plain), expanded by the backend piece
 *	  by piece, each piece scanned while the next is expanded
 *	  (genie_scan_ahead.h), instead of detoasted whole before the search
 *	  starts.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_QUERY_ARRAY_H
#define GENIE_QUERY_ARRAY_H

#include "search/genie_scan_ahead.h"

typedef struct GenieQueryArray GenieQueryArray;

/*
 * The stored array of queries value (genie_knn's argument, not detoasted)
 * when it is a table's value stored out of line and at least 4 MB (two
 * pieces of GENIE_SCAN_AHEAD_PIECE_BYTES): a compressed one fetched, still
 * compressed; else NULL, and the caller detoasts it as usual.
 */
extern GenieQueryArray *genie_query_array_open(Datum value);

/*
 * Expands the array into batch (vectors, in the caller's memory context),
 * with the checks and errors of genie_vector_queries and
 * genie_vector_check_queries (index's dimension; a 2-D array's width is
 * checked before its elements, so an array with both faults gets the
 * width's error).  With entry (the pinned
 * entry of the search; NULL: none), each piece of a 2-D array is scanned
 * for its k nearest while the next is expanded: then, when every piece
 * was, true and *first the first round's rows of the whole batch, as
 * genie_search_values_visible takes them.  Called again (a search's
 * retry), it expands the array again.
 */
extern bool genie_query_array_read(GenieQueryArray *qa, Relation index, GenieCachedIndex *entry,
								   int32 k, GenieValueBatch *batch, GenieValueRows *first);

#endif							/* GENIE_QUERY_ARRAY_H */
