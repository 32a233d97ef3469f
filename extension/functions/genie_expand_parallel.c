/*-------------------------------------------------------------------------
 *
 * genie_expand_parallel.c
 *	  A pglz stream expanded on several threads (genie_expand_parallel.h).
 *
 * pglz has no points to start from in the middle: a control group's first
 * byte looks like any other, and a match copies from up to 4,095 bytes
 * back.  Expanding in order runs at 0.6-0.7 GB/s on one core (Fashion-
 * MNIST's 10,000 test images, 31 MB: 46-52 ms on an H200 host's Xeon,
 * bench/expand-bench), and it was most of a stored array's genie_knn.  So
 * the input is cut in equal parts and expanded in three steps:
 *
 * 1. Each part is parsed from its first byte as if a control group began
 *    there (a guess), counting the bytes each item writes, and the group
 *    starts it meets in its first PGLZ_SPAN bytes (its head) and in the
 *    first PGLZ_SPAN bytes past its end (its tail) are recorded.  A parse
 *    depends on the input's bytes alone, so two parses that meet at one
 *    group start go on alike; a wrong guess meets the true parse within a
 *    few groups (each group it reads starts on a true one's with a chance
 *    of one in their length).  The first part's start is true; where part
 *    k's tail and part k + 1's head first meet, part k + 1's parse has
 *    become the true one, and the bytes part k writes up to there are
 *    known: so every part's true input and output ranges follow.
 * 2. Each part is expanded into its own output range.  A match in its
 *    first 4,095 bytes that reaches back before it (into the part before,
 *    being written beside it) writes zeros for what it cannot read, and the
 *    part is marked.
 * 3. Each marked part is expanded again from its start, now that what it
 *    reads of the part before is written, until the 4,095 bytes behind the output were all
 *    written as before: from there on every match reads what it read the
 *    first time, so the rest is right already.  The parts' fixes run side
 *    by side: each reads only the last 4,095 bytes of the part before, and
 *    none writes that far (PGLZ_FIX_LIMIT).
 *
 * Parts whose parses never meet (a periodic input can keep a wrong guess
 * off the true group starts), corrupt data, or a part not right within
 * PGLZ_FIX_LIMIT make it stop where the output is right, and the caller
 * expands the rest in order, which also says what is corrupt: the answer
 * is the same either way.  Pure functions of the bytes, as
 * genie_expand.c's; the threads are the caller's (GenieExpandRun).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdlib.h>

#include "functions/genie_expand_parallel.h"

/* input bytes past a part's guessed start, and past its end, whose group starts are recorded */
#define PGLZ_SPAN			(32 * 1024)
/* no part smaller (step 1's record and step 3's fix are a few kB of it) */
#define PGLZ_MIN_PART		(256 * 1024)
#define PGLZ_MAX_PARTS		64
/* no part larger, but for a short rest (expanding 1 MB of input: 5-10 ms a step) */
#define PGLZ_MAX_PART		(1024 * 1024)
/* a group is 9 bytes or more, but the stream's last, which ends a span anyway */
#define PGLZ_SPAN_GROUPS	(PGLZ_SPAN / 9 + 2)
/* the farthest a match reaches back */
#define PGLZ_WINDOW			4095
/*
 * The most a part is expanded again (step 3): Fashion-MNIST's parts were
 * right again 44-51 kB in; in a stream of matches of matches (a few values
 * repeated) the zeros step 2 wrote are copied on and on, and such a part is
 * given back to the order.
 */
#define PGLZ_FIX_LIMIT		(256 * 1024)

/* A group start a parse met: where, and the bytes it had counted written by then. */
typedef struct GroupStart
{
	const unsigned char *at;
	int64		out;
} GroupStart;

