/*-------------------------------------------------------------------------
 *
 * genie_explain.c
 *	  EXPLAIN (ANALYZE) of a statement that searched a genie index ends with
 *	  what a user tunes by: how many engine searches ran (an index scan
 *	  searches again, four times wider, when its first k runs out), the
 *	  largest k, where they ran (CPU or GPU, in this backend or through the
 *	  genie service), the rows the engines returned and those the scans
 *	  handed on, the heap rows batch functions fetched and found invisible,
 *	  searches moved to a new index version, and the time of each phase.
 *
 * PostgreSQL 15 lets an index access method add nothing to its own plan
 * node, so this is one block per statement, after the plan (text), or an
 * object of its own beside the plan's (JSON, YAML, XML), through
 * ExplainOneQuery_hook.  The hook plans and explains the query exactly as
 * explain.c does without a hook (or calls the hook installed before it),
 * with genie.profile on for the statement; a session whose genie.profile
 * was off keeps its genie_profile() sums as they were.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "executor/instrument.h"
#include "lib/stringinfo.h"
#include "optimizer/optimizer.h"
#include "tcop/tcopprot.h"

#include "profile/genie_explain.h"
#include "profile/genie_profile.h"

GenieExplainCounts genie_explain_counts;
bool		genie_explain_analyzing = false;

static ExplainOneQuery_hook_type prev_explain_one_query = NULL;

void
genie_explain_search(int nq, int64 k, int64 rows, genie_engine_kind engine, bool by_service,
					 bool shared)
{
	genie_explain_counts.searches++;
	genie_explain_counts.queries += nq;
	genie_explain_counts.largest_k = Max(genie_explain_counts.largest_k, k);
	genie_explain_counts.engine_rows += rows;
	if (shared)
		genie_explain_counts.engines |= GENIE_EXPLAIN_CPU_SHARED;
	else if (engine == GENIE_ENGINE_GPU)
		genie_explain_counts.engines |= by_service ? GENIE_EXPLAIN_GPU_SERVICE : GENIE_EXPLAIN_GPU_HERE;
	else
		genie_explain_counts.engines |= by_service ? GENIE_EXPLAIN_CPU_SERVICE : GENIE_EXPLAIN_CPU_HERE;
}

void
genie_explain_permutation(int64 candidates, int64 hits, int64 wanted)
{
	genie_explain_counts.permutation_candidates += candidates;
	genie_explain_counts.permutation_hits += hits;
	genie_explain_counts.permutation_wanted += wanted;
}

void
genie_explain_range(int64 distances, int64 superclusters_discarded, int64 clusters_discarded)
{
	genie_explain_counts.range_distances += distances;
	genie_explain_counts.range_superclusters_discarded += superclusters_discarded;
	genie_explain_counts.range_clusters_discarded += clusters_discarded;
}

void
genie_explain_list(int64 queries, int64 distances)
{
	genie_explain_counts.list_queries += queries;
	genie_explain_counts.list_distances += distances;
}

void
genie_explain_ahead(int64 queries, int64 pieces)
{
	genie_explain_counts.ahead_queries += queries;
	genie_explain_counts.ahead_pieces += pieces;
}

void
genie_explain_expanded(int64 on_threads, int64 in_order)
{
	genie_explain_counts.expanded_threads += on_threads;
	genie_explain_counts.expanded_order += in_order;
}

/*
 * What explain.c's ExplainOneQuery does for a query when no hook is set
 * (PostgreSQL 17's also measures the planner's memory for EXPLAIN (MEMORY)).
 */
static void
explain_one_query(Query *query, int cursorOptions, IntoClause *into, ExplainState *es,
				  const char *queryString, ParamListInfo params, QueryEnvironment *queryEnv)
{
	PlannedStmt *plan;
	instr_time	planstart;
	instr_time	planduration;
	BufferUsage bufusage_start;
	BufferUsage bufusage;
#if PG_VERSION_NUM >= 170000
	MemoryContextCounters mem_counters;
	MemoryContext planner_ctx = NULL;
	MemoryContext saved_ctx = NULL;

	if (es->memory)
	{
		planner_ctx = AllocSetContextCreate(CurrentMemoryContext, "explain analyze planner context",
											ALLOCSET_DEFAULT_SIZES);
		saved_ctx = MemoryContextSwitchTo(planner_ctx);
	}
#endif

	if (es->buffers)
		bufusage_start = pgBufferUsage;
	INSTR_TIME_SET_CURRENT(planstart);
	plan = pg_plan_query(query, queryString, cursorOptions, params);
	INSTR_TIME_SET_CURRENT(planduration);
	INSTR_TIME_SUBTRACT(planduration, planstart);
	if (es->buffers)
	{
		memset(&bufusage, 0, sizeof(BufferUsage));
		BufferUsageAccumDiff(&bufusage, &pgBufferUsage, &bufusage_start);
	}
#if PG_VERSION_NUM >= 170000
	if (es->memory)
	{
		MemoryContextSwitchTo(saved_ctx);
		MemoryContextMemConsumed(planner_ctx, &mem_counters);
	}
	ExplainOnePlan(plan, into, es, queryString, params, queryEnv, &planduration,
				   es->buffers ? &bufusage : NULL, es->memory ? &mem_counters : NULL);
#else
	ExplainOnePlan(plan, into, es, queryString, params, queryEnv, &planduration,
				   es->buffers ? &bufusage : NULL);
#endif
}

