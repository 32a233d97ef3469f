/*-------------------------------------------------------------------------
 *
 * genie_search_visible.c
 *	  The k nearest rows of each query of a batch that a snapshot sees
 *	  (genie_search_values_visible): the engine's rows checked in the heap,
 *	  k widened while invisible rows take places, and a large exact batch
 *	  scanned in pieces beside the checks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "genie_utils.h"
#include "search/genie_search_values.h"
#include "search/genie_search_visible.h"
#include "search/genie_visibility.h"
#include "profile/genie_profile.h"


/* The visible rows of each query, in the order found (what the widening rounds collect). */
typedef struct RowCollector
{
	ItemPointerData **tids;		/* the caller's: returned as they are */
	int32	  **objects;
	float8	  **distances;
	int64	   *counts;
	int64	   *capacity;
} RowCollector;

static void
collector_begin(RowCollector *c, int nq, int32 k, ItemPointerData **tids)
{
	c->tids = tids;
	c->objects = palloc(sizeof(int32 *) * Max(nq, 1));
	c->distances = palloc(sizeof(float8 *) * Max(nq, 1));
	c->counts = palloc0(sizeof(int64) * Max(nq, 1));
	c->capacity = palloc(sizeof(int64) * Max(nq, 1));
	for (int q = 0; q < nq; q++)
	{
		c->capacity[q] = Max(Min(k, 1024), 1);
		tids[q] = palloc(sizeof(ItemPointerData) * c->capacity[q]);
		c->objects[q] = palloc(sizeof(int32) * c->capacity[q]);
		c->distances[q] = palloc(sizeof(float8) * c->capacity[q]);
	}
}

static void
collector_add(RowCollector *c, int q, ItemPointer tid, int32 object, float8 distance)
{
	int64		n = c->counts[q];

	if (n == c->capacity[q])
	{
		c->capacity[q] *= 2;
		c->tids[q] = repalloc_huge(c->tids[q], sizeof(ItemPointerData) * c->capacity[q]);
		c->objects[q] = repalloc_huge(c->objects[q], sizeof(int32) * c->capacity[q]);
		c->distances[q] = repalloc_huge(c->distances[q], sizeof(float8) * c->capacity[q]);
	}
	c->tids[q][n] = *tid;
	c->objects[q][n] = object;
	c->distances[q][n] = distance;
	c->counts[q] = n + 1;
}

/* The collected rows as CSR arrays (no lengths: the order is settled). */
static void
collector_finish(RowCollector *c, int nq, GenieValueRows *rows)
{
	int64		total = 0;

	for (int q = 0; q < nq; q++)
		total += c->counts[q];
	rows->n_queries = nq;
	rows->offsets = palloc(sizeof(int64) * (nq + 1));
	rows->objects = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->distances = palloc_extended(sizeof(float8) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->lengths = NULL;
	rows->offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		memcpy(rows->objects + rows->offsets[q], c->objects[q], sizeof(int32) * c->counts[q]);
		memcpy(rows->distances + rows->offsets[q], c->distances[q], sizeof(float8) * c->counts[q]);
		rows->offsets[q + 1] = rows->offsets[q] + c->counts[q];
	}
}

/* The object ids of query q's first n collected rows, sorted (for bsearch). */
static int32 *
collected_sorted(const RowCollector *c, int q, int64 n)
{
	int32	   *ids = palloc(sizeof(int32) * Max(n, 1));

	memcpy(ids, c->objects[q], sizeof(int32) * n);
	qsort(ids, n, sizeof(int32), genie_int32_cmp);
	return ids;
}

/*
 * One search's rows (row i: query which[i], n of them) into collected: each
 * query's first k visible rows, after its first base[q] (NULL: none) less
 * the found rows among them (skip[q], sorted, base[q] of them).  A query
 * still short of k while the search gave all kprime it was asked for
 * (invisible rows took places) goes into still (*n_still of them; still
 * may be which), one whose approximate search ran out short into ran_out.
 */
