/*-------------------------------------------------------------------------
 *
 * genie_expand.h
 *	  Compressed values expanded in order, a part at a time
 *	  (genie_expand.c): a pglz stream or an lz4 block, as PostgreSQL
 *	  compresses a stored value, expanded up to a point, then further.
 *	  Pure functions of the bytes (no palloc, no error).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_EXPAND_H
#define GENIE_EXPAND_H

/*
 * Where the expanding of a value stands: the compressed input left
 * [sp, srcend), the output [dest, destend) written up to dp.  Start with
 * sp at the compressed data's first byte and dp = dest.
 */
typedef struct GenieExpand
{
	const unsigned char *sp;
	const unsigned char *srcend;
	unsigned char *dest;
	unsigned char *dp;
	unsigned char *destend;
} GenieExpand;

/*
 * Expands s until at least upto bytes of dest are written (whole pglz
 * control groups or lz4 sequences: a little more) or the input ends; false
 * on corrupt data (a match before dest's start or past its end, a
 * truncated item).  Once the value is whole, dp == destend and
 * sp == srcend.
 */
extern bool genie_expand_pglz(GenieExpand *s, Size upto);

/*
 * A pglz match's length and offset read at *sp (2 bytes, 3 when the length
 * is 18 or more), *sp moved past it; false when the input ends within it.
 * (genie_expand_parallel.c reads the stream's items too.)
 */
static inline bool
genie_pglz_read_match(const unsigned char **sp, const unsigned char *srcend, int32 *len, int32 *off)
{
	const unsigned char *p = *sp;

	if (srcend - p < 2)
		return false;
	*len = (p[0] & 0x0f) + 3;
	*off = ((p[0] & 0xf0) << 4) | p[1];
	p += 2;
	if (*len == 18)
	{
		if (p >= srcend)
			return false;
		*len += *p++;
	}
	*sp = p;
	return true;
}
extern bool genie_expand_lz4(GenieExpand *s, Size upto);

#endif							/* GENIE_EXPAND_H */
