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
 * same way.  The formats expanded are pglz's, as
 * src/common/pg_lzcompress.c describes it, and lz4's block format (the
 * server compresses a value as one block).
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
};

/*
 * Where the expanding of a value stands: the input (compressed values),
 * the output written so far.
 */
typedef struct ExpandState
{
	const unsigned char *sp;
	const unsigned char *srcend;
	unsigned char *dest;
	unsigned char *dp;
	unsigned char *destend;
} ExpandState;

/*
 * The copy of a match of len bytes from off back, with 16 bytes of room
 * past it.  Most of a float array's matches are a float or two: one
 * 16-byte copy (the bytes past len are written again by what follows); a
 * longer one that overlaps what it writes (a run) repeats its pattern in
 * chunks that double, each reading bytes already written.
 */
static inline void
copy_match(unsigned char *dp, int32 off, int32 len)
{
	const unsigned char *from = dp - off;

	if (len <= 16 && off >= 16)
		memcpy(dp, from, 16);
	else if (len <= 8 && off >= 8)
		memcpy(dp, from, 8);
	else if (off >= len)
		memcpy(dp, from, len);
	else
	{
		int32		done = 0;
		int32		chunk = off;

		/* [from, dp + done) repeats the pattern, and dp + done is in phase with from */
		while (len - done > chunk)
		{
			memcpy(dp + done, from, chunk);
			done += chunk;
			chunk = done + off;
		}
		memcpy(dp + done, from, len - done);
	}
}

/* ---- a pglz stream expanded in order, a part at a time ---- */

/*
 * A pglz stream is control bytes, each followed by the 8 items its bits
 * (lowest first) describe: 0 a literal byte, 1 a match of 2 or 3 bytes,
 * len - 3 in the low 4 bits of the first (15: len is 18 plus a third
 * byte), the offset back in its high 4 bits and the second byte (1 to
 * 4095).  A match may overlap what it writes (off < len repeats a
 * pattern).
 */

/* The most a control group reads (8 matches of 3 bytes) and writes (8 of 273). */
#define PGLZ_GROUP_IN		(1 + 8 * 3)
#define PGLZ_GROUP_OUT		(8 * 273)

/*
 * Expands s until at least upto bytes of dest are written (whole control
 * groups: a little more) or the stream ends; false on corrupt data (a
 * match before dest's start or past its end, a truncated item).
 */
static bool
pglz_expand(ExpandState *s, Size upto)
{
	const unsigned char *sp = s->sp;
	const unsigned char *srcend = s->srcend;
	unsigned char *dp = s->dp;
	unsigned char *dest = s->dest;
	unsigned char *destend = s->destend;
	unsigned char *target = upto < (Size) (destend - dest) ? dest + upto : destend;

	/* groups far from both ends: no bounds checks but the offset's */
	while (dp < target && srcend - sp >= PGLZ_GROUP_IN && destend - dp >= PGLZ_GROUP_OUT + 16)
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

				sp += 2;
				if (len == 18)
					len += *sp++;
				if (off == 0 || off > dp - dest)
					return false;
				copy_match(dp, off, len);
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

/*
 * An lz4 block is sequences: a token (literals' count in its high 4 bits,
 * the match's length - 4 in its low 4; 15 continues in the next bytes, each
 * added, up to one under 255), the literals, the match's offset back (2
 * bytes, little-endian, 1 to 65535) and its length's further bytes; the
 * last sequence has literals only.
 */

/* A length's further bytes (after 15 in the token); -1 past the input's end. */
static inline int64
lz4_length(const unsigned char **sp, const unsigned char *srcend, int64 len)
{
	unsigned int b;

	do
	{
		if (*sp >= srcend)
			return -1;
		b = *(*sp)++;
		len += b;
	} while (b == 255 && len < PG_INT32_MAX);
	return len;
}

/* As pglz_expand, for an lz4 block (whole sequences). */
static bool
lz4_expand(ExpandState *s, Size upto)
{
	const unsigned char *sp = s->sp;
	const unsigned char *srcend = s->srcend;
	unsigned char *dp = s->dp;
	unsigned char *dest = s->dest;
	unsigned char *destend = s->destend;
	unsigned char *target = upto < (Size) (destend - dest) ? dest + upto : destend;

	while (dp < target && sp < srcend)
	{
		const unsigned int token = *sp++;
		int64		lits = token >> 4;
		int64		len;
		int32		off;

		if (lits == 15 && (lits = lz4_length(&sp, srcend, lits)) < 0)
			return false;
		if (lits > srcend - sp || lits > destend - dp)
			return false;
		if (lits <= 16 && srcend - sp >= 16 && destend - dp >= 16)
			memcpy(dp, sp, 16);	/* the common short run, 16 bytes at once */
		else
			memcpy(dp, sp, lits);
		dp += lits;
		sp += lits;
		if (sp == srcend)
			break;				/* the last sequence */
		if (srcend - sp < 2)
			return false;
		off = sp[0] | (sp[1] << 8);
		sp += 2;
		len = (token & 0x0f) + 4;
		if (len == 19 && (len = lz4_length(&sp, srcend, len)) < 0)
			return false;
		if (off == 0 || off > dp - dest || len > destend - dp)
			return false;
		if (destend - dp >= len + 16)
			copy_match(dp, off, (int32) len);
		else
			for (int64 i = 0; i < len; i++)
				dp[i] = dp[i - off];
		dp += len;
	}
	s->sp = sp;
	s->dp = dp;
	return true;
}

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

/*
 * Expands qa's value to upto bytes of its data (or its end): a compressed
 * one with the error of corrupt data; a plain one's slice fetched from the
 * TOAST table.
 */
static void
expand_to(const GenieQueryArray *qa, ExpandState *s, Size upto)
{
	switch (qa->storage)
	{
		case QUERY_ARRAY_PGLZ:
			if (!pglz_expand(s, upto))
				corrupt(qa);
			break;
		case QUERY_ARRAY_LZ4:
			if (!lz4_expand(s, upto))
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
	ExpandState s;
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

	/* the header: the dimensions (and the element type) */
	expand_to(qa, &s, ARR_OVERHEAD_NONULLS(2) - VARHDRSZ);
	if (s.dp - s.dest < ARR_OVERHEAD_NONULLS(2) - VARHDRSZ || !array_in_pieces(array, qa->rawsize))
	{
		/* expanded whole: genie_knn's checks and errors */
		expand_to(qa, &s, qa->rawsize);
		if (s.dp != s.destend || s.sp != s.srcend)
			corrupt(qa);
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

			expand_to(qa, &s, data + ((Size) from + n) * dim * sizeof(float));
			if (s.dp - s.dest < (int64) (data + ((Size) from + n) * dim * sizeof(float)))
				corrupt(qa);
			genie_vector_check_finite(vectors + (int64) from * dim, (int64) n * dim, dim, from);
			/* a batch of one piece is searched as one, as before */
			if (ahead != NULL && n < nq)
				genie_scan_ahead_add(ahead, vectors + (int64) from * dim, n, dim);
			CHECK_FOR_INTERRUPTS();
		}
		if (s.dp != s.destend || s.sp != s.srcend)
			corrupt(qa);
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
