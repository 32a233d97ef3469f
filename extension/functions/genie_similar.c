/*-------------------------------------------------------------------------
 *
 * genie_similar.c
 *	  genie_similar(index, queries, k, candidates, max_rounds): the paper's
 *	  batch pipeline for sequences, made exact.
 *
 * Each round asks the engine for every unfinished query's top K rows by
 * n-gram count (K starts at max(candidates, k)), reads those rows' strings
 * from the table (once per row per call), verifies them by edit distance
 * with the count and length filters on the GPU or the CPU, and certifies the
 * top k (Theorem 5.2: no row outside the verified ones can be nearer).  A
 * query that is not certified runs again with K doubled; once the engine
 * has returned every row with a count >= 1, the next round makes every row
 * of the index a candidate, which certifies by construction.  max_rounds
 * stops early: then only the rows that are provably in the top k are
 * flagged exact.
 *
 * That is the path of indexes built without their strings (store_strings =
 * off, or before genie kept them).  An index that stores its strings is
 * answered by one exact scan of them instead (similar_by_scan): with real
 * typos the count bound is weak and certification pulls a large part of
 * the table, while the scan's length filter and early exit make every
 * string cost a few word operations; every row is exact after one round,
 * and candidates and max_rounds have nothing left to limit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "search/genie_search_device.h"
#include "search/genie_search_values.h"
#include "types/genie_type.h"
#include "profile/genie_profile.h"

PG_FUNCTION_INFO_V1(genie_similar);

#define GENIE_SIMILAR_MAX_K		(1 << 30)

/* A row of the index as seen by this call: visible or not, and its string. */
typedef struct SimilarRow
{
	int32		object_id;		/* hash key */
	bool		visible;
	ItemPointerData tid;		/* of the visible version */
	int64		text_offset;	/* in the arena */
	int32		text_size;
} SimilarRow;

typedef struct SimilarQuery
{
	const char *text;			/* UTF-8 */
	size_t		size;
	GenieQuery *query;
	int32		K;				/* candidates asked of the engine this round */
	bool		every_row;		/* this round: every row is a candidate */
	bool		done;
	int32		rounds;
	/* the result */
	int32		n_rows;
	ItemPointerData *tids;
	int32	   *distances;
	bool	   *exact;
} SimilarQuery;

typedef struct SimilarState
{
	Relation	heap;
	Relation	index;
	GenieCachedIndex *entry;
	Snapshot	snapshot;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	IndexInfo  *index_info;
	EState	   *estate;
	HTAB	   *rows;
	MemoryContext call_cxt;		/* lives as long as the call: rows and their strings */
	char	   *arena;
	int64		arena_used;
	int64		arena_capacity;
} SimilarState;

