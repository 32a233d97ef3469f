/*-------------------------------------------------------------------------
 *
 * genie_scan.c
 *	  Index scans ordered by match count: ORDER BY col <~> query; and the
 *	  rows of set predicates (WHERE col @> q, genie_set_scan.c) alone.
 *
 * The scan asks the engine for the top k' objects (k' starts at
 * genie.scan_batch_size) and returns them in order.  When the executor wants
 * more (LIMIT beyond k', WHERE filters, invisible rows), it searches again
 * with a larger k' and continues after what it returned, remembering the
 * returned objects in a bitmap so that ties across the boundary are neither
 * repeated nor skipped.  After the last object with score >= 1 it returns
 * the rest with score 0, then the rows whose indexed value is NULL (their
 * distance is NULL, which sorts last), so the scan equals a sequential scan
 * for any LIMIT.
 *
 * ORDER BY col <%> query on an n-gram index returns the same rows in the
 * same order of n-gram count, but reports for each the lower bound on its
 * edit distance that its count implies (Theorem 5.1; ascending as the count
 * descends) with xs_recheckorderby, so that the executor computes the true
 * distances and reorders: exactly the k nearest rows for any LIMIT.
 *
 * On an index that stores its strings, ORDER BY col <%> query instead asks
 * for the k' nearest strings by exact edit distance (genie_search_values)
 * and returns them in that order with their true distances, k' growing as
 * for counts, not rechecked (the distances are the operator's own).
 *
 * ORDER BY v <-> query on a vector index (and code <-> query on a code
 * index) does the same with the k' nearest vectors (codes) in the same
 * VALUES phase: exact distances, not rechecked.  With
 * genie.vector_search = lsh (genie.bit_search = ewh) the rows of each k' are
 * the LSH (EWH) candidates re-ranked, so the order across two k' may step
 * back (approximate, and not rechecked); once the candidates run out, the
 * rest of the rows follow by exact distance, so that no row is ever left
 * out.
 *
 * Each search runs in an internal subtransaction (genie_retry_on_version_gone):
 * when the index's version the scan searched is gone (the genie service let
 * it go and a merge has renumbered the pages), the scan moves to the current
 * version, finds the rows it returned there by TID, and searches again, so
 * a cursor or a long statement never fails for that internal reason.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/relscan.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "search/genie_search_device.h"
#include "search/genie_search_values.h"
#include "profile/genie_explain.h"
#include "profile/genie_profile.h"

int			genie_scan_batch_size = 100;

typedef enum GenieScanPhase
{
	GENIE_SCAN_VALUES,			/* stored strings or vectors by exact distance */
	GENIE_SCAN_HITS,			/* objects with score >= 1, from the engine */
	GENIE_SCAN_ZEROS,			/* the remaining objects, score 0 */
	GENIE_SCAN_NULLS,			/* rows whose indexed value is NULL */
	GENIE_SCAN_MATCHES,			/* rows of set predicates, no ORDER BY */
	GENIE_SCAN_DONE
} GenieScanPhase;

typedef struct GenieScanOpaqueData
{
	MemoryContext cxt;			/* per-rescan state */
	GenieQuery *query;			/* NULL when the ORDER BY argument is NULL */
	GenieOrderBy orderby;		/* the query and how to report distances */
	int16		ngram_n;
	bool		has_orderby;
	GenieCachedIndex *entry;	/* pinned */
	GenieScanPhase phase;
	int32		k;				/* current k' */
	GenieSearchResult result;
	GenieValueBatch values_query;	/* the VALUES phase's query: text or vector */
	GenieValueRows values;		/* the VALUES phase's rows */
	bool		approximate;	/* the VALUES phase counts LSH keywords or EWH buckets */
	const char *query_text;		/* the <%> argument as UTF-8, or NULL */
	int64		query_size;
	int64		query_text_offsets[2];
	int64		position;		/* next hit of result (or row of strings) to consider */
	uint8	   *returned;		/* bitmap over object ids */
	int32		cursor;			/* next object id for the ZEROS and NULLS phases */
	int32	   *matches;		/* the MATCHES phase's objects, ascending */
	int64		n_matches;
	MemoryContextCallback unpin_callback;
} GenieScanOpaqueData;

typedef GenieScanOpaqueData *GenieScanOpaque;

static void
release_entry(GenieScanOpaque so)
{
	if (so->entry != NULL)
	{
		genie_cache_unpin(so->entry);
		so->entry = NULL;
	}
}

/* Runs when the scan's memory goes away, normally or on abort. */
static void
unpin_on_reset(void *arg)
{
	release_entry((GenieScanOpaque) arg);
}

