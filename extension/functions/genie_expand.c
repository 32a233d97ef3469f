/*-------------------------------------------------------------------------
 *
 * genie_expand.c
 *	  pglz streams and lz4 blocks expanded in order, a part at a time
 *	  (genie_expand.h).
 *
 * The formats are pglz's, as src/common/pg_lzcompress.c describes it, and
 * lz4's block format (the server compresses a value as one block).
 * PostgreSQL's and liblz4's decompressors expand a value whole; these stop
 * where they are asked to and go on from there, so that a stored array's
 * first queries are searched while the rest is expanded
 * (genie_query_array.c).  bench/expand-bench times them against both and
 * checks them byte for byte.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "functions/genie_expand.h"


/*
 * The copy of a match of len bytes from off back.  Most of a float array's
 * matches are a float or two: with room (16 bytes free past len), one
 * 16-byte copy, the bytes past len written again by what follows.  A
 * longer match that overlaps what it writes (a run) repeats its pattern in
 * chunks that double, each reading bytes already written.
 */
static inline void
copy_match(unsigned char *dp, int32 off, int32 len, bool room)
{
	const unsigned char *from = dp - off;

	if (room && len <= 16 && off >= 16)
		memcpy(dp, from, 16);
	else if (room && len <= 8 && off >= 8)
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

/* ---- pglz ---- */

/*
 * A pglz stream is control bytes, each followed by the 8 items its bits
 * (lowest first) describe: 0 a literal byte, 1 a match of 2 or 3 bytes,
 * len - 3 in the low 4 bits of the first (15: len is 18 plus a third
 * byte), the offset back in its high 4 bits and the second byte (1 to
 * 4095).  A match may overlap what it writes (off < len repeats a
 * pattern).
 */

/*
 * The most a control group reads (8 matches of 3 bytes, and the 8 bytes a
 * run of literals' copy reads from the last) and writes (8 of 273).
 */
#define PGLZ_GROUP_IN		(1 + 8 * 3 + 8)
#define PGLZ_GROUP_OUT		(8 * 273)

bool
genie_expand_pglz(GenieExpand *s, Size upto)
{
	const unsigned char *sp = s->sp;
	const unsigned char *srcend = s->srcend;
	unsigned char *dp = s->dp;
	unsigned char *dest = s->dest;
	unsigned char *destend = s->destend;
	unsigned char *target = upto < (Size) (destend - dest) ? dest + upto : destend;

	/*
	 * Groups far from both ends: no bounds checks but the offset's.  A run
	 * of literals up to the next match is one 8-byte copy, its length the
	 * control bits' trailing zeros (bit 8 ends the group): a branch a
	 * match, not one an item, whose outcome a float array's mix of
	 * literals and matches makes hard to predict (bench/expand-bench: the
	 * stream of half zeros 1.6-2.1x faster, Fashion-MNIST's 1.0-1.2x).
	 */
	while (dp < target && srcend - sp >= PGLZ_GROUP_IN && destend - dp >= PGLZ_GROUP_OUT + 16)
	{
		unsigned int bits = *sp++ | 0x100;

		for (;;)
		{
			int			n = __builtin_ctz(bits);
			int32		len;
			int32		off;

			memcpy(dp, sp, 8);
			dp += n;
			sp += n;
			bits >>= n;
			if (bits == 1)
				break;
			len = (sp[0] & 0x0f) + 3;
			off = ((sp[0] & 0xf0) << 4) | sp[1];
			sp += 2;
			if (len == 18)
				len += *sp++;
			if (off == 0 || off > dp - dest)
				return false;
			copy_match(dp, off, len, true);
			dp += len;
			bits >>= 1;
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

				if (!genie_pglz_read_match(&sp, srcend, &len, &off))
					return false;
				if (off == 0 || off > dp - dest)
					return false;
				/* a match past the value's end is cut short, as pglz_decompress cuts it */
				len = Min(len, (int32) (destend - dp));
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

bool
genie_expand_lz4(GenieExpand *s, Size upto)
{
	const unsigned char *sp = s->sp;
	const unsigned char *srcend = s->srcend;
	unsigned char *dp = s->dp;
	unsigned char *dest = s->dest;
	unsigned char *destend = s->destend;
	unsigned char *target = upto < (Size) (destend - dest) ? dest + upto : destend;

	while (dp < target && sp < srcend)
	{
		unsigned int token;
		int64		lits;
		int64		len;
		int32		off;

		/*
		 * Far from both ends, a short sequence (under 15 literals, a match
		 * under 19 bytes) in fixed-size copies: most of a float array's.
		 * Its literals end before the input does, so it has a match.
		 */
		if (srcend - sp >= 32 && destend - dp >= 64 && (sp[0] >> 4) < 15 && (sp[0] & 0x0f) < 15)
		{
			token = *sp++;
			lits = token >> 4;
			len = (token & 0x0f) + 4;
			memcpy(dp, sp, 16);
			dp += lits;
			sp += lits;
			off = sp[0] | (sp[1] << 8);
			sp += 2;
			if (off == 0 || off > dp - dest)
				return false;
			if (off >= 16)
			{
				memcpy(dp, dp - off, 16);
				memcpy(dp + 16, dp - off + 16, 8);
			}
			else
				copy_match(dp, off, (int32) len, true);
			dp += len;
			continue;
		}
		token = *sp++;
		lits = token >> 4;
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
		copy_match(dp, off, (int32) len, destend - dp >= len + 16);
		dp += len;
	}
	s->sp = sp;
	s->dp = dp;
	return true;
}
