/*-------------------------------------------------------------------------
 *
 * genie_rows.c
 *	  Row indexes (genie_row_ops): range-tuple scoring over relational rows,
 *	  the paper's Example 2.1 and section V-C.
 *
 * The type's callbacks and range queries on the index; the rule that turns
 * rows into keywords is in genie_rows.h.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/rel.h"

#include "types/rows/genie_rows.h"

/* ---- range queries on the index ---- */

static void
reserve_codes(int32 **codes, int *capacity, int needed)
{
	if (*capacity >= needed)
		return;
	*capacity = Max(needed, 64);
	*codes = *codes == NULL ? palloc(sizeof(int32) * *capacity) :
		repalloc(*codes, sizeof(int32) * *capacity);
}

/* The engine query of a genie_ranges value, with the dictionary of the moment. */
GenieQuery *
genie_ranges_query(Relation index, GenieRanges *ranges)
{
	GenieRowSchema schema;
	GenieRowDictionary *d;
	GenieQueryBuilder b;
	GenieRangesItem *items = GENIE_RANGES_ITEMS(ranges);
	const char *area = GENIE_RANGES_VALUES(ranges);
	int32	   *codes = NULL;
	int			codes_capacity = 0;

	genie_row_schema(index, &schema);
	if (ranges->index != RelationGetRelid(index) || ranges->schema_id != schema.schema_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("this genie_ranges value was not made for the current build of index \"%s\"",
						RelationGetRelationName(index)),
				 errhint("Make the query with genie_ranges('%s', ...) again: the index was rebuilt, or the query names another index.",
						 RelationGetRelationName(index))));
	d = genie_row_index_dictionary(index, &schema);
	genie_query_builder_init(&b);
	b.limited = false;
	for (int i = 0; i < ranges->n_items; i++)
	{
		GenieRangesItem *item = &items[i];
		int			slot = item->slot;
		bool		numeric;
		int			n = 0;

		genie_row_type_supported(item->attribute.type, &numeric);
		if (numeric && item->attribute.mode == GENIE_ROW_BUCKETS)
		{
			genie_query_builder_begin_item(&b, item->weight);
			genie_query_builder_add_range(&b, GENIE_ROW_KEYWORD(slot, item->bucket_lo),
										  GENIE_ROW_KEYWORD(slot, item->bucket_hi));
			continue;
		}
		if (numeric)
		{
			int32		count = d->n_numeric[slot];

			reserve_codes(&codes, &codes_capacity, count);
			for (int32 j = 0; j < count; j++)
			{
				float8		v = d->numeric_values[slot][j];

				if (item->lo <= v && v <= item->hi)
					codes[n++] = d->numeric_codes[slot][j];
			}
		}
		else
		{
			const char *p = area + item->values_offset;

			reserve_codes(&codes, &codes_capacity, item->n_values);
			for (int j = 0; j < item->n_values; j++)
			{
				int32		length;
				int32		code;

				memcpy(&length, p, sizeof(int32));
				code = genie_row_dictionary_lookup(d, slot, p + sizeof(int32), length);
				if (code >= 0)
					codes[n++] = code;
				p += INTALIGN(sizeof(int32) + length);
			}
		}
		if (n == 0)
			continue;			/* no row can match this item */
		genie_query_builder_begin_item(&b, item->weight);
		for (int j = 0; j < n; j++)
			genie_query_builder_add_range(&b, GENIE_ROW_KEYWORD(slot, codes[j]),
										  GENIE_ROW_KEYWORD(slot, codes[j]));
	}
	return genie_query_builder_finish(&b);
}


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
