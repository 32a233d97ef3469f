/*-------------------------------------------------------------------------
 *
 * genie_knn.c
 *	  genie_knn(index, queries, k): the k nearest rows visible to the caller
 *	  of each query of a batch, in one engine call: vectors by Euclidean
 *	  distance (real[] <-> real[]), exact, or with genie.vector_search = lsh
 *	  the LSH candidates re-ranked.  genie_hamming_knn(index, codes, k): the
 *	  same for codes by Hamming distance (bit <-> bit), exact.  genie_knn_from
 *	  takes the queries of either kind from the rows of a query.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "genie_utils.h"
#include "functions/genie_query_array.h"
#include "functions/genie_query_rows.h"
#include "search/genie_search_device.h"
#include "search/genie_search_values.h"
#include "types/genie_bit.h"
#include "types/genie_vector.h"
#include "profile/genie_profile.h"

PG_FUNCTION_INFO_V1(genie_knn);
PG_FUNCTION_INFO_V1(genie_hamming_knn);
PG_FUNCTION_INFO_V1(genie_knn_from);
PG_FUNCTION_INFO_V1(genie_knn_bytes);

#define GENIE_KNN_MAX_K	(1 << 30)

/* The checks of k, both functions'. */
static void
check_k(int32 k)
{
	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1")));
	if (k > GENIE_KNN_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("k must be at most %d", GENIE_KNN_MAX_K)));
}

/* One search of knn_rows (genie_search_batch_retrying runs it again when its version goes). */
typedef struct KnnSearch
{
	Relation	heap;
	Relation	index;
	GenieIndexType type;
	GenieValueBatch batch;
	int32		k;
	const char *sql;			/* genie_knn_from's query, until its rows are read */
	GenieQueryRows query_rows;
	GenieQueryArray *array;		/* genie_knn's stored array, until it is read */
	GenieValueRows rows;		/* out */
	ItemPointerData **tids;		/* out, one array a query */
} KnnSearch;

/* Whether an index of type answers a batch of codes (genie_hamming_knn) or of vectors (genie_knn). */
static bool
knn_answers(const GenieIndexType *type, bool codes)
{
	return strcmp(type->info->batch_function, codes ? "genie_hamming_knn" : "genie_knn") == 0;
}

/* The error of a batch of the other kind than the index answers. */
static void
knn_kind_error(Relation index, const GenieIndexType *type, bool codes)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("%s cannot search genie index \"%s\", which is of operator class %s",
					codes ? "a search by bit queries" : "a search by real[] queries",
					RelationGetRelationName(index), type->info->opclass),
			 errhint("Use %s() for this index.", type->info->batch_function)));
}

/*
 * The index (and *heap), opened for a batch search by vectors or by codes,
 * once the table has no row-level security and the index is of a kind
 * those queries search.
 */
static Relation
open_knn_index(Oid indexoid, bool codes, Relation *heap, GenieIndexType *type)
{
	Relation	index = genie_open_index(indexoid, heap, GENIE_ACCESS_READ);

	/* genie_knn reads rows by TID, past any row-level security policy */
	if (check_enable_rls(RelationGetRelid(*heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_knn cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(*heap)),
				 errhint("Use ORDER BY ... <-> ... LIMIT k, which applies the policies.")));
	genie_index_type(index, type);
	if (!knn_answers(type, codes))
		knn_kind_error(index, type, codes);
	return index;
}

/*
 * genie_knn_from's rows on a vector index, read by its search's attempt on
 * the index's current entry, the first that reads them whole (a later
 * attempt searches the rows read): its vectors are scanned ahead on the
 * entry while they are read; true and *first the first round's rows when
 * they were.  The entry's values are loaded before the first row is read
 * (through the genie service, which holds them, nothing is), so an
 * attempt that moves to a new version has read none, unless the
 * query's own SQL raised the move (its genie searches retry on their own
 * first): then the query runs again.
 */
