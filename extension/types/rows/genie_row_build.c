/*-------------------------------------------------------------------------
 *
 * genie_row_build.c
 *	  Building a row index: the attribute list (the reloption), the first
 *	  table scan that measures numeric attributes and chooses BUCKETS or
 *	  VALUES, the dictionary made during the build and written after it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "types/rows/genie_row_build.h"
#include "types/rows/genie_row_dictionary.h"
#include "types/rows/genie_row_values.h"

/* ---- the attribute list ---- */


/*
 * Parses 'name, name lo..hi, "Quoted Name"' into specs; returns the count,
 * or -1 with *error set.  Used to validate the reloption too.
 */
int
genie_row_parse_attributes(const char *list, GenieRowAttributeSpec *specs, int max, const char **error)
{
	const char *p = list;
	int			n = 0;

	for (;;)
	{
		StringInfoData name;
		const char *start;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		if (n == max)
		{
			*error = "too many attributes";
			return -1;
		}
		initStringInfo(&name);
		if (*p == '"')
		{
			p++;
			for (;;)
			{
				if (*p == '\0')
				{
					*error = "unterminated quoted name";
					return -1;
				}
				if (*p == '"' && p[1] == '"')
				{
					appendStringInfoChar(&name, '"');
					p += 2;
				}
				else if (*p == '"')
				{
					p++;
					break;
				}
				else
					appendStringInfoChar(&name, *p++);
			}
		}
		else
		{
			while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t' && *p != '\n')
				appendStringInfoChar(&name, pg_tolower((unsigned char) *p++));
		}
		if (name.len == 0)
		{
			*error = "empty attribute name";
			return -1;
		}
		specs[n].name = name.data;
		specs[n].lo = specs[n].hi = NULL;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p != ',' && *p != '\0')
		{
			/* bounds: everything up to the comma, split at ".." */
			const char *dots;
			const char *end;

			start = p;
			end = strchr(p, ',');
			if (end == NULL)
				end = p + strlen(p);
			dots = strstr(start, "..");
			if (dots == NULL || dots >= end)
			{
				*error = "bounds must be written lo..hi";
				return -1;
			}
			specs[n].lo = pnstrdup(start, dots - start);
			specs[n].hi = pnstrdup(dots + 2, end - dots - 2);
			p = end;
		}
		n++;
		if (*p == ',')
			p++;
	}
	return n;
}

void
genie_validate_attribute_list(const char *value)
{
	GenieRowAttributeSpec specs[GENIE_ROW_MAX_ATTRIBUTES];
	const char *error = NULL;

	if (value != NULL &&
		genie_row_parse_attributes(value, specs, GENIE_ROW_MAX_ATTRIBUTES, &error) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for genie option \"attributes\": %s", error),
				 errhint("Write column names separated by commas, each optionally followed by bounds lo..hi, at most %d.",
						 GENIE_ROW_MAX_ATTRIBUTES)));
}

/* ---- building ---- */

struct GenieRowBuild
{
	Relation	index;
	Oid			rowtype;
	TupleDesc	desc;
	GenieRowDictionary *dictionary;
	/* pass 1 statistics of numeric attributes without given bounds */
	bool		measure[GENIE_ROW_MAX_ATTRIBUTES];
	bool		have_finite[GENIE_ROW_MAX_ATTRIBUTES];
	float8		min[GENIE_ROW_MAX_ATTRIBUTES];
	float8		max[GENIE_ROW_MAX_ATTRIBUTES];
	HTAB	   *distinct[GENIE_ROW_MAX_ATTRIBUTES];	/* NULL once over budget */
	MemoryContext tmpcxt;
};

static float8
bound_value(Relation heap, Form_pg_attribute att, const char *text)
{
	Oid			typinput;
	Oid			typioparam;
	float8		v;
	char	   *trimmed = pstrdup(text);
	int			len = strlen(trimmed);

	while (len > 0 && (trimmed[len - 1] == ' ' || trimmed[len - 1] == '\t'))
		trimmed[--len] = '\0';
	while (*trimmed == ' ' || *trimmed == '\t')
		trimmed++;
	getTypeInputInfo(att->atttypid, &typinput, &typioparam);
	v = genie_row_numeric(att->atttypid,
						  OidInputFunctionCall(typinput, trimmed, typioparam, att->atttypmod));
	if (!isfinite(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bounds of genie attribute \"%s\" must be finite", NameStr(att->attname))));
	return v;
}

