/*-------------------------------------------------------------------------
 *
 * genie_topk.c
 *	  genie_topk(index, queries, k): a whole batch of queries in one engine
 *	  call, returning for each query its k best rows visible to the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "search/genie_search.h"
#include "search/genie_search_device.h"
#include "types/documents/genie_document.h"
#include "types/documents/genie_document_query.h"
#include "types/rows/genie_ranges.h"
#include "profile/genie_profile.h"

PG_FUNCTION_INFO_V1(genie_topk);

#define GENIE_TOPK_MAX_K	(1 << 30)

/* One search of genie_topk (genie_search_batch_retrying runs it again when its version goes). */
typedef struct TopkSearch
{
	Relation	heap;
	GenieQuery **queries;
	int			nq;
	int32		k;
	GenieVisibleRows *rows;		/* out */
} TopkSearch;

static void
topk_search(GenieCachedIndex *entry, void *arg)
{
	TopkSearch *s = arg;

	genie_search_visible(entry, s->heap, GetActiveSnapshot(), s->queries, s->nq, s->k, s->rows);
}

Datum
genie_topk(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(1);
	int32		k = PG_GETARG_INT32(2);
	/* genie_document_topk's idf (STRICT: not NULL) */
	bool		idf = PG_NARGS() > 3 && PG_GETARG_BOOL(3);
	GenieResultWriter writer;
	Relation	heap;
	Relation	index;
	Datum	   *elems;
	bool	   *nulls;
	int			nq;
	int16		elem_len;
	bool		elem_byval;
	char		elem_align;
	const char *called;

	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1")));
	if (k > GENIE_TOPK_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("k must be at most %d", GENIE_TOPK_MAX_K)));
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a one-dimensional array")));

	InitMaterializedSRF(fcinfo, 0);
	genie_profile_push(GENIE_PHASE_QUERY);
	/*
	 * One C function behind three SQL names, told apart by the queries' type:
	 * genie_query[], genie_ranges[] (a row index), tsquery[], tsvector[] or
	 * genie_document_query[] (an index of documents).
	 */
	if (ARR_ELEMTYPE(array) == genie_ranges_type(fcinfo->flinfo->fn_oid))
		called = "genie_ranges_topk";
	else if (ARR_ELEMTYPE(array) == TSQUERYOID || ARR_ELEMTYPE(array) == TSVECTOROID ||
			 ARR_ELEMTYPE(array) == genie_document_query_type(get_func_namespace(fcinfo->flinfo->fn_oid)))
		called = "genie_document_topk";
	else
		called = "genie_topk";
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &elem_len, &elem_byval, &elem_align);
	deconstruct_array(array, ARR_ELEMTYPE(array), elem_len, elem_byval, elem_align,
					  &elems, &nulls, &nq);
	for (int i = 0; i < nq; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queries must not contain NULL elements")));
	genie_profile_pop();
	if (nq == 0)
		return (Datum) 0;

	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_READ);
	/* genie_topk reads rows by TID, past any row-level security policy */
	if (check_enable_rls(RelationGetRelid(heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_topk cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(heap)),
				 errhint("Use ORDER BY ... <~> ... LIMIT k, which applies the policies.")));
	{
		GenieIndexType type;
		TopkSearch	s;

		/* each type answers batches through one function: say which */
		genie_index_type(index, &type);
		if (strcmp(type.info->batch_function, called) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("%s cannot search genie index \"%s\", which is of operator class %s",
							called,
							RelationGetRelationName(index), type.info->opclass),
					 errhint("Use %s() for this index.", type.info->batch_function)));

		s.heap = heap;
		s.nq = nq;
		s.k = k;
		s.queries = palloc(sizeof(GenieQuery *) * nq);
		s.rows = palloc(sizeof(GenieVisibleRows) * nq);
		genie_profile_push(GENIE_PHASE_QUERY);
		for (int i = 0; i < nq; i++)
		{
			GenieOrderBy orderby;

			if (idf)
				orderby.query = genie_document_engine_query(index, elems[i], ARR_ELEMTYPE(array), true);
			else
				type.info->encode_query(index, &type.encoding, GENIE_MATCH_STRATEGY, elems[i],
										 ARR_ELEMTYPE(array), &orderby);
			s.queries[i] = orderby.query;
		}
		genie_profile_pop();
		genie_search_prepare_device();
		genie_search_batch_retrying(index, topk_search, &s);

		genie_profile_push(GENIE_PHASE_RESULTS);
		{
			int64		n_rows = 0;

			for (int q = 0; q < nq; q++)
				n_rows += s.rows[q].n;
			genie_result_rows_expected(fcinfo, n_rows);
		}
		genie_result_writer_begin(&writer, fcinfo);
		for (int q = 0; q < nq; q++)
		{
			for (int64 j = 0; j < s.rows[q].n; j++)
			{
				Datum		values[3];

				values[0] = Int32GetDatum(q + 1);
				values[1] = PointerGetDatum(&s.rows[q].tids[j]);
				values[2] = Int32GetDatum(s.rows[q].scores[j]);
				genie_result_put(&writer, values);
			}
		}
		genie_result_writer_end(&writer);
		genie_profile_pop();
	}

	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return (Datum) 0;
}
