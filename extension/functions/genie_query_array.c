/*-------------------------------------------------------------------------
 *
 * genie_query_array.c
 *	  genie_knn's stored array of queries read in pieces
 *	  (genie_query_array.h).
 *
 * The 10,000 Fashion-MNIST test vectors are one 31 MB real[][], which a
 * table stores pglz-compressed (8.4 MB) by default.  Detoasting it is one
 * pglz stream expanded on one core, 48-72 ms on the GPU hosts
 * (bench/latency.md), and the search could only start after it.  A pglz
 * or lz4 stream cannot be expanded from the middle (its matches point back
 * into what it wrote before: up to 4 kB for pglz, 64 kB for lz4), but it
 * can be expanded in order a piece at a time: here the backend expands the
 * array to the end of each piece of queries, checks it and hands it to the
 * scan ahead, whose thread searches it while the backend expands the next.
 * A value stored out of line uncompressed is fetched a piece at a time the
 * same way.  (genie_expand.c expands the streams.)  A pglz stream is also
 * expanded on the threads the reading has, a cut of a megabyte a thread at
 * a time (genie_expand_parallel.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "genie_utils.h"
#include "functions/genie_expand.h"
#include "functions/genie_expand_parallel.h"
#include "profile/genie_explain.h"
#include "functions/genie_query_array.h"
#include "types/genie_vector.h"

/*
 * An array is read in pieces when it is at least this long: two pieces of
 * 2 MB (a shorter one is searched in one call anyway).  A piece is also at
 * least 1,024 queries, so an array of wider vectors may still be one piece:
 * it is then expanded here, then searched.
 */
#define QUERY_ARRAY_MIN_BYTES	((Size) 2 * GENIE_SCAN_AHEAD_PIECE_BYTES)

/* How the table stores the array. */
typedef enum QueryArrayStorage
{
	QUERY_ARRAY_PGLZ,
	QUERY_ARRAY_LZ4,
	QUERY_ARRAY_PLAIN			/* out of line, not compressed */
} QueryArrayStorage;

struct GenieQueryArray
{
	QueryArrayStorage storage;
	struct varlena *stored;		/* the toast pointer (plain), or the compressed value fetched */
	int32		rawsize;		/* its bytes expanded, without the varlena header */
	char	   *expanded;		/* the array, VARHDRSZ + rawsize bytes; NULL until read */
	int			threads;		/* the reading's now (a pglz stream's cuts) */
	bool		in_order;		/* a cut could not be expanded on threads: the rest in order */
};

static void
corrupt(const GenieQueryArray *qa)
{
	if (qa->storage == QUERY_ARRAY_PLAIN)
		elog(ERROR, "genie: the stored queries are not as long as their header says");
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg_internal("compressed %s data is corrupt",
							 qa->storage == QUERY_ARRAY_LZ4 ? "lz4" : "pglz")));
}

/* A GenieExpandRun: genie_parallel_for's threads, false when it fails or is cancelled. */
static bool
run_on_threads(int n, int threads, void (*body) (int64 i, void *arg), void *arg)
{
	genie_error err;

	return genie_parallel_for(n, threads, body, arg, genie_cancel_requested, NULL, &err) == GENIE_OK;
}

/* The threads the reading has now: genie_scan_ahead_reading_threads, 0 resolved to every core. */
static void
set_threads(GenieQueryArray *qa, GenieScanAhead *ahead)
{
	int			threads = ahead != NULL ? genie_scan_ahead_reading_threads(ahead) : genie_cpu_threads;

	qa->threads = threads > 0 ? threads : (int) Max(1, sysconf(_SC_NPROCESSORS_ONLN));
}

/*
 * Expands qa's value to upto bytes of its data (or its end): a compressed
 * one with the error of corrupt data, also when it ends short of upto; a
 * plain one's slice fetched from the TOAST table.
 */
