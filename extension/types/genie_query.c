/*-------------------------------------------------------------------------
 *
 * genie_query.c
 *	  The genie_query type: text and binary I/O, constructors, scoring.
 *
 * Text form: {item, item, ...} where an item is a keyword (17), an
 * inclusive keyword range (10..20) or a set of them in parentheses
 * ((1..3, 7)), optionally followed by a weight (*2).  Example:
 *		{3, 17, 10..20*2, (1..3, 7)*5}
 * Each item's ranges are stored sorted and merged (an item is a set), so
 * the output is canonical and input(output(q)) = q.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rangetypes.h"

#include "genie_utils.h"
#include "types/genie_query.h"

PG_FUNCTION_INFO_V1(genie_query_in);
PG_FUNCTION_INFO_V1(genie_query_out);
PG_FUNCTION_INFO_V1(genie_query_recv);
PG_FUNCTION_INFO_V1(genie_query_send);
PG_FUNCTION_INFO_V1(genie_query_from_int4_array);
PG_FUNCTION_INFO_V1(genie_query_add_ranges);
PG_FUNCTION_INFO_V1(genie_query_add_keywords);
PG_FUNCTION_INFO_V1(genie_query_items);
PG_FUNCTION_INFO_V1(genie_match_count_query);

/* =, <>, <, <=, >, >=, comparison and hash functions (genie_utils.h) */
GENIE_COMPARISON_FUNCTIONS(genie_query);


void
genie_query_builder_init(GenieQueryBuilder *b)
{
	b->limited = true;
	b->n_items = 0;
	b->items_capacity = 16;
	b->items = palloc(sizeof(GenieQueryItem) * b->items_capacity);
	b->n_ranges = 0;
	b->ranges_capacity = 16;
	b->ranges = palloc(sizeof(GenieKeywordRange) * b->ranges_capacity);
}

