/*-------------------------------------------------------------------------
 *
 * genie_int4.c
 *	  int4[] keyword sets (genie_int4_ops): the elements of an array are its
 *	  keywords, and a query is an int4[] (each distinct element an item of
 *	  weight 1) or a genie_query.  Also the match-count functions and the
 *	  ordering operator <~> on int4[].
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "types/genie_type.h"

PG_FUNCTION_INFO_V1(genie_int4_support);
PG_FUNCTION_INFO_V1(genie_match_count_int4_array);
PG_FUNCTION_INFO_V1(genie_negated_match_count_int4_array);
PG_FUNCTION_INFO_V1(genie_negated_match_count_query);

/* ---- the type's callbacks ---- */

static void
int4_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* nothing to choose: the elements are the keywords */
}

static int32 *
int4_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	return genie_int4_array_values(DatumGetArrayTypeP(value), "indexed array", n);
}

static void
int4_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				  Datum value, Oid type, GenieOrderBy *out)
{
	memset(out, 0, sizeof(*out));
	if (type == INT4ARRAYOID)
	{
		int			n;
		int32	   *keywords = genie_int4_array_values(DatumGetArrayTypeP(value), "query", &n);

		out->query = genie_query_from_keywords(keywords, n, false);
	}
	else
		out->query = (GenieQuery *) PG_DETOAST_DATUM_COPY(value);
}

static const GenieTypeInfo int4_type = {
	.encoding = GENIE_ENCODING_INT4_SET,
	.name = "int4 set",
	.opclass = "genie_int4_ops",
	.batch_function = "genie_topk",
	.build_encoding = int4_build_encoding,
	.encode_value = int4_encode_value,
	.encode_query = int4_encode_query,
};

/* support function 1 of genie_int4_ops */
Datum
genie_int4_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&int4_type);
}

/* ---- SQL functions ---- */

/*
 * A query prepared for the match counts of many rows (an ordered scan's
 * projection and a sequential scan call the function once a row with the
 * same query): kept in fn_extra with a copy of the query's bytes, by which
 * a call recognizes it.
 */
typedef struct PreparedInt4Query
{
	Size		bytes;			/* the query array's size, and its copy */
	char	   *copy;
	int32	   *keywords;		/* sorted, distinct */
	size_t		n;
	uint64		filter;
	Size		capacity;		/* of copy, in bytes (keywords: as many int4) */
} PreparedInt4Query;

static const PreparedInt4Query *
prepared_query(FmgrInfo *flinfo, ArrayType *query)
{
	PreparedInt4Query *p = (PreparedInt4Query *) flinfo->fn_extra;
	Size		bytes = VARSIZE(query);
	int			query_len;
	int32	   *values;
	genie_error err;

	if (p != NULL && p->bytes == bytes && memcmp(p->copy, query, bytes) == 0)
		return p;
	/* checked before anything is kept: a bad query is never recognized */
	values = genie_int4_array_values(query, "query", &query_len);
	if (p == NULL)
	{
		p = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(PreparedInt4Query));
		flinfo->fn_extra = p;
	}
	p->bytes = 0;				/* not usable until filled */
	/*
	 * Kept from query to query (a join or a correlated subquery may change
	 * it every row): the array's bytes bound its element count.
	 */
	if (p->capacity < bytes)
	{
		/* the new buffers first: an allocation's error leaves the old ones */
		char	   *copy = MemoryContextAlloc(flinfo->fn_mcxt, bytes);
		int32	   *keywords = MemoryContextAlloc(flinfo->fn_mcxt, bytes);

		if (p->copy != NULL)
		{
			pfree(p->copy);
			pfree(p->keywords);
		}
		p->copy = copy;
		p->keywords = keywords;
		p->capacity = bytes;
	}
	memcpy(p->copy, query, bytes);
	GENIE_CHECK(genie_match_count_prepare_int4(values, query_len, p->keywords, &p->n, &p->filter, &err),
				&err, "genie_match_count");
	p->bytes = bytes;
	return p;
}

/* The count of the call's (object int4[], query int4[]) arguments. */
static int32
match_count(FunctionCallInfo fcinfo)
{
	ArrayType  *object = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *query = PG_GETARG_ARRAYTYPE_P(1);
	int			object_len;
	int32	   *object_values = genie_int4_array_values(object, "object", &object_len);
	int32		count;
	genie_error err;

	if (fcinfo->flinfo != NULL)
	{
		const PreparedInt4Query *p = prepared_query(fcinfo->flinfo, query);

		GENIE_CHECK(genie_match_count_prepared_int4(object_values, object_len, p->keywords, p->n,
													p->filter, &count, &err),
					&err, "genie_match_count");
	}
	else
	{
		int			query_len;
		int32	   *query_values = genie_int4_array_values(query, "query", &query_len);

		GENIE_CHECK(genie_match_count_int4(object_values, object_len, query_values, query_len,
										   &count, &err),
					&err, "genie_match_count");
	}
	PG_FREE_IF_COPY(object, 0);
	PG_FREE_IF_COPY(query, 1);
	return count;
}

/*
 * genie_match_count(object int4[], query int4[]) -> int4
 *
 * The number of distinct query keywords that occur in the object.  STRICT in
 * SQL, so NULL arrays give NULL without reaching here.
 */
Datum
genie_match_count_int4_array(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(match_count(fcinfo));
}

/*
 * The ordering operator <~> returns the negated count, because index scans
 * order ascending only.  A count of 0 gives 0, not -0.
 */
static Datum
negated(int32 count)
{
	return Float8GetDatum(count == 0 ? 0.0 : -(float8) count);
}

/* int4[] <~> int4[] */
Datum
genie_negated_match_count_int4_array(PG_FUNCTION_ARGS)
{
	return negated(match_count(fcinfo));
}

/* int4[] <~> genie_query */
Datum
genie_negated_match_count_query(PG_FUNCTION_ARGS)
{
	Datum		count = DirectFunctionCall2(genie_match_count_query,
											PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));

	return negated(DatumGetInt32(count));
}