static void
collect_found(GenieCachedIndex *entry, GenieVisibility *vs, const GenieValueRows *found,
			  const int *which, int n, int32 k, int32 kprime, RowCollector *collected,
			  const int64 *base, int32 *const *skip, bool approximate,
			  int *still, int *n_still, int *ran_out, int *n_ran_out)
{
	genie_profile_push(GENIE_PHASE_VISIBILITY);

	/*
	 * each query's first k rows are checked unless they are among the
	 * base[q] kept (which are known already: they were checked)
	 */
	genie_visibility_check_ahead(vs, entry, found->objects, found->offsets, n, k);
	for (int i = 0; i < n; i++)
	{
		int			q = which[i];
		int64		n_found = found->offsets[i + 1] - found->offsets[i];

		collected->counts[q] = base != NULL ? base[q] : 0;
		for (int64 h = found->offsets[i]; h < found->offsets[i + 1] && collected->counts[q] < k; h++)
		{
			ItemPointerData tid;
			int32		object = found->objects[h];

			if (skip != NULL && base[q] > 0 &&
				bsearch(&object, skip[q], base[q], sizeof(int32), genie_int32_cmp) != NULL)
				continue;
			if (genie_object_visible(vs, entry, object, &tid))
				collector_add(collected, q, &tid, object, found->distances[h]);
		}
		if (collected->counts[q] >= k)
			continue;
		if (n_found == kprime)
		{
			if (kprime < entry->n_objects)
				still[(*n_still)++] = q;
		}
		else if (approximate)
			ran_out[(*n_ran_out)++] = q;
		CHECK_FOR_INTERRUPTS();
	}
	genie_profile_pop();
}

/*
 * Rounds of searches until every query of queries_in (n_short of them) has
 * k visible rows or its search ran out.  Each query keeps its first base[q]
 * collected rows (NULL: none) and adds the found rows not among them
 * (skip[q], sorted, base[q] of them).  With approximate queries, a query
 * whose candidates ran out short of k (rows of match count 0 are never
 * candidates) goes into
 * ran_out (*n_ran_out of them), for the exact rest.
 */
static void
collect_rounds(GenieCachedIndex *entry, GenieVisibility *vs, const GenieValueBatch *queries,
			   GenieQuery **approximate, int32 k, int32 kprime, RowCollector *collected,
			   const int *queries_in, int n_short, const int64 *base, int32 *const *skip,
			   int *ran_out, int *n_ran_out)
{
	int			nq = queries->n;
	GenieQuery **sub_approximate = palloc0(sizeof(GenieQuery *) * Max(nq, 1));
	/* the rounds narrow their own list; the caller's stays as given */
	int		   *short_of_k = palloc(sizeof(int) * Max(n_short, 1));

	memcpy(short_of_k, queries_in, sizeof(int) * n_short);
	while (n_short > 0)
	{
		GenieValueBatch sub = *queries;
		GenieValueRows found;
		int			still = 0;
		bool		whole = n_short == nq;

		/* the queries still short of k visible rows, as one batch (the whole one when in order) */
		for (int i = 0; whole && i < n_short; i++)
			whole = short_of_k[i] == i;
		if (!whole)
		{
			genie_value_batch_select(queries, short_of_k, n_short, &sub);
			if (approximate != NULL)
				for (int i = 0; i < n_short; i++)
					sub_approximate[i] = approximate[short_of_k[i]];
		}
		genie_search_values(entry, &sub,
							approximate == NULL ? NULL : whole ? approximate : sub_approximate,
							kprime, &found);
		if (!whole)
			genie_value_batch_free_copy(&sub);
		collect_found(entry, vs, &found, short_of_k, n_short, k, kprime, collected, base, skip,
					  approximate != NULL, short_of_k, &still, ran_out, n_ran_out);
		genie_value_rows_free(&found);
		n_short = still;
		kprime = genie_search_wider_k(kprime, entry->n_objects);
	}
	pfree(sub_approximate);
	pfree(short_of_k);
}

/* ---- a batch in pieces ---- */

/*
 * A batch of at least 2 x PIECE_QUERIES queries is scanned in up to
 * MAX_PIECES pieces of at least PIECE_QUERIES.
 */
#define PIECE_QUERIES	1024
#define MAX_PIECES		8

/* One piece of a batch, scanned on a thread of its own while the backend checks the piece before. */
typedef struct Piece
{
	const GenieValueSet *set;
	genie_engine_kind device;
	genie_engine_options options;
	GenieValueBatch queries;	/* a view of the batch's queries [first, first + queries.n) */
	int			first;
	int32		k;
	const uint8 *excluded;
	GenieValueFound found;		/* out, when status is GENIE_OK */
	genie_error err;
	genie_status status;
	volatile sig_atomic_t abandon;	/* the backend leaves on an error: stop now */
	genie_job  *job;			/* NULL once waited for, or when it ran on the backend's thread */
} Piece;

