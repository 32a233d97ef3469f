/*-------------------------------------------------------------------------
 *
 * genie_ranges.c
 *	  The genie_ranges type: a range-tuple query over a row index, made by
 *	  genie_ranges(index, '{"age": [30, 40], "workclass": ["Private"]}'),
 *	  and the scoring of rows by it without the index.
 *
 * An attribute given a numeric range [lo, hi] (closed; null for an open end)
 * matches a row whose value falls in a bucket the range overlaps: for a
 * BUCKETS attribute, bucket(lo) <= bucket(value) <= bucket(hi), for a VALUES
 * attribute, lo <= value <= hi.  An attribute given a set of values matches
 * a row whose value is one of them.  A row scores the summed weights (1
 * unless given) of the attributes it matches; NULLs match nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "types/rows/genie_row_dictionary.h"
#include "types/rows/genie_row_values.h"
#include "types/rows/genie_ranges.h"

PG_FUNCTION_INFO_V1(genie_ranges_in);
PG_FUNCTION_INFO_V1(genie_ranges_out);
PG_FUNCTION_INFO_V1(genie_ranges_recv);
PG_FUNCTION_INFO_V1(genie_ranges_send);
PG_FUNCTION_INFO_V1(genie_ranges_make);
PG_FUNCTION_INFO_V1(genie_match_count_row);
PG_FUNCTION_INFO_V1(genie_negated_match_count_row);
PG_FUNCTION_INFO_V1(genie_index_attributes);

/* =, <>, <, <=, >, >=, comparison and hash functions (genie_utils.h) */
GENIE_COMPARISON_FUNCTIONS(genie_ranges);

static GenieRanges *ranges_from_text(const char *str, bool missing_ok);

/*
 * A value whose index did not exist when it was read (pg_restore loads data
 * before it creates indexes) keeps its text form and no index: it is bound,
 * made anew from the text against the index of that name, where it is used.
 */
#define RANGES_UNBOUND(r)	(!OidIsValid((r)->index))
#define RANGES_TEXT(r)		((const char *) GENIE_RANGES_VALUES(r))

GenieRanges *
genie_ranges_from_datum(Datum value)
{
	GenieRanges *r = (GenieRanges *) PG_DETOAST_DATUM(value);

	return RANGES_UNBOUND(r) ? ranges_from_text(RANGES_TEXT(r), false) : r;
}

Oid
genie_ranges_type(Oid extension_function)
{
	Oid			ns = get_func_namespace(extension_function);

	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("genie_ranges"),
						   ObjectIdGetDatum(ns));
}

static const char *
mode_name(const GenieRowAttribute *a)
{
	return a->mode == GENIE_ROW_BUCKETS ? "buckets" : "values";
}

/* ---- making a query ---- */

static void
ranges_error(const char *attribute, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid range query for attribute \"%s\": %s", attribute, detail),
			 errhint("Give a numeric attribute [lo, hi] (null for an open end) or one value, a categorical one an array of values or one value, either optionally as {\"range\" or \"values\": ..., \"weight\": n}.")));
}

static char *
scalar_text(JsonbValue *v, const char *attribute)
{
	switch (v->type)
	{
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			ranges_error(attribute, "values must be strings, numbers or booleans");
	}
	return NULL;				/* keep compiler quiet */
}

static Datum
typed_value(Oid type, const char *text)
{
	Oid			typinput;
	Oid			typioparam;

	getTypeInputInfo(type, &typinput, &typioparam);
	return OidInputFunctionCall(typinput, (char *) text, typioparam, -1);
}

/* A bound of a numeric range: null is open, strings are read as the column's type. */
static float8
numeric_bound(JsonbValue *v, Oid type, const char *attribute, bool upper)
{
	float8		f;

	Oid			base = getBaseType(type);

	if (v->type == jbvNull)
		return upper ? get_float8_infinity() : -get_float8_infinity();
	if (v->type == jbvNumeric && (base == DATEOID || base == TIMESTAMPOID || base == TIMESTAMPTZOID))
		ranges_error(attribute, "give dates and timestamps as strings, e.g. \"2020-01-31\"");
	if (v->type == jbvNumeric)
		f = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
	else if (v->type == jbvString)
		f = genie_row_numeric(type, typed_value(type, scalar_text(v, attribute)));
	else
	{
		ranges_error(attribute, "range bounds must be numbers, strings of the column's type, or null");
		f = 0;
	}
	if (isnan(f))
		ranges_error(attribute, "range bounds cannot be NaN");
	return f == 0 ? 0 : f;
}