IndexScanDesc
genie_ambeginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
	GenieScanOpaque so = palloc0(sizeof(GenieScanOpaqueData));

	so->cxt = AllocSetContextCreate(CurrentMemoryContext, "genie scan context",
									ALLOCSET_DEFAULT_SIZES);
	so->unpin_callback.func = unpin_on_reset;
	so->unpin_callback.arg = so;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &so->unpin_callback);
	so->phase = GENIE_SCAN_DONE;
	scan->opaque = so;
	/* the executor reads these; an ordering AM provides them */
	if (norderbys > 0)
	{
		scan->xs_orderbyvals = palloc0(sizeof(Datum) * norderbys);
		scan->xs_orderbynulls = palloc(sizeof(bool) * norderbys);
		memset(scan->xs_orderbynulls, true, sizeof(bool) * norderbys);
	}
	return scan;
}

void
genie_amrescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys)
{
	GenieScanOpaque so = (GenieScanOpaque) scan->opaque;
	MemoryContext old;

	release_entry(so);
	MemoryContextReset(so->cxt);
	memset(&so->result, 0, sizeof(so->result));
	so->query = NULL;
	so->query_text = NULL;
	memset(&so->values_query, 0, sizeof(so->values_query));
	memset(&so->values, 0, sizeof(so->values));
	memset(&so->orderby, 0, sizeof(so->orderby));
	so->returned = NULL;
	so->matches = NULL;
	so->n_matches = 0;
	so->position = 0;
	so->cursor = 0;
	so->k = 0;
	so->phase = GENIE_SCAN_HITS;
	so->has_orderby = norderbys > 0;

	if (orderbys && scan->numberOfOrderBys > 0)
		memmove(scan->orderByData, orderbys, scan->numberOfOrderBys * sizeof(ScanKeyData));
	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));

	old = MemoryContextSwitchTo(so->cxt);
	if (so->has_orderby && !(scan->orderByData[0].sk_flags & SK_ISNULL))
	{
		GenieIndexType type;

		genie_profile_push(GENIE_PHASE_QUERY);
		genie_index_type(scan->indexRelation, &type);
		type.info->encode_query(scan->indexRelation, &type.encoding,
								 scan->orderByData[0].sk_strategy,
								 scan->orderByData[0].sk_argument,
								 scan->orderByData[0].sk_subtype, &so->orderby);
		so->query = so->orderby.query;
		so->ngram_n = type.encoding.ngram_n;
		if (so->orderby.edit_distance)
		{
			size_t		size;

			so->query_text = genie_text_utf8(DatumGetTextPP(scan->orderByData[0].sk_argument), &size);
			so->query_size = (int64) size;
		}
		genie_profile_pop();
	}
	MemoryContextSwitchTo(old);
}

static void
search(IndexScanDesc scan, GenieScanOpaque so)
{
	MemoryContext old = MemoryContextSwitchTo(so->cxt);
	GenieQueryBatch batch;

	genie_search_free(&so->result);
	genie_query_batch_init(&batch, &so->query, 1);
	genie_search(so->entry, &batch, so->k, &so->result);
	pfree(batch.query_offsets);
	pfree(batch.item_offsets);
	pfree(batch.item_weights);
	pfree(batch.ranges_lo);
	pfree(batch.ranges_hi);
	so->position = 0;
	MemoryContextSwitchTo(old);
}

/* The VALUES phase's next k' rows. */
static void
search_values(IndexScanDesc scan, GenieScanOpaque so)
{
	MemoryContext old = MemoryContextSwitchTo(so->cxt);

	genie_value_rows_free(&so->values);
	genie_search_values(so->entry, &so->values_query, so->approximate ? &so->orderby.query : NULL,
						so->k, &so->values);
	so->position = 0;
	MemoryContextSwitchTo(old);
}

/*
 * The LIMIT the planner last saw above an ordered path of each index, for
 * the first search of a scan: an index scan cannot see its LIMIT, and a
 * top 100 costs more than a top 10 (an edit-distance scan most of all).
 * A hint only: a stale one (another statement's, a generic plan's) costs
 * a widening round or a larger first search, never a row.
 */
#define GENIE_LIMIT_HINTS 16

static struct
{
	Oid			index;
	double		limit;
}			limit_hints[GENIE_LIMIT_HINTS];
static int	n_limit_hints = 0;