/* The piece's engine stops for a cancel, a statement_timeout, or the backend leaving. */
static int
piece_cancel(void *arg)
{
	Piece	   *piece = arg;

	return piece->abandon || genie_cancel_requested(NULL);
}

/* On the piece's thread: the C API's scan alone (no memory contexts, no ereport). */
static void
piece_scan(void *arg)
{
	Piece	   *piece = arg;

	piece->status = genie_value_set_scan(piece->set, piece->device, &piece->options, &piece->queries,
										 piece->k, piece->excluded, NULL, NULL, NULL,
										 GENIE_LIST_NEVER, &piece->found, &piece->err);
}

/* Starts the piece's scan beside the backend; without a thread, runs it here. */
static void
piece_start(Piece *piece)
{
	piece->job = genie_job_start(piece_scan, piece);
	if (piece->job == NULL)
		piece_scan(piece);
}

/* Waits for the piece's scan (as the engine's time: it is what the checks did not hide). */
static void
piece_wait(Piece *piece)
{
	genie_profile_push(GENIE_PHASE_ENGINE);
	genie_job_wait(piece->job);
	piece->job = NULL;
	genie_profile_pop();
}

/*
 * The first round of a batch's exact scan, in pieces: piece p + 1 is
 * scanned on a thread of its own while the backend checks piece p's rows
 * against the snapshot, so the checks (a fifth of genie_knn of 10,000
 * Fashion-MNIST queries on the GPU) run beside the engine instead of after
 * it (bench/latency.md).  The rows are those of one scan: a piece's rows are
 * each of its queries' own.  A query short of k visible rows goes into
 * short_of_k (*n_short), to be searched wider as collect_rounds does; the
 * queries of a piece the engine failed on, and of every piece after it,
 * into again (*n_again), to be searched as one search is (with its CPU
 * fallback).  False, having done nothing, for a batch not scanned in
 * pieces (genie_search_values_piecewise).
 */
