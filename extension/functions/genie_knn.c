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

#include <dlfcn.h>
#include <math.h>

#include "access/detoast.h"
#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/toast_compression.h"
#include "catalog/pg_type.h"
#include "common/pg_lzcompress.h"
#include "executor/spi.h"
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
	GenieValueRows rows;		/* out */
	ItemPointerData **tids;		/* out, one array a query */
} KnnSearch;

static void
knn_search(GenieCachedIndex *entry, void *arg)
{
	KnnSearch  *s = arg;
	GenieQuery **approximate = NULL;
	int			nq = s->batch.n;

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
								s->k, &s->rows, s->tids);
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
	if (strcmp(type->info->batch_function, codes ? "genie_hamming_knn" : "genie_knn") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s cannot search genie index \"%s\", which is of operator class %s",
						codes ? "a search by bit queries" : "a search by real[] queries",
						RelationGetRelationName(index), type->info->opclass),
				 errhint("Use %s() for this index.", type->info->batch_function)));
	return index;
}

/*
 * The k nearest rows of each query of queries (vectors of dim finite
 * elements, or codes of dim bits) in the index's table, into the function's
 * result: what genie_knn and genie_knn_from answer once they have their
 * queries.
 */
static void
knn_rows(FunctionCallInfo fcinfo, Oid indexoid, const GenieValueBatch *queries, int32 k)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	KnnSearch	s;
	int			nq = queries->n;
	bool		codes = queries->kind == GENIE_VALUES_CODES;

	InitMaterializedSRF(fcinfo, 0);
	if (nq == 0)
		return;

	memset(&s, 0, sizeof(s));
	s.index = open_knn_index(indexoid, codes, &s.heap, &s.type);
	if (codes)
		genie_code_check_queries(s.index, queries->dim);
	else
		genie_vector_check_queries(s.index, queries->dim);
	s.batch = *queries;
	s.k = k;
	s.tids = palloc(sizeof(ItemPointerData *) * nq);
	genie_search_prepare_device();
	genie_search_batch_retrying(s.index, knn_search, &s);

	genie_profile_push(GENIE_PHASE_RESULTS);
	genie_result_rows_expected(fcinfo, s.rows.offsets[nq]);
	for (int q = 0; q < nq; q++)
	{
		for (int64 j = s.rows.offsets[q]; j < s.rows.offsets[q + 1]; j++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = Int32GetDatum(q + 1);
			values[1] = PointerGetDatum(&s.tids[q][j - s.rows.offsets[q]]);
			values[2] = Float8GetDatum(s.rows.distances[j]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	genie_profile_pop();

	index_close(s.index, AccessShareLock);
	table_close(s.heap, AccessShareLock);
}

Datum
genie_knn(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array;
	int32		k = PG_GETARG_INT32(2);
	float	   *queries;
	int			nq;
	int			dim;
	GenieValueBatch batch;

	check_k(k);
	/* the array is read (detoasted) here: for large batches, most of a call's time */
	genie_profile_push(GENIE_PHASE_QUERY);
	array = PG_GETARG_ARRAYTYPE_P(1);
	queries = genie_vector_queries(array, &nq, &dim);
	genie_profile_pop();
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_VECTORS;
	batch.n = nq;
	batch.vectors = queries;
	batch.dim = dim;
	knn_rows(fcinfo, indexoid, &batch, k);
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
	knn_rows(fcinfo, indexoid, &batch, k);
	return (Datum) 0;
}

/* Appends a query code to the batch's rows (grown as they come), checked. */
static void
add_query_code(GenieValueBatch *batch, int64 *capacity, VarBit *code, int64 number)
{
	int32		bits = genie_code_bits(code, "a query code");
	Size		words = (Size) genie_code_words(bits);
	uint64	   *rows = unconstify(uint64 *, batch->codes);

	if (batch->n == 0)
		batch->dim = bits;
	else if (bits != batch->dim)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_LENGTH_MISMATCH),
				 errmsg("the query codes have %d and %d bits", batch->dim, bits),
				 errdetail("Query %lld differs from the first.", (long long) number)));
	if ((int64) (batch->n + 1) * (int64) words > *capacity)
	{
		*capacity = Max(*capacity * 2, (int64) (batch->n + 1) * (int64) words);
		rows = rows == NULL ? palloc_extended(sizeof(uint64) * *capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(rows, sizeof(uint64) * *capacity);
	}
	memset(rows + (Size) batch->n * words, 0, sizeof(uint64) * words);
	memcpy(rows + (Size) batch->n * words, VARBITS(code), VARBITBYTES(code));
	batch->codes = rows;
	batch->n++;
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
		add_query_code(&batch, &capacity, DatumGetVarBitP(elems[i]), i + 1);
		if ((i & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	genie_profile_pop();
	knn_rows(fcinfo, indexoid, &batch, k);
	return (Datum) 0;
}

/*
 * A query row's real[] that pglz or lz4 compressed, as the cursor gave it
 * (in rows_cxt), kept until such rows are read together on the threads.
 */
typedef struct RowValue
{
	struct varlena *value;
	int			number;			/* its row: 1 for the first */
	uint8		state;			/* ROW_*: what the threads made of it */
} RowValue;

#define ROW_KEPT		0		/* not read yet */
#define ROW_COPIED		1		/* checked and copied into the vectors */
#define ROW_CORRUPT		2		/* the data did not decompress */
#define ROW_SERIAL		3		/* for the backend: a check failed */

/* The kept rows are read once they expand to this many bytes, so a batch never holds all of them. */
#define QUERY_ROWS_KEPT_BYTES	((Size) 16 * 1024 * 1024)

/* The largest row a thread expands (on its stack): 16,378 dimensions, with the array's header. */
#define ROW_STACK_BYTES			65536

/*
 * liblz4's decompression, as the server links it (a server built without
 * lz4 has no lz4 values): looked up once, NULL when absent, so that genie
 * needs no lz4 headers to build.  Pure, as pglz_decompress is.
 */
typedef int (*Lz4Decompress) (const char *source, char *dest, int source_size, int dest_capacity);

static Lz4Decompress
lz4_decompress(void)
{
	static bool looked = false;
	static Lz4Decompress found = NULL;

	if (!looked)
	{
		found = (Lz4Decompress) dlsym(RTLD_DEFAULT, "LZ4_decompress_safe");
		looked = true;
	}
	return found;
}

/* Whether the threads can expand compressed value v (else the backend detoasts it). */
static bool
threads_expand(struct varlena *v)
{
	if (!VARATT_IS_COMPRESSED(v))
		return false;
	switch (VARDATA_COMPRESSED_GET_COMPRESS_METHOD(v))
	{
		case TOAST_PGLZ_COMPRESSION_ID:
			return true;
		case TOAST_LZ4_COMPRESSION_ID:
			return lz4_decompress() != NULL;
		default:
			return false;
	}
}

/* What query_rows gathers: the rows' vectors or codes, grown as they come. */
typedef struct QueryRows
{
	MemoryContext cxt;			/* the caller's: the rows outlive SPI */
	float	   *vectors;
	int64		capacity;		/* floats */
	int			n;				/* rows: those kept included */
	int			dim;
	bool		codes;			/* a bit column: the rows go to code_batch */
	GenieValueBatch code_batch;
	int64		code_capacity;	/* words */
	MemoryContext rows_cxt;		/* a real[] column: the rows kept, reset by read_kept_rows */
	RowValue   *kept;			/* in rows_cxt, in the rows' order */
	int			n_kept;
	int			kept_room;
	Size		kept_bytes;
} QueryRows;

/*
 * Row number's real[] (plain) checked as a query, with the error a user
 * sees (the first row sets the dimensions), and copied into the vectors.
 */
static void
copy_query_row(QueryRows *qr, ArrayType *array, int number)
{
	const float *v;
	int			dim;

	if (ARR_NDIM(array) != 1 || array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("each query must be a one-dimensional real[] without NULL elements"),
				 errdetail("Row %d of the query is not.", number)));
	dim = ARR_DIMS(array)[0];
	if (number == 1)
		qr->dim = dim;
	else if (dim != qr->dim)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the queries have %d and %d dimensions", qr->dim, dim),
				 errdetail("Row %d of the query differs from the first row.", number)));
	v = (const float *) ARR_DATA_PTR(array);
	genie_vector_check_finite(v, dim, Max(dim, 1), number - 1);
	memcpy(qr->vectors + (int64) (number - 1) * dim, v, sizeof(float) * dim);
}