static GenieRanges *
make_ranges(Oid indexoid, Jsonb *spec)
{
	Relation	heap;
	Relation	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_READ);
	TupleDesc	desc = RelationGetDescr(heap);
	GenieRowSchema schema;
	GenieRangesItem items[GENIE_ROW_MAX_ATTRIBUTES];
	int			n_items = 0;
	StringInfoData area;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	GenieRanges *out;
	Size		size;

	genie_row_schema(index, &schema);
	if (!JB_ROOT_IS_OBJECT(spec))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a genie range query must be a JSON object"),
				 errhint("For example '{\"age\": [30, 40], \"workclass\": [\"Private\"]}'.")));
	initStringInfo(&area);
	it = JsonbIteratorInit(&spec->root);
	tok = JsonbIteratorNext(&it, &v, true);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *name;
		JsonbValue	value;
		JsonbValue *target = &value;
		GenieRangesItem *item;
		int			slot = -1;
		bool		numeric;

		if (tok != WJB_KEY)
			continue;
		name = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &value, true);
		for (int i = 0; i < schema.n_attributes; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, schema.attributes[i].attnum - 1);

			if (strcmp(NameStr(att->attname), name) == 0)
				slot = i;
		}
		if (slot < 0)
		{
			StringInfoData names;

			initStringInfo(&names);
			for (int i = 0; i < schema.n_attributes; i++)
				appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
								 NameStr(TupleDescAttr(desc, schema.attributes[i].attnum - 1)->attname));
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("genie index \"%s\" has no attribute \"%s\"",
							RelationGetRelationName(index), name),
					 errhint("Its attributes are: %s.", names.data)));
		}
		item = &items[n_items++];
		memset(item, 0, sizeof(*item));
		item->attribute = schema.attributes[slot];
		/* the dictionary's size grows with inserts: not part of the query, and not of its equality */
		item->attribute.n_values = 0;
		item->slot = slot;
		item->weight = 1;
		genie_row_type_supported(item->attribute.type, &numeric);

		/* {"range" | "values": ..., "weight": n} */
		if (value.type == jbvBinary && JsonContainerIsObject(value.val.binary.data))
		{
			JsonbContainer *c = value.val.binary.data;
			JsonbValue *w = getKeyJsonValueFromContainer(c, "weight", 6, NULL);
			JsonbValue *r = getKeyJsonValueFromContainer(c, numeric ? "range" : "values",
														 numeric ? 5 : 6, NULL);

			if (r == NULL || JsonContainerSize(c) != 1 + (w != NULL))
				ranges_error(name, numeric ? "a numeric attribute takes {\"range\": [lo, hi], \"weight\": n}"
							 : "a categorical attribute takes {\"values\": [...], \"weight\": n}");
			if (w != NULL)
			{
				float8		wf;

				if (w->type != jbvNumeric)
					ranges_error(name, "the weight must be a number");
				wf = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(w->val.numeric)));
				if (wf != floor(wf) || wf < 1 || wf > GENIE_QUERY_MAX_WEIGHT)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("weight of attribute \"%s\" must be an integer between 1 and %d",
									name, GENIE_QUERY_MAX_WEIGHT)));
				item->weight = (int32) wf;
			}
			target = r;
		}

		if (numeric)
		{
			if (target->type == jbvBinary && JsonContainerIsArray(target->val.binary.data))
			{
				JsonbContainer *c = target->val.binary.data;

				if (JsonContainerSize(c) != 2)
					ranges_error(name, "a range is an array [lo, hi] of two bounds");
				item->lo = numeric_bound(getIthJsonbValueFromContainer(c, 0), item->attribute.type,
										 name, false);
				item->hi = numeric_bound(getIthJsonbValueFromContainer(c, 1), item->attribute.type,
										 name, true);
			}
			else if (target->type == jbvNumeric || target->type == jbvString)
				item->lo = item->hi = numeric_bound(target, item->attribute.type, name, false);
			else
				ranges_error(name, "a numeric attribute takes [lo, hi] or one value");
			if (item->lo > item->hi)
				ranges_error(name, "the range is empty (lo > hi)");
			if (item->attribute.mode == GENIE_ROW_BUCKETS)
			{
				item->bucket_lo = genie_row_bucket(&item->attribute, item->lo);
				item->bucket_hi = genie_row_bucket(&item->attribute, item->hi);
			}
		}
		else
		{
			int			n;
			bool		array = target->type == jbvBinary &&
				JsonContainerIsArray(target->val.binary.data);

			if (target->type == jbvBinary && !array)
				ranges_error(name, "a categorical attribute takes an array of values or one value");
			if (target->type == jbvNull)
				ranges_error(name, "NULL matches no row");
			n = array ? JsonContainerSize(target->val.binary.data) : 1;
			item->n_values = n;
			item->values_offset = area.len;
			for (int j = 0; j < n; j++)
			{
				JsonbValue *e = array ? getIthJsonbValueFromContainer(target->val.binary.data, j) : target;
				char	   *bytes;
				int			length;
				int32		len32;

				if (e->type == jbvNull)
					ranges_error(name, "NULL matches no row");
				if (e->type == jbvBinary)
					ranges_error(name, "values must be strings, numbers or booleans");
				bytes = genie_row_value_bytes(item->attribute.type,
											  typed_value(item->attribute.type, scalar_text(e, name)),
											  &length);
				len32 = length;
				appendBinaryStringInfo(&area, (char *) &len32, sizeof(int32));
				appendBinaryStringInfo(&area, bytes, length);
				while (area.len % sizeof(int32) != 0)
					appendStringInfoChar(&area, '\0');
			}
		}
	}

	size = MAXALIGN(sizeof(GenieRanges)) + sizeof(GenieRangesItem) * n_items + area.len;
	out = palloc0(size);
	SET_VARSIZE(out, size);
	out->index = RelationGetRelid(index);
	out->rowtype = heap->rd_rel->reltype;
	out->n_items = n_items;
	out->schema_id = schema.schema_id;
	if (n_items > 0)
		memcpy(GENIE_RANGES_ITEMS(out), items, sizeof(GenieRangesItem) * n_items);
	if (area.len > 0)
		memcpy(GENIE_RANGES_VALUES(out), area.data, area.len);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return out;
}