void
genie_query_builder_begin_item(GenieQueryBuilder *b, int32 weight)
{
	if (b->limited && b->n_items >= GENIE_QUERY_MAX_ITEMS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie_query can have at most %d items", GENIE_QUERY_MAX_ITEMS)));
	if (b->n_items == b->items_capacity)
	{
		b->items_capacity *= 2;
		b->items = repalloc_huge(b->items, sizeof(GenieQueryItem) * b->items_capacity);
	}
	b->items[b->n_items].weight = weight;
	b->items[b->n_items].first_range = b->n_ranges;
	b->items[b->n_items].n_ranges = 0;
	b->n_items++;
}

void
genie_query_builder_add_range(GenieQueryBuilder *b, int32 lo, int32 hi)
{
	if (lo > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genie_query keyword range %d..%d is empty", lo, hi),
				 errhint("Write the lower bound first.")));
	if (b->limited && b->n_ranges >= GENIE_QUERY_MAX_RANGES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie_query can have at most %d keyword ranges", GENIE_QUERY_MAX_RANGES)));
	if (b->n_ranges == b->ranges_capacity)
	{
		b->ranges_capacity *= 2;
		b->ranges = repalloc_huge(b->ranges, sizeof(GenieKeywordRange) * b->ranges_capacity);
	}
	b->ranges[b->n_ranges].lo = lo;
	b->ranges[b->n_ranges].hi = hi;
	b->n_ranges++;
	b->items[b->n_items - 1].n_ranges++;
}

static void
check_weight(int64 weight)
{
	if (weight < 1 || weight > GENIE_QUERY_MAX_WEIGHT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genie_query item weight must be between 1 and %d", GENIE_QUERY_MAX_WEIGHT)));
}

static int
keyword_range_cmp(const void *a, const void *b)
{
	const GenieKeywordRange *ra = a;
	const GenieKeywordRange *rb = b;

	if (ra->lo != rb->lo)
		return ra->lo < rb->lo ? -1 : 1;
	if (ra->hi != rb->hi)
		return ra->hi < rb->hi ? -1 : 1;
	return 0;
}

/* Sorts and merges each item's ranges into the compact varlena form. */
GenieQuery *
genie_query_builder_finish(GenieQueryBuilder *b)
{
	GenieQuery *q;
	GenieQueryItem *items;
	GenieKeywordRange *ranges;
	int			out = 0;
	Size		size;

	for (int i = 0; i < b->n_items; i++)
	{
		GenieQueryItem *item = &b->items[i];
		GenieKeywordRange *r = b->ranges + item->first_range;
		int			first = out;

		bool		sorted = true;

		/* many callers give them in order (EWH's buckets): a check is cheaper than qsort */
		for (int j = 1; j < item->n_ranges && sorted; j++)
			sorted = keyword_range_cmp(&r[j - 1], &r[j]) <= 0;
		if (!sorted)
			qsort(r, item->n_ranges, sizeof(GenieKeywordRange), keyword_range_cmp);
		for (int j = 0; j < item->n_ranges; j++)
		{
			/* merge overlapping or adjacent ranges; compare in 64 bits */
			if (out > first && (int64) r[j].lo <= (int64) b->ranges[out - 1].hi + 1)
			{
				if (r[j].hi > b->ranges[out - 1].hi)
					b->ranges[out - 1].hi = r[j].hi;
			}
			else
				b->ranges[out++] = r[j];
		}
		item->first_range = first;
		item->n_ranges = out - first;
	}

	size = GENIE_QUERY_SIZE(b->n_items, out);
	if (size > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("genie_query is too large")));
	q = palloc0(size);
	SET_VARSIZE(q, size);
	q->n_items = b->n_items;
	q->n_ranges = out;
	items = GENIE_QUERY_ITEMS(q);
	ranges = GENIE_QUERY_RANGES(q);
	if (b->n_items > 0)
		memcpy(items, b->items, sizeof(GenieQueryItem) * b->n_items);
	if (out > 0)
		memcpy(ranges, b->ranges, sizeof(GenieKeywordRange) * out);
	return q;
}

/* Starts a builder holding a copy of an existing query. */
static void
builder_from_query(GenieQueryBuilder *b, GenieQuery *q)
{
	GenieQueryItem *items = GENIE_QUERY_ITEMS(q);
	GenieKeywordRange *ranges = GENIE_QUERY_RANGES(q);

	genie_query_builder_init(b);
	for (int i = 0; i < q->n_items; i++)
	{
		genie_query_builder_begin_item(b, items[i].weight);
		for (int j = 0; j < items[i].n_ranges; j++)
			genie_query_builder_add_range(b, ranges[items[i].first_range + j].lo,
							  ranges[items[i].first_range + j].hi);
	}
}

/* ---- text input ---- */

typedef struct QueryParser
{
	const char *input;
	const char *p;
} QueryParser;

static void
parse_fail(QueryParser *ps, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type genie_query: \"%s\"", ps->input),
			 errdetail("%s at character %d.", detail, (int) (ps->p - ps->input) + 1),
			 errhint("Write items like {3, 17, 10..20*2, (1..3, 7)*5}.")));
}

static void
skip_space(QueryParser *ps)
{
	while (*ps->p && isspace((unsigned char) *ps->p))
		ps->p++;
}

/* Consumes a comma and the space after it; false when there is none. */
static bool
consume_comma(QueryParser *ps)
{
	if (*ps->p != ',')
		return false;
	ps->p++;
	skip_space(ps);
	return true;
}

static int64
parse_integer(QueryParser *ps, int64 min, int64 max, const char *what)
{
	const char *start = ps->p;
	bool		negative = false;
	int64		value = 0;

	if (*ps->p == '-' || *ps->p == '+')
	{
		negative = (*ps->p == '-');
		ps->p++;
	}
	if (!isdigit((unsigned char) *ps->p))
		parse_fail(ps, psprintf("expected %s", what));
	while (isdigit((unsigned char) *ps->p))
	{
		value = value * 10 + (*ps->p - '0');
		if (value > (int64) INT_MAX + 1)
		{
			ps->p = start;
			parse_fail(ps, psprintf("%s out of range", what));
		}
		ps->p++;
	}
	if (negative)
		value = -value;
	if (value < min || value > max)
	{
		ps->p = start;
		parse_fail(ps, psprintf("%s out of range", what));
	}
	return value;
}