/*
 * Takes one row's real[]: a compressed value (pglz, or lz4 where liblz4 is
 * found) is kept for read_kept_rows (copied into rows_cxt, as SPI's tuples
 * go with each fetch), as decompression is most of reading a batch on one
 * core (bench/latency.md); a plain one is checked and copied here, as is
 * the first row, which sets the dimensions.
 */
static void
take_query_row(QueryRows *qr, Datum value, bool isnull)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(value);
	int			number = qr->n + 1;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the queries must not be NULL"),
				 errdetail("Row %d of the query is NULL.", number)));
	if (number > 1 && (int64) number * qr->dim > qr->capacity)
	{
		qr->capacity = Max(qr->capacity * 2, (int64) number * qr->dim);
		qr->vectors = repalloc_huge(qr->vectors, sizeof(float) * qr->capacity);
	}
	if (number > 1 && VARATT_IS_EXTERNAL_ONDISK(v))
	{
		/* still compressed, if it was */
		MemoryContext old = MemoryContextSwitchTo(qr->rows_cxt);

		v = detoast_external_attr(v);
		MemoryContextSwitchTo(old);
	}
	if (number > 1 && threads_expand(v) &&
		VARDATA_COMPRESSED_GET_EXTSIZE(v) + VARHDRSZ <= ROW_STACK_BYTES)
	{
		RowValue   *row;

		if (qr->n_kept == qr->kept_room)
		{
			qr->kept_room = Max(qr->kept_room * 2, 1024);
			qr->kept = qr->kept == NULL
				? MemoryContextAlloc(qr->rows_cxt, sizeof(RowValue) * qr->kept_room)
				: repalloc(qr->kept, sizeof(RowValue) * qr->kept_room);
		}
		if (v == (struct varlena *) DatumGetPointer(value))
		{
			v = MemoryContextAlloc(qr->rows_cxt, VARSIZE(v));
			memcpy(v, DatumGetPointer(value), VARSIZE(DatumGetPointer(value)));
		}
		row = &qr->kept[qr->n_kept++];
		row->value = v;
		row->number = number;
		row->state = ROW_KEPT;
		qr->kept_bytes += VARDATA_COMPRESSED_GET_EXTSIZE(v);
	}
	else
	{
		ArrayType  *array = DatumGetArrayTypeP(PointerGetDatum(v));

		if (number == 1)
		{
			/* the first: the vectors' first room (up to 1,024 rows or 16 MB) once its width is known */
			int			dim = ARR_NDIM(array) == 1 ? Max(ARR_DIMS(array)[0], 1) : 1;

			qr->capacity = (int64) Max(1, Min(1024, QUERY_ROWS_KEPT_BYTES / sizeof(float) / dim)) * dim;
			qr->vectors = MemoryContextAllocExtended(qr->cxt, sizeof(float) * qr->capacity,
													 MCXT_ALLOC_HUGE);
		}
		copy_query_row(qr, array, number);
		/* the copies made here, each row's own: a batch holds its rows once */
		if ((Pointer) array != (Pointer) v)
			pfree(array);
		if ((Pointer) v != DatumGetPointer(value))
			pfree(v);
	}
	qr->n++;
}

