/*-------------------------------------------------------------------------
 *
 * genie_visibility.c
 *	  Which of a batch's result rows the caller's snapshot sees (see
 *	  genie_visibility.h).
 *
 * A batch of 1,000 queries returns 10,000 to 100,000 rows, scattered over
 * the heap in the order of their scores: checked in that order, nearly
 * every check releases one heap page and pins and prunes another (a buffer
 * mapping lookup each), which made the checks as long as the engine call
 * (bench/latency.md).  genie_visibility_check_ahead takes the rows a round
 * will check and checks them in id order, so a page is pinned once for all
 * its rows; the round then finds each answer in the per-call memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "profile/genie_explain.h"
#include "search/genie_visibility.h"

/* the per-call memory: 7 bytes a row, beyond this every hit is checked */
#define GENIE_VISIBILITY_CACHE_BYTES ((Size) 256 * 1024 * 1024)

void
genie_visibility_begin(GenieVisibility *vs, GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
					   int nq)
{
	memset(vs, 0, sizeof(*vs));
	vs->snapshot = snapshot;
	vs->fetch = table_index_fetch_begin(heap);
	vs->slot = table_slot_create(heap, NULL);
	vs->heap = heap;
	vs->use_map = heap->rd_tableam == GetHeapamTableAmRoutine() && IsMVCCSnapshot(snapshot);
#if PG_VERSION_NUM < 170000

	/*
	 * With old_snapshot_threshold on, VACUUM may mark a page all-visible
	 * that an old snapshot still sees differently (index-only scans test
	 * their index pages for that): every row is fetched then.  PostgreSQL
	 * 17 has no such setting.
	 */
	vs->use_map = vs->use_map && !OldSnapshotThresholdActive();
#endif
	vs->vmbuffer = InvalidBuffer;
	if (nq > 1 &&
		(Size) entry->n_objects * (1 + sizeof(ItemPointerData)) <= GENIE_VISIBILITY_CACHE_BYTES)
	{
		vs->known = palloc_extended(Max(entry->n_objects, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		vs->visible_tids = palloc_extended(sizeof(ItemPointerData) * Max(entry->n_objects, 1),
										   MCXT_ALLOC_HUGE);
	}
}

void
genie_visibility_end(GenieVisibility *vs)
{
	if (BufferIsValid(vs->vmbuffer))
		ReleaseBuffer(vs->vmbuffer);
	ExecDropSingleTupleTableSlot(vs->slot);
	table_index_fetch_end(vs->fetch);
}

bool
genie_object_visible(GenieVisibility *vs, GenieCachedIndex *entry, int32 id, ItemPointer tid)
{
	bool		call_again = false;
	bool		all_dead = false;
	bool		visible;

	if (entry->objects[id].flags & GENIE_OBJECT_DEAD)
		return false;
	if (vs->known != NULL && vs->known[id] != 0)
	{
		*tid = vs->visible_tids[id];
		return vs->known[id] == 1;
	}
	*tid = entry->objects[id].tid;
	visible = table_index_fetch_tuple(vs->fetch, tid, vs->snapshot, vs->slot,
									  &call_again, &all_dead);
	genie_explain_counts.heap_fetches++;
	genie_explain_counts.invisible += !visible;
	if (vs->known != NULL)
	{
		vs->known[id] = visible ? 1 : 2;
		vs->visible_tids[id] = *tid;
	}
	return visible;
}

/*
 * The visibility of rows ids[0 .. n) (not known yet), all on heap page block.
 *
 * On a page the visibility map marks all-visible, every tuple is visible to
 * every MVCC snapshot (what index-only scans rely on), so a row's answer is
 * its line pointer's: a normal one is the visible version itself (the TID
 * the index holds is a HOT chain's root, and a root that a committed HOT
 * update replaced is not visible to all); a redirect leads to it, the
 * chain's only member left.  The map is read again once the page is share
 * locked: a writer clears the bit under the page's exclusive lock, in the
 * same hold as its change, so a row a writer added or updated and our
 * snapshot may not see shows the bit cleared; the page's own flag must
 * agree (a writer goes by it).  A serializable transaction locks each row
 * so answered, as the fetch did.  Anything else is fetched as before.
 */
static void
check_page(GenieVisibility *vs, GenieCachedIndex *entry, BlockNumber block, const int32 *ids, int n)
{
	int			by_map = 0;

	if (vs->use_map && VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer))
	{
		Buffer		buffer = ReadBuffer(vs->heap, block);
		Page		page;

		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		if (PageIsAllVisible(page) && VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer))
		{
			OffsetNumber max = PageGetMaxOffsetNumber(page);

			for (int i = 0; i < n; i++)
			{
				OffsetNumber offset = ItemPointerGetOffsetNumber(&entry->objects[ids[i]].tid);
				ItemId		item;
				HeapTupleHeader tuple;
				bool		redirected = false;

				if (offset < FirstOffsetNumber || offset > max)
					continue;
				item = PageGetItemId(page, offset);
				if (ItemIdIsRedirected(item))
				{
					offset = ItemIdGetRedirect(item);
					if (offset < FirstOffsetNumber || offset > max)
						continue;
					item = PageGetItemId(page, offset);
					redirected = true;
				}
				/* a chain starts at a tuple that is not heap-only; a redirect leads to one that is */
				if (!ItemIdIsNormal(item))
					continue;
				tuple = (HeapTupleHeader) PageGetItem(page, item);
				if (HeapTupleHeaderIsHeapOnly(tuple) != redirected)
					continue;
				vs->known[ids[i]] = 1;
				ItemPointerSet(&vs->visible_tids[ids[i]], block, offset);
				PredicateLockTID(vs->heap, &vs->visible_tids[ids[i]], vs->snapshot,
								 HeapTupleHeaderGetXmin(tuple));
				by_map++;
			}
		}
		UnlockReleaseBuffer(buffer);
	}
	genie_explain_counts.all_visible += by_map;
	/* the rest (or all, off the map) fetched one by one */
	for (int i = 0; by_map < n && i < n; i++)
		if (vs->known[ids[i]] == 0)
		{
			ItemPointerData tid;

			(void) genie_object_visible(vs, entry, ids[i], &tid);
		}
}