void
genie_scan_note_limit(Oid index, double limit_tuples)
{
	int			i;

	for (i = 0; i < n_limit_hints && limit_hints[i].index != index; i++)
		;
	if (i == n_limit_hints)
	{
		if (n_limit_hints < GENIE_LIMIT_HINTS)
			n_limit_hints++;
		else
			i = (int) (index % GENIE_LIMIT_HINTS);	/* full: overwrite one */
	}
	limit_hints[i].index = index;
	limit_hints[i].limit = limit_tuples;
}

/*
 * How many rows the first search asks for: genie.scan_batch_size, or the
 * planner's LIMIT when that is smaller (never fewer than 1, never more
 * than the objects).  A LIMIT gets a margin for the rows the caller may
 * not see: each pending row is an insert or an update, and an update
 * leaves its old version in the main postings, invisible but still
 * counted, so a fraction f of pending rows costs about f of the top rows.
 * A second search costs a whole engine call; a few more rows in the
 * first cost next to nothing, so the margin is twice the expected loss,
 * plus two.
 */
static int32
first_k(IndexScanDesc scan, GenieCachedIndex *entry)
{
	Oid			index = RelationGetRelid(scan->indexRelation);
	int32		k = Max(genie_scan_batch_size, 1);

	for (int i = 0; i < n_limit_hints; i++)
		if (limit_hints[i].index == index && limit_hints[i].limit >= 1 &&
			limit_hints[i].limit < (double) k)
		{
			double		limit = limit_hints[i].limit;
			int32		pending = entry->n_objects - entry->n_main_objects;

			if (pending > 0)
				limit += 2.0 + 2.0 * limit * pending / Max(entry->n_objects, 1);
			k = (int32) Min(ceil(limit), (double) k);
		}
	return Min(k, Max(entry->n_objects, 1));
}

static inline bool
was_returned(GenieScanOpaque so, int32 id)
{
	return (so->returned[id >> 3] >> (id & 7)) & 1;
}

static inline void
mark_returned(GenieScanOpaque so, int32 id)
{
	so->returned[id >> 3] |= (uint8) (1 << (id & 7));
}

/* WHERE col @> / && / <@ q alone: the matching rows, by object id */
static void
search_matches(IndexScanDesc scan, GenieScanOpaque so)
{
	MemoryContext old = MemoryContextSwitchTo(so->cxt);

	if (so->matches != NULL)
		pfree(so->matches);
	so->matches = NULL;
	so->n_matches = genie_set_scan_matches(so->entry, scan->keyData, scan->numberOfKeys,
										   &so->matches);
	so->position = 0;
	MemoryContextSwitchTo(old);
}

/* ---- searches that outlive the index's version ---- */

typedef void (*ScanSearch) (IndexScanDesc scan, GenieScanOpaque so);

typedef struct ScanAttempt
{
	IndexScanDesc scan;
	GenieScanOpaque so;
	ScanSearch	search;
} ScanAttempt;

static void
scan_attempt(void *arg)
{
	ScanAttempt *a = arg;

	a->search(a->scan, a->so);
}

/*
 * The version the scan searched is gone (the genie service let it go and a
 * merge has renumbered the pages since): the scan moves to the index's
 * current entry, which holds every row its snapshot sees (a row it can see
 * is never vacuumed away under it), with the same scores and distances.
 * The rows it returned are found there again by TID and marked, so that
 * the next search goes on after them as a wider search of the same version
 * would.
 */
