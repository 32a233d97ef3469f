/*-------------------------------------------------------------------------
 *
 * genie_query_rows.h
 *	  The query rows of genie_knn_from (genie_query_rows.c): a query's rows,
 *	  one real[] or bit column, read from a cursor into one batch, the
 *	  compressed ones expanded on every core, and vectors scanned ahead
 *	  while the rest are read.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_QUERY_ROWS_H
#define GENIE_QUERY_ROWS_H

#include "search/genie_scan_ahead.h"

struct RowValue;

/* What genie_query_rows_read gathers: the rows' vectors or codes, grown as they come. */
typedef struct GenieQueryRows
{
	MemoryContext cxt;			/* the caller's: the rows outlive SPI */
	float	   *vectors;
	int64		capacity;		/* floats */
	int			n;				/* rows: those kept included */
	int			dim;
	bool		codes;			/* a bit column: the rows go to code_batch */
	GenieValueBatch code_batch;
	int64		code_capacity;	/* words */
	MemoryContext rows_cxt;		/* a real[] column: the rows kept, reset by read_kept_rows */
	struct RowValue *kept;		/* in rows_cxt, in the rows' order */
	int			n_kept;
	int			kept_room;
	Size		kept_bytes;
	GenieScanAhead *ahead;		/* NULL: none */
	int			handed;			/* rows handed to ahead */
} GenieQueryRows;

/*
 * Runs sql (read-only, as the caller) and gathers its rows into qr, in the
 * caller's memory context: a real[] column's into the batch of vectors, a
 * bit column's into code_batch (codes set).  With entry (the pinned
 * entry of the search the rows are for; NULL: none), pieces of vector
 * rows are scanned for their k nearest while the next are read
 * (genie_scan_ahead.h): then, when every piece was, true and *first the
 * first round's rows of the whole batch, as genie_search_values_visible
 * takes them.
 */
extern bool genie_query_rows_read(const char *sql, GenieCachedIndex *entry, int32 k,
								  GenieQueryRows *qr, GenieValueRows *first);

/* The vectors read, as a batch of queries (qr's arrays, not copied). */
extern void genie_query_rows_batch(const GenieQueryRows *qr, GenieValueBatch *batch);

/* Frees what qr holds (a search's attempt that will read again). */
extern void genie_query_rows_free(GenieQueryRows *qr);

#endif							/* GENIE_QUERY_ROWS_H */