static bool
knn_read_rows(GenieCachedIndex *entry, KnnSearch *s, GenieValueRows *first)
{
	GenieQueryRows *qr = &s->query_rows;
	bool		scanned;

	genie_query_rows_free(qr);	/* an attempt that failed midway */
	genie_profile_push(GENIE_PHASE_QUERY);
	scanned = genie_query_rows_read(s->sql, entry, s->k, qr, first);
	genie_profile_pop();
	s->sql = NULL;
	/* codes on a vector index: its error, as genie_knn_from of codes gets (none when none) */
	if (qr->codes && qr->code_batch.n > 0)
		knn_kind_error(s->index, &s->type, true);
	genie_query_rows_batch(qr, &s->batch);
	if (qr->codes)
		s->batch.n = 0;
	s->tids = palloc(sizeof(ItemPointerData *) * Max(s->batch.n, 1));
	if (s->batch.n > 0)
		genie_vector_check_queries(s->index, s->batch.dim);
	return scanned;
}

static void
knn_search(GenieCachedIndex *entry, void *arg)
{
	KnnSearch  *s = arg;
	GenieQuery **approximate = NULL;
	GenieValueRows first;
	bool		scanned = false;
	int			nq;

	if (s->array != NULL)
	{
		/* read whole by an attempt, it is kept for the next */
		genie_profile_push(GENIE_PHASE_QUERY);
		scanned = genie_query_array_read(s->array, s->index, entry, s->k, &s->batch, &first);
		genie_profile_pop();
		s->array = NULL;
		s->tids = palloc(sizeof(ItemPointerData *) * s->batch.n);
	}
	else if (s->sql != NULL)
	{
		scanned = knn_read_rows(entry, s, &first);
		if (s->batch.n == 0)
		{
			s->rows.offsets = palloc0(sizeof(int64));
			return;
		}
		/* the rows' SQL may have changed the settings: the first round is then not the search's */
		if (scanned && (genie_search_approximate(s->batch.kind) ||
						genie_search_permutation(s->batch.kind)))
		{
			genie_value_rows_free(&first);
			scanned = false;
		}
	}
	nq = s->batch.n;

	/* LSH keywords of vectors, EWH buckets of codes */
	if (genie_search_approximate(s->batch.kind))
	{
		genie_profile_push(GENIE_PHASE_QUERY);
		approximate = palloc(sizeof(GenieQuery *) * nq);
		if (s->type.info->approximate_queries != NULL)
			s->type.info->approximate_queries(s->index, &s->batch, approximate);
		else
			for (int q = 0; q < nq; q++)
			{
				approximate[q] = s->type.info->approximate_query(s->index, &s->batch, q);
				if ((q & 1023) == 1023)
					CHECK_FOR_INTERRUPTS();
			}
		genie_profile_pop();
	}
	genie_search_values_visible(entry, s->heap, GetActiveSnapshot(), &s->batch, approximate,
								s->k, scanned ? &first : NULL, &s->rows, s->tids);
}


/*
 * The k nearest rows of each query of queries (vectors of dim finite
 * elements, or codes of dim bits) in the index's table, into the function's
 * result: what genie_knn and genie_knn_from answer once they have their
 * queries.  With sql instead (queries NULL, a vector index), the queries
 * are the rows of sql, read by the search (knn_read_rows); with array, a
 * stored array's, read by the search (genie_query_array_read).
 */
