/*-------------------------------------------------------------------------
 *
 * genie_scan_ahead.h
 *	  A batch's first queries scanned while the backend reads the rest
 *	  (genie_scan_ahead.c): genie_knn_from reads its query rows from a
 *	  cursor, and the engine scans each piece of them as it is read, so that
 *	  reading and scanning overlap instead of following each other.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SCAN_AHEAD_H
#define GENIE_SCAN_AHEAD_H

#include "search/genie_search_values.h"

typedef struct GenieScanAhead GenieScanAhead;

/*
 * Query vectors of dim elements are scanned ahead in pieces of at least this
 * many rows (and GENIE_SCAN_AHEAD_PIECE_BYTES): each piece is an engine call,
 * and a call of fewer queries costs more a query.
 */
#define GENIE_SCAN_AHEAD_PIECE_ROWS		1024
#define GENIE_SCAN_AHEAD_PIECE_BYTES	((Size) 2 * 1024 * 1024)
/* The pieces' copies kept for the next pieces once scanned. */
#define GENIE_SCAN_AHEAD_SPARE			4

/*
 * A scan ahead of vector queries of dim elements, k nearest, on entry
 * (pinned by the caller until genie_scan_ahead_end), on genie.device's
 * engine: NULL where the batch would not be one exact in-process scan of
 * the entry's vectors (the genie service, the approximate modes, the
 * permutation index, a List of Clusters read, another dimension than the
 * entry's) or the thread cannot start; the caller then searches as usual.
 */
extern GenieScanAhead *genie_scan_ahead_begin(GenieCachedIndex *entry, int dim, int32 k);

/* The next n query vectors of the batch, copied: the engine scans them on its thread. */
extern void genie_scan_ahead_add(GenieScanAhead *ahead, const float *vectors, int n);

/*
 * The threads the caller reads the batch on while the pieces are scanned
 * (as genie.cpu_threads: 0 is every core): beside GPU scans, the cores
 * the scans' host side leaves.
 */
extern int	genie_scan_ahead_reading_threads(const GenieScanAhead *ahead);

/*
 * After the batch's last piece (nq queries in all): waits for the scans and
 * moves their rows into *first (palloc'd), as genie_search_values answers
 * the whole batch at genie_search_first_k(k, entry->n_objects); true.
 * False when a piece could not be scanned (out of memory, a GPU error, a
 * cancel): the caller searches the batch as usual, which reports it.
 */
extern bool genie_scan_ahead_finish(GenieScanAhead *ahead, int nq, GenieValueRows *first);

/*
 * Stops the scans (those under way are cancelled) and frees the scan
 * ahead; after finish too, and on every error path (PG_FINALLY), as the
 * thread reads the entry's values.
 */
extern void genie_scan_ahead_end(GenieScanAhead *ahead);

#endif							/* GENIE_SCAN_AHEAD_H */