static void
parse_atom(QueryParser *ps, GenieQueryBuilder *b)
{
	int32		lo = (int32) parse_integer(ps, INT_MIN, INT_MAX, "a keyword");
	int32		hi = lo;

	skip_space(ps);
	if (ps->p[0] == '.' && ps->p[1] == '.')
	{
		ps->p += 2;
		skip_space(ps);
		hi = (int32) parse_integer(ps, INT_MIN, INT_MAX, "a keyword");
		if (lo > hi)
			parse_fail(ps, "a keyword range's lower bound exceeds its upper bound");
	}
	genie_query_builder_add_range(b, lo, hi);
}

Datum
genie_query_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	QueryParser ps = {str, str};
	GenieQueryBuilder b;

	genie_query_builder_init(&b);
	skip_space(&ps);
	if (*ps.p != '{')
		parse_fail(&ps, "expected \"{\"");
	ps.p++;
	skip_space(&ps);
	if (*ps.p != '}')
	{
		for (;;)
		{
			genie_query_builder_begin_item(&b, 1);
			if (*ps.p == '(')
			{
				ps.p++;
				skip_space(&ps);
				if (*ps.p != ')')
				{
					do
					{
						parse_atom(&ps, &b);
						skip_space(&ps);
					} while (consume_comma(&ps));
				}
				if (*ps.p != ')')
					parse_fail(&ps, "expected \",\" or \")\"");
				ps.p++;
			}
			else
				parse_atom(&ps, &b);
			skip_space(&ps);
			if (*ps.p == '*')
			{
				ps.p++;
				skip_space(&ps);
				b.items[b.n_items - 1].weight =
					(int32) parse_integer(&ps, 1, GENIE_QUERY_MAX_WEIGHT, "a weight");
				skip_space(&ps);
			}
			if (!consume_comma(&ps))
				break;
		}
	}
	if (*ps.p != '}')
		parse_fail(&ps, "expected \",\" or \"}\"");
	ps.p++;
	skip_space(&ps);
	if (*ps.p != '\0')
		parse_fail(&ps, "junk after \"}\"");

	PG_RETURN_POINTER(genie_query_builder_finish(&b));
}

static void
append_range(StringInfo s, const GenieKeywordRange *r)
{
	if (r->lo == r->hi)
		appendStringInfo(s, "%d", r->lo);
	else
		appendStringInfo(s, "%d..%d", r->lo, r->hi);
}

Datum
genie_query_out(PG_FUNCTION_ARGS)
{
	GenieQuery *q = PG_GETARG_GENIE_QUERY_P(0);
	GenieQueryItem *items = GENIE_QUERY_ITEMS(q);
	GenieKeywordRange *ranges = GENIE_QUERY_RANGES(q);
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < q->n_items; i++)
	{
		if (i > 0)
			appendStringInfoString(&s, ",");
		if (items[i].n_ranges == 1)
			append_range(&s, &ranges[items[i].first_range]);
		else
		{
			appendStringInfoChar(&s, '(');
			for (int j = 0; j < items[i].n_ranges; j++)
			{
				if (j > 0)
					appendStringInfoChar(&s, ',');
				append_range(&s, &ranges[items[i].first_range + j]);
			}
			appendStringInfoChar(&s, ')');
		}
		if (items[i].weight != 1)
			appendStringInfo(&s, "*%d", items[i].weight);
	}
	appendStringInfoChar(&s, '}');
	PG_RETURN_CSTRING(s.data);
}

/* Binary form: n_items, then per item weight, n_ranges and its (lo, hi) pairs. */
Datum
genie_query_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int32		n_items = pq_getmsgint(buf, 4);
	GenieQueryBuilder b;

	if (n_items < 0 || n_items > GENIE_QUERY_MAX_ITEMS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid number of genie_query items: %d", n_items)));
	genie_query_builder_init(&b);
	for (int i = 0; i < n_items; i++)
	{
		int32		weight = pq_getmsgint(buf, 4);
		int32		n_ranges = pq_getmsgint(buf, 4);

		check_weight(weight);
		if (n_ranges < 0 || n_ranges > GENIE_QUERY_MAX_RANGES)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("invalid number of genie_query ranges: %d", n_ranges)));
		genie_query_builder_begin_item(&b, weight);
		for (int j = 0; j < n_ranges; j++)
		{
			int32		lo = pq_getmsgint(buf, 4);
			int32		hi = pq_getmsgint(buf, 4);

			genie_query_builder_add_range(&b, lo, hi);
		}
	}
	PG_RETURN_POINTER(genie_query_builder_finish(&b));
}

