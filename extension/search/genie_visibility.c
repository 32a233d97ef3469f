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
 * Rows answered by the visibility map are also remembered in the index's
 * cache entry for the next batches (GenieAllVisibleMemo, below).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
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

/* the memo's: 10 bytes a row and 12 a heap page, beyond this none is kept */
#define GENIE_ALL_VISIBLE_MEMO_BYTES ((Size) 128 * 1024 * 1024)

/*
 * The rows found visible by the visibility map, kept in the index's cache
 * entry from one batch to the next (entry->all_visible_memo).
 *
 * A batch's checks pin every heap page its rows are on and read their line
 * pointers and tuple headers, cache misses over the buffer pool: genie_knn
 * of 10,000 Fashion-MNIST queries spent 11-14 ms of its 65-95 in them on an
 * H200 host (bench/latency.md), and the next batch over the same table
 * pinned the same pages to learn the same answers.  The map says when those
 * still hold: a row answered on an all-visible page keeps its answer while
 * its page's bit stays set and the map page's LSN is the one read when the
 * row was answered.
 *
 *	 - Every change to an existing line pointer, or to whether an existing
 *	   tuple is visible (update, delete, and the pruning and vacuuming
 *	   after them), clears the page's bit, under the page's exclusive lock
 *	   (on a standby, redo clears it just before), and an all-visible page
 *	   has nothing to prune.  The changes that leave the bit set (a row
 *	   lock, freezing, COPY FREEZE's rows added to a page) change neither.
 *	 - Setting a bit again is WAL-logged and stamps the map page with the
 *	   record's LSN (visibilitymap_set, and its redo on a standby), past any
 *	   LSN the page had.
 *
 * So with the bit set now and the map page's LSN what it was before the
 * row was answered (both read under the map page's share lock; the row was
 * answered with the bit set, under the heap page's lock), no bit of the map
 * page was set since, so the heap page's was not cleared since either, and
 * the row's line pointer and visible TID are as they were.  A changed LSN
 * (any of the map page's 32,672 heap pages set again) only costs a new
 * check.
 * A removed row's TID is never answered: it may be reused only once VACUUM
 * removed the index's entry, which makes a new index version and a new
 * entry.  Relations without WAL (unlogged, or new under wal_level =
 * minimal) stamp no LSN and keep no memo; nor does a serializable
 * transaction, whose rows are predicate-locked with their tuple's xmin.
 */
typedef struct GenieAllVisibleMemo
{
	GenieRelFile heap_file;		/* the heap's file its answers are of */
	int32		n_objects;
	BlockNumber n_blocks;		/* past the highest heap block of a row */
	uint32		last_check;		/* the latest page check's number; 0: none yet */
	/* by row: the page check that answered it (0: none), and its visible TID */
	uint32	   *object_check;
	ItemPointerData *tids;
	/* by heap block: its latest check, and the map page's LSN then */
	uint32	   *block_check;
	XLogRecPtr *block_lsn;
} GenieAllVisibleMemo;

/* The memo remembers nothing again (every row and page unchecked). */
static void
memo_forget(GenieAllVisibleMemo *memo)
{
	memset(memo->object_check, 0, sizeof(uint32) * memo->n_objects);
	memset(memo->block_check, 0, sizeof(uint32) * memo->n_blocks);
	memo->last_check = 0;
}

/*
 * The entry's memo of heap's rows, made at its first batch; NULL when the
 * entry's rows would take more than GENIE_ALL_VISIBLE_MEMO_BYTES or the
 * memory is not there.
 */
