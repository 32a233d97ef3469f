/*-------------------------------------------------------------------------
 *
 * genie_query_array.c
 *	  genie_knn's stored array of queries read in pieces
 *	  (genie_query_array.h).
 *
 * The 10,000 Fashion-MNIST test vectors are one 31 MB real[][], which a
 * table stores pglz-compressed (8.4 MB).  Detoasting it is one pglz stream
 * expanded on one core, 48-72 ms on the GPU hosts (bench/latency.md), and
 * the search could only start after it.  A pglz stream cannot be expanded
 * from the middle (its matches point up to 4 kB back into what it wrote
 * before), but it can be expanded in order a piece at a time: here the
 * backend expands the array to the end of each piece of queries, checks
 * it and hands it to the scan ahead, whose thread searches it while the
 * backend expands the next.  The format expanded is pglz's, as
 * src/common/pg_lzcompress.c describes it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "catalog/pg_type.h"
#include "common/pg_lzcompress.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "genie_utils.h"
#include "functions/genie_query_array.h"
#include "types/genie_vector.h"

/*
 * An array is read in pieces when it is at least this long: two pieces of
 * Fashion-MNIST queries (a shorter one is searched in one call anyway).
 */
#define QUERY_ARRAY_MIN_BYTES	((Size) 2 * GENIE_SCAN_AHEAD_PIECE_BYTES)

struct GenieQueryArray
{
	struct varlena *compressed; /* the value as the table stores it, fetched */
	int32		rawsize;		/* its bytes expanded, without the varlena header */
	char	   *expanded;		/* the array, VARHDRSZ + rawsize bytes; NULL until read */
};

/* ---- a pglz stream expanded in order, a part at a time ---- */

/*
 * A pglz stream is control bytes, each followed by the 8 items its bits
 * (lowest first) describe: 0 a literal byte, 1 a match of 2 or 3 bytes,
 * len - 3 in the low 4 bits of the first (15: len is 18 plus a third
 * byte), the offset back in its high 4 bits and the second byte (1 to
 * 4095).  A match may overlap what it writes (off < len repeats a
 * pattern).
 */
typedef struct PglzStream
{
	const unsigned char *sp;
	const unsigned char *srcend;
	unsigned char *dest;
	unsigned char *dp;
	unsigned char *destend;
} PglzStream;

/* The most a control group reads (8 matches of 3 bytes) and writes (8 of 273). */
#define PGLZ_GROUP_IN		(1 + 8 * 3)
#define PGLZ_GROUP_OUT		(8 * 273)

/*
 * Expands s until at least upto bytes of dest are written (whole control
 * groups: a little more) or the stream ends; false on corrupt data (a
 * match before dest's start or past its end, a truncated item).  A match
 * is copied 8 bytes at a time where off >= 8 (each 8 bytes read are then
 * already written) with room past it for the overrun, which the following
 * items write again; most of a float array's items are literals and
 * 4-byte matches (one float), so the per-item work is what counts.
 */
static bool
pglz_stream_expand(PglzStream *s, Size upto)
{
	const unsigned char *sp = s->sp;
	const unsigned char *srcend = s->srcend;
	unsigned char *dp = s->dp;
	unsigned char *dest = s->dest;
	unsigned char *destend = s->destend;
	unsigned char *target = upto < (Size) (destend - dest) ? dest + upto : destend;

	/* groups far from both ends: no bounds checks but the offset's */
	while (dp < target && srcend - sp >= PGLZ_GROUP_IN && destend - dp >= PGLZ_GROUP_OUT + 8)
	{
		unsigned int ctrl = *sp++;

		if (ctrl == 0)
		{
			memcpy(dp, sp, 8);
			dp += 8;
			sp += 8;
			continue;
		}
		for (int bit = 0; bit < 8; bit++, ctrl >>= 1)
		{
			if (ctrl & 1)
			{
				int32		len = (sp[0] & 0x0f) + 3;
				int32		off = ((sp[0] & 0xf0) << 4) | sp[1];
				const unsigned char *from;

				sp += 2;
				if (len == 18)
					len += *sp++;
				if (off == 0 || off > dp - dest)
					return false;
				from = dp - off;
				if (off >= 8)
					for (int32 i = 0; i < len; i += 8)
						memcpy(dp + i, from + i, 8);
				else
					for (int32 i = 0; i < len; i++)
						dp[i] = from[i];
				dp += len;
			}
			else
				*dp++ = *sp++;
		}
	}
	/* near an end: every item checked */
	while (dp < target && sp < srcend)
	{
		unsigned int ctrl = *sp++;

		for (int bit = 0; bit < 8 && sp < srcend && dp < destend; bit++, ctrl >>= 1)
		{
			if (ctrl & 1)
			{
				int32		len;
				int32		off;

				if (srcend - sp < 2)
					return false;
				len = (sp[0] & 0x0f) + 3;
				off = ((sp[0] & 0xf0) << 4) | sp[1];
				sp += 2;
				if (len == 18)
				{
					if (sp >= srcend)
						return false;
					len += *sp++;
				}
				if (off == 0 || off > dp - dest || len > destend - dp)
					return false;
				for (int32 i = 0; i < len; i++)
					dp[i] = dp[i - off];
				dp += len;
			}
			else
				*dp++ = *sp++;
		}
	}
	s->sp = sp;
	s->dp = dp;
	return true;
}