void
genie_visibility_check_ahead(GenieVisibility *vs, GenieCachedIndex *entry, const int32 *ids,
							 const int64 *offsets, int nq, int64 first_n)
{
	int64		words = ((int64) entry->n_objects + 63) / 64;
	int64		first = words;
	int64		last = -1;
	int64		checked = 0;

	if (vs->known == NULL)
		return;
	if (vs->wanted == NULL)
		vs->wanted = palloc_extended(sizeof(uint64) * Max(words, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	/* mark the rows not known yet (a dead row needs no check) */
	for (int q = 0; q < nq; q++)
	{
		int64		end = offsets[q + 1] - offsets[q] > first_n ? offsets[q] + first_n : offsets[q + 1];

		for (int64 i = offsets[q]; i < end; i++)
		{
			int32		id = ids[i];
			int64		w = id / 64;

			if (vs->known[id] != 0 || (entry->objects[id].flags & GENIE_OBJECT_DEAD))
				continue;
			vs->wanted[w] |= UINT64CONST(1) << (id % 64);
			first = Min(first, w);
			last = Max(last, w);
		}
		CHECK_FOR_INTERRUPTS();	/* a huge k makes this loop long too */
	}

	/* check them in id order, a heap page's rows together, clearing the marks as they go */
	{
		int32		run[MaxHeapTuplesPerPage];
		int			n_run = 0;
		BlockNumber run_block = InvalidBlockNumber;

		for (int64 w = first; w <= last; w++)
		{
			uint64		bits = vs->wanted[w];

			vs->wanted[w] = 0;
			while (bits != 0)
			{
				int32		id = (int32) (w * 64 + pg_rightmost_one_pos64(bits));
				BlockNumber block = ItemPointerGetBlockNumber(&entry->objects[id].tid);

				bits &= bits - 1;
				if (n_run > 0 && (block != run_block || n_run == lengthof(run)))
				{
					check_page(vs, entry, run_block, run, n_run);
					n_run = 0;
				}
				run_block = block;
				run[n_run++] = id;
				if ((++checked & 4095) == 0)
					CHECK_FOR_INTERRUPTS();
			}
		}
		if (n_run > 0)
			check_page(vs, entry, run_block, run, n_run);
	}
}
