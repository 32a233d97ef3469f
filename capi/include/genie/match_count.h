/*
 * genie/match_count.h: the C API of one object's match count against one
 * int4 keyword query (capi/src/match_count.cpp): the SQL functions
 * genie_match_count and <~> on int4[], which an ordered scan's projection
 * and every sequential scan call once a row.  Part of genie.h, which
 * includes it at its end; included first, it includes genie.h, whose
 * error type it uses.
 */
#ifndef GENIE_MATCH_COUNT_H
#define GENIE_MATCH_COUNT_H

#include "genie/genie.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * GENIE's match count of keyword sets: the number of distinct query keywords
 * that occur in the object.  Duplicates count once on either side; an empty
 * side gives 0.
 */
genie_status genie_match_count_int4(const int32_t *object, size_t object_len,
									const int32_t *query, size_t query_len,
									int32_t *count, genie_error *err);

/*
 * A query prepared once for the match counts of many objects (a scan calls
 * the operator with the same query for every row): its distinct keywords,
 * sorted, in keywords[0 .. *n), and a 64-bit filter of them that turns
 * most other keywords away with one bit test, before any search.  keywords
 * has room for query_len (the query may alias it).
 */
genie_status genie_match_count_prepare_int4(const int32_t *query, size_t query_len,
											int32_t *keywords, size_t *n, uint64_t *filter,
											genie_error *err);
/* genie_match_count_int4 against a prepared query: the same count */
genie_status genie_match_count_prepared_int4(const int32_t *object, size_t object_len,
											 const int32_t *keywords, size_t n, uint64_t filter,
											 int32_t *count, genie_error *err);

#ifdef __cplusplus
}
#endif

#endif							/* GENIE_MATCH_COUNT_H */