static void
stats_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state_)
{
	GenieRowBuild *b = (GenieRowBuild *) state_;
	GenieRowDictionary *d = b->dictionary;
	HeapTupleData tuple;
	MemoryContext old;

	if (isnull[0])
		return;
	old = MemoryContextSwitchTo(b->tmpcxt);
	tuple = genie_row_tuple(values[0], b->rowtype);
	for (int slot = 0; slot < d->schema.n_attributes; slot++)
	{
		const GenieRowAttribute *a = &d->schema.attributes[slot];
		bool		null;
		Datum		value;
		float8		v;

		if (!b->measure[slot])
			continue;
		value = heap_getattr(&tuple, a->attnum, b->desc, &null);
		if (null)
			continue;
		v = genie_row_numeric(a->type, value);
		if (isfinite(v))
		{
			if (!b->have_finite[slot] || v < b->min[slot])
				b->min[slot] = v;
			if (!b->have_finite[slot] || v > b->max[slot])
				b->max[slot] = v;
			b->have_finite[slot] = true;
		}
		if (b->distinct[slot] != NULL)
		{
			hash_search(b->distinct[slot], &v, HASH_ENTER, NULL);
			if (hash_get_num_entries(b->distinct[slot]) > a->n_buckets)
			{
				hash_destroy(b->distinct[slot]);
				b->distinct[slot] = NULL;
			}
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(b->tmpcxt);
}

static int
float8_order(const void *a, const void *b)
{
	return float8_cmp_internal(*(const float8 *) a, *(const float8 *) b);
}

GenieRowBuild *
genie_row_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	int			buckets = opts != NULL ? opts->buckets : GENIE_ROW_DEFAULT_BUCKETS;
	const char *list = (opts != NULL && opts->attributes != 0) ?
		(const char *) opts + opts->attributes : NULL;
	GenieRowAttributeSpec specs[GENIE_ROW_MAX_ATTRIBUTES];
	int			n_specs = 0;
	TupleDesc	desc = RelationGetDescr(heap);
	GenieRowSchema schema;
	GenieRowBuild *b = palloc0(sizeof(GenieRowBuild));
	List	   *exprs = RelationGetIndexExpressions(index);
	bool		any_measured = false;

	if (indexInfo->ii_NumIndexAttrs != 1 || indexInfo->ii_IndexAttrNumbers[0] != 0 ||
		list_length(exprs) != 1 || !IsA(linitial(exprs), Var) ||
		((Var *) linitial(exprs))->varattno != InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genie_row_ops indexes the whole row of its table"),
				 errhint("CREATE INDEX ... ON %s USING genie ((%s)) WITH (attributes = '...');",
						 quote_identifier(RelationGetRelationName(heap)),
						 quote_identifier(RelationGetRelationName(heap)))));

	memset(&schema, 0, sizeof(schema));
	if (list != NULL)
	{
		const char *error = NULL;

		n_specs = genie_row_parse_attributes(list, specs, GENIE_ROW_MAX_ATTRIBUTES, &error);
		if (n_specs < 0)
			genie_validate_attribute_list(list);
		if (n_specs == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genie option \"attributes\" names no column")));
	}
	else
	{
		/* every column of a supported type */
		for (int i = 0; i < desc->natts && n_specs < GENIE_ROW_MAX_ATTRIBUTES; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			bool		numeric;

			if (!att->attisdropped && genie_row_type_supported(att->atttypid, &numeric))
			{
				specs[n_specs].name = pstrdup(NameStr(att->attname));
				specs[n_specs].lo = specs[n_specs].hi = NULL;
				n_specs++;
			}
		}
		if (n_specs == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" has no column genie_row_ops can index",
							RelationGetRelationName(heap)),
					 errhint("Supported types: int2, int4, int8, float4, float8, numeric, date, timestamp, timestamptz, text, varchar, char, bool and enums.")));
	}

	schema.n_attributes = n_specs;
	schema.schema_id = genie_row_schema_new_id(index);
	schema.dictionary.head = schema.dictionary.tail = InvalidBlockNumber;
	for (int slot = 0; slot < n_specs; slot++)
	{
		AttrNumber attnum = InvalidAttrNumber;
		Form_pg_attribute att = NULL;
		GenieRowAttribute *a = &schema.attributes[slot];
		bool		numeric;

		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), specs[slot].name) == 0)
			{
				att = TupleDescAttr(desc, i);
				attnum = i + 1;
			}
		if (att == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of genie option \"attributes\" does not exist in table \"%s\"",
							specs[slot].name, RelationGetRelationName(heap)),
					 errhint("After renaming or dropping a column, name the columns anew: ALTER INDEX %s SET (attributes = '...').",
							 quote_identifier(RelationGetRelationName(index)))));
		for (int j = 0; j < slot; j++)
			if (schema.attributes[j].attnum == attnum)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" appears twice in genie option \"attributes\"",
								specs[slot].name)));
		if (!genie_row_type_supported(att->atttypid, &numeric))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" has type %s, which genie_row_ops cannot index",
							specs[slot].name, format_type_be(att->atttypid)),
					 errhint("Supported types: int2, int4, int8, float4, float8, numeric, date, timestamp, timestamptz, text, varchar, char, bool and enums.")));
		a->attnum = attnum;
		a->type = att->atttypid;
		a->n_buckets = buckets;
		a->mode = GENIE_ROW_VALUES;
		if (specs[slot].lo != NULL)
		{
			if (!numeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("categorical column \"%s\" cannot have bounds", specs[slot].name)));
			a->mode = GENIE_ROW_BUCKETS;
			a->lo = bound_value(heap, att, specs[slot].lo);
			a->hi = bound_value(heap, att, specs[slot].hi);
			if (!(a->lo < a->hi))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("bounds of genie attribute \"%s\" must have lo < hi", specs[slot].name)));
		}
		else if (numeric)
		{
			HASHCTL		ctl;

			memset(&ctl, 0, sizeof(ctl));
			ctl.keysize = sizeof(float8);
			ctl.entrysize = sizeof(float8);
			ctl.hcxt = CurrentMemoryContext;
			b->distinct[slot] = hash_create("genie distinct values", 1024, &ctl,
											HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
			b->measure[slot] = true;
			any_measured = true;
		}
	}

	b->index = index;
	b->rowtype = heap->rd_rel->reltype;
	b->desc = desc;
	b->dictionary = genie_row_dictionary_create(CurrentMemoryContext, index, &schema);
	b->tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie row statistics",
									  ALLOCSET_DEFAULT_SIZES);

	/* pass 1: bounds and distinct counts of numeric attributes */
	if (any_measured && scan)
		table_index_build_scan(heap, index, indexInfo, true, false, stats_callback, b, NULL);

	for (int slot = 0; slot < n_specs; slot++)
	{
		GenieRowAttribute *a = &b->dictionary->schema.attributes[slot];

		if (!b->measure[slot])
			continue;
		if (b->distinct[slot] != NULL && hash_get_num_entries(b->distinct[slot]) == 0 && scan)
			ereport(NOTICE,
					(errmsg("genie index \"%s\": attribute \"%s\" has no values to take bounds from, so it keeps exact values",
							RelationGetRelationName(index),
							NameStr(TupleDescAttr(desc, a->attnum - 1)->attname)),
					 errhint("Give it bounds in the attribute list (%s lo..hi), or REINDEX after loading rows.",
							 quote_identifier(NameStr(TupleDescAttr(desc, a->attnum - 1)->attname)))));
		if (b->distinct[slot] != NULL)
		{
			/* few distinct values: each keeps its own code, in value order */
			long		n = hash_get_num_entries(b->distinct[slot]);
			float8	   *sorted = palloc(sizeof(float8) * Max(n, 1));
			HASH_SEQ_STATUS seq;
			float8	   *v;
			int			i = 0;

			hash_seq_init(&seq, b->distinct[slot]);
			while ((v = hash_seq_search(&seq)) != NULL)
				sorted[i++] = *v;
			qsort(sorted, n, sizeof(float8), float8_order);
			a->mode = GENIE_ROW_VALUES;
			for (i = 0; i < n; i++)
				genie_row_dictionary_add_building(index, b->dictionary, slot, (char *) &sorted[i],
										sizeof(float8));
			hash_destroy(b->distinct[slot]);
			b->distinct[slot] = NULL;
		}
		else
		{
			a->mode = GENIE_ROW_BUCKETS;
			a->lo = b->have_finite[slot] ? b->min[slot] : 0;
			a->hi = b->have_finite[slot] ? b->max[slot] : 1;
			if (!(a->lo < a->hi))
				a->hi = a->lo + 1;
		}
	}
	return b;
}

int32 *
genie_row_build_keywords(GenieRowBuild *b, Datum row, int *n)
{
	return genie_row_encode(b->index, b->dictionary, b->desc, b->rowtype, row,
							GENIE_ROW_ENCODE_BUILD, n);
}

/* Writes the dictionary and fills schema. */
void
genie_row_build_finish(GenieRowBuild *b, GenieRowSchema *schema)
{
	genie_row_dictionary_write(b->index, b->dictionary, schema);
	MemoryContextDelete(b->tmpcxt);
	MemoryContextDelete(b->dictionary->cxt);
}

