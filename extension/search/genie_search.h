/*-------------------------------------------------------------------------
 *
 * genie_search.h
 *	  Searching a genie index: the one place that decides which engine runs
 *	  (genie.device), what happens when the GPU runs out of memory, how the
 *	  main postings and the pending list are searched and merged, and how a
 *	  batch keeps asking for more until each query has k rows the caller can
 *	  see.  Index scans (genie_scan.c), genie_topk and genie_ranges_topk
 *	  (genie_topk.c) and genie_similar (genie_similar.c) all search through
 *	  here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_H
#define GENIE_SEARCH_H

#include "postgres.h"

#include "access/tableam.h"
#include "executor/tuptable.h"
#include "utils/snapshot.h"

#include "search/genie_cache.h"
#include "types/genie_query.h"

/* genie.device: which engine runs searches */
typedef enum GenieDeviceSetting
{
	GENIE_DEVICE_SETTING_AUTO,
	GENIE_DEVICE_SETTING_CPU,
	GENIE_DEVICE_SETTING_GPU
} GenieDeviceSetting;

extern int	genie_device_setting;
extern int	genie_device_memory_limit_mb;
extern int	genie_gpu_set_min_postings;
extern int	genie_cpu_threads;

/* Engine options from genie.cpu_threads and genie.device_memory_limit. */
extern void genie_search_engine_options(genie_engine_kind kind, int (*cancel) (void *),
										void *cancel_arg, genie_engine_options *options);

/*
 * Per query q, hits [query_offsets[q], query_offsets[q + 1]) of objects and
 * scores, highest score first, ties by ascending object id; object ids are
 * the entry's (pending ids follow the main ones).  palloc'd.
 */
typedef struct GenieSearchResult
{
	int			n_queries;
	int64	   *query_offsets;
	int32	   *objects;
	int32	   *scores;
} GenieSearchResult;

/*
 * The top k by score of each query of the batch over the entry's main
 * postings (on the engine genie.device chooses, the CPU when the GPU runs
 * out of memory and genie.device is not gpu) and its pending list (on the
 * CPU), merged.  Dead objects are not filtered: callers skip them.  Honours
 * cancel and statement_timeout while the engines work.
 */
extern void genie_search(GenieCachedIndex *entry, GenieQueryBatch *batch, int32 k,
						 GenieSearchResult *result);
extern void genie_search_free(GenieSearchResult *result);

/*
 * Widening: a search asked for k' and the caller needs more than the
 * visible rows among them.  The next k' (four times wider, at most every
 * object), and whether query q's result already holds every object with
 * score >= 1 (asking again would give nothing new).
 */
extern int32 genie_search_wider_k(int32 k, int32 n_objects);
extern bool genie_search_exhausted(const GenieSearchResult *result, int q, int32 k,
								   int32 n_objects);

/* A query's rows as genie_search_visible returns them, best first. */
typedef struct GenieVisibleRows
{
	int64		n;
	ItemPointerData *tids;		/* of the visible version */
	int32	   *scores;
} GenieVisibleRows;

/*
 * For each query, its k best rows of heap visible to snapshot (fewer when
 * there are fewer rows with score >= 1): searches, drops dead and invisible
 * rows, and searches again with a wider k for the queries that came up
 * short.  Each row's visibility is checked once per call.
 */
extern void genie_search_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
								 GenieQuery **queries, int nq, int32 k,
								 GenieVisibleRows *rows);

/*
 * The exact k nearest stored strings by edit distance (the entry must store
 * strings): per query q, rows [offsets[q], offsets[q + 1]) of objects and
 * distances, ordered by (distance, length, object id), dead and NULL
 * objects left out, visible or not.  Queries are UTF-8 in CSR form.  Runs
 * where genie.device says (in-process: preloaded backends scan on the CPU,
 * as the genie service does not hold strings yet), the CPU when the GPU
 * runs out of memory unless genie.device = gpu; honours cancel.
 */
typedef struct GenieStringRows
{
	int			n_queries;
	int64	   *offsets;
	int32	   *objects;
	int32	   *distances;
} GenieStringRows;

/*
 * genie_search_strings.c: the k nearest stored strings of each query over
 * every object of the entry's version that is not dead or NULL, in
 * (distance, length, id) order: through the genie service when genie is
 * preloaded (its main strings there, the pending ones here), else on the
 * engine genie.device asks for.
 */
extern void genie_search_strings(GenieCachedIndex *entry, const char *query_text,
								 const int64 *query_offsets, int nq, int32 k,
								 GenieStringRows *rows);

/*
 * The same restricted to rows of heap visible to snapshot: each query's k
 * nearest visible rows (fewer only when fewer rows have a string), with the
 * TIDs of their visible versions in tids (n_queries arrays, palloc'd);
 * scans again with a wider k for the queries whose nearest rows were not
 * all visible.
 */
extern void genie_search_strings_visible(GenieCachedIndex *entry, Relation heap,
										 Snapshot snapshot, const char *query_text,
										 const int64 *query_offsets, int nq, int32 k,
										 GenieStringRows *rows, ItemPointerData **tids);

/* genie.vector_search: how vector indexes answer */
typedef enum GenieVectorSearchSetting
{
	GENIE_VECTOR_SEARCH_EXACT,	/* every stored vector, exact */
	GENIE_VECTOR_SEARCH_LSH		/* LSH candidates re-ranked: approximate */
} GenieVectorSearchSetting;