static bool
collect_in_pieces(GenieCachedIndex *entry, GenieVisibility *vs, const GenieValueBatch *queries,
				  int32 k, int32 kprime, RowCollector *collected, int *short_of_k, int *n_short,
				  int *again, int *n_again)
{
	int			nq = queries->n;
	int			n_pieces = Min(MAX_PIECES, nq / PIECE_QUERIES);
	int			size;
	genie_engine_kind device;
	const GenieValueSet *set;
	Piece	   *pieces;
	Piece	   *volatile running = NULL;
	int		   *which;

	if (n_pieces < 2)
		return false;
	set = genie_search_values_piecewise(entry, queries, &device);
	if (set == NULL)
		return false;
	size = (nq + n_pieces - 1) / n_pieces;
	pieces = palloc0(sizeof(Piece) * n_pieces);
	which = palloc(sizeof(int) * size);
	for (int p = 0; p < n_pieces; p++)
	{
		Piece	   *piece = &pieces[p];

		piece->set = set;
		piece->device = device;
		piece->k = kprime;
		piece->excluded = entry->excluded;
		piece->first = p * size;
		piece->queries = *queries;
		piece->queries.n = Min(size, nq - piece->first);
		if (queries->kind == GENIE_VALUES_VECTORS)
			piece->queries.vectors = queries->vectors + (int64) piece->first * queries->dim;
		else
			piece->queries.codes = queries->codes + (int64) piece->first * genie_code_words(queries->dim);
		genie_search_engine_options(device, piece_cancel, piece, &piece->options);
	}

	PG_TRY();
	{
		running = &pieces[0];
		piece_start(&pieces[0]);
		for (int p = 0; p < n_pieces; p++)
		{
			Piece	   *piece = &pieces[p];
			GenieValueRows found;
			int			n_still = 0;

			piece_wait(piece);
			running = NULL;
			if (piece->status != GENIE_OK)
			{
				if (piece->status == GENIE_CANCELLED)
					genie_report_error(&piece->err, queries->kind == GENIE_VALUES_CODES ?
									   "genie: Hamming search" : "genie: vector search");
				for (int q = piece->first; q < nq; q++)
					again[(*n_again)++] = q;
				break;
			}
			if (p + 1 < n_pieces)
			{
				running = &pieces[p + 1];
				piece_start(&pieces[p + 1]);
			}
			genie_search_ran_on(genie_value_found_device(&piece->found), false);
			genie_value_rows_take(&piece->found, NULL, &found);
			genie_search_count(piece->queries.n, kprime, found.offsets[piece->queries.n]);
			for (int i = 0; i < piece->queries.n; i++)
				which[i] = piece->first + i;
			collect_found(entry, vs, &found, which, piece->queries.n, k, kprime, collected, NULL,
						  NULL, false, short_of_k + *n_short, &n_still, NULL, NULL);
			*n_short += n_still;
			genie_value_rows_free(&found);
		}
	}
	PG_CATCH();
	{
		/* the piece being scanned stops before its memory goes */
		Piece	   *piece = running;

		if (piece != NULL)
		{
			piece->abandon = 1;
			genie_job_wait(piece->job);
			if (piece->status == GENIE_OK)
				genie_value_found_free(&piece->found);
		}
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(which);
	pfree(pieces);
	return true;
}

void
genie_search_values_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
							const GenieValueBatch *queries, GenieQuery **approximate, int32 k,
							GenieValueRows *rows, ItemPointerData **tids)
{
	int			nq = queries->n;
	int		   *short_of_k = palloc(sizeof(int) * Max(nq, 1));
	int		   *ran_out = palloc(sizeof(int) * Max(nq, 1));
	int		   *again = palloc(sizeof(int) * Max(nq, 1));
	int			n_ran_out = 0;
	int			n_short = 0;
	int			n_again = 0;
	int32		kprime = (int32) Min((int64) k, (int64) Max(entry->n_objects, 1));
	RowCollector collected;
	GenieVisibility vs;

	genie_visibility_begin(&vs, entry, heap, snapshot, nq);
	collector_begin(&collected, nq, k, tids);
	if (approximate == NULL &&
		collect_in_pieces(entry, &vs, queries, k, kprime, &collected, short_of_k, &n_short,
						  again, &n_again))
	{
		/* a piece the engine failed on, and those after it, as one search (which falls back) */
		if (n_again > 0)
			collect_rounds(entry, &vs, queries, NULL, k, kprime, &collected, again, n_again,
						   NULL, NULL, NULL, &n_ran_out);
		if (n_short > 0)
			collect_rounds(entry, &vs, queries, NULL, k,
						   genie_search_wider_k(kprime, entry->n_objects), &collected,
						   short_of_k, n_short, NULL, NULL, NULL, &n_ran_out);
	}
	else
	{
		for (int i = 0; i < nq; i++)
			short_of_k[i] = i;
		collect_rounds(entry, &vs, queries, approximate, k, kprime, &collected, short_of_k, nq,
					   NULL, NULL,
					   ran_out, &n_ran_out);
	}

	/*
	 * LSH: the candidates of these queries ran out before k visible rows;
	 * the rest follow by exact distance, after the candidates, as in the
	 * index scan (so the batch returns what the scan returns).
	 */
	if (n_ran_out > 0)
	{
		int64	   *base = palloc0(sizeof(int64) * Max(nq, 1));
		int32	  **skip = palloc0(sizeof(int32 *) * Max(nq, 1));
		int64		widest = 0;
		int			unused = 0;

		for (int i = 0; i < n_ran_out; i++)
		{
			int			q = ran_out[i];

			base[q] = collected.counts[q];
			skip[q] = collected_sorted(&collected, q, base[q]);
			widest = Max(widest, base[q]);
		}
		kprime = (int32) Min((int64) k + widest, (int64) Max(entry->n_objects, 1));
		collect_rounds(entry, &vs, queries, NULL, k, kprime, &collected, ran_out, n_ran_out,
					   base, skip, NULL, &unused);
		for (int i = 0; i < n_ran_out; i++)
			pfree(skip[ran_out[i]]);
		pfree(skip);
		pfree(base);
	}
	genie_visibility_end(&vs);
	collector_finish(&collected, nq, rows);
	pfree(short_of_k);
	pfree(ran_out);
	pfree(again);
}
