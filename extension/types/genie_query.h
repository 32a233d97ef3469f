/*-------------------------------------------------------------------------
 *
 * genie_query.h
 *	  The genie_query type: a list of items, each a set of keyword ranges
 *	  with an integer weight.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_QUERY_H
#define GENIE_QUERY_H

#include "postgres.h"

#include "fmgr.h"

#include "genie_utils.h"

#define GENIE_QUERY_MAX_ITEMS		100000
#define GENIE_QUERY_MAX_RANGES		1000000
#define GENIE_QUERY_MAX_WEIGHT		1000000

typedef struct GenieKeywordRange
{
	int32		lo;
	int32		hi;				/* inclusive */
} GenieKeywordRange;

typedef struct GenieQueryItem
{
	int32		weight;
	int32		first_range;	/* index into the query's ranges */
	int32		n_ranges;		/* sorted, disjoint, non-adjacent */
} GenieQueryItem;

typedef struct GenieQuery
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int32		n_items;
	int32		n_ranges;
	/* GenieQueryItem items[n_items]; GenieKeywordRange ranges[n_ranges]; follow */
} GenieQuery;

#define GENIE_QUERY_ITEMS(q) \
	((GenieQueryItem *) ((char *) (q) + MAXALIGN(sizeof(GenieQuery))))
#define GENIE_QUERY_RANGES(q) \
	((GenieKeywordRange *) ((char *) GENIE_QUERY_ITEMS(q) + sizeof(GenieQueryItem) * (q)->n_items))
#define GENIE_QUERY_SIZE(n_items, n_ranges) \
	(MAXALIGN(sizeof(GenieQuery)) + sizeof(GenieQueryItem) * (n_items) + \
	 sizeof(GenieKeywordRange) * (n_ranges))

#define DatumGetGenieQueryP(d)	((GenieQuery *) PG_DETOAST_DATUM(d))
#define PG_GETARG_GENIE_QUERY_P(n) DatumGetGenieQueryP(PG_GETARG_DATUM(n))

/*
 * A batch of queries in the C API's CSR form, with the palloc'd arrays that
 * back it.
 */
typedef struct GenieQueryBatch
{
	genie_query_batch batch;
	int64	   *query_offsets;
	int64	   *item_offsets;
	int32	   *item_weights;
	int32	   *ranges_lo;
	int32	   *ranges_hi;
} GenieQueryBatch;

/* A query under construction: items with their raw (unmerged) ranges. */
typedef struct GenieQueryBuilder
{
	bool		limited;		/* enforce the type's limits (not for internal queries) */
	int			n_items;
	int			items_capacity;
	GenieQueryItem *items;
	int			n_ranges;
	int			ranges_capacity;
	GenieKeywordRange *ranges;
} GenieQueryBuilder;

extern void genie_query_builder_init(GenieQueryBuilder *b);
extern void genie_query_builder_begin_item(GenieQueryBuilder *b, int32 weight);
extern void genie_query_builder_add_range(GenieQueryBuilder *b, int32 lo, int32 hi);
/* Sorts and merges each item's ranges into the compact varlena form. */
extern GenieQuery *genie_query_builder_finish(GenieQueryBuilder *b);

/*
 * Builds a genie_query from keywords: each distinct keyword its own item of
 * weight 1.  Without limited, the type's item limit does not apply (an int4[]
 * ORDER BY argument must work wherever the sequential scan does).
 */
extern GenieQuery *genie_query_from_keywords(const int32 *keywords, int n, bool limited);

/* Lays out queries[0..n) as one batch for the engine. */
extern void genie_query_batch_init(GenieQueryBatch *out, GenieQuery **queries, int n);

/* genie_match_count(int4[], genie_query), for the ordering operator */
extern Datum genie_match_count_query(PG_FUNCTION_ARGS);

/* score(query, object) computed by core/. */
extern int32 genie_query_score(GenieQuery *query, const int32 *object, int object_len);

#endif							/* GENIE_QUERY_H */