static void
knn_rows(FunctionCallInfo fcinfo, Oid indexoid, const GenieValueBatch *queries, const char *sql,
		 GenieQueryArray *array, int32 k)
{
	KnnSearch	s;
	GenieResultWriter writer;
	int			nq;
	bool		codes = queries != NULL && queries->kind == GENIE_VALUES_CODES;

	InitMaterializedSRF(fcinfo, 0);
	if (queries != NULL && queries->n == 0)
		return;

	memset(&s, 0, sizeof(s));
	s.index = open_knn_index(indexoid, codes, &s.heap, &s.type);
	s.k = k;
	s.sql = sql;
	s.array = array;
	if (queries != NULL)
	{
		if (codes)
			genie_code_check_queries(s.index, queries->dim);
		else
			genie_vector_check_queries(s.index, queries->dim);
		s.batch = *queries;
		s.tids = palloc(sizeof(ItemPointerData *) * queries->n);
	}
	genie_search_prepare_device();
	genie_search_batch_retrying(s.index, knn_search, &s);
	nq = s.batch.n;

	genie_profile_push(GENIE_PHASE_RESULTS);
	genie_result_rows_expected(fcinfo, s.rows.offsets[nq]);
	genie_result_writer_begin(&writer, fcinfo);
	for (int q = 0; q < nq; q++)
	{
		for (int64 j = s.rows.offsets[q]; j < s.rows.offsets[q + 1]; j++)
		{
			Datum		values[3];

			values[0] = Int32GetDatum(q + 1);
			values[1] = PointerGetDatum(&s.tids[q][j - s.rows.offsets[q]]);
			values[2] = Float8GetDatum(s.rows.distances[j]);
			genie_result_put(&writer, values);
		}
	}
	genie_result_writer_end(&writer);
	genie_profile_pop();

	index_close(s.index, AccessShareLock);
	table_close(s.heap, AccessShareLock);
}

Datum
genie_knn(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array;
	GenieQueryArray *stored;
	int32		k = PG_GETARG_INT32(2);
	float	   *queries;
	int			nq;
	int			dim;
	GenieValueBatch batch;

	check_k(k);
	/*
	 * A table's array stored out of line (4 MB or more) is read by the
	 * search, in pieces scanned while the next are expanded; any other is
	 * read (detoasted) here: for large batches, most of a call's time.
	 */
	genie_profile_push(GENIE_PHASE_QUERY);
	stored = genie_query_array_open(PG_GETARG_DATUM(1));
	if (stored != NULL)
	{
		genie_profile_pop();
		knn_rows(fcinfo, indexoid, NULL, NULL, stored, k);
		return (Datum) 0;
	}
	array = PG_GETARG_ARRAYTYPE_P(1);
	queries = genie_vector_queries(array, &nq, &dim);
	genie_profile_pop();
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_VECTORS;
	batch.n = nq;
	batch.vectors = queries;
	batch.dim = dim;
	knn_rows(fcinfo, indexoid, &batch, NULL, NULL, k);
	return (Datum) 0;
}

/*
 * genie_knn_bytes(index regclass, queries bytea, dim int4, k int4) -> setof (query_no, ctid, distance)
 *
 * genie_knn over queries sent as raw bytes: float32 values, little-endian,
 * one vector of dim values after another (dim must be the index's, so that
 * bytes of another width are an error, not other queries).  A client's
 * binary bytea parameter arrives as one copy; a real[][] parameter is
 * parsed element by element (bench/latency.md: longer than the search).
 */
