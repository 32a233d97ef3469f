/*-------------------------------------------------------------------------
 *
 * genie_search.h
 *	  Searching a genie index: the one place that decides which engine runs
 *	  (genie.device), what happens when the GPU runs out of memory, how the
 *	  main postings and the pending list are searched and merged, and how a
 *	  batch keeps asking for more until each query has k rows the caller can
 *	  see.  Index scans (am/genie_scan.c), genie_topk and genie_ranges_topk
 *	  (functions/genie_topk.c) and genie_similar (functions/genie_similar.c)
 *	  all search through here; searches of stored values build on it
 *	  (genie_search_values.h).
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
#include "search/genie_search_device.h"
#include "types/genie_query.h"

extern int	genie_gpu_set_min_postings;

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
/* The k' of a batch's first round: k, at most every object (at least one). */
extern int32 genie_search_first_k(int32 k, int32 n_objects);

/*
 * Runs search(entry, arg), a batch function's whole search before it
 * returns any row, on the index's cache entry (got and pinned here, unpinned
 * after), in an internal subtransaction: when the index's version the
 * search started with is gone under it (genie_content_version_gone: the
 * genie service lost it and a merge has renumbered the pages since), it
 * runs again on the current version's entry, which holds every row the
 * statement's snapshot sees.  The third run holds merges off (below), so
 * that a READ COMMITTED read never fails for that internal reason.  search must leave its
 * results in memory of the caller's context, not in the function's result
 * yet.  In parallel mode (no subtransaction allowed) it runs once.
 */
typedef void (*GenieBatchSearch) (GenieCachedIndex *entry, void *arg);
extern void genie_search_batch_retrying(Relation index, GenieBatchSearch search, void *arg);

/*
 * The mechanism under it, for any search: runs attempt(arg) in an internal
 * subtransaction; when the version it searched is gone (as above), calls
 * moved(arg) (if not NULL: the caller moves to the index's current entry)
 * and runs it again.  The third run takes the index's content lock in
 * share mode before moved(arg) and keeps it to its end: no merge can take
 * its version, and merges wait for it.  In parallel mode it runs once.
 */
typedef void (*GenieAttempt) (void *arg);
extern void genie_retry_on_version_gone(Relation index, GenieAttempt attempt, GenieAttempt moved,
										void *arg);

/*
 * Where the last engine search ran (EXPLAIN (ANALYZE), genie_explain.h):
 * set by the paths that run one, read when the search is counted.
 */
extern void genie_search_ran_on(genie_engine_kind engine, bool by_service);
extern void genie_search_count(int nq, int64 k, int64 rows);
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
 * genie_similar's verification round on the device the entry's searches
 * use, with the same out-of-memory fallback.
 */
extern void genie_search_verify(GenieCachedIndex *entry, const genie_similar_batch *batch,
								genie_similar_verdict *verdict);


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
 * A request to the genie service about the entry (genie_search.c): ask(entry,
 * arg, ...) sends it; while the service does not hold what it needs,
 * ship(entry) hands that over (or, when another backend is doing so, the
 * backend waits) and asks again.  False when the service is away (then
 * search in-process); held names what is handed over ("the stored
 * strings"), what names the search, in messages.  One loop for the main
 * postings and for stored values.
 */
typedef GenieServiceOutcome (*GenieServiceAsk) (GenieCachedIndex *entry, void *arg,
												genie_engine_kind *engine, bool *device_fallback,
												genie_error *err);
typedef GenieServiceOutcome (*GenieServiceShip) (GenieCachedIndex *entry, genie_error *err);
extern bool genie_search_through_service(GenieCachedIndex *entry, GenieServiceAsk ask,
										 GenieServiceShip ship, void *arg, const char *held,
										 const char *what);


#endif							/* GENIE_SEARCH_H */