static const char *
engines_text(uint8 engines)
{
	StringInfoData s;
	static const struct
	{
		uint8		bit;
		const char *text;
	}			names[] = {
		{GENIE_EXPLAIN_GPU_SERVICE, "gpu, genie service"},
		{GENIE_EXPLAIN_CPU_SERVICE, "cpu, genie service"},
		{GENIE_EXPLAIN_GPU_HERE, "gpu, this backend"},
		{GENIE_EXPLAIN_CPU_HERE, "cpu, this backend"},
		{GENIE_EXPLAIN_CPU_SHARED, "cpu, this backend, the genie service's shared postings"},
	};

	initStringInfo(&s);
	for (int i = 0; i < lengthof(names); i++)
		if (engines & names[i].bit)
			appendStringInfo(&s, "%s%s", s.len > 0 ? "; " : "", names[i].text);
	return s.data;
}

static void
show(ExplainState *es, const GenieExplainCounts *before, const double *ms_before,
	 const GenieExplainCounts *now, const double *ms_now)
{
	static const struct
	{
		GeniePhase	phase;
		const char *label;
	}			times[] = {
		{GENIE_PHASE_QUERY, "Genie Query Time"},
		{GENIE_PHASE_CACHE, "Genie Cache Time"},
		{GENIE_PHASE_LOAD, "Genie Load Time"},
		{GENIE_PHASE_UPLOAD, "Genie Upload Time"},
		{GENIE_PHASE_SERVICE, "Genie Service Time"},
		{GENIE_PHASE_QUEUE, "Genie Queue Time"},
		{GENIE_PHASE_ENGINE, "Genie Engine Time"},
		{GENIE_PHASE_PENDING, "Genie Pending Time"},
		{GENIE_PHASE_VISIBILITY, "Genie Visibility Time"},
	};
	int64		searches = now->searches - before->searches;
	int64		heap_fetches = now->heap_fetches - before->heap_fetches;
	int64		all_visible = now->all_visible - before->all_visible;
	int64		moves = now->moves - before->moves;

	if (searches == 0 && now->scan_rows == before->scan_rows)
		return;
	/* text: lines after the plan's; other formats: an object beside the plan's */
	ExplainOpenGroup("Genie", NULL, true, es);
	ExplainPropertyInteger("Genie Searches", NULL, searches, es);
	if (searches > 0)
	{
		ExplainPropertyInteger("Genie Queries", NULL, now->queries - before->queries, es);
		ExplainPropertyInteger("Genie Largest k", NULL, now->largest_k, es);
		ExplainPropertyText("Genie Engines", engines_text(now->engines), es);
		ExplainPropertyInteger("Genie Engine Rows", NULL, now->engine_rows - before->engine_rows, es);
	}
	ExplainPropertyInteger("Genie Scan Rows", NULL, now->scan_rows - before->scan_rows, es);
	if (heap_fetches > 0 || all_visible > 0)
	{
		/* as an index-only scan's Heap Fetches: the rows the visibility map did not answer */
		ExplainPropertyInteger("Genie Heap Fetches", NULL, heap_fetches, es);
		ExplainPropertyInteger("Genie Invisible Rows", NULL, now->invisible - before->invisible, es);
		ExplainPropertyInteger("Genie All-Visible Rows", NULL, all_visible, es);
		/* of those, the rows earlier batches' answers gave, their pages unchanged since */
		if (now->all_visible_remembered > before->all_visible_remembered)
			ExplainPropertyInteger("Genie All-Visible Rows Remembered", NULL,
								   now->all_visible_remembered - before->all_visible_remembered, es);
	}
	if (moves > 0)
		ExplainPropertyInteger("Genie Version Moves", NULL, moves, es);
	if (now->permutation_candidates > before->permutation_candidates)
	{
		int64		wanted = now->permutation_wanted - before->permutation_wanted;

		ExplainPropertyInteger("Genie Permutation Candidates", NULL,
							   now->permutation_candidates - before->permutation_candidates, es);
		/* the share of the exact search's rows matched: recall@k, ties at the k-th allowed */
		ExplainPropertyFloat("Genie Permutation Recall", NULL,
							 wanted > 0 ? (double) (now->permutation_hits - before->permutation_hits) / wanted : 1.0,
							 3, es);
	}
	if (now->range_distances > before->range_distances)
	{
		ExplainPropertyInteger("Genie Range Distances", NULL,
							   now->range_distances - before->range_distances, es);
		ExplainPropertyInteger("Genie Discarded Superclusters", NULL,
							   now->range_superclusters_discarded - before->range_superclusters_discarded, es);
		ExplainPropertyInteger("Genie Discarded Clusters", NULL,
							   now->range_clusters_discarded - before->range_clusters_discarded, es);
	}
	if (now->list_queries > before->list_queries)
	{
		ExplainPropertyInteger("Genie List Queries", NULL, now->list_queries - before->list_queries, es);
		ExplainPropertyInteger("Genie List Distances", NULL,
							   now->list_distances - before->list_distances, es);
	}
	if (now->ahead_queries > before->ahead_queries)
	{
		ExplainPropertyInteger("Genie Queries Scanned Ahead", NULL,
							   now->ahead_queries - before->ahead_queries, es);
		ExplainPropertyInteger("Genie Pieces Scanned Ahead", NULL,
							   now->ahead_pieces - before->ahead_pieces, es);
	}
	if (now->expanded_threads + now->expanded_order > before->expanded_threads + before->expanded_order)
	{
		/* a stored batch's compressed stream, in kB (the share on threads is what a user can change) */
		ExplainPropertyInteger("Genie Batch Expanded On Threads", "kB",
							   (now->expanded_threads - before->expanded_threads) / 1024, es);
		ExplainPropertyInteger("Genie Batch Expanded In Order", "kB",
							   (now->expanded_order - before->expanded_order) / 1024, es);
	}
	if (es->timing)
		for (int i = 0; i < lengthof(times); i++)
		{
			double		ms = ms_now[times[i].phase] - ms_before[times[i].phase];

			if (ms > 0 || times[i].phase == GENIE_PHASE_ENGINE)
				ExplainPropertyFloat(times[i].label, "ms", ms, 3, es);
		}
	ExplainCloseGroup("Genie", NULL, true, es);
}