/* genie_ranges(index regclass, ranges jsonb) */
Datum
genie_ranges_make(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(make_ranges(PG_GETARG_OID(0), PG_GETARG_JSONB_P(1)));
}

/*
 * The text form is the constructor's arguments: {"index": ..., "ranges":
 * {...}}.  With missing_ok, an index that does not exist (yet) gives an
 * unbound value that keeps the text.
 */
static GenieRanges *
ranges_from_text(const char *str, bool missing_ok)
{
	Jsonb	   *doc = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(str)));
	JsonbValue *index;
	JsonbValue *ranges;
	Oid			indexoid;
	char	   *name;

	if (!JB_ROOT_IS_OBJECT(doc) ||
		(index = getKeyJsonValueFromContainer(&doc->root, "index", 5, NULL)) == NULL ||
		index->type != jbvString ||
		(ranges = getKeyJsonValueFromContainer(&doc->root, "ranges", 6, NULL)) == NULL ||
		ranges->type != jbvBinary)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type genie_ranges: \"%s\"", str),
				 errhint("Write {\"index\": \"index_name\", \"ranges\": {...}}, or call genie_ranges(index, ranges).")));
	name = pnstrdup(index->val.string.val, index->val.string.len);
	if (name[0] != '\0' && strspn(name, "0123456789") == strlen(name))
		indexoid = DatumGetObjectId(DirectFunctionCall1(regclassin, CStringGetDatum(name)));
	else
		indexoid = RangeVarGetRelid(makeRangeVarFromNameList(genie_qualified_name_list(name)),
									NoLock, true);
	if (!OidIsValid(indexoid))
	{
		Size		len = strlen(str) + 1;
		Size		size = MAXALIGN(sizeof(GenieRanges)) + len;
		GenieRanges *out;

		if (!missing_ok)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("genie_ranges query names index \"%s\", which does not exist", name),
					 errhint("A query read before its index existed (as pg_restore loads data) is made against the index of its name when it is used.")));
		out = palloc0(size);
		SET_VARSIZE(out, size);
		memcpy((char *) GENIE_RANGES_VALUES(out), str, len);
		return out;
	}
	return make_ranges(indexoid, JsonbValueToJsonb(ranges));
}

Datum
genie_ranges_in(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(ranges_from_text(PG_GETARG_CSTRING(0), true));
}

/*
 * The binary form is a format version byte and the text form, as jsonb's:
 * receiving goes through the same checks as text input (the index is looked
 * up by name and the ranges made anew), so no client can hand the scan a
 * value it could not have typed.
 */
#define GENIE_RANGES_BINARY_VERSION 1

