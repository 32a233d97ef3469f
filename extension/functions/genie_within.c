/*-------------------------------------------------------------------------
 *
 * genie_within.c
 *	  genie_within(index, queries, radius): range queries, every row visible
 *	  to the caller within a distance of each query of a batch, exact: by
 *	  Euclidean distance (real[] <-> real[]) over a genie_vector_ops index,
 *	  by edit distance (levenshtein(), code points) over a genie_ngram_ops
 *	  index that stores its strings.  The boundary is included: a row at
 *	  exactly the radius is an answer.
 *
 * The search (genie/cluster_list.hpp, search/genie_search_range.c) runs in
 * this backend, or with genie preloaded in the genie service (the main
 * rows; the pending ones here), on the engine genie.device asks for (on the
 * GPU, for vectors the CPU plans from the list's centres and the device
 * reads the members; for strings the device reads each query's length
 * window): over the
 * index's List of Clusters when it keeps one (WITH (cluster_list = on):
 * clusters and superclusters that cannot meet a query's ball are skipped),
 * else over every stored value, and over each pending row; a float32 pass with a proven bound (vectors) or the length
 * filter and a capped distance (strings) rules most out before their exact
 * distance.  Under genie.vector_search / genie.text_search = permutation an
 * index with permutants reads only its candidates (approximate, every
 * distance true; search/genie_search_range.c).  Rows come in (query_no,
 * distance, ctid) order.
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
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "profile/genie_profile.h"
#include "search/genie_search.h"
#include "search/genie_search_device.h"
#include "search/genie_search_range.h"
#include "search/genie_visibility.h"
#include "types/genie_vector.h"

PG_FUNCTION_INFO_V1(genie_within_vectors);
PG_FUNCTION_INFO_V1(genie_within_strings);

/* One answer: what the result's order needs. */
typedef struct WithinRow
{
	int32		query;
	ItemPointerData tid;
	float8		distance;
} WithinRow;

static int
within_row_cmp(const void *a, const void *b)
{
	const WithinRow *x = a;
	const WithinRow *y = b;

	if (x->query != y->query)
		return x->query < y->query ? -1 : 1;
	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return ItemPointerCompare(unconstify(ItemPointerData *, &x->tid),
							  unconstify(ItemPointerData *, &y->tid));
}

/* One search (genie_search_batch_retrying runs it again when its version goes). */
typedef struct WithinSearch
{
	Relation	heap;
	GenieValueBatch batch;
	double		radius;
	WithinRow  *rows;			/* out */
	int64		n_rows;
	int64		capacity;
} WithinSearch;

static void
add_row(WithinSearch *s, int32 query, ItemPointer tid, float8 distance)
{
	if (s->n_rows == s->capacity)
	{
		s->capacity = Max(s->capacity * 2, 1024);
		s->rows = s->rows == NULL ? palloc_extended(sizeof(WithinRow) * s->capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(s->rows, sizeof(WithinRow) * s->capacity);
	}
	s->rows[s->n_rows].query = query;
	s->rows[s->n_rows].tid = *tid;
	s->rows[s->n_rows].distance = distance;
	s->n_rows++;
}

static void
within_search(GenieCachedIndex *entry, void *arg)
{
	WithinSearch *s = arg;
	genie_range_results *found;
	GenieVisibility vs;

	s->n_rows = 0;				/* a retry starts over */
	found = genie_search_range(entry, &s->batch, s->radius, true);
	if (found == NULL)
		return;
	genie_profile_push(GENIE_PHASE_VISIBILITY);
	PG_TRY();
	{
		genie_visibility_begin(&vs, entry, s->heap, GetActiveSnapshot(), s->batch.n);
		genie_visibility_check_ahead(&vs, entry, found->objects, found->query_offsets,
									 found->n_queries, PG_INT64_MAX);
		for (int32 q = 0; q < found->n_queries; q++)
		{
			for (int64 i = found->query_offsets[q]; i < found->query_offsets[q + 1]; i++)
			{
				ItemPointerData tid;

				if (genie_object_visible(&vs, entry, found->objects[i], &tid))
					add_row(s, q, &tid, found->distances[i]);
				if ((i & 4095) == 4095)
					CHECK_FOR_INTERRUPTS();
			}
		}
		genie_visibility_end(&vs);
	}
	PG_FINALLY();
	{
		genie_range_results_free(found);
	}
	PG_END_TRY();
	genie_profile_pop();
}

/* Opens the index for genie_within, checked against the queries' kind. */
static Relation
open_for_within(Oid indexoid, GenieValuesKind kind, Relation *heap)
{
	Relation	index = genie_open_index(indexoid, heap, GENIE_ACCESS_READ);
	GenieIndexType type;
	bool		vectors = kind == GENIE_VALUES_VECTORS;

	/* genie_within reads rows by TID, past any row-level security policy */
	if (check_enable_rls(RelationGetRelid(*heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_within cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(*heap)),
				 errhint("Compare the distance in a WHERE clause, which applies the policies.")));
	genie_index_type(index, &type);
	if (strcmp(type.info->batch_function, vectors ? "genie_knn" : "genie_similar") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("genie_within with %s queries cannot search genie index \"%s\", which is of operator class %s",
						vectors ? "real[]" : "text[]", RelationGetRelationName(index), type.info->opclass),
				 errhint("Range queries need genie_vector_ops (real[] queries) or genie_ngram_ops with stored strings (text[] queries).")));
	if (!vectors && !genie_index_stores_values(index, type.info))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genie index \"%s\" does not store its strings", RelationGetRelationName(index)),
				 errhint("Rebuild it with store_strings = on (the default).")));
	return index;
}