static GenieAllVisibleMemo *
all_visible_memo(GenieCachedIndex *entry, Relation heap)
{
	MemoryContext cxt = GetMemoryChunkContext(entry);
	GenieAllVisibleMemo *memo;
	BlockNumber n_blocks = 0;
	Size		bytes;
	int			flags = MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM | MCXT_ALLOC_ZERO;

	if (entry->all_visible_memo != NULL)
	{
		memo = entry->all_visible_memo;
		/*
		 * The heap moved to a new file since (ALTER TABLE SET TABLESPACE
		 * copies it, TIDs and all, and keeps the index): the rows are
		 * checked anew.
		 */
		if (!GenieRelFileEquals(memo->heap_file, GENIE_REL_FILE(heap)))
		{
			memo_forget(memo);
			memo->heap_file = GENIE_REL_FILE(heap);
		}
		return memo;
	}
	/* (refused once, for the entry's life: the scan below is not repeated every batch) */
	if (entry->all_visible_memo_refused)
		return NULL;
	entry->all_visible_memo_refused = true;
	for (int32 id = 0; id < entry->n_objects; id++)
		n_blocks = Max(n_blocks, ItemPointerGetBlockNumber(&entry->objects[id].tid) + 1);
	bytes = sizeof(GenieAllVisibleMemo) +
		(Size) entry->n_objects * (sizeof(uint32) + sizeof(ItemPointerData)) +
		(Size) n_blocks * (sizeof(uint32) + sizeof(XLogRecPtr));
	if (bytes > GENIE_ALL_VISIBLE_MEMO_BYTES)
		return NULL;
	memo = MemoryContextAllocExtended(cxt, sizeof(GenieAllVisibleMemo), flags);
	if (memo == NULL)
		return NULL;
	memo->heap_file = GENIE_REL_FILE(heap);
	memo->n_objects = entry->n_objects;
	memo->n_blocks = n_blocks;
	memo->object_check = MemoryContextAllocExtended(cxt, sizeof(uint32) * Max(entry->n_objects, 1), flags);
	memo->tids = MemoryContextAllocExtended(cxt, sizeof(ItemPointerData) * Max(entry->n_objects, 1), flags);
	memo->block_check = MemoryContextAllocExtended(cxt, sizeof(uint32) * Max(n_blocks, 1), flags);
	memo->block_lsn = MemoryContextAllocExtended(cxt, sizeof(XLogRecPtr) * Max(n_blocks, 1), flags);
	if (memo->object_check == NULL || memo->tids == NULL || memo->block_check == NULL ||
		memo->block_lsn == NULL)
	{
		void	   *parts[] = {memo->object_check, memo->tids, memo->block_check, memo->block_lsn, memo};

		for (int i = 0; i < lengthof(parts); i++)
			if (parts[i] != NULL)
				pfree(parts[i]);
		return NULL;
	}
	entry->all_visible_memo = memo;
	entry->all_visible_memo_refused = false;
	/* (the cache's budget sees it at its next load) */
	entry->bytes += bytes;
	return memo;
}

/*
 * Whether the map says heap block is all-visible, and its map page's LSN
 * (*lsn), read together under the map page's share lock.
 */
static bool
map_bit_and_lsn(GenieVisibility *vs, BlockNumber block, XLogRecPtr *lsn)
{
	bool		set;

	/* (pins the map page of block, so that the second read below stays on it) */
	if (!VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer))
		return false;
	LockBuffer(vs->vmbuffer, BUFFER_LOCK_SHARE);
	set = VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer);
	*lsn = PageGetLSN(BufferGetPage(vs->vmbuffer));
	LockBuffer(vs->vmbuffer, BUFFER_LOCK_UNLOCK);
	vs->seen_map_block = BufferGetBlockNumber(vs->vmbuffer);
	vs->seen_lsn = *lsn;
	return set;
}

/*
 * Whether the map page that vs->vmbuffer holds (heap block's, after a
 * VM_ALL_VISIBLE of it) was read by map_bit_and_lsn already in this call:
 * its LSN then is vs->seen_lsn.
 */
static inline bool
map_page_seen(GenieVisibility *vs)
{
	return BufferIsValid(vs->vmbuffer) && BufferGetBlockNumber(vs->vmbuffer) == vs->seen_map_block;
}

/*
 * The rows of ids (n of them, on heap page block, none known yet) that
 * the memo answers: marked visible at their remembered TID; their count.
 */