/* The hook installed before genie's, or explain.c's own work. */
static void
next(Query *query, int cursorOptions, IntoClause *into, ExplainState *es,
	 const char *queryString, ParamListInfo params, QueryEnvironment *queryEnv)
{
	if (prev_explain_one_query)
		prev_explain_one_query(query, cursorOptions, into, es, queryString, params, queryEnv);
	else
		explain_one_query(query, cursorOptions, into, es, queryString, params, queryEnv);
}

static void
genie_explain_one_query(Query *query, int cursorOptions, IntoClause *into, ExplainState *es,
						const char *queryString, ParamListInfo params, QueryEnvironment *queryEnv)
{
	GenieExplainCounts before;
	GenieExplainCounts now;
	double		ms_before[GENIE_N_PHASES];
	int64		calls_before[GENIE_N_PHASES];
	double		ms_now[GENIE_N_PHASES];
	int64		calls_now[GENIE_N_PHASES];
	/* set before PG_TRY and only read inside it: safe across its longjmp */
	bool		profiling = genie_profile_enabled;
	bool		analyzing = genie_explain_analyzing;

	if (!es->analyze)
	{
		next(query, cursorOptions, into, es, queryString, params, queryEnv);
		return;
	}
	genie_profile_read(ms_before, calls_before);
	/* the statement's largest k and engines, not the session's */
	before = genie_explain_counts;
	genie_explain_counts.largest_k = 0;
	genie_explain_counts.engines = 0;
	genie_profile_enabled = true;
	genie_explain_analyzing = true;
	PG_TRY();
	{
		next(query, cursorOptions, into, es, queryString, params, queryEnv);
	}
	PG_FINALLY();
	{
		/* the session's state as it was, whether the statement ended or failed */
		genie_profile_enabled = profiling;
		genie_explain_analyzing = analyzing;
		genie_profile_read(ms_now, calls_now);
		now = genie_explain_counts;
		genie_explain_counts.largest_k = Max(before.largest_k, now.largest_k);
		genie_explain_counts.engines |= before.engines;
		if (!profiling)
			genie_profile_restore(ms_before, calls_before);
	}
	PG_END_TRY();
	show(es, &before, ms_before, &now, ms_now);
}

void
genie_explain_init(void)
{
	prev_explain_one_query = ExplainOneQuery_hook;
	ExplainOneQuery_hook = genie_explain_one_query;
}