typedef struct PglzPart
{
	/* step 1 */
	const unsigned char *guess; /* where its parse starts */
	const unsigned char *next;	/* where the next part's starts (or the cut's end) */
	GroupStart *head;
	GroupStart *tail;
	int			nhead;
	int			ntail;
	bool		parsed;			/* its parse reached its tail's end, or the input's */
	/* step 2: the true ranges */
	const unsigned char *from;
	const unsigned char *to;
	int64		out_from;
	int64		out_to;
	bool		expanded;
	bool		reaches_back;	/* a match read before out_from: step 3 */
	bool		fixed;			/* step 3 found it right (or had nothing to do) */
} PglzPart;

typedef struct PglzCut
{
	const unsigned char *srcend;
	unsigned char *dest;
	int			nparts;
	PglzPart	parts[PGLZ_MAX_PARTS];
} PglzCut;

static inline void
record(GroupStart *list, int *n, const unsigned char *at, int64 out)
{
	if (*n < PGLZ_SPAN_GROUPS)
	{
		list[*n].at = at;
		list[*n].out = out;
		(*n)++;
	}
}

/* Step 1 for part i (a GenieExpandRun body). */
static void
parse_part(int64 i, void *arg)
{
	PglzCut    *cut = arg;
	PglzPart   *p = &cut->parts[i];
	const unsigned char *sp = p->guess;
	const unsigned char *srcend = cut->srcend;
	const unsigned char *head_end = p->guess + Min((Size) PGLZ_SPAN, (Size) (srcend - p->guess));
	const unsigned char *tail_end = p->next + Min((Size) PGLZ_SPAN, (Size) (srcend - p->next));
	int64		out = 0;

	/* (counted here, not in p: the parts' structs lie side by side, written by other threads) */
	int			nhead = 0;
	int			ntail = 0;

	p->parsed = false;
	while (sp < srcend)
	{
		if (sp < head_end)
			record(p->head, &nhead, sp, out);
		if (sp >= p->next)
		{
			if (sp >= tail_end)
				break;
			record(p->tail, &ntail, sp, out);
		}
		if (srcend - sp >= 1 + 8 * 3)
		{
			/* a whole group (at most 25 bytes) in reach: literals counted a run at a time */
			unsigned int bits = *sp++ | 0x100;

			for (;;)
			{
				int			n = __builtin_ctz(bits);
				int32		len;

				out += n;
				sp += n;
				bits >>= n;
				if (bits == 1)
					break;
				len = (sp[0] & 0x0f) + 3;
				sp += 2;
				if (len == 18)
					len += *sp++;
				out += len;
				bits >>= 1;
			}
		}
		else
		{
			unsigned int ctrl = *sp++;

			for (int bit = 0; bit < 8 && sp < srcend; bit++, ctrl >>= 1)
			{
				if (ctrl & 1)
				{
					int32		len;
					int32		off;

					if (!genie_pglz_read_match(&sp, srcend, &len, &off))
						return;		/* a truncated match */
					out += len;
				}
				else
				{
					out++;
					sp++;
				}
			}
		}
	}
	/* the input's end is where the last part ends */
	if (sp == srcend && sp >= p->next)
		record(p->tail, &ntail, sp, out);
	p->nhead = nhead;
	p->ntail = ntail;
	p->parsed = true;
}

/*
 * Whether two parses met at a group start (lists in input order): the
 * first such, its places in a and b in *ia and *ib.
 */
static bool
first_meeting(const GroupStart *a, int na, const GroupStart *b, int nb, int *ia, int *ib)
{
	int			i = 0,
				j = 0;

	while (i < na && j < nb)
	{
		if (a[i].at < b[j].at)
			i++;
		else if (a[i].at > b[j].at)
			j++;
		else
		{
			*ia = i;
			*ib = j;
			return true;
		}
	}
	return false;
}

/*
 * Step 2's start of part p: whole groups up to PGLZ_WINDOW bytes past its
 * output's start, every item checked, a match's bytes from before that
 * start written as zeros.  False on corrupt data.
 */