static int
answer_from_memo(GenieVisibility *vs, BlockNumber block, const int32 *ids, int n)
{
	GenieAllVisibleMemo *memo = vs->memo;
	XLogRecPtr	lsn;
	uint32		check;
	int			answered = 0;

	if (memo == NULL || block >= memo->n_blocks || memo->block_check[block] == 0)
		return 0;

	/*
	 * A map page's LSN only grows: remembered before the LSN this call saw,
	 * the page's rows no longer match (after a VACUUM, every page of the map
	 * page's misses here without a lock)
	 */
	if (!VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer) ||
		(map_page_seen(vs) && memo->block_lsn[block] < vs->seen_lsn))
		return 0;
	if (!map_bit_and_lsn(vs, block, &lsn) || lsn != memo->block_lsn[block])
		return 0;
	check = memo->block_check[block];
	for (int i = 0; i < n; i++)
		if (memo->object_check[ids[i]] == check)
		{
			vs->known[ids[i]] = 1;
			vs->visible_tids[ids[i]] = memo->tids[ids[i]];
			answered++;
		}
	return answered;
}

/*
 * The check number under which the rows of heap page block, which the
 * caller has share-locked and found all-visible, are remembered: the
 * page's last one while the map page's LSN is unchanged (the rows
 * remembered then still hold), else a new one (they no longer match).  0:
 * none is remembered.  Once the numbers run out the memo starts again.
 */
static uint32
memo_check(GenieVisibility *vs, BlockNumber block)
{
	GenieAllVisibleMemo *memo = vs->memo;
	XLogRecPtr	lsn;

	if (memo == NULL || block >= memo->n_blocks)
		return 0;

	/*
	 * An LSN this call read before the page was locked serves as well as
	 * one read now: unchanged later, it also shows no map bit set since the
	 * lock, so no change reached the page since (a change clears its bit,
	 * which only a set, stamping a newer LSN, makes visible again).  The
	 * caller has just found the bit set, with the map page in vmbuffer.
	 */
	if (map_page_seen(vs))
		lsn = vs->seen_lsn;
	else if (!map_bit_and_lsn(vs, block, &lsn))
		return 0;
	if (memo->block_check[block] != 0 && memo->block_lsn[block] == lsn)
		return memo->block_check[block];
	if (memo->last_check == PG_UINT32_MAX)
	{
		memo_forget(memo);
	}
	memo->block_check[block] = ++memo->last_check;
	memo->block_lsn[block] = lsn;
	return memo->block_check[block];
}

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
	vs->seen_map_block = InvalidBlockNumber;
	if (nq > 1 &&
		(Size) entry->n_objects * (1 + sizeof(ItemPointerData)) <= GENIE_VISIBILITY_CACHE_BYTES)
	{
		vs->known = palloc_extended(Max(entry->n_objects, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		vs->visible_tids = palloc_extended(sizeof(ItemPointerData) * Max(entry->n_objects, 1),
										   MCXT_ALLOC_HUGE);
		if (vs->use_map && RelationNeedsWAL(heap) && !IsolationIsSerializable())
			vs->memo = all_visible_memo(entry, heap);
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
	int			remembered = answer_from_memo(vs, block, ids, n);
	int			by_map = remembered;

	genie_explain_counts.all_visible_remembered += remembered;
	if (remembered < n && vs->use_map && VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer))
	{
		Buffer		buffer = ReadBuffer(vs->heap, block);
		Page		page;

		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		if (PageIsAllVisible(page) && VM_ALL_VISIBLE(vs->heap, block, &vs->vmbuffer))
		{
			OffsetNumber max = PageGetMaxOffsetNumber(page);
			/* (the bit just seen set, under the page's lock: what the memo's rows rest on) */
			uint32		check = memo_check(vs, block);

			for (int i = 0; i < n; i++)
			{
				OffsetNumber offset = ItemPointerGetOffsetNumber(&entry->objects[ids[i]].tid);
				ItemId		item;
				HeapTupleHeader tuple;
				bool		redirected = false;

				if (vs->known[ids[i]] != 0)
					continue;	/* the memo's */
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
				if (check != 0)
				{
					vs->memo->object_check[ids[i]] = check;
					vs->memo->tids[ids[i]] = vs->visible_tids[ids[i]];
				}
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