Datum
genie_knn_bytes(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	int32		dim = PG_GETARG_INT32(2);
	int32		k = PG_GETARG_INT32(3);
	bytea	   *bytes;
	Size		size;
	Size		width;
	const char *data;
	float	   *queries;
	GenieValueBatch batch;

	check_k(k);
	if (dim < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dim must be at least 1")));
	genie_profile_push(GENIE_PHASE_QUERY);
	bytes = PG_GETARG_BYTEA_P(1);
	size = VARSIZE(bytes) - VARHDRSZ;
	data = VARDATA(bytes);
	width = sizeof(float) * (Size) dim;
	if (size % width != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the query bytes are not whole vectors of %d dimensions", dim),
				 errdetail("%zu bytes are not a multiple of %zu, four bytes for each of %d dimensions.",
						   size, width, dim),
				 errhint("Send float32 values, little-endian, one vector after another (numpy: astype('<f4').tobytes()).")));
#ifdef WORDS_BIGENDIAN
	queries = palloc_extended(Max(size, 1), MCXT_ALLOC_HUGE);
	for (Size i = 0; i < size / sizeof(uint32); i++)
	{
		uint32		word;

		memcpy(&word, data + i * sizeof(uint32), sizeof(uint32));
		word = pg_bswap32(word);
		memcpy((char *) queries + i * sizeof(uint32), &word, sizeof(uint32));
		if ((i & 0xFFFFF) == 0xFFFFF)
			CHECK_FOR_INTERRUPTS();	/* up to 1 GB of bytes */
	}
#else
	/* a detoasted or stored bytea is 4-byte aligned; copied if not (a guard) */
	if ((uintptr_t) data % sizeof(float) == 0)
		queries = (float *) data;
	else
	{
		queries = palloc_extended(Max(size, 1), MCXT_ALLOC_HUGE);
		memcpy(queries, data, size);
	}
#endif
	/* a bytea is at most 1 GB: the vectors' count fits an int */
	genie_vector_check_finite(queries, (int64) (size / sizeof(float)), dim, 0);
	genie_profile_pop();
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_VECTORS;
	batch.n = (int32) (size / width);
	batch.vectors = queries;
	batch.dim = dim;
	/* the index's kind and width are checked there */
	knn_rows(fcinfo, indexoid, &batch, NULL, NULL, k);
	return (Datum) 0;
}

/*
 * genie_hamming_knn(index regclass, queries bit[], k int4) -> setof (query_no, ctid, distance)
 *
 * The k nearest rows of each query code by Hamming distance, exact
 * (distance is bit_count(code # query) as float8, ties by row order).
 */
Datum
genie_hamming_knn(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array;
	int32		k = PG_GETARG_INT32(2);
	GenieValueBatch batch;
	int64		capacity = 0;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	check_k(k);
	genie_profile_push(GENIE_PHASE_QUERY);
	array = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("query codes must be a one-dimensional bit[]")));
	deconstruct_array(array, ARR_ELEMTYPE(array), -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_CODES;
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("query codes must not contain NULL elements")));
		genie_code_batch_add(&batch, &capacity, DatumGetVarBitP(elems[i]), i + 1);
		if ((i & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	genie_profile_pop();
	knn_rows(fcinfo, indexoid, &batch, NULL, NULL, k);
	return (Datum) 0;
}

/*
 * genie_knn_from(index regclass, query text, k int4) -> setof (query_no, ctid, distance)
 *
 * genie_knn over the rows of a query: each row of query (one real[] or
 * bit column) a query vector or code, query_no its 1-based position in the
 * query's order.  The rows are read from a cursor, so a batch of thousands
 * of queries is never built as one array.
 */
Datum
genie_knn_from(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int32		k = PG_GETARG_INT32(2);
	Relation	heap;
	Relation	index;
	GenieIndexType type;
	bool		vectors;
	GenieQueryRows qr;
	GenieValueBatch batch;

	check_k(k);
	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_READ);
	genie_index_type(index, &type);
	vectors = knn_answers(&type, false);
	/* (the locks are kept to the end of the transaction, as knn_rows' own) */
	index_close(index, NoLock);
	table_close(heap, NoLock);
	/* a vector index: the rows are read by the search, which scans them as they come */
	if (vectors)
	{
		knn_rows(fcinfo, indexoid, NULL, sql, NULL, k);
		return (Datum) 0;
	}
	genie_profile_push(GENIE_PHASE_QUERY);
	(void) genie_query_rows_read(sql, NULL, k, &qr, NULL);
	genie_profile_pop();
	if (qr.codes)
		knn_rows(fcinfo, indexoid, &qr.code_batch, NULL, NULL, k);
	else
	{
		genie_query_rows_batch(&qr, &batch);
		knn_rows(fcinfo, indexoid, &batch, NULL, NULL, k);
	}
	return (Datum) 0;
}