/* The kept rows and where they go (read_row's argument). */
typedef struct RowsRead
{
	RowValue   *kept;
	float	   *vectors;
	int			dim;
	Lz4Decompress lz4;
} RowsRead;

/*
 * On a thread of genie_parallel_for, pure (no palloc, no ereport): kept row
 * i expanded on the stack and copied into the vectors when it passes every
 * check; any other is left to the backend, which reports it.
 */
static void
read_row(int64 i, void *arg)
{
	RowsRead   *read = arg;
	RowValue   *row = &read->kept[i];
	union
	{
		double		align;
		char		bytes[ROW_STACK_BYTES];
	}			expanded;
	int32		rawsize = (int32) VARDATA_COMPRESSED_GET_EXTSIZE(row->value);
	ArrayType  *array = (ArrayType *) expanded.bytes;
	const float *v;

	/* (take_query_row keeps no wider row: a guard) */
	if ((Size) rawsize + VARHDRSZ > sizeof(expanded.bytes))
	{
		row->state = ROW_SERIAL;
		return;
	}
	if ((VARDATA_COMPRESSED_GET_COMPRESS_METHOD(row->value) == TOAST_PGLZ_COMPRESSION_ID
		 ? pglz_decompress((char *) row->value + VARHDRSZ_COMPRESSED,
						   (int32) (VARSIZE(row->value) - VARHDRSZ_COMPRESSED),
						   VARDATA(expanded.bytes), rawsize, true)
		 : read->lz4((char *) row->value + VARHDRSZ_COMPRESSED, VARDATA(expanded.bytes),
					 (int) (VARSIZE(row->value) - VARHDRSZ_COMPRESSED), rawsize)) != rawsize)
	{
		row->state = ROW_CORRUPT;
		return;
	}
	SET_VARSIZE(expanded.bytes, rawsize + VARHDRSZ);
	/* the size of a 1-D real[] of dim elements without NULLs, before its header is read */
	if ((Size) rawsize + VARHDRSZ != ARR_OVERHEAD_NONULLS(1) + sizeof(float) * (Size) read->dim ||
		ARR_NDIM(array) != 1 || ARR_HASNULL(array) || ARR_DIMS(array)[0] != read->dim)
	{
		row->state = ROW_SERIAL;
		return;
	}
	v = (const float *) ARR_DATA_PTR(array);
	for (int j = 0; j < read->dim; j++)
		if (isnan(v[j]) || isinf(v[j]))
		{
			row->state = ROW_SERIAL;
			return;
		}
	memcpy(read->vectors + (int64) (row->number - 1) * read->dim, v, sizeof(float) * read->dim);
	row->state = ROW_COPIED;
}