static bool
expand_reaching_back(PglzPart *p, GenieExpand *e)
{
	const unsigned char *sp = e->sp;
	unsigned char *dp = e->dp;
	unsigned char *start = e->dp;

	while (dp - start < PGLZ_WINDOW && sp < e->srcend)
	{
		unsigned int ctrl = *sp++;

		for (int bit = 0; bit < 8 && sp < e->srcend && dp < e->destend; bit++, ctrl >>= 1)
		{
			if (ctrl & 1)
			{
				int32		len;
				int32		off;

				if (!genie_pglz_read_match(&sp, e->srcend, &len, &off))
					return false;
				if (off == 0 || off > dp - e->dest || len > e->destend - dp)
					return false;
				for (int32 j = 0; j < len; j++)
				{
					if (dp + j - off < start)
					{
						dp[j] = 0;
						p->reaches_back = true;
					}
					else
						dp[j] = dp[j - off];
				}
				dp += len;
			}
			else
				*dp++ = *sp++;
		}
	}
	e->sp = sp;
	e->dp = dp;
	return true;
}

/* Step 2 for part i (a GenieExpandRun body). */
static void
expand_part(int64 i, void *arg)
{
	PglzCut    *cut = arg;
	PglzPart   *p = &cut->parts[i];
	GenieExpand e;

	p->expanded = false;
	p->reaches_back = false;
	e.sp = p->from;
	e.srcend = p->to;
	e.dest = cut->dest;
	e.dp = cut->dest + p->out_from;
	e.destend = cut->dest + p->out_to;
	/* (the first part's start is the stream's, or follows what is expanded) */
	if (i > 0 && !expand_reaching_back(p, &e))
		return;
	if (!genie_expand_pglz(&e, (Size) p->out_to))
		return;
	p->expanded = e.sp == p->to && e.dp == cut->dest + p->out_to;
}

/*
 * Step 3 for part i + 1 (a GenieExpandRun body): expanded again from its
 * start until the PGLZ_WINDOW bytes behind the output are as step 2 wrote
 * them (step 2 checked the items: none is malformed), within
 * PGLZ_FIX_LIMIT bytes and, as it stops at a group's end, short of the
 * part's last 2 * PGLZ_WINDOW bytes by at most a group (8 * 273): clear of
 * the last PGLZ_WINDOW, which the next part's fix reads beside it.
 */
static void
fix_part(int64 i, void *arg)
{
	PglzCut    *cut = arg;
	PglzPart   *p = &cut->parts[i + 1];
	const unsigned char *sp = p->from;
	unsigned char *start = cut->dest + p->out_from;
	unsigned char *dp = start;
	unsigned char *last_change = start - 1;
	int64		limit = Min((int64) PGLZ_FIX_LIMIT, p->out_to - p->out_from - 2 * PGLZ_WINDOW);

	p->fixed = !p->reaches_back;
	while (!p->fixed && sp < p->to && dp - start < limit)
	{
		unsigned int ctrl = *sp++;

		for (int bit = 0; bit < 8 && sp < p->to; bit++, ctrl >>= 1)
		{
			if (ctrl & 1)
			{
				int32		len = (sp[0] & 0x0f) + 3;
				int32		off = ((sp[0] & 0xf0) << 4) | sp[1];

				sp += 2;
				if (len == 18)
					len += *sp++;
				for (int32 j = 0; j < len; j++)
				{
					if (dp[j] != dp[j - off])
					{
						dp[j] = dp[j - off];
						last_change = dp + j;
					}
				}
				dp += len;
			}
			else
			{
				/* (a literal is right already) */
				dp++;
				sp++;
			}
			if (dp - start >= PGLZ_WINDOW && dp - last_change > PGLZ_WINDOW)
			{
				p->fixed = true;
				break;
			}
		}
	}
}

