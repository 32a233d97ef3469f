/*-------------------------------------------------------------------------
 *
 * genie_scan_ahead.h
 *	  A batch's first queries scanned while the backend reads the rest
 *	  (genie_scan_ahead.c): genie_knn_from reads its query rows from a
 *	  cursor, genie_knn expands a stored array, and the engine scans each
 *	  piece of them as it is read, so that reading and scanning overlap
 *	  instead of following each other.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SCAN_AHEAD_H
#define GENIE_SCAN_AHEAD_H

#include "search/genie_search_values.h"

typedef struct GenieScanAhead GenieScanAhead;

/*
 * Query vectors are handed over in pieces of at least this many rows (and
 * GENIE_SCAN_AHEAD_PIECE_BYTES): each piece is an engine call, and a call
 * of fewer queries costs more a query.
 */
#define GENIE_SCAN_AHEAD_PIECE_ROWS		1024
#define GENIE_SCAN_AHEAD_PIECE_BYTES	((Size) 2 * 1024 * 1024)

/* The rows of a piece of vectors of dim elements: both of the above. */
static inline int
genie_scan_ahead_piece_rows(int dim)
{
	return (int) Max((int64) GENIE_SCAN_AHEAD_PIECE_ROWS,
					 (int64) (GENIE_SCAN_AHEAD_PIECE_BYTES / sizeof(float) / Max(dim, 1)));
}

/*
 * A scan ahead of vector queries, k nearest, on entry (pinned by the
 * caller until genie_scan_ahead_end), on genie.device's engine, made
 * before the caller reads a row (in-process, the entry's values are loaded
 * here): NULL where the batch would not be one exact scan of the entry's
 * vectors (the approximate modes, the permutation index), in-process where
 * a List of Clusters would be read or genie.cpu_threads gives one core,
 * and through the genie service while it is away, holds no main objects,
 * or a piece's answer would be past what it hands back; the caller then
 * searches as usual.  In-process, the thread starts with the first
 * piece; through the service, each piece is a request to it, out while
 * the caller reads the next.
 * (genie_query_rows_read and genie_query_array_read begin and end one.)
 */
extern GenieScanAhead *genie_scan_ahead_begin(GenieCachedIndex *entry, int32 k);

/*
 * The next n query vectors of dim elements, copied: the engine scans them
 * on its thread (or the service: the copy is its request's).  Rows of
 * another width than the entry's end the scans (the search reports them).
 * Waits while a few pieces are not scanned yet (through the service, for
 * the answer to the piece before).
 */
extern void genie_scan_ahead_add(GenieScanAhead *ahead, const float *vectors, int n, int dim);

/*
 * The same without the copy: the caller keeps the vectors, unchanged, until
 * genie_scan_ahead_end (a stored array expanded in place).
 */
extern void genie_scan_ahead_add_kept(GenieScanAhead *ahead, const float *vectors, int n, int dim);

/*
 * The threads the caller expands rows on (as genie.cpu_threads counts
 * them): while pieces are scanned, beside GPU scans the half of the cores
 * the scans' host side leaves, beside CPU scans one; else genie.cpu_threads.
 */
extern int	genie_scan_ahead_reading_threads(GenieScanAhead *ahead);

/*
 * After the batch's last piece (the nq queries of vectors in all): waits
 * for the scans and moves their rows into *first (palloc'd), as
 * genie_search_values answers the whole batch at genie_search_first_k(k,
 * entry->n_objects) (through the service: with the pending objects scanned
 * here), not yet counted as a search (genie_search_values_visible counts
 * them); true.
 * False when no piece was added or a piece could not be scanned (out of
 * memory, a GPU error, a cancel): the caller searches the batch as usual,
 * which reports it.
 */
extern bool genie_scan_ahead_finish(GenieScanAhead *ahead, const float *vectors, int nq,
									GenieValueRows *first);

/*
 * Stops the scans (those under way are cancelled, a request out is
 * withdrawn) and frees the scan ahead; after finish too, and on every
 * error path (PG_FINALLY), as the thread reads the entry's values.
 */
extern void genie_scan_ahead_end(GenieScanAhead *ahead);

#endif							/* GENIE_SCAN_AHEAD_H */
