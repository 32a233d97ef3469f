/*-------------------------------------------------------------------------
 *
 * genie_visibility.h
 *	  Which of a batch's result rows the caller's snapshot sees: each row
 *	  checked once per call, and the rows a batch will check looked at
 *	  ahead, page by page, rather than in result order.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_VISIBILITY_H
#define GENIE_VISIBILITY_H

#include "postgres.h"

#include "access/tableam.h"
#include "access/xlogdefs.h"
#include "executor/tuptable.h"
#include "storage/buf.h"
#include "utils/snapshot.h"

#include "search/genie_cache.h"

/*
 * Visibility checks of the rows of a batch of nq queries over heap:
 * whether object id is visible to the snapshot, and the TID of its visible
 * version.
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
	/* genie_visibility_check_ahead's bitmap of the ids to check, by id */
	uint64	   *wanted;

	/*
	 * A heap table and an MVCC snapshot: genie_visibility_check_ahead takes
	 * the rows of an all-visible page as visible from the visibility map, as
	 * an index-only scan does (vmbuffer: the map page it last read).
	 */
	Relation	heap;
	bool		use_map;
	Buffer		vmbuffer;

	/*
	 * The rows answered by the map in earlier batches, while their pages
	 * stay unchanged (the entry's, genie_visibility.c); NULL when none is
	 * kept (no per-call memory, no map, a relation without WAL, a
	 * serializable transaction).
	 */
	struct GenieAllVisibleMemo *memo;
	BlockNumber seen_map_block; /* the map page whose LSN this call read last */
	XLogRecPtr	seen_lsn;
} GenieVisibility;

extern void genie_visibility_begin(GenieVisibility *vs, GenieCachedIndex *entry, Relation heap,
								   Snapshot snapshot, int nq);
extern void genie_visibility_end(GenieVisibility *vs);
extern bool genie_object_visible(GenieVisibility *vs, GenieCachedIndex *entry, int32 id,
								 ItemPointer tid);

/*
 * Checks now the rows a batch is about to ask genie_object_visible about:
 * the first first_n of each query q's rows ids[offsets[q] .. offsets[q + 1])
 * (nq queries) whose visibility is not known yet, in id order.  An index
 * numbers its rows in the heap's order (a build reads the heap block by
 * block, a merge keeps the old order and appends the pending rows), so
 * consecutive checks mostly fall on the heap page already pinned, where
 * checking them in result order pins another page for almost every row.
 * A row on a page the visibility map marks all-visible is visible to every
 * MVCC snapshot: its answer comes from its line pointer, without reading
 * its tuple (the fetch's lock, HOT chain walk and visibility test).
 * Answers are those of asking row by row (rows answered by the map are
 * counted as all_visible, not heap_fetches, and those the memo of earlier
 * batches answered, without reading their page, also as
 * all_visible_remembered); without the per-call memory (one query, or a
 * huge index) it does nothing.
 */
extern void genie_visibility_check_ahead(GenieVisibility *vs, GenieCachedIndex *entry,
										 const int32 *ids, const int64 *offsets, int nq,
										 int64 first_n);

#endif							/* GENIE_VISIBILITY_H */
