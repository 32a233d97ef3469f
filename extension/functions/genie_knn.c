/*-------------------------------------------------------------------------
 *
 * genie_knn.c
 *	  genie_knn(index, queries, k): the k nearest rows visible to the caller
 *	  of each query vector of a batch, in one engine call, by Euclidean
 *	  distance (real[] <-> real[]): exact, or with genie.vector_search = lsh
 *	  the LSH candidates re-ranked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "search/genie_search_values.h"
#include "types/genie_vector.h"
#include "profile/genie_profile.h"

PG_FUNCTION_INFO_V1(genie_knn);

#define GENIE_KNN_MAX_K	(1 << 30)

/*
 * The query vectors of a real[][] (one per row) or of a real[] (one
 * query): finite, without NULLs; *nq and *dim receive the shape.
 */
static float *
query_vectors(ArrayType *array, int *nq, int *dim)
{
	float	   *values = (float *) ARR_DATA_PTR(array);
	int64		n;

	if (ARR_ELEMTYPE(array) != FLOAT4OID)
		elog(ERROR, "genie_knn: queries are not a real[]");
	if (ARR_NDIM(array) > 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a two-dimensional array, one query vector per row")));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queries must not contain NULL elements")));
	*nq = ARR_NDIM(array) == 2 ? ARR_DIMS(array)[0] : (ARR_NDIM(array) == 1 ? 1 : 0);
	*dim = ARR_NDIM(array) == 2 ? ARR_DIMS(array)[1] : (ARR_NDIM(array) == 1 ? ARR_DIMS(array)[0] : 0);
	n = (int64) *nq * *dim;
	for (int64 i = 0; i < n; i++)
		if (isnan(values[i]) || isinf(values[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("queries must not contain %s", isnan(values[i]) ? "NaN" : "infinity"),
					 errdetail("Query %lld, element %lld.", (long long) (i / *dim + 1),
							   (long long) (i % *dim + 1))));
	return values;
}

Datum
genie_knn(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array;
	int32		k = PG_GETARG_INT32(2);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index;
	GenieCachedIndex *volatile entry = NULL;
	float	   *queries;
	int			nq;
	int			dim;

	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1")));
	if (k > GENIE_KNN_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("k must be at most %d", GENIE_KNN_MAX_K)));
	/* the array is read (detoasted) here: for large batches, most of a call's time */
	genie_profile_push(GENIE_PHASE_QUERY);
	array = PG_GETARG_ARRAYTYPE_P(1);
	queries = query_vectors(array, &nq, &dim);
	genie_profile_pop();
	InitMaterializedSRF(fcinfo, 0);
	if (nq == 0)
		return (Datum) 0;

	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_READ);
	/* genie_knn reads rows by TID, past any row-level security policy */
	if (check_enable_rls(RelationGetRelid(heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_knn cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(heap)),
				 errhint("Use ORDER BY ... <-> ... LIMIT k, which applies the policies.")));
	PG_TRY();
	{
		GenieIndexType type;
		GenieQuery **lsh = NULL;
		GenieValueBatch batch = {GENIE_VALUES_VECTORS, nq, NULL, NULL, queries, dim};
		GenieValueRows rows;
		ItemPointerData **tids = palloc(sizeof(ItemPointerData *) * nq);

		genie_index_type(index, &type);
		if (strcmp(type.info->batch_function, "genie_knn") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("genie_knn cannot search genie index \"%s\", which is of operator class %s",
							RelationGetRelationName(index), type.info->opclass),
					 errhint("Use %s() for this index.", type.info->batch_function)));
		genie_vector_check_queries(index, dim);
		entry = genie_cache_get(index);
		genie_cache_pin(entry);
		if (genie_vector_search_setting == GENIE_VECTOR_SEARCH_LSH)
		{
			genie_profile_push(GENIE_PHASE_QUERY);
			lsh = palloc(sizeof(GenieQuery *) * nq);
			for (int q = 0; q < nq; q++)
				lsh[q] = type.info->approximate_query(index, queries + (Size) q * dim, dim);
			genie_profile_pop();
		}
		genie_search_values_visible(entry, heap, GetActiveSnapshot(), &batch, lsh, k, &rows, tids);
		genie_profile_push(GENIE_PHASE_RESULTS);
		for (int q = 0; q < nq; q++)
		{
			for (int64 j = rows.offsets[q]; j < rows.offsets[q + 1]; j++)
			{
				Datum		values[3];
				bool		nulls[3] = {false, false, false};

				values[0] = Int32GetDatum(q + 1);
				values[1] = PointerGetDatum(&tids[q][j - rows.offsets[q]]);
				values[2] = Float8GetDatum(rows.distances[j]);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
		}
		genie_profile_pop();
	}
	PG_FINALLY();
	{
		if (entry != NULL)
			genie_cache_unpin(entry);
	}
	PG_END_TRY();

	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return (Datum) 0;
}