/* Runs the search and returns its rows as the function's result. */
static void
within_rows(FunctionCallInfo fcinfo, Oid indexoid, const GenieValueBatch *queries, double radius)
{
	WithinSearch s;
	GenieResultWriter writer;
	Relation	index;

	InitMaterializedSRF(fcinfo, 0);
	if (queries->n == 0)
		return;
	memset(&s, 0, sizeof(s));
	index = open_for_within(indexoid, queries->kind, &s.heap);
	if (queries->kind == GENIE_VALUES_VECTORS)
		genie_vector_check_queries(index, queries->dim);
	s.batch = *queries;
	s.radius = radius;
	if (queries->kind == GENIE_VALUES_VECTORS)
		genie_search_prepare_device();
	genie_search_batch_retrying(index, within_search, &s);

	genie_profile_push(GENIE_PHASE_RESULTS);
	genie_result_rows_expected(fcinfo, s.n_rows);
	if (s.n_rows > 1)
		qsort(s.rows, s.n_rows, sizeof(WithinRow), within_row_cmp);
	genie_result_writer_begin(&writer, fcinfo);
	for (int64 i = 0; i < s.n_rows; i++)
	{
		Datum		values[3];

		values[0] = Int32GetDatum(s.rows[i].query + 1);
		values[1] = PointerGetDatum(&s.rows[i].tid);
		values[2] = Float8GetDatum(s.rows[i].distance);
		genie_result_put(&writer, values);
	}
	genie_result_writer_end(&writer);
	genie_profile_pop();
	index_close(index, AccessShareLock);
	table_close(s.heap, AccessShareLock);
}

/*
 * genie_within(index regclass, queries real[], radius float8)
 *		-> setof (query_no int4, ctid tid, distance float8)
 */
Datum
genie_within_vectors(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	float8		radius = PG_GETARG_FLOAT8(2);
	ArrayType  *array;
	GenieValueBatch batch;
	int			nq;
	int			dim;

	if (isnan(radius) || radius < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the radius must be at least 0"),
				 errdetail("It is %g.", radius)));
	genie_profile_push(GENIE_PHASE_QUERY);
	array = PG_GETARG_ARRAYTYPE_P(1);
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_VECTORS;
	batch.vectors = genie_vector_queries(array, &nq, &dim);
	batch.n = nq;
	batch.dim = dim;
	genie_profile_pop();
	within_rows(fcinfo, indexoid, &batch, radius);
	return (Datum) 0;
}

/*
 * genie_within(index regclass, queries text[], radius int4)
 *		-> setof (query_no int4, ctid tid, distance float8)
 */
Datum
genie_within_strings(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	int32		radius = PG_GETARG_INT32(2);
	ArrayType  *array;
	Datum	   *elems;
	bool	   *nulls;
	int			nq;
	int64	   *offsets;
	StringInfoData buf;
	GenieValueBatch batch;

	if (radius < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the radius must be at least 0"),
				 errdetail("It is %d.", radius)));
	genie_profile_push(GENIE_PHASE_QUERY);
	array = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a one-dimensional array")));
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nq);
	offsets = palloc(sizeof(int64) * (nq + 1));
	initStringInfo(&buf);
	offsets[0] = 0;
	for (int i = 0; i < nq; i++)
	{
		text		   *t;
		const char *utf8;
		size_t		size;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queries must not contain NULL elements")));
		t = DatumGetTextPP(elems[i]);
		/* the stored strings are UTF-8 whatever the database's encoding */
		utf8 = genie_text_utf8(t, &size);
		appendBinaryStringInfo(&buf, utf8, (int) size);
		offsets[i + 1] = buf.len;
		if ((i & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	genie_profile_pop();
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_STRINGS;
	batch.n = nq;
	batch.text = buf.data;
	batch.text_offsets = offsets;
	within_rows(fcinfo, indexoid, &batch, (double) radius);
	return (Datum) 0;
}