static void
scan_moved(void *arg)
{
	ScanAttempt *a = arg;
	GenieScanOpaque so = a->so;
	GenieCachedIndex *old = so->entry;
	GenieCachedIndex *entry;
	MemoryContext prev = MemoryContextSwitchTo(so->cxt);
	ItemPointerData *tids;
	int64		n = 0;

	for (int32 id = 0; id < old->n_objects; id++)
		n += was_returned(so, id);
	tids = palloc_extended(sizeof(ItemPointerData) * Max(n, 1), MCXT_ALLOC_HUGE);
	n = 0;
	for (int32 id = 0; id < old->n_objects; id++)
		if (was_returned(so, id))
			tids[n++] = old->objects[id].tid;
	release_entry(so);
	entry = genie_cache_get(a->scan->indexRelation);
	genie_cache_pin(entry);
	so->entry = entry;
	pfree(so->returned);
	so->returned = MemoryContextAllocExtended(so->cxt, entry->n_objects / 8 + 1,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	if (n > 0)
	{
		qsort(tids, n, sizeof(ItemPointerData), genie_tid_cmp);
		for (int32 id = 0; id < entry->n_objects; id++)
		{
			if ((id & 0xFFFF) == 0xFFFF)
				CHECK_FOR_INTERRUPTS();
			if (bsearch(&entry->objects[id].tid, tids, n, sizeof(ItemPointerData), genie_tid_cmp) != NULL)
				mark_returned(so, id);
		}
	}
	pfree(tids);
	so->k = Min(so->k, Max(entry->n_objects, 1));
	MemoryContextSwitchTo(prev);
}

/* One of the scan's searches, moved to the current version if its own goes. */
static void
run(IndexScanDesc scan, GenieScanOpaque so, ScanSearch search)
{
	ScanAttempt a = {scan, so, search};

	genie_retry_on_version_gone(scan->indexRelation, scan_attempt, scan_moved, &a);
}

static void
start(IndexScanDesc scan, GenieScanOpaque so)
{
	GenieCachedIndex *entry;

	/* set predicates alone never search on the GPU: no context for them */
	if (so->has_orderby)
		genie_search_prepare_device();
	entry = genie_cache_get(scan->indexRelation);

	genie_cache_pin(entry);
	so->entry = entry;
	so->returned = MemoryContextAllocExtended(so->cxt, entry->n_objects / 8 + 1,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	so->cursor = 0;
	if (!so->has_orderby && scan->numberOfKeys > 0)
	{
		/* WHERE col @> / && / <@ q alone: the matching rows, by object id */
		so->phase = GENIE_SCAN_MATCHES;
		run(scan, so, search_matches);
		return;
	}
	if (so->orderby.vector != NULL || so->orderby.code != NULL)
	{
		so->k = first_k(scan, entry);
		so->values_query.n = 1;
		if (so->orderby.vector != NULL)
		{
			so->values_query.kind = GENIE_VALUES_VECTORS;
			so->values_query.vectors = so->orderby.vector;
			so->values_query.dim = so->orderby.vector_dim;
		}
		else
		{
			so->values_query.kind = GENIE_VALUES_CODES;
			so->values_query.codes = so->orderby.code;
			so->values_query.dim = so->orderby.code_bits;
		}
		so->approximate = genie_search_approximate(so->values_query.kind);
		if (so->approximate)
		{
			GenieIndexType type;
			MemoryContext old = MemoryContextSwitchTo(so->cxt);

			genie_profile_push(GENIE_PHASE_QUERY);
			genie_index_type(scan->indexRelation, &type);
			so->orderby.query = type.info->approximate_query(scan->indexRelation,
															  &so->values_query, 0);
			genie_profile_pop();
			MemoryContextSwitchTo(old);
		}
		so->phase = GENIE_SCAN_VALUES;
		run(scan, so, search_values);
		return;
	}
	if (so->query == NULL)
	{
		/* no ORDER BY, or ORDER BY NULL: every row, in any order */
		so->phase = so->has_orderby ? GENIE_SCAN_NULLS : GENIE_SCAN_ZEROS;
		return;
	}
	so->k = first_k(scan, entry);
	if (so->query_text != NULL && entry->values_stored)
	{
		so->query_text_offsets[0] = 0;
		so->query_text_offsets[1] = so->query_size;
		so->values_query.kind = GENIE_VALUES_STRINGS;
		so->values_query.n = 1;
		so->values_query.text = so->query_text;
		so->values_query.text_offsets = so->query_text_offsets;
		so->phase = GENIE_SCAN_VALUES;
		run(scan, so, search_values);
		return;
	}
	so->phase = GENIE_SCAN_HITS;
	run(scan, so, search);
}

static void
emit(IndexScanDesc scan, GenieScanOpaque so, int32 id, int32 score, bool null_distance)
{
	mark_returned(so, id);
	genie_explain_counts.scan_rows++;
	scan->xs_heaptid = so->entry->objects[id].tid;
	/* an ordered scan returns every row: the executor applies set predicates */
	scan->xs_recheck = scan->numberOfKeys > 0;
	if (scan->numberOfOrderBys > 0)
	{
		scan->xs_orderbynulls[0] = null_distance;
		if (so->orderby.edit_distance)
		{
			scan->xs_recheckorderby = true;
			scan->xs_orderbyvals[0] = Float8GetDatum(null_distance ? 0.0 :
													 (float8) genie_ngram_distance_lower_bound(so->orderby.query_length,
																							   so->orderby.query_lost,
																							   score, so->ngram_n));
		}
		else
		{
			scan->xs_recheckorderby = false;
			/* the operator returns the negated score; avoid -0 */
			scan->xs_orderbyvals[0] = Float8GetDatum(null_distance || score == 0 ? 0.0 : -(float8) score);
		}
	}
}

/*
 * Returns object id with its true distance (stored strings, vectors).  The
 * distance is the operator's own, bit for bit (the engines compute it as
 * the operator does), so the executor is not asked to recheck it: a recheck
 * would detoast each returned row's value and compute its distance again,
 * about a third of a single exact vector statement's time outside the
 * engine.
 */
static void
emit_at_distance(IndexScanDesc scan, GenieScanOpaque so, int32 id, float8 distance)
{
	mark_returned(so, id);
	genie_explain_counts.scan_rows++;
	scan->xs_heaptid = so->entry->objects[id].tid;
	/* an ordered scan returns every row: the executor applies set predicates */
	scan->xs_recheck = scan->numberOfKeys > 0;
	scan->xs_recheckorderby = false;
	scan->xs_orderbynulls[0] = false;
	scan->xs_orderbyvals[0] = Float8GetDatum(distance);
}

bool
genie_amgettuple(IndexScanDesc scan, ScanDirection dir)
{
	GenieScanOpaque so = (GenieScanOpaque) scan->opaque;

	if (so->entry == NULL && so->phase != GENIE_SCAN_DONE)
		start(scan, so);

	for (;;)
	{
		GenieCachedIndex *entry = so->entry;

		CHECK_FOR_INTERRUPTS();
		switch (so->phase)
		{
			case GENIE_SCAN_VALUES:
				while (so->position < so->values.offsets[1])
				{
					int32		id = so->values.objects[so->position];
					float8		distance = so->values.distances[so->position];

					so->position++;
					if (was_returned(so, id))
						continue;
					emit_at_distance(scan, so, id, distance);
					return true;
				}
				if (so->values.offsets[1] < so->k || so->k >= entry->n_objects)
				{
					/*
					 * Fewer rows than asked: the candidates ran out (rows of
					 * match count 0 are never candidates), whatever k is, so
					 * the rest follow by exact distance.
					 */
					if (so->approximate && so->values.offsets[1] < so->k)
					{
						so->approximate = false;
						run(scan, so, search_values);
						break;
					}
					/* every value was returned: then the NULLs */
					so->phase = GENIE_SCAN_NULLS;
					so->cursor = 0;
					break;
				}
				so->k = genie_search_wider_k(so->k, entry->n_objects);
				run(scan, so, search_values);
				break;
			case GENIE_SCAN_HITS:
				{
					int64		end = so->result.query_offsets[1];

					while (so->position < end)
					{
						int32		id = so->result.objects[so->position];
						int32		score = so->result.scores[so->position];

						so->position++;
						if (was_returned(so, id) || (entry->objects[id].flags & GENIE_OBJECT_DEAD))
							continue;
						emit(scan, so, id, score, false);
						return true;
					}
					if (genie_search_exhausted(&so->result, 0, so->k, entry->n_objects))
					{
						/* every object with score >= 1 was seen */
						so->phase = GENIE_SCAN_ZEROS;
						break;
					}
					/* the executor wants more than k': search again, 4 times wider */
					so->k = genie_search_wider_k(so->k, entry->n_objects);
					run(scan, so, search);
					break;
				}
			case GENIE_SCAN_ZEROS:
				while (so->cursor < entry->n_objects)
				{
					int32		id = so->cursor++;
					uint16		flags = entry->objects[id].flags;

					if (was_returned(so, id) || (flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)))
						continue;
					emit(scan, so, id, 0, false);
					return true;
				}
				so->phase = GENIE_SCAN_NULLS;
				so->cursor = 0;
				break;
			case GENIE_SCAN_NULLS:
				while (so->cursor < entry->n_objects)
				{
					int32		id = so->cursor++;
					uint16		flags = entry->objects[id].flags;

					if (was_returned(so, id) || (flags & GENIE_OBJECT_DEAD))
						continue;
					/* ORDER BY NULL gives every row a NULL distance */
					if (!(flags & GENIE_OBJECT_NULL) && (so->query != NULL || so->orderby.vector != NULL ||
														 so->orderby.code != NULL))
						continue;
					emit(scan, so, id, 0, true);
					return true;
				}
				so->phase = GENIE_SCAN_DONE;
				break;
			case GENIE_SCAN_MATCHES:
				if (so->position < so->n_matches)
				{
					scan->xs_heaptid = entry->objects[so->matches[so->position++]].tid;
					scan->xs_recheck = false;
					genie_explain_counts.scan_rows++;
					return true;
				}
				so->phase = GENIE_SCAN_DONE;
				break;
			case GENIE_SCAN_DONE:
				return false;
		}
	}
}

void
genie_amendscan(IndexScanDesc scan)
{
	GenieScanOpaque so = (GenieScanOpaque) scan->opaque;

	release_entry(so);
	MemoryContextDelete(so->cxt);
	so->cxt = NULL;
}
