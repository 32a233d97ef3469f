/*-------------------------------------------------------------------------
 *
 * genie_query_rows.c
 *	  The query rows of genie_knn_from (genie_query_rows.h).
 *
 * A query's rows are read from a cursor, so a batch of thousands of
 * queries is never built as one array.  A Fashion-MNIST row (784 floats,
 * 3 kB) is stored pglz-compressed, and decompressing 10,000 of them on the
 * backend's one core was most of a batch's reading (bench/latency.md): a
 * compressed row is kept as the cursor gives it and expanded, checked and
 * copied on the threads every 16 MB (or every piece).  While the backend
 * reads, the engine scans the rows read so far in pieces
 * (genie_scan_ahead.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dlfcn.h>
#include <math.h>

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "catalog/pg_type.h"
#include "common/pg_lzcompress.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "genie_utils.h"
#include "functions/genie_query_rows.h"
#include "types/genie_bit.h"
#include "types/genie_vector.h"

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


/*
 * Row number's real[] (plain) checked as a query, with the error a user
 * sees (the first row sets the dimensions), and copied into the vectors.
 */
static void
copy_query_row(GenieQueryRows *qr, ArrayType *array, int number)
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
take_query_row(GenieQueryRows *qr, Datum value, bool isnull)
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
 * The kept rows expanded, checked and copied into their places on
 * genie.cpu_threads threads (beside a scan ahead, the threads it leaves),
 * then forgotten; a row a thread left (a failed
 * check, corrupt data) is done again here, which reports the first such
 * kept row with the error one row at a time gives (a bad row that was not
 * kept, read as it came, is reported before kept rows ahead of it).
 */
static void
read_kept_rows(GenieQueryRows *qr)
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

		if (genie_parallel_for(qr->n_kept,
							   qr->ahead != NULL ? genie_scan_ahead_reading_threads(qr->ahead) : genie_cpu_threads,
							   read_row, &read,
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
 * The rows read since the last piece, handed to the scan ahead once they
 * make a piece (GENIE_SCAN_AHEAD_PIECE_ROWS and _BYTES), or at the last
 * row once a piece was handed, so that a batch of a piece or less is
 * searched as one, as before.  Kept rows are read first: only checked
 * rows are scanned.
 */
static void
scan_ahead(GenieQueryRows *qr, bool last)
{
	int64		piece = genie_scan_ahead_piece_rows(qr->dim);

	if (qr->ahead == NULL || qr->n == qr->handed || (last && qr->handed == 0) ||
		(!last && qr->n - qr->handed < piece))
		return;
	if (qr->n_kept > 0)
		read_kept_rows(qr);
	genie_scan_ahead_add(qr->ahead, qr->vectors + (int64) qr->handed * qr->dim, qr->n - qr->handed,
						 qr->dim);
	qr->handed = qr->n;
}

/*
 * Runs sql (read-only, as the caller) and gathers its rows, one real[] or
 * bit column, into qr: row by row from a cursor, without building an array.
 */
static void
query_rows(const char *sql, GenieQueryRows *qr)
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
				genie_code_batch_add(&qr->code_batch, &qr->code_capacity, code, qr->code_batch.n + 1);
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
		if (!qr->codes)
			scan_ahead(qr, false);
		CHECK_FOR_INTERRUPTS();
	}
	if (qr->n_kept > 0)
		read_kept_rows(qr);
	if (!qr->codes)
		scan_ahead(qr, true);
	SPI_cursor_close(portal);
	SPI_finish();
}

bool
genie_query_rows_read(const char *sql, GenieCachedIndex *entry, int32 k, GenieQueryRows *qr,
					  GenieValueRows *first)
{
	GenieScanAhead *volatile ahead = NULL;
	volatile bool scanned = false;

	memset(qr, 0, sizeof(*qr));
	qr->cxt = CurrentMemoryContext;
	qr->rows_cxt = AllocSetContextCreate(CurrentMemoryContext, "genie_knn_from rows",
										 ALLOCSET_DEFAULT_SIZES);
	qr->code_batch.kind = GENIE_VALUES_CODES;
	/* the scans' thread reads the entry's values: it ends before any way out */
	PG_TRY();
	{
		if (entry != NULL)
			ahead = genie_scan_ahead_begin(entry, k);
		qr->ahead = ahead;
		query_rows(sql, qr);
		if (ahead != NULL)
			scanned = genie_scan_ahead_finish(ahead, qr->vectors, qr->n, first);
	}
	PG_FINALLY();
	{
		genie_scan_ahead_end(ahead);
		qr->ahead = NULL;
	}
	PG_END_TRY();
	MemoryContextDelete(qr->rows_cxt);
	qr->rows_cxt = NULL;
	return scanned;
}

void
genie_query_rows_batch(const GenieQueryRows *qr, GenieValueBatch *batch)
{
	memset(batch, 0, sizeof(*batch));
	batch->kind = GENIE_VALUES_VECTORS;
	batch->n = qr->n;
	batch->vectors = qr->vectors;
	batch->dim = qr->dim;
}

void
genie_query_rows_free(GenieQueryRows *qr)
{
	if (qr->rows_cxt != NULL)
		MemoryContextDelete(qr->rows_cxt);
	if (qr->vectors != NULL)
		pfree(qr->vectors);
	if (qr->code_batch.codes != NULL)
		pfree(unconstify(uint64 *, qr->code_batch.codes));
	memset(qr, 0, sizeof(*qr));
}