static void
expand_step(GenieQueryArray *qa, GenieExpand *s, Size upto)
{
	unsigned char *before = s->dp;
	unsigned char *threaded = s->dp;	/* where the cut on threads ended */

	switch (qa->storage)
	{
		case QUERY_ARRAY_PGLZ:
			/* a cut on threads first (it stops where the output is right) */
			if (!qa->in_order && qa->threads > 1 && (Size) (s->dp - s->dest) < upto &&
				!genie_expand_pglz_parallel(s, qa->threads * (s->dp == s->dest ? GENIE_EXPAND_FIRST_PART_BYTES
															  : GENIE_EXPAND_PART_BYTES),
											qa->threads, run_on_threads))
				qa->in_order = true;
			threaded = s->dp;
			if (!genie_expand_pglz(s, upto))
				corrupt(qa);
			break;
		case QUERY_ARRAY_LZ4:
			if (!genie_expand_lz4(s, upto))
				corrupt(qa);
			break;
		case QUERY_ARRAY_PLAIN:
			{
				Size		done = s->dp - s->dest;
				Size		end = Min(upto, (Size) (s->destend - s->dest));

				if (end > done)
				{
					struct varlena *slice = detoast_attr_slice(qa->stored, (int32) done,
															   (int32) (end - done));

					if (VARSIZE(slice) - VARHDRSZ != end - done)
						elog(ERROR, "genie: a slice of the stored queries is %zu bytes, not %zu",
							 (Size) (VARSIZE(slice) - VARHDRSZ), end - done);
					memcpy(s->dp, VARDATA(slice), end - done);
					s->dp += end - done;
					pfree(slice);
				}
				break;
			}
	}
	if ((Size) (s->dp - s->dest) < Min(upto, (Size) (s->destend - s->dest)))
		corrupt(qa);
	if (qa->storage != QUERY_ARRAY_PLAIN)
		genie_explain_expanded(threaded - before, s->dp - threaded);
}

/*
 * expand_step to upto, GENIE_SCAN_AHEAD_PIECE_BYTES at a time with a
 * cancel check between: a piece of 1,024 wide queries (64 MB at 16,000
 * dimensions) takes longer to expand than a cancel may wait.
 */
static void
expand_to(GenieQueryArray *qa, GenieExpand *s, Size upto)
{
	for (Size done = s->dp - s->dest; done < upto; done = s->dp - s->dest)
	{
		expand_step(qa, s, Min(upto, done + GENIE_SCAN_AHEAD_PIECE_BYTES));
		if (s->dp == s->destend)
			break;
		CHECK_FOR_INTERRUPTS();
	}
}

/* ---- the array ---- */

GenieQueryArray *
genie_query_array_open(Datum value)
{
	struct varlena *v = (struct varlena *) DatumGetPointer(value);
	struct varatt_external pointer;
	GenieQueryArray *qa;

	if (!VARATT_IS_EXTERNAL_ONDISK(v))
		return NULL;
	VARATT_EXTERNAL_GET_POINTER(pointer, v);
	if ((Size) pointer.va_rawsize < QUERY_ARRAY_MIN_BYTES)
		return NULL;
	qa = palloc0(sizeof(GenieQueryArray));
	if (!VARATT_EXTERNAL_IS_COMPRESSED(pointer))
	{
		qa->storage = QUERY_ARRAY_PLAIN;
		qa->stored = (struct varlena *) palloc(VARSIZE_ANY(v));
		memcpy(qa->stored, v, VARSIZE_ANY(v));
		qa->rawsize = pointer.va_rawsize - VARHDRSZ;
		return qa;
	}
	switch (VARATT_EXTERNAL_GET_COMPRESS_METHOD(pointer))
	{
		case TOAST_PGLZ_COMPRESSION_ID:
			qa->storage = QUERY_ARRAY_PGLZ;
			break;
		case TOAST_LZ4_COMPRESSION_ID:
			qa->storage = QUERY_ARRAY_LZ4;
			break;
		default:
			pfree(qa);
			return NULL;
	}
	/* the chunks gathered, not expanded (an 8 MB copy: a few ms) */
	qa->stored = detoast_external_attr(v);
	if (!VARATT_IS_COMPRESSED(qa->stored) ||
		VARDATA_COMPRESSED_GET_COMPRESS_METHOD(qa->stored) != VARATT_EXTERNAL_GET_COMPRESS_METHOD(pointer))
		corrupt(qa);
	qa->rawsize = (int32) VARDATA_COMPRESSED_GET_EXTSIZE(qa->stored);
	return qa;
}

/*
 * Whether the expanded start of array (the header's bytes) is a 2-D real[]
 * without NULLs whose size is its elements': the arrays read in pieces
 * (any other is expanded whole and checked as genie_knn checks any).
 */