Datum
genie_ranges_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int			version = pq_getmsgint(buf, 1);
	char	   *str;
	int			nbytes;

	if (version != GENIE_RANGES_BINARY_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("unsupported genie_ranges binary format version %d", version)));
	str = pq_getmsgtext(buf, buf->len - buf->cursor, &nbytes);
	PG_RETURN_DATUM(DirectFunctionCall1(genie_ranges_in, CStringGetDatum(str)));
}

Datum
genie_ranges_send(PG_FUNCTION_ARGS)
{
	char	   *str = DatumGetCString(DirectFunctionCall1(genie_ranges_out, PG_GETARG_DATUM(0)));
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint8(&buf, GENIE_RANGES_BINARY_VERSION);
	pq_sendtext(&buf, str, strlen(str));
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

static void
append_bound(StringInfo s, Oid type, float8 v)
{
	Oid			base = getBaseType(type);

	if (isinf(v))
	{
		appendStringInfoString(s, "null");
		return;
	}
	if (base == DATEOID)
		escape_json(s, DatumGetCString(DirectFunctionCall1(date_out, DateADTGetDatum((DateADT) v))));
	else if (base == TIMESTAMPOID)
		escape_json(s, DatumGetCString(DirectFunctionCall1(timestamp_out,
														   TimestampGetDatum((Timestamp) v))));
	else if (base == TIMESTAMPTZOID)
		escape_json(s, DatumGetCString(DirectFunctionCall1(timestamptz_out,
														   TimestampTzGetDatum((TimestampTz) v))));
	else
		appendStringInfoString(s, float8out_internal(v));
}

Datum
genie_ranges_out(PG_FUNCTION_ARGS)
{
	GenieRanges *q = (GenieRanges *) PG_DETOAST_DATUM(PG_GETARG_DATUM(0));
	GenieRangesItem *items = GENIE_RANGES_ITEMS(q);
	const char *area = GENIE_RANGES_VALUES(q);
	Oid			relid;
	StringInfoData s;

	/* an unbound value prints the text it was read from: printing never fails */
	if (RANGES_UNBOUND(q))
		PG_RETURN_CSTRING(pstrdup(RANGES_TEXT(q)));
	relid = get_typ_typrelid(q->rowtype);

	initStringInfo(&s);
	appendStringInfoString(&s, "{\"index\": ");
	escape_json(&s, DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(q->index))));
	appendStringInfoString(&s, ", \"ranges\": {");
	for (int i = 0; i < q->n_items; i++)
	{
		GenieRangesItem *item = &items[i];
		char	   *name = get_attname(relid, item->attribute.attnum, true);
		bool		numeric;
		Oid			base = getBaseType(item->attribute.type);

		genie_row_type_supported(item->attribute.type, &numeric);
		if (i > 0)
			appendStringInfoString(&s, ", ");
		escape_json(&s, name != NULL ? name : "?");
		appendStringInfoString(&s, ": ");
		if (item->weight != 1)
			appendStringInfo(&s, "{\"%s\": ", numeric ? "range" : "values");
		appendStringInfoChar(&s, '[');
		if (numeric)
		{
			append_bound(&s, item->attribute.type, item->lo);
			appendStringInfoString(&s, ", ");
			append_bound(&s, item->attribute.type, item->hi);
		}
		else
		{
			const char *p = area + item->values_offset;

			for (int j = 0; j < item->n_values; j++)
			{
				int32		length;

				memcpy(&length, p, sizeof(int32));
				if (j > 0)
					appendStringInfoString(&s, ", ");
				if (base == BOOLOID)
					appendStringInfoString(&s, p[sizeof(int32)] ? "true" : "false");
				else if (base == TEXTOID || base == VARCHAROID || base == BPCHAROID)
					escape_json(&s, pnstrdup(p + sizeof(int32), length));
				else
				{
					Oid			o;

					memcpy(&o, p + sizeof(int32), sizeof(Oid));
					escape_json(&s, DatumGetCString(DirectFunctionCall1(enum_out, ObjectIdGetDatum(o))));
				}
				p += INTALIGN(sizeof(int32) + length);
			}
		}
		appendStringInfoChar(&s, ']');
		if (item->weight != 1)
			appendStringInfo(&s, ", \"weight\": %d}", item->weight);
	}
	appendStringInfoString(&s, "}}");
	PG_RETURN_CSTRING(s.data);
}

/* ---- the engine query of a value, on the index ---- */

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


/* ---- scoring rows without the index ---- */