/* The row of an object id, reading it from the table the first time. */
static SimilarRow *
get_row(SimilarState *st, int32 id)
{
	bool		found;
	SimilarRow *row = hash_search(st->rows, &id, HASH_ENTER, &found);
	ItemPointerData tid;
	bool		call_again = false;
	bool		all_dead = false;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	ExprContext *econtext;
	size_t		size;
	const char *utf8;

	if (found)
		return row;
	row->visible = false;
	row->text_size = 0;
	row->text_offset = 0;
	tid = st->entry->objects[id].tid;
	if (!table_index_fetch_tuple(st->fetch, &tid, st->snapshot, st->slot, &call_again, &all_dead))
		return row;

	econtext = GetPerTupleExprContext(st->estate);
	ResetExprContext(econtext);
	econtext->ecxt_scantuple = st->slot;
	FormIndexDatum(st->index_info, st->slot, st->estate, values, isnull);
	/* a row whose value changed to NULL under a HOT update is no candidate */
	if (isnull[0])
		return row;
	utf8 = genie_text_utf8(DatumGetTextPP(values[0]), &size);
	if (st->arena_used + (int64) size > st->arena_capacity)
	{
		int64		capacity = Max(st->arena_capacity * 2, st->arena_used + (int64) size + 1024);

		st->arena = st->arena == NULL
			? MemoryContextAllocExtended(st->call_cxt, capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(st->arena, capacity);
		st->arena_capacity = capacity;
	}
	memcpy(st->arena + st->arena_used, utf8, size);
	row->text_offset = st->arena_used;
	row->text_size = (int32) size;
	st->arena_used += (int64) size;
	row->tid = tid;
	row->visible = true;
	return row;
}

/* One round's candidates of one query, before verification. */
typedef struct RoundCandidates
{
	int64		n;
	int64		capacity;
	SimilarRow **rows;			/* visible rows, entries of SimilarState.rows */
	int32	   *counts;
	int32		unseen_count_bound;
} RoundCandidates;

static void
add_candidate(RoundCandidates *c, SimilarRow *row, int32 count)
{
	if (c->n == c->capacity)
	{
		c->capacity = Max(c->capacity * 2, 64);
		c->rows = c->rows == NULL ? palloc_extended(sizeof(SimilarRow *) * c->capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(c->rows, sizeof(SimilarRow *) * c->capacity);
		c->counts = c->counts == NULL ? palloc_extended(sizeof(int32) * c->capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(c->counts, sizeof(int32) * c->capacity);
	}
	c->rows[c->n] = row;
	c->counts[c->n] = count;
	c->n++;
}

/* The row of an object if it can be a candidate: a live string visible to us. */
static SimilarRow *
candidate_row(SimilarState *st, int32 id)
{
	SimilarRow *row;

	if (st->entry->objects[id].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL))
		return NULL;
	row = get_row(st, id);
	return row->visible ? row : NULL;
}

/*
 * The candidates of queries[active[0..n_active)] for this round, from one
 * engine search per group of equal K.
 */
static void
collect_candidates(SimilarState *st, SimilarQuery *queries, int *active, int n_active,
				   RoundCandidates *out)
{
	GenieCachedIndex *entry = st->entry;
	int32		n_objects = entry->n_objects;

	for (int pass = 0; pass < 2; pass++)
	{
		/* pass 0: queries with their K; pass 1: every-row queries, all counts */
		int		   *group = palloc(sizeof(int) * n_active);
		GenieQuery **batch_queries = palloc(sizeof(GenieQuery *) * n_active);
		int			n_group = 0;
		int32		kprime = 0;
		GenieQueryBatch batch;
		GenieSearchResult result;

		for (int i = 0; i < n_active; i++)
		{
			SimilarQuery *q = &queries[active[i]];

			if (q->every_row != (pass == 1))
				continue;
			kprime = pass == 1 ? n_objects : (int32) Min((int64) q->K, (int64) n_objects);
			group[n_group] = i;
			batch_queries[n_group] = q->query;
			n_group++;
		}
		if (n_group == 0 || n_objects == 0)
			continue;
		/* every query of pass 0 has the same K: they all started together */
		genie_query_batch_init(&batch, batch_queries, n_group);
		genie_search(entry, &batch, Max(kprime, 1), &result);

		for (int g = 0; g < n_group; g++)
		{
			RoundCandidates *c = &out[group[g]];
			int64		begin = result.query_offsets[g];
			int64		end = result.query_offsets[g + 1];
			uint8	   *seen = NULL;

			if (pass == 1)
				seen = palloc_extended(n_objects / 8 + 1, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			for (int64 h = begin; h < end; h++)
			{
				int32		id = result.objects[h];
				SimilarRow *row = candidate_row(st, id);

				if (seen != NULL)
					seen[id >> 3] |= (uint8) (1 << (id & 7));
				if (row != NULL)
					add_candidate(c, row, result.scores[h]);
				CHECK_FOR_INTERRUPTS();
			}
			if (pass == 1)
			{
				/* the rows that share no gram with the query */
				for (int32 id = 0; id < n_objects; id++)
				{
					SimilarRow *row;

					if ((seen[id >> 3] >> (id & 7)) & 1)
						continue;
					row = candidate_row(st, id);
					if (row != NULL)
						add_candidate(c, row, 0);
					if ((id & 1023) == 0)
						CHECK_FOR_INTERRUPTS();
				}
				c->unseen_count_bound = -1;
				pfree(seen);
			}
			else if (end - begin >= (int64) n_objects)
				c->unseen_count_bound = -1;
			else if (end - begin == kprime)
				c->unseen_count_bound = result.scores[end - 1];
			else
				c->unseen_count_bound = 0;	/* every row with a count >= 1 was returned */
		}
		genie_search_free(&result);
	}
}

/* Sorts candidate indexes by (distance, object id). */
typedef struct ScoredCandidate
{
	int32		distance;
	SimilarRow *row;
} ScoredCandidate;

static int
compare_scored(const void *a, const void *b)
{
	const ScoredCandidate *x = a;
	const ScoredCandidate *y = b;

	if (x->distance != y->distance)
		return x->distance < y->distance ? -1 : 1;
	return (x->row->object_id > y->row->object_id) - (x->row->object_id < y->row->object_id);
}

static void
finish_query(SimilarQuery *q, RoundCandidates *c, const int32 *distances,
			 const uint8 *exact, bool certified, int32 open_bound, int32 k)
{
	ScoredCandidate *scored = palloc_extended(sizeof(ScoredCandidate) * Max(c->n, 1), MCXT_ALLOC_HUGE);
	int64		n = 0;

	for (int64 j = 0; j < c->n; j++)
		if (exact[j])
		{
			scored[n].distance = distances[j];
			scored[n].row = c->rows[j];
			n++;
		}
	qsort(scored, n, sizeof(ScoredCandidate), compare_scored);
	q->n_rows = (int32) Min(n, (int64) k);
	q->tids = palloc(sizeof(ItemPointerData) * Max(q->n_rows, 1));
	q->distances = palloc(sizeof(int32) * Max(q->n_rows, 1));
	q->exact = palloc(sizeof(bool) * Max(q->n_rows, 1));
	for (int32 i = 0; i < q->n_rows; i++)
	{
		q->tids[i] = scored[i].row->tid;
		q->distances[i] = scored[i].distance;
		q->exact[i] = certified || scored[i].distance <= open_bound;
	}
	q->done = true;
	pfree(scored);
}

static void
run_rounds(SimilarState *st, SimilarQuery *queries, int nq, int32 k, int32 max_rounds)
{
	GenieCachedIndex *entry = st->entry;
	int		   *active = palloc(sizeof(int) * nq);

	for (;;)
	{
		int			n_active = 0;
		RoundCandidates *cands;
		genie_similar_batch batch;
		genie_similar_verdict verdict;
		int64		total = 0;
		int64		text_bytes = 0;
		int64		query_bytes = 0;
		char	   *candidate_text;
		char	   *query_text;
		int64	   *candidate_text_offsets;
		int64	   *query_text_offsets;
		int64	   *candidate_offsets;
		int32	   *candidate_counts;
		int32	   *unseen;
		int64		pos;
		MemoryContext round_cxt;
		MemoryContext old;

		for (int i = 0; i < nq; i++)
			if (!queries[i].done)
				active[n_active++] = i;
		if (n_active == 0)
			break;

		round_cxt = AllocSetContextCreate(CurrentMemoryContext, "genie_similar round",
										  ALLOCSET_DEFAULT_SIZES);
		old = MemoryContextSwitchTo(round_cxt);
		cands = palloc0(sizeof(RoundCandidates) * n_active);
		collect_candidates(st, queries, active, n_active, cands);

		for (int i = 0; i < n_active; i++)
		{
			total += cands[i].n;
			query_bytes += (int64) queries[active[i]].size;
			for (int64 j = 0; j < cands[i].n; j++)
				text_bytes += cands[i].rows[j]->text_size;
		}
		candidate_text = palloc_extended(Max(text_bytes, 1), MCXT_ALLOC_HUGE);
		candidate_text_offsets = palloc_extended(sizeof(int64) * (total + 1), MCXT_ALLOC_HUGE);
		candidate_counts = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
		candidate_offsets = palloc(sizeof(int64) * (n_active + 1));
		query_text = palloc(Max(query_bytes, 1));
		query_text_offsets = palloc(sizeof(int64) * (n_active + 1));
		unseen = palloc(sizeof(int32) * n_active);
		pos = 0;
		total = 0;
		candidate_text_offsets[0] = 0;
		candidate_offsets[0] = 0;
		query_text_offsets[0] = 0;
		for (int i = 0; i < n_active; i++)
		{
			SimilarQuery *q = &queries[active[i]];

			memcpy(query_text + query_text_offsets[i], q->text, q->size);
			query_text_offsets[i + 1] = query_text_offsets[i] + (int64) q->size;
			for (int64 j = 0; j < cands[i].n; j++)
			{
				SimilarRow *row = cands[i].rows[j];

				memcpy(candidate_text + pos, st->arena + row->text_offset, row->text_size);
				pos += row->text_size;
				candidate_counts[total] = cands[i].counts[j];
				candidate_text_offsets[++total] = pos;
			}
			candidate_offsets[i + 1] = total;
			unseen[i] = cands[i].unseen_count_bound;
		}

		memset(&batch, 0, sizeof(batch));
		batch.n_queries = n_active;
		batch.n = entry->encoding.ngram_n;
		batch.k = k;
		batch.query_text = query_text;
		batch.query_text_offsets = query_text_offsets;
		batch.candidate_offsets = candidate_offsets;
		batch.candidate_text = candidate_text;
		batch.candidate_text_offsets = candidate_text_offsets;
		batch.candidate_counts = candidate_counts;
		batch.unseen_count_bound = unseen;
		memset(&verdict, 0, sizeof(verdict));
		verdict.distances = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
		verdict.exact = palloc_extended(Max(total, 1), MCXT_ALLOC_HUGE);
		verdict.certified = palloc(n_active);
		verdict.open_bound = palloc(sizeof(int32) * n_active);
		genie_search_verify(entry, &batch, &verdict);

		for (int i = 0; i < n_active; i++)
		{
			SimilarQuery *q = &queries[active[i]];
			bool		certified = verdict.certified[i] != 0;
			bool		last_round = max_rounds > 0 && q->rounds + 1 >= max_rounds;

			q->rounds++;
			if (certified || q->every_row || last_round)
			{
				MemoryContextSwitchTo(old);
				finish_query(q, &cands[i], verdict.distances + candidate_offsets[i],
							 verdict.exact + candidate_offsets[i], certified || q->every_row,
							 verdict.open_bound[i], k);
				MemoryContextSwitchTo(round_cxt);
			}
			else if (cands[i].unseen_count_bound == 0 || q->K >= entry->n_objects)
				q->every_row = true;	/* the engine has nothing more to rank */
			else
				q->K = (int32) Min((int64) q->K * 2, (int64) GENIE_SIMILAR_MAX_K);
		}
		MemoryContextSwitchTo(old);
		MemoryContextDelete(round_cxt);
	}
	pfree(active);
}

/*
 * genie_similar on an index that stores its strings: one exact scan of
 * every stored string per query (genie_search_values_visible), so every
 * row is exact after one round, whatever the typos.  The rows are left in
 * rows and tids.
 */
static void
similar_by_scan(SimilarState *st, SimilarQuery *queries, int nq, int32 k, GenieValueRows *rows,
				ItemPointerData **tids)
{
	int64	   *offsets = palloc(sizeof(int64) * (nq + 1));
	char	   *text;
	GenieValueBatch batch;

	offsets[0] = 0;
	for (int i = 0; i < nq; i++)
		offsets[i + 1] = offsets[i] + (int64) queries[i].size;
	text = palloc_extended(Max(offsets[nq], 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < nq; i++)
		memcpy(text + offsets[i], queries[i].text, queries[i].size);
	memset(&batch, 0, sizeof(batch));
	batch.kind = GENIE_VALUES_STRINGS;
	batch.n = nq;
	batch.text = text;
	batch.text_offsets = offsets;
	genie_search_values_visible(st->entry, st->heap, GetActiveSnapshot(), &batch, NULL, k, NULL,
								rows, tids);
}

/* genie_similar's whole search, as genie_search_batch_retrying runs it. */
typedef struct SimilarSearch
{
	SimilarState *st;
	SimilarQuery *queries;
	int			nq;
	int32		k;
	int32		candidates;
	int32		max_rounds;
	bool		by_scan;		/* stored strings: the result is in rows and tids */
	GenieValueRows rows;
	ItemPointerData **tids;
} SimilarSearch;

/*
 * One run on the index's entry (pinned by the caller).  A run on another
 * version, after the first one's went, starts afresh: object ids are the
 * version's own.
 */
static void
similar_search(GenieCachedIndex *entry, void *arg)
{
	SimilarSearch *s = arg;
	SimilarState *st = s->st;
	HASHCTL		ctl;

	st->entry = entry;
	s->by_scan = entry->values_stored;
	if (s->by_scan)
	{
		similar_by_scan(st, s->queries, s->nq, s->k, &s->rows, s->tids);
		st->entry = NULL;
		return;
	}
	for (int i = 0; i < s->nq; i++)
	{
		SimilarQuery *q = &s->queries[i];

		q->K = Max(s->candidates, s->k);
		q->every_row = false;
		q->done = false;
		q->rounds = 0;
		q->n_rows = 0;
	}
	st->arena_used = 0;
	st->snapshot = GetActiveSnapshot();
	/*
	 * The heap fetch and the slot pin buffers: they are made and dropped
	 * within the run, whose subtransaction owns the pins.
	 */
	st->fetch = table_index_fetch_begin(st->heap);
	st->slot = table_slot_create(st->heap, NULL);
	st->estate = CreateExecutorState();
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(SimilarRow);
	ctl.hcxt = CurrentMemoryContext;
	st->rows = hash_create("genie_similar rows", 1024, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	run_rounds(st, s->queries, s->nq, s->k, s->max_rounds);

	hash_destroy(st->rows);
	st->rows = NULL;
	FreeExecutorState(st->estate);
	ExecDropSingleTupleTableSlot(st->slot);
	table_index_fetch_end(st->fetch);
	st->entry = NULL;
}

/* The work of genie_similar once the index is open. */
static void
similar_body(FunctionCallInfo fcinfo, SimilarState *st, Datum *elems, int nq, int32 k,
			 int32 candidates, int32 max_rounds)
{
	SimilarQuery *queries;
	GenieIndexType type;
	SimilarSearch s;
	GenieResultWriter writer;

	genie_index_type(st->index, &type);
	if (strcmp(type.info->batch_function, "genie_similar") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("genie_similar needs a genie index of operator class genie_ngram_ops"),
				 errhint("CREATE INDEX ... USING genie (col genie_ngram_ops);")));

	queries = palloc0(sizeof(SimilarQuery) * Max(nq, 1));
	for (int i = 0; i < nq; i++)
	{
		GenieOrderBy orderby;

		type.info->encode_query(st->index, &type.encoding, GENIE_NGRAM_EDIT_STRATEGY,
								 elems[i], TEXTOID, &orderby);
		queries[i].query = orderby.query;
		queries[i].text = genie_text_utf8(DatumGetTextPP(elems[i]), &queries[i].size);
	}

	st->call_cxt = CurrentMemoryContext;
	st->index_info = BuildIndexInfo(st->index);
	memset(&s, 0, sizeof(s));
	s.st = st;
	s.queries = queries;
	s.nq = nq;
	s.k = k;
	s.candidates = candidates;
	s.max_rounds = max_rounds;
	s.tids = palloc(sizeof(ItemPointerData *) * Max(nq, 1));
	/* no row reaches the result before the whole search succeeded */
	genie_search_prepare_device();
	genie_search_batch_retrying(st->index, similar_search, &s);

	genie_profile_push(GENIE_PHASE_RESULTS);
	{
		int64		n_rows = 0;

		for (int q = 0; q < nq; q++)
			n_rows += s.by_scan ? s.rows.offsets[q + 1] - s.rows.offsets[q] : queries[q].n_rows;
		genie_result_rows_expected(fcinfo, n_rows);
	}
	genie_result_writer_begin(&writer, fcinfo);
	for (int q = 0; q < nq; q++)
	{
		int64		n = s.by_scan ? s.rows.offsets[q + 1] - s.rows.offsets[q] : queries[q].n_rows;

		for (int64 j = 0; j < n; j++)
		{
			Datum		values[5];

			values[0] = Int32GetDatum(q + 1);
			if (s.by_scan)
			{
				values[1] = PointerGetDatum(&s.tids[q][j]);
				values[2] = Int32GetDatum((int32) s.rows.distances[s.rows.offsets[q] + j]);	/* a whole number */
				values[3] = BoolGetDatum(true);
				values[4] = Int32GetDatum(1);
			}
			else
			{
				values[1] = PointerGetDatum(&queries[q].tids[j]);
				values[2] = Int32GetDatum(queries[q].distances[j]);
				values[3] = BoolGetDatum(queries[q].exact[j]);
				values[4] = Int32GetDatum(queries[q].rounds);
			}
			genie_result_put(&writer, values);
		}
	}
	genie_result_writer_end(&writer);
	genie_profile_pop();
}

Datum
genie_similar(PG_FUNCTION_ARGS)
{
	Oid			indexoid;
	ArrayType  *array;
	int32		k;
	int32		candidates;
	int32		max_rounds;
	Datum	   *elems;
	bool	   *nulls;
	int			nq;
	SimilarState st;

	for (int i = 0; i < 4; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("genie_similar: %s must not be NULL",
							i == 0 ? "index" : i == 1 ? "queries" : i == 2 ? "k" : "candidates")));
	indexoid = PG_GETARG_OID(0);
	array = PG_GETARG_ARRAYTYPE_P(1);
	k = PG_GETARG_INT32(2);
	candidates = PG_GETARG_INT32(3);
	max_rounds = PG_ARGISNULL(4) ? 0 : PG_GETARG_INT32(4);
	if (!PG_ARGISNULL(4))
	{
		if (max_rounds < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_rounds must be at least 1, or NULL for no limit")));
	}
	if (k < 1 || k > GENIE_SIMILAR_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be between 1 and %d", GENIE_SIMILAR_MAX_K)));
	if (candidates < 1 || candidates > GENIE_SIMILAR_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("candidates must be between 1 and %d", GENIE_SIMILAR_MAX_K)));
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a one-dimensional array")));

	InitMaterializedSRF(fcinfo, 0);
	genie_profile_push(GENIE_PHASE_QUERY);
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nq);
	genie_profile_pop();
	for (int i = 0; i < nq; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queries must not contain NULL elements")));

	memset(&st, 0, sizeof(st));
	st.index = genie_open_index(indexoid, &st.heap, GENIE_ACCESS_READ);
	if (check_enable_rls(RelationGetRelid(st.heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_similar cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(st.heap)),
				 errhint("Use ORDER BY ... <%%> ... LIMIT k, which applies the policies.")));

	similar_body(fcinfo, &st, elems, nq, k, candidates, max_rounds);

	index_close(st.index, AccessShareLock);
	table_close(st.heap, AccessShareLock);
	return (Datum) 0;
}
