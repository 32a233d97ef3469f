/*-------------------------------------------------------------------------
 *
 * genie_rows.c
 *	  Row indexes (genie_row_ops): range-tuple scoring over relational rows,
 *	  the paper's Example 2.1 and section V-C.
 *
 * The index is on the table's whole row, CREATE INDEX ... USING genie ((t))
 * WITH (attributes = 'a, b, c', buckets = 1024), and gives each row one
 * keyword per non-NULL attribute:
 *	- a numeric attribute (int2/4/8, float4/8, numeric, date, timestamp[tz])
 *	  whose build saw at most `buckets` distinct values keeps exact values
 *	  (VALUES); otherwise (BUCKETS) its value v falls into the equal-width
 *	  bucket floor((v - lo) / ((hi - lo) / buckets)), clamped to the edge
 *	  buckets, where lo and hi are the smallest and largest finite values the
 *	  build saw or the bounds the attribute list gives ('age 0..100');
 *	  NaN goes to the top bucket;
 *	- a categorical attribute (text, varchar, char, bool, enums) keeps exact
 *	  values (VALUES).
 * VALUES attributes get their codes from the dictionary, which the build
 * writes and inserts of unseen values append to (one WAL record each, under
 * the metapage lock), so no two values ever share a keyword.  Numeric
 * attributes are compared as float8.
 *
 * The folder types/rows/, bottom first: genie_row_values.c (column
 * values), genie_row_dictionary.c (schema, dictionary, the keywords of a
 * row), genie_row_build.c (attribute list, building), genie_ranges.c (the
 * genie_ranges type, its engine query, scoring rows without the index),
 * and this file: the type's callbacks (GenieTypeInfo), which the operator
 * class's support function returns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/rel.h"

#include "types/rows/genie_row_build.h"
#include "types/rows/genie_row_dictionary.h"
#include "types/rows/genie_row_values.h"
#include "types/rows/genie_ranges.h"

/* ---- the type's callbacks ---- */

static void
row_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* the attributes, bounds and modes go to the metapage's schema (build_finish) */
}

static void *
row_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	return genie_row_build_begin(heap, index, indexInfo, scan);
}

static int32 *
row_build_value(void *state, Datum value, int *n)
{
	return genie_row_build_keywords((GenieRowBuild *) state, value, n);
}

static void
row_build_finish(void *state, GenieMetaPageData *meta)
{
	genie_row_build_finish((GenieRowBuild *) state, &meta->rows);
}

static int32 *
row_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	return genie_row_keywords(index, value, GENIE_ROW_ENCODE_INSERT, n);
}

static int32 *
row_encode_check(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	return genie_row_keywords(index, value, GENIE_ROW_ENCODE_CHECK, n);
}

static void
row_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				 Datum value, Oid type, GenieOrderBy *out)
{
	memset(out, 0, sizeof(*out));
	out->query = genie_ranges_query(index, genie_ranges_from_datum(value));
}

/*
 * A query made for another index of the table, or kept from before a
 * REINDEX, would make the scan fail: the sequential scan can score it.
 */
static bool
row_plan_serves(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				Datum query, bool query_known)
{
	GenieRanges *ranges;
	GenieRowSchema schema;

	if (!query_known)
		return true;
	ranges = genie_ranges_from_datum(query);
	if (ranges->index != RelationGetRelid(index))
		return false;
	genie_row_schema(index, &schema);
	return schema.schema_id == ranges->schema_id;
}

static const GenieTypeInfo row_type = {
	.encoding = GENIE_ENCODING_ROW,
	.name = "rows",
	.opclass = "genie_row_ops",
	.batch_function = "genie_ranges_topk",
	.build_encoding = row_build_encoding,
	.build_begin = row_build_begin,
	.build_value = row_build_value,
	.build_finish = row_build_finish,
	.encode_value = row_encode_value,
	.encode_check = row_encode_check,
	.encode_query = row_encode_query,
	.plan_serves = row_plan_serves,
};

PG_FUNCTION_INFO_V1(genie_row_support);

/* support function 1 of genie_row_ops */
Datum
genie_row_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&row_type);
}