static int32
ranges_score(GenieRanges *q, HeapTupleHeader td)
{
	Oid			typid = HeapTupleHeaderGetTypeId(td);
	TupleDesc	desc;
	HeapTupleData tuple;
	GenieRangesItem *items = GENIE_RANGES_ITEMS(q);
	const char *area = GENIE_RANGES_VALUES(q);
	int32		score = 0;

	if (typid != q->rowtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("genie_ranges query for index \"%s\" cannot score a row of type %s",
						get_rel_name(q->index) ? get_rel_name(q->index) : "?",
						format_type_be(typid)),
				 errhint("Score rows of the indexed table: ORDER BY t <~> genie_ranges('t_index', ...).")));
	desc = lookup_rowtype_tupdesc(typid, HeapTupleHeaderGetTypMod(td));
	tuple.t_len = HeapTupleHeaderGetDatumLength(td);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = td;
	for (int i = 0; i < q->n_items; i++)
	{
		GenieRangesItem *item = &items[i];
		const GenieRowAttribute *a = &item->attribute;
		Form_pg_attribute att;
		bool		isnull;
		Datum		value;
		bool		numeric;
		bool		match = false;

		if (a->attnum > desc->natts ||
			(att = TupleDescAttr(desc, a->attnum - 1))->attisdropped ||
			att->atttypid != a->type)
		{
			ReleaseTupleDesc(desc);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genie_ranges query was made for an earlier definition of the table"),
					 errhint("Make the query with genie_ranges() again.")));
		}
		value = heap_getattr(&tuple, a->attnum, desc, &isnull);
		if (isnull)
			continue;
		genie_row_type_supported(a->type, &numeric);
		if (numeric)
		{
			float8		v = genie_row_numeric(a->type, value);

			if (a->mode == GENIE_ROW_BUCKETS)
			{
				int32		b = genie_row_bucket(a, v);

				match = item->bucket_lo <= b && b <= item->bucket_hi;
			}
			else
				match = item->lo <= v && v <= item->hi;
		}
		else
		{
			int			length;
			const char *bytes = genie_row_value_bytes(a->type, value, &length);
			const char *p = area + item->values_offset;

			for (int j = 0; j < item->n_values && !match; j++)
			{
				int32		len;

				memcpy(&len, p, sizeof(int32));
				match = len == length && memcmp(p + sizeof(int32), bytes, length) == 0;
				p += INTALIGN(sizeof(int32) + len);
			}
		}
		if (match)
			score += item->weight;
	}
	ReleaseTupleDesc(desc);
	return score;
}

/* genie_match_count(row record, query genie_ranges) */
Datum
genie_match_count_row(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ranges_score(genie_ranges_from_datum(PG_GETARG_DATUM(1)),
								 PG_GETARG_HEAPTUPLEHEADER(0)));
}

/* record <~> genie_ranges: the negated match count, smallest first */
Datum
genie_negated_match_count_row(PG_FUNCTION_ARGS)
{
	int32		score = ranges_score(genie_ranges_from_datum(PG_GETARG_DATUM(1)),
									 PG_GETARG_HEAPTUPLEHEADER(0));

	/* 0, not -0, as the index reports it */
	PG_RETURN_FLOAT8(score == 0 ? 0.0 : -(float8) score);
}

/* genie_index_attributes(index): how a row index encodes each attribute */
Datum
genie_index_attributes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index;
	GenieRowSchema schema;

	InitMaterializedSRF(fcinfo, 0);
	index = genie_open_index(PG_GETARG_OID(0), &heap, GENIE_ACCESS_STATS);
	genie_row_schema(index, &schema);
	for (int i = 0; i < schema.n_attributes; i++)
	{
		GenieRowAttribute *a = &schema.attributes[i];
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};
		bool		buckets = a->mode == GENIE_ROW_BUCKETS;

		values[0] = CStringGetTextDatum(NameStr(TupleDescAttr(RelationGetDescr(heap),
															  a->attnum - 1)->attname));
		values[1] = ObjectIdGetDatum(a->type);
		values[2] = CStringGetTextDatum(mode_name(a));
		values[3] = Int32GetDatum(a->n_buckets);
		nulls[3] = !buckets;
		values[4] = Float8GetDatum(a->lo);
		nulls[4] = !buckets;
		values[5] = Float8GetDatum(a->hi);
		nulls[5] = !buckets;
		values[6] = Int32GetDatum(a->n_values);
		nulls[6] = buckets;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return (Datum) 0;
}