/*
 * The kept rows expanded, checked and copied into their places on every
 * core (genie.cpu_threads), then forgotten; a row a thread left (a failed
 * check, corrupt data) is done again here, which reports the first such
 * kept row with the error one row at a time gives (a bad row that was not
 * kept, read as it came, is reported before kept rows ahead of it).
 */
static void
read_kept_rows(QueryRows *qr)
{
	RowsRead	read;

	read.kept = qr->kept;
	read.vectors = qr->vectors;
	read.dim = qr->dim;
	read.lz4 = lz4_decompress();
	/* a few rows: not worth waking the threads */
	if (qr->n_kept < 64)
		for (int i = 0; i < qr->n_kept; i++)
			read_row(i, &read);
	else
	{
		genie_error err;

		if (genie_parallel_for(qr->n_kept, genie_cpu_threads, read_row, &read,
							   genie_cancel_requested, NULL, &err) != GENIE_OK)
			genie_report_error(&err, "genie_knn_from: reading the query rows");
	}
	for (int i = 0; i < qr->n_kept; i++)
	{
		RowValue   *row = &qr->kept[i];

		if (row->state == ROW_CORRUPT)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg_internal("compressed %s data is corrupt",
									 VARDATA_COMPRESSED_GET_COMPRESS_METHOD(row->value) ==
									 TOAST_PGLZ_COMPRESSION_ID ? "pglz" : "lz4"),
					 errdetail("Row %d of the query.", row->number)));
		if (row->state == ROW_SERIAL)
		{
			ArrayType  *array = DatumGetArrayTypeP(PointerGetDatum(row->value));

			copy_query_row(qr, array, row->number);
			pfree(array);
			CHECK_FOR_INTERRUPTS();
		}
	}
	MemoryContextReset(qr->rows_cxt);
	qr->kept = NULL;
	qr->n_kept = 0;
	qr->kept_room = 0;
	qr->kept_bytes = 0;
}