Datum
genie_query_send(PG_FUNCTION_ARGS)
{
	GenieQuery *q = PG_GETARG_GENIE_QUERY_P(0);
	GenieQueryItem *items = GENIE_QUERY_ITEMS(q);
	GenieKeywordRange *ranges = GENIE_QUERY_RANGES(q);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint32(&buf, q->n_items);
	for (int i = 0; i < q->n_items; i++)
	{
		pq_sendint32(&buf, items[i].weight);
		pq_sendint32(&buf, items[i].n_ranges);
		for (int j = 0; j < items[i].n_ranges; j++)
		{
			pq_sendint32(&buf, ranges[items[i].first_range + j].lo);
			pq_sendint32(&buf, ranges[items[i].first_range + j].hi);
		}
	}
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* ---- constructors ---- */

GenieQuery *
genie_query_from_keywords(const int32 *keywords, int n, bool limited)
{
	int32	   *sorted = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
	GenieQueryBuilder b;

	memcpy(sorted, keywords, sizeof(int32) * n);
	qsort(sorted, n, sizeof(int32), genie_int32_cmp);
	genie_query_builder_init(&b);
	b.limited = limited;
	for (int i = 0; i < n; i++)
	{
		if (i > 0 && sorted[i] == sorted[i - 1])
			continue;
		genie_query_builder_begin_item(&b, 1);
		genie_query_builder_add_range(&b, sorted[i], sorted[i]);
	}
	pfree(sorted);
	return genie_query_builder_finish(&b);
}

/* genie_query(int4[]): each distinct element its own item of weight 1 */
Datum
genie_query_from_int4_array(PG_FUNCTION_ARGS)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(0);
	int			n;
	int32	   *values = genie_int4_array_values(array, "keywords", &n);

	PG_RETURN_POINTER(genie_query_from_keywords(values, n, true));
}

/* genie_query_add(q, int4range[], weight): appends one item, the union of the ranges */
Datum
genie_query_add_ranges(PG_FUNCTION_ARGS)
{
	GenieQuery *q = PG_GETARG_GENIE_QUERY_P(0);
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(1);
	int32		weight = PG_GETARG_INT32(2);
	Oid			elemtype = ARR_ELEMTYPE(array);
	TypeCacheEntry *typcache = lookup_type_cache(elemtype, TYPECACHE_RANGE_INFO);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	GenieQueryBuilder b;

	check_weight(weight);
	if (typcache->rngelemtype == NULL || typcache->rngelemtype->type_id != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("genie_query_add expects an array of int4range")));
	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	deconstruct_array(array, elemtype, typlen, typbyval, typalign, &elems, &nulls, &n);

	builder_from_query(&b, q);
	genie_query_builder_begin_item(&b, weight);
	for (int i = 0; i < n; i++)
	{
		RangeBound lower;
		RangeBound upper;
		bool		empty;
		int64		lo;
		int64		hi;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("ranges must not contain NULL elements")));
		range_deserialize(typcache, DatumGetRangeTypeP(elems[i]), &lower, &upper, &empty);
		if (empty)
			continue;
		/* int4range is canonical: [lo, hi) */
		lo = lower.infinite ? INT_MIN : DatumGetInt32(lower.val);
		hi = upper.infinite ? INT_MAX : (int64) DatumGetInt32(upper.val) - 1;
		genie_query_builder_add_range(&b, (int32) lo, (int32) hi);
	}
	PG_RETURN_POINTER(genie_query_builder_finish(&b));
}

/* genie_query_add(q, int4[], weight): appends one item, the set of the keywords */
Datum
genie_query_add_keywords(PG_FUNCTION_ARGS)
{
	GenieQuery *q = PG_GETARG_GENIE_QUERY_P(0);
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(1);
	int32		weight = PG_GETARG_INT32(2);
	int			n;
	int32	   *values = genie_int4_array_values(array, "keywords", &n);
	GenieQueryBuilder b;

	check_weight(weight);
	builder_from_query(&b, q);
	genie_query_builder_begin_item(&b, weight);
	for (int i = 0; i < n; i++)
		genie_query_builder_add_range(&b, values[i], values[i]);
	PG_RETURN_POINTER(genie_query_builder_finish(&b));
}

