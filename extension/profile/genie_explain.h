/*-------------------------------------------------------------------------
 *
 * genie_explain.h
 *	  What EXPLAIN (ANALYZE) says of a statement's genie work
 *	  (genie_explain.c): the searches and counts below, kept by the code
 *	  that does the work, and the time of each phase (genie_profile.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_EXPLAIN_H
#define GENIE_EXPLAIN_H

#include "postgres.h"

#include "genie/genie.h"

/* A backend's running counts: EXPLAIN (ANALYZE) shows their growth over its statement. */
typedef struct GenieExplainCounts
{
	int64		searches;		/* engine searches of postings or stored values */
	int64		queries;		/* queries in them */
	int64		largest_k;		/* the largest k asked (a maximum, not a sum) */
	int64		engine_rows;	/* rows the engines returned */
	int64		scan_rows;		/* rows index scans handed to the executor */
	int64		heap_fetches;	/* rows batch functions fetched from the heap */
	int64		invisible;		/* of those, rows the snapshot does not see */
	int64		all_visible;	/* rows they found visible by the visibility map, no fetch */
	int64		all_visible_remembered; /* of those, answered by earlier batches' (no page read) */
	int64		moves;			/* searches moved to a new index version */
	int64		permutation_candidates; /* rows the permutation index re-ranked */
	int64		permutation_hits;	/* its rows no farther than the exact k-th */
	int64		permutation_wanted; /* the exact search's rows */
	int64		range_distances;	/* distances range queries computed */
	int64		range_superclusters_discarded;	/* superclusters their lists skipped */
	int64		range_clusters_discarded;	/* clusters their lists skipped */
	int64		list_queries;	/* exact kNN queries answered through a List of Clusters */
	int64		list_distances; /* the distances they computed (centres and members) */
	int64		ahead_queries;	/* batch queries scanned while the batch was read */
	int64		ahead_pieces;	/* the engine calls that scanned them */
	int64		expanded_threads;	/* bytes of a stored batch's stream expanded on threads */
	int64		expanded_order; /* and in order */
	uint8		engines;		/* GENIE_EXPLAIN_* bits: where the searches ran */
} GenieExplainCounts;

#define GENIE_EXPLAIN_CPU_HERE		0x01
#define GENIE_EXPLAIN_GPU_HERE		0x02
#define GENIE_EXPLAIN_CPU_SERVICE	0x04
#define GENIE_EXPLAIN_GPU_SERVICE	0x08
#define GENIE_EXPLAIN_CPU_SHARED	0x10	/* here, over the service's shared postings */

extern GenieExplainCounts genie_explain_counts;

/*
 * One engine search of nq queries for the top k, returning rows rows, on
 * engine, by the service or here (shared: over the service's shared postings).
 */
extern void genie_explain_search(int nq, int64 k, int64 rows, genie_engine_kind engine, bool by_service,
								 bool shared);

/*
 * True while EXPLAIN (ANALYZE) runs a statement: the permutation index then
 * also runs the exact search, to report its recall.
 */
extern bool genie_explain_analyzing;

/*
 * A permutation search that re-ranked candidates rows, of whose rows hits
 * were no farther than the exact search's k-th of each query, out of
 * wanted (the exact rows).
 */
extern void genie_explain_permutation(int64 candidates, int64 hits, int64 wanted);

/* A range search that computed distances and skipped superclusters and clusters. */
extern void genie_explain_range(int64 distances, int64 superclusters_discarded,
								int64 clusters_discarded);

/* An exact kNN search that answered queries through a List of Clusters computing distances. */
extern void genie_explain_list(int64 queries, int64 distances);

/* A batch whose queries were scanned in pieces while it was read (genie_scan_ahead.h). */
extern void genie_explain_ahead(int64 queries, int64 pieces);

/*
 * Bytes of a stored batch's compressed stream expanded by genie
 * (genie_query_array.c): on threads, in order.
 */
extern void genie_explain_expanded(int64 on_threads, int64 in_order);

/* Installs the EXPLAIN hook (from _PG_init). */
extern void genie_explain_init(void);

#endif							/* GENIE_EXPLAIN_H */