/*
 * Runs sql (read-only, as the caller) and gathers its rows, one real[]
 * column, into qr: row by row from a cursor, without building an array.
 */
static void
query_rows(const char *sql, QueryRows *qr)
{
	Portal		portal;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "genie_knn_from: SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, sql, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		TupleDesc	desc;

		SPI_cursor_fetch(portal, true, 1024);
		desc = SPI_tuptable->tupdesc;
		if (desc->natts != 1 || (TupleDescAttr(desc, 0)->atttypid != FLOAT4ARRAYOID &&
								 TupleDescAttr(desc, 0)->atttypid != BITOID &&
								 TupleDescAttr(desc, 0)->atttypid != VARBITOID))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the query of genie_knn_from must return one column of type real[] or bit"),
					 errdetail("It returns %d column(s), the first of type %s.", desc->natts,
							   desc->natts > 0 ? format_type_be(TupleDescAttr(desc, 0)->atttypid) : "none")));
		qr->codes = TupleDescAttr(desc, 0)->atttypid != FLOAT4ARRAYOID;
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			Datum		value = SPI_getbinval(SPI_tuptable->vals[r], desc, 1, &isnull);

			if (qr->codes)
			{
				MemoryContext old;
				VarBit	   *code;

				if (isnull)
					ereport(ERROR,
							(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
							 errmsg("the queries must not be NULL"),
							 errdetail("Row %d of the query is NULL.", qr->code_batch.n + 1)));
				/* detoasted here (SPI's context), copied into the caller's rows */
				code = DatumGetVarBitP(value);
				old = MemoryContextSwitchTo(qr->cxt);
				add_query_code(&qr->code_batch, &qr->code_capacity, code, qr->code_batch.n + 1);
				MemoryContextSwitchTo(old);
				if ((Pointer) code != DatumGetPointer(value))
					pfree(code);
			}
			else
				take_query_row(qr, value, isnull);
		}
		SPI_freetuptable(SPI_tuptable);
		if (qr->kept_bytes >= QUERY_ROWS_KEPT_BYTES)
			read_kept_rows(qr);
		CHECK_FOR_INTERRUPTS();
	}
	if (qr->n_kept > 0)
		read_kept_rows(qr);
	SPI_cursor_close(portal);
	SPI_finish();
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
	QueryRows	qr;

	check_k(k);
	memset(&qr, 0, sizeof(qr));
	qr.cxt = CurrentMemoryContext;
	qr.rows_cxt = AllocSetContextCreate(CurrentMemoryContext, "genie_knn_from rows",
										ALLOCSET_DEFAULT_SIZES);
	qr.code_batch.kind = GENIE_VALUES_CODES;
	genie_profile_push(GENIE_PHASE_QUERY);
	query_rows(sql, &qr);
	MemoryContextDelete(qr.rows_cxt);
	genie_profile_pop();
	if (qr.codes)
		knn_rows(fcinfo, indexoid, &qr.code_batch, k);
	else
	{
		GenieValueBatch batch;

		memset(&batch, 0, sizeof(batch));
		batch.kind = GENIE_VALUES_VECTORS;
		batch.n = qr.n;
		batch.vectors = qr.vectors;
		batch.dim = qr.dim;
		knn_rows(fcinfo, indexoid, &batch, k);
	}
	return (Datum) 0;
}