/* genie_query_items(q): setof (item_no, weight, lo, hi), one row per range */
Datum
genie_query_items(PG_FUNCTION_ARGS)
{
	GenieQuery *q = PG_GETARG_GENIE_QUERY_P(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	GenieQueryItem *items = GENIE_QUERY_ITEMS(q);
	GenieKeywordRange *ranges = GENIE_QUERY_RANGES(q);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < q->n_items; i++)
	{
		for (int j = 0; j < items[i].n_ranges; j++)
		{
			Datum		values[4];
			bool		nulls[4] = {false};

			values[0] = Int32GetDatum(i + 1);
			values[1] = Int32GetDatum(items[i].weight);
			values[2] = Int32GetDatum(ranges[items[i].first_range + j].lo);
			values[3] = Int32GetDatum(ranges[items[i].first_range + j].hi);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/* ---- batches and scoring ---- */

void
genie_query_batch_init(GenieQueryBatch *out, GenieQuery **queries, int n)
{
	int64		total_items = 0;
	int64		total_ranges = 0;
	int64		item = 0;
	int64		range = 0;

	for (int i = 0; i < n; i++)
	{
		total_items += queries[i]->n_items;
		total_ranges += queries[i]->n_ranges;
	}
	out->query_offsets = palloc_extended(sizeof(int64) * (n + 1), MCXT_ALLOC_HUGE);
	out->item_offsets = palloc_extended(sizeof(int64) * (total_items + 1), MCXT_ALLOC_HUGE);
	out->item_weights = palloc_extended(sizeof(int32) * Max(total_items, 1), MCXT_ALLOC_HUGE);
	out->ranges_lo = palloc_extended(sizeof(int32) * Max(total_ranges, 1), MCXT_ALLOC_HUGE);
	out->ranges_hi = palloc_extended(sizeof(int32) * Max(total_ranges, 1), MCXT_ALLOC_HUGE);

	out->query_offsets[0] = 0;
	out->item_offsets[0] = 0;
	for (int i = 0; i < n; i++)
	{
		GenieQuery *q = queries[i];
		GenieQueryItem *items = GENIE_QUERY_ITEMS(q);
		GenieKeywordRange *ranges = GENIE_QUERY_RANGES(q);

		for (int j = 0; j < q->n_items; j++)
		{
			out->item_weights[item] = items[j].weight;
			for (int r = 0; r < items[j].n_ranges; r++)
			{
				out->ranges_lo[range] = ranges[items[j].first_range + r].lo;
				out->ranges_hi[range] = ranges[items[j].first_range + r].hi;
				range++;
			}
			item++;
			out->item_offsets[item] = range;
		}
		out->query_offsets[i + 1] = item;
	}

	out->batch.n_queries = n;
	out->batch.query_offsets = out->query_offsets;
	out->batch.item_offsets = out->item_offsets;
	out->batch.item_weights = out->item_weights;
	out->batch.ranges_lo = out->ranges_lo;
	out->batch.ranges_hi = out->ranges_hi;
}

int32
genie_query_score(GenieQuery *query, const int32 *object, int object_len)
{
	GenieQueryBatch batch;
	int64		score;
	genie_error err;

	genie_query_batch_init(&batch, &query, 1);
	GENIE_CHECK(genie_score_int4(object, object_len, &batch.batch, &score, &err),
				&err, "genie_match_count");
	if (score > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("genie match count %lld is out of range for integer", (long long) score)));
	return (int32) score;
}

/* genie_match_count(object int4[], query genie_query) -> int4 */
Datum
genie_match_count_query(PG_FUNCTION_ARGS)
{
	ArrayType  *object = PG_GETARG_ARRAYTYPE_P(0);
	GenieQuery *query = PG_GETARG_GENIE_QUERY_P(1);
	int			n;
	int32	   *values = genie_int4_array_values(object, "object", &n);

	PG_RETURN_INT32(genie_query_score(query, values, n));
}