static bool
array_in_pieces(const ArrayType *array, int32 rawsize)
{
	int64		elements;

	if (ARR_NDIM(array) != 2 || ARR_HASNULL(array) || ARR_ELEMTYPE(array) != FLOAT4OID ||
		ARR_DIMS(array)[0] < 1 || ARR_DIMS(array)[1] < 1)
		return false;
	elements = (int64) ARR_DIMS(array)[0] * ARR_DIMS(array)[1];
	return (int64) ARR_OVERHEAD_NONULLS(2) + elements * (int64) sizeof(float) ==
		(int64) rawsize + VARHDRSZ;
}

bool
genie_query_array_read(GenieQueryArray *qa, Relation index, GenieCachedIndex *entry, int32 k,
					   GenieValueBatch *batch, GenieValueRows *first)
{
	GenieScanAhead *volatile ahead = NULL;
	volatile bool scanned = false;
	ArrayType  *array;
	GenieExpand s;
	int			nq;
	int			dim;

	if (qa->expanded == NULL)
		qa->expanded = palloc_extended((Size) qa->rawsize + VARHDRSZ, MCXT_ALLOC_HUGE);
	SET_VARSIZE(qa->expanded, (Size) qa->rawsize + VARHDRSZ);
	array = (ArrayType *) qa->expanded;
	s.sp = NULL;
	s.srcend = NULL;
	if (qa->storage != QUERY_ARRAY_PLAIN)
	{
		s.sp = (const unsigned char *) qa->stored + VARHDRSZ_COMPRESSED;
		s.srcend = (const unsigned char *) qa->stored + VARSIZE(qa->stored);
	}
	s.dest = (unsigned char *) VARDATA(qa->expanded);
	s.dp = s.dest;
	s.destend = s.dest + qa->rawsize;
	qa->in_order = false;
	set_threads(qa, NULL);

	/* the header: the dimensions (and the element type) */
	expand_to(qa, &s, ARR_OVERHEAD_NONULLS(2) - VARHDRSZ);
	if (qa->rawsize < ARR_OVERHEAD_NONULLS(2) - VARHDRSZ || !array_in_pieces(array, qa->rawsize))
	{
		/* expanded whole (2 MB at a time, for a cancel): genie_knn's checks and errors */
		expand_to(qa, &s, qa->rawsize);
		if (s.sp != s.srcend)
			corrupt(qa);		/* input past the value's end */
		memset(batch, 0, sizeof(*batch));
		batch->kind = GENIE_VALUES_VECTORS;
		batch->vectors = genie_vector_queries(array, &batch->n, &batch->dim);
		genie_vector_check_queries(index, batch->dim);
		return false;
	}
	nq = ARR_DIMS(array)[0];
	dim = ARR_DIMS(array)[1];
	genie_vector_check_queries(index, dim);

	/* the scans' thread reads the entry's values: it ends before any way out */
	PG_TRY();
	{
		const Size data = ARR_DATA_OFFSET(array) - VARHDRSZ;
		const float *vectors = (const float *) ARR_DATA_PTR(array);
		const int	piece = genie_scan_ahead_piece_rows(dim);

		if (entry != NULL)
			ahead = genie_scan_ahead_begin(entry, k);
		for (int from = 0; from < nq; from += piece)
		{
			int			n = Min(piece, nq - from);

			set_threads(qa, ahead);
			expand_to(qa, &s, data + ((Size) from + n) * dim * sizeof(float));
			genie_vector_check_finite(vectors + (int64) from * dim, (int64) n * dim, dim, from);
			/* a batch of one piece is searched as one, as before */
			if (ahead != NULL && n < nq)
				genie_scan_ahead_add_kept(ahead, vectors + (int64) from * dim, n, dim);
			CHECK_FOR_INTERRUPTS();
		}
		if (s.sp != s.srcend)
			corrupt(qa);		/* (the last piece ends the value) */
		if (ahead != NULL && nq > piece)
			scanned = genie_scan_ahead_finish(ahead, vectors, nq, first);
	}
	PG_FINALLY();
	{
		genie_scan_ahead_end(ahead);
	}
	PG_END_TRY();
	memset(batch, 0, sizeof(*batch));
	batch->kind = GENIE_VALUES_VECTORS;
	batch->n = nq;
	batch->vectors = (float *) ARR_DATA_PTR(array);
	batch->dim = dim;
	return scanned;
}