extern int	genie_vector_search_setting;
extern int	genie_lsh_candidates;

/*
 * Per query q, rows [offsets[q], offsets[q + 1]) of objects and distances
 * (real[] <-> real[]), by (distance, object id).
 */
typedef struct GenieVectorRows
{
	int			n_queries;
	int64	   *offsets;
	int32	   *objects;
	float8	   *distances;
} GenieVectorRows;

/*
 * genie_search_vectors.c: the k nearest vectors of each query (nq rows of
 * the index's dimension in queries) over every object of the entry's
 * version that is not dead or NULL, visible or not: exact when lsh is
 * NULL, else (genie.vector_search = lsh) the top genie.lsh_candidates by
 * the LSH match count of lsh[q] (the queries' keywords, GenieOrderBy.query;
 * an error when one is NULL: the index has none) re-ranked.  Honours
 * cancel.
 */
extern void genie_search_vectors(GenieCachedIndex *entry, const float *queries, GenieQuery **lsh,
								 int nq, int32 k, GenieVectorRows *rows);

/*
 * The same restricted to rows of heap visible to snapshot, with the TIDs
 * of their visible versions in tids (nq arrays, palloc'd); searches again
 * with a wider k for the queries whose nearest rows were not all visible.
 */
extern void genie_search_vectors_visible(GenieCachedIndex *entry, Relation heap,
										 Snapshot snapshot, const float *queries,
										 GenieQuery **lsh, int nq, int32 k,
										 GenieVectorRows *rows, ItemPointerData **tids);

/*
 * genie_similar's verification round on the device the entry's searches
 * use, with the same out-of-memory fallback.
 */
extern void genie_search_verify(GenieCachedIndex *entry, const genie_similar_batch *batch,
								genie_similar_verdict *verdict);

/*
 * Visibility checks of the rows of a batch of nq queries over heap
 * (genie_search.c): whether object id is visible to the snapshot, and the
 * TID of its visible version.
 */
typedef struct GenieVisibility
{
	Snapshot	snapshot;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;

	/*
	 * Popular rows appear in the results of many queries of a batch: each
	 * one's visibility is checked once per call (0 unknown, 1 visible, 2
	 * not), remembering the TID of the visible version.  For one query, or
	 * beyond the cap, the memory is not worth it and every hit is checked.
	 */
	uint8	   *known;
	ItemPointerData *visible_tids;
} GenieVisibility;

extern void genie_visibility_begin(GenieVisibility *vs, GenieCachedIndex *entry, Relation heap,
								   Snapshot snapshot, int nq);
extern void genie_visibility_end(GenieVisibility *vs);
extern bool genie_object_visible(GenieVisibility *vs, GenieCachedIndex *entry, int32 id,
								 ItemPointer tid);

/*
 * The visible rows of each query of a batch, in the order found, with a
 * distance of distance_size bytes each (int32 edit distances, float8
 * Euclidean ones): what the widening rounds of genie_search_strings_visible
 * and genie_search_vectors_visible collect.  tids[q] are the caller's (they
 * are returned as they are); genie_rows_finish flattens objects and
 * distances into CSR arrays.
 */
typedef struct GenieRowCollector
{
	Size		distance_size;
	ItemPointerData **tids;
	int32	  **objects;
	char	  **distances;
	int64	   *counts;
	int64	   *capacity;
} GenieRowCollector;

extern void genie_rows_begin(GenieRowCollector *c, int nq, int32 k, Size distance_size,
							 ItemPointerData **tids);
extern void genie_rows_add(GenieRowCollector *c, int q, ItemPointer tid, int32 object,
						   const void *distance);
extern void genie_rows_finish(GenieRowCollector *c, int nq, int64 **offsets, int32 **objects,
							  void **distances);

/*
 * A set predicate over the entry's main part on this backend's GPU engine
 * (genie_search.c): with genie.device = gpu, or auto once a search made a
 * GPU engine for this version, and the genie service not configured.  The
 * matching ids, ascending, into out (room for every main object); -1 when
 * the GPU does not take it (the caller matches on the host).
 */
extern int64 genie_search_match_set(GenieCachedIndex *entry, genie_set_predicate predicate,
									const int32 *keywords, int n, int32 *out);

/*
 * For the callers of the genie service (genie_search.c): the service is
 * away, so search in-process (false; once a NOTICE) or, with genie.device =
 * gpu, an error; and the NOTICEs for the engine that answered.
 */
extern bool genie_search_service_away(void);
extern void genie_search_note_engine(genie_engine_kind engine, bool device_fallback,
									 const char *what);

/*
 * A scan of the entry's stored values (values: "strings" or "vectors")
 * through the genie service (genie_search.c): ask(entry, arg, ...) sends
 * one request; while the service does not hold the values, ship(entry)
 * hands them over (or, when another backend is doing so, the backend waits)
 * and asks again.  False when the service is away; what names the search
 * in messages.
 */
typedef GenieServiceOutcome (*GenieValuesAsk) (GenieCachedIndex *entry, void *arg,
											   genie_engine_kind *engine, bool *device_fallback,
											   genie_error *err);
typedef GenieServiceOutcome (*GenieValuesShip) (GenieCachedIndex *entry, genie_error *err);
extern bool genie_search_values_through_service(GenieCachedIndex *entry, GenieValuesAsk ask,
												GenieValuesShip ship, void *arg,
												const char *values, const char *what);

#endif							/* GENIE_SEARCH_H */