bool
genie_expand_pglz_parallel(GenieExpand *s, Size in_bytes, int threads, GenieExpandRun run)
{
	Size		left = s->srcend - s->sp;
	Size		len = Min(in_bytes, left);
	int			nparts;
	PglzCut    *cut;
	GroupStart *lists;
	bool		done = false;

	if (threads < 2 || run == NULL)
		return false;

	/*
	 * Parts of at most PGLZ_MAX_PART (a few ms each: the cancel, polled
	 * between parts, is seen in time), whatever threads and in_bytes ask.
	 */
	len = Min(len, (Size) PGLZ_MAX_PARTS * PGLZ_MAX_PART);
	/* a rest too short for a part of its own goes with this cut */
	if (left - len < PGLZ_MIN_PART)
		len = left;
	nparts = (int) Min((Size) Min(threads, PGLZ_MAX_PARTS), len / PGLZ_MIN_PART);
	if (nparts < 2)
		return false;
	cut = malloc(sizeof(PglzCut));
	lists = malloc(sizeof(GroupStart) * PGLZ_SPAN_GROUPS * 2 * nparts);
	if (cut == NULL || lists == NULL)
		goto out;
	cut->srcend = s->srcend;
	cut->dest = s->dest;
	cut->nparts = nparts;
	for (int i = 0; i < nparts; i++)
	{
		PglzPart   *p = &cut->parts[i];

		p->guess = s->sp + len * i / nparts;
		p->next = s->sp + len * (i + 1) / nparts;
		p->head = lists + (Size) PGLZ_SPAN_GROUPS * 2 * i;
		p->tail = p->head + PGLZ_SPAN_GROUPS;
	}

	/* step 1, then where the parts truly start and end */
	if (!run(nparts, threads, parse_part, cut))
		goto out;
	for (int i = 0; i < nparts; i++)
		if (!cut->parts[i].parsed)
			goto out;
	cut->parts[0].from = s->sp;
	cut->parts[0].out_from = s->dp - s->dest;
	for (int i = 0; i < nparts; i++)
	{
		PglzPart   *p = &cut->parts[i];
		int			start = 0;	/* p->from's place in its head (the first part's: its first) */
		int			end;

		if (i > 0)
		{
			int			at_tail;

			if (!first_meeting(cut->parts[i - 1].tail, cut->parts[i - 1].ntail, p->head, p->nhead,
							   &at_tail, &start))
				goto out;
			p->from = p->head[start].at;
			p->out_from = cut->parts[i - 1].out_to;
		}
		if (i + 1 < nparts)
		{
			int			at_head;

			if (!first_meeting(p->tail, p->ntail, cut->parts[i + 1].head, cut->parts[i + 1].nhead,
							   &end, &at_head))
				goto out;
		}
		else if (p->ntail > 0)
			end = 0;			/* the first group start past the cut (or the input's end) */
		else
			goto out;
		/* (the meeting before must lie in the part, not past its end) */
		if (p->nhead == 0 || p->tail[end].at <= p->from)
			goto out;
		p->to = p->tail[end].at;
		p->out_to = p->out_from + p->tail[end].out - p->head[start].out;
		if (p->out_to > s->destend - s->dest)
			goto out;
	}

	/* step 2, then step 3 */
	if (!run(nparts, threads, expand_part, cut))
		goto out;
	for (int i = 0; i < nparts; i++)
		if (!cut->parts[i].expanded)
			goto out;
	if (!run(nparts - 1, threads, fix_part, cut))
		goto out;

	/*
	 * Up to the first part step 3 could not fix (each part's fix read the
	 * last bytes of the part before, right unless that one is not fixed).
	 */
	for (int i = 0; i < nparts; i++)
	{
		const PglzPart *p = &cut->parts[i];

		if (i > 0 && !p->fixed)
			break;
		s->sp = p->to;
		s->dp = s->dest + p->out_to;
		done = i == nparts - 1;
	}
out:
	free(lists);
	free(cut);
	return done;
}