static void
pglz_corrupt(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg_internal("compressed pglz data is corrupt")));
}

/* Expands s to upto bytes (or its end), with the error of corrupt data. */
static void
expand_to(PglzStream *s, Size upto)
{
	if (!pglz_stream_expand(s, upto))
		pglz_corrupt();
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
	if (!VARATT_EXTERNAL_IS_COMPRESSED(pointer) ||
		VARATT_EXTERNAL_GET_COMPRESS_METHOD(pointer) != TOAST_PGLZ_COMPRESSION_ID ||
		(Size) pointer.va_rawsize < QUERY_ARRAY_MIN_BYTES)
		return NULL;
	qa = palloc0(sizeof(GenieQueryArray));
	/* the chunks gathered, not expanded (an 8 MB copy: a few ms) */
	qa->compressed = detoast_external_attr(v);
	if (!VARATT_IS_COMPRESSED(qa->compressed) ||
		VARDATA_COMPRESSED_GET_COMPRESS_METHOD(qa->compressed) != TOAST_PGLZ_COMPRESSION_ID)
		pglz_corrupt();
	qa->rawsize = (int32) VARDATA_COMPRESSED_GET_EXTSIZE(qa->compressed);
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
	PglzStream	s;
	int			nq;
	int			dim;

	if (qa->expanded == NULL)
		qa->expanded = palloc_extended((Size) qa->rawsize + VARHDRSZ, MCXT_ALLOC_HUGE);
	SET_VARSIZE(qa->expanded, (Size) qa->rawsize + VARHDRSZ);
	array = (ArrayType *) qa->expanded;
	s.sp = (const unsigned char *) qa->compressed + VARHDRSZ_COMPRESSED;
	s.srcend = (const unsigned char *) qa->compressed + VARSIZE(qa->compressed);
	s.dest = (unsigned char *) VARDATA(qa->expanded);
	s.dp = s.dest;
	s.destend = s.dest + qa->rawsize;

	/* the header: the dimensions (and the element type) */
	expand_to(&s, ARR_OVERHEAD_NONULLS(2) - VARHDRSZ);
	if (s.dp - s.dest < ARR_OVERHEAD_NONULLS(2) - VARHDRSZ || !array_in_pieces(array, qa->rawsize))
	{
		/* expanded whole: genie_knn's checks and errors */
		expand_to(&s, qa->rawsize);
		if (s.dp != s.destend || s.sp != s.srcend)
			pglz_corrupt();
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
		const int	piece = (int) Max((int64) GENIE_SCAN_AHEAD_PIECE_ROWS,
									  (int64) (GENIE_SCAN_AHEAD_PIECE_BYTES / sizeof(float) / dim));

		if (entry != NULL)
			ahead = genie_scan_ahead_begin(entry, k);
		for (int from = 0; from < nq; from += piece)
		{
			int			n = Min(piece, nq - from);

			expand_to(&s, data + ((Size) from + n) * dim * sizeof(float));
			if (s.dp - s.dest < (int64) (data + ((Size) from + n) * dim * sizeof(float)))
				pglz_corrupt();
			genie_vector_check_finite(vectors + (int64) from * dim, (int64) n * dim, dim, from);
			/* a batch of one piece is searched as one, as before */
			if (ahead != NULL && n < nq)
				genie_scan_ahead_add(ahead, vectors + (int64) from * dim, n, dim);
			CHECK_FOR_INTERRUPTS();
		}
		if (s.dp != s.destend || s.sp != s.srcend)
			pglz_corrupt();
		if (ahead != NULL && nq > piece)
			scanned = genie_scan_ahead_finish(ahead, nq, first);
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
