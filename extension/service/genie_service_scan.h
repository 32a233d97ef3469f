/*-------------------------------------------------------------------------
 *
 * genie_service_scan.h
 *	  A backend's requests about the main objects' stored values in the
 *	  genie service (genie_service_scan.c): their k-nearest scans, whole or
 *	  in pieces sent while the backend reads the next, and their range
 *	  searches.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SERVICE_SCAN_H
#define GENIE_SERVICE_SCAN_H

#include "service/genie_service_client.h"

/*
 * The k nearest main values of each query (same kind as the index's), in
 * (distance, length, id) order, over the values of the key's version
 * without the main objects in excluded (genie_strings_scan or
 * genie_vectors_scan in the worker, on the engine genie.device asks for;
 * vectors through the version's List of Clusters as list_use, the
 * backend's genie.cluster_list_knn, says); list_counts (NULL: not wanted)
 * gets the queries read through the list and their distances, the scan
 * then an engine call of its own (EXPLAIN (ANALYZE)).  rows->lengths is
 * palloc'd for vectors too.  NOT_RESIDENT: the worker does not hold them.
 */
extern GenieServiceOutcome genie_service_scan_values(const GenieServiceKey *key, Oid index_oid,
													 int device, const GenieValueBatch *queries,
													 int32 k, int list_use, int64 *list_counts,
													 const int32 *excluded,
													 int32 n_excluded, GenieValueRows *rows,
													 genie_engine_kind *engine,
													 bool *device_fallback, genie_error *err);

/* What a range search in the worker read and discarded (EXPLAIN's counts). */
typedef struct GenieWithinCounts
{
	int64		distances_computed;
	int64		superclusters_discarded;
	int64		clusters_discarded;
} GenieWithinCounts;

/*
 * The range search of the main objects' stored values in the worker:
 * every main object within radius of each query, skipping the excluded
 * main objects, in (distance, object) order per query, as
 * genie_value_set_within answers it (through the version's List of
 * Clusters when the index keeps one).  rows is palloc'd (lengths NULL);
 * *counts is what the worker read and discarded.  *too_large: the answer
 * is past what the service hands back (64 MB; rows incomplete), for the
 * caller to search in-process.
 * NOT_RESIDENT: the worker does not hold the values.
 */
extern GenieServiceOutcome genie_service_within(const GenieServiceKey *key, Oid index_oid, int device,
												const GenieValueBatch *queries, double radius,
												const int32 *excluded, int32 n_excluded,
												GenieValueRows *rows, GenieWithinCounts *counts,
												bool *too_large, genie_engine_kind *engine,
												bool *device_fallback, genie_error *err);

/*
 * A k-nearest scan of the main values sent in pieces (genie_scan_ahead.c:
 * the pieces of a stored array or of a query's rows): each piece's request
 * is out while the backend reads the next, and the rows are the ones
 * genie_service_scan_values gives the whole batch, with the same
 * arguments.
 */
typedef struct GenieServicePieces
{
	GenieServiceKey key;
	Oid			index_oid;
	int			device;
	int32		k;				/* as the worker is asked: at most the main objects */
	int			list_use;
	bool		list_counted;	/* EXPLAIN (ANALYZE): list_counts wanted */
	const int32 *excluded;
	int32		n_excluded;
	MemoryContext cxt;			/* the rows' */
	GenieValueRows rows;		/* of queries [0, n_answered) */
	int64		capacity;		/* rows' columns */
	int			offsets_room;	/* rows.offsets' */
	int			n_answered;
	int			n_out;			/* the queries of the piece out; 0: none */
	bool		failed;			/* a piece was not sent or not answered: no more are sent */
	genie_engine_kind engine;
	bool		device_fallback;
	int64		list_counts[2];
} GenieServicePieces;

/* A scan in pieces, as genie_service_scan_values would be asked; the rows in the current context. */
extern void genie_service_pieces_begin(GenieServicePieces *pieces, const GenieServiceKey *key,
									   Oid index_oid, int device, int32 k, int list_use,
									   bool list_counted, const int32 *excluded, int32 n_excluded);

/*
 * The next piece of queries (written into the segment: the caller may
 * reuse them; beside the piece before while the service searches that one,
 * where the segment allows): the answer to the piece before is taken, then
 * this one is sent and not waited for.  False when it was not sent: a piece
 * failed (the worker went away, does not hold the version, an engine
 * error) or its answer would be too large; the caller then searches the
 * batch as usual, which reports or handles what happened.
 */
extern bool genie_service_pieces_add(GenieServicePieces *pieces, const GenieValueBatch *piece);

/*
 * Waits for the last piece's answer; true when every piece's rows came
 * back (pieces->rows, n_answered queries).
 */
extern bool genie_service_pieces_finish(GenieServicePieces *pieces);

/*
 * Withdraws a piece still out (on every way out of an error, and after a
 * finish that was not reached) and frees the rows unless the caller took
 * them (rows.offsets set to NULL).
 */
extern void genie_service_pieces_end(GenieServicePieces *pieces);

#endif							/* GENIE_SERVICE_SCAN_H */
