/*-------------------------------------------------------------------------
 *
 * genie_vacuum.c
 *	  VACUUM of a genie index: ambulkdelete flags the objects of dead heap
 *	  tuples (scans exclude them); amvacuumcleanup compacts: it rewrites the
 *	  main postings without the dead objects and with the pending list merged
 *	  in, renumbering the objects densely.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "commands/vacuum.h"
#include "postmaster/autovacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "storage/genie_content.h"

/* Flags dead the live entries of one directory page whose TIDs callback reports. */
static int64
bulkdelete_directory_page(Relation index, Buffer buffer, IndexBulkDeleteCallback callback,
						  void *callback_state, int64 *live)
{
	Page		page = BufferGetPage(buffer);
	GenieObjectEntry *entries = (GenieObjectEntry *) GeniePageGetData(page);
	uint32		n = GeniePageGetOpaque(page)->n_entries;
	GenericXLogState *state = NULL;
	int64		removed = 0;

	for (uint32 i = 0; i < n; i++)
	{
		if (entries[i].flags & GENIE_OBJECT_DEAD)
			continue;
		if (callback(&entries[i].tid, callback_state))
		{
			if (state == NULL)
			{
				state = GenericXLogStart(index);
				page = GenericXLogRegisterBuffer(state, buffer, 0);
				entries = (GenieObjectEntry *) GeniePageGetData(page);
			}
			entries[i].flags |= GENIE_OBJECT_DEAD;
			removed++;
		}
		else
			(*live)++;
	}
	if (state != NULL)
		GenericXLogFinish(state);
	return removed;
}

static int64
bulkdelete_pending_page(Relation index, Buffer buffer, uint32 used,
						IndexBulkDeleteCallback callback, void *callback_state, int64 *live,
						int32 *last_object)
{
	Page		page = BufferGetPage(buffer);
	GenericXLogState *state = NULL;
	int64		removed = 0;
	Size		pos = 0;

	while (pos < used)
	{
		GeniePendingRecord *rec = (GeniePendingRecord *) (GeniePageGetData(page) + pos);
		Size		size = MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * rec->n_keywords);

		/*
		 * Every piece of an object carries its flags; count each object once
		 * (at its first piece) but flag all pieces.
		 */
		if (!(rec->flags & GENIE_OBJECT_DEAD) && callback(&rec->tid, callback_state))
		{
			if (state == NULL)
			{
				state = GenericXLogStart(index);
				page = GenericXLogRegisterBuffer(state, buffer, 0);
				rec = (GeniePendingRecord *) (GeniePageGetData(page) + pos);
			}
			rec->flags |= GENIE_OBJECT_DEAD;
			if (rec->object_id != *last_object)
				removed++;
		}
		else if (!(rec->flags & GENIE_OBJECT_DEAD) && rec->object_id != *last_object)
			(*live)++;
		*last_object = rec->object_id;
		pos += size;
	}
	if (state != NULL)
		GenericXLogFinish(state);
	return removed;
}

/*
 * Flags the objects of dead heap tuples.  The share content lock keeps
 * merges out; inserts may go on, appending beyond the committed end copied
 * here, and never for a TID in the dead list (its line pointer is not free
 * until this VACUUM is done).  Readers may see some flags early: they only
 * hide rows no snapshot can see.
 */
IndexBulkDeleteResult *
genie_ambulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				   IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	GenieMetaPageData meta;
	int64		removed = 0;
	int64		live = 0;
	int32		last_object = -1;
	BlockNumber blkno;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));

	GENIE_CONTENT_LOCK_SHARE(index);
	genie_read_meta(index, &meta);

	for (blkno = meta.directory.head; blkno != InvalidBlockNumber;)
	{
		Buffer		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
												info->strategy);
		BlockNumber next;

		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		removed += bulkdelete_directory_page(index, buffer, callback, callback_state, &live);
		next = blkno == meta.directory.tail ? InvalidBlockNumber
			: GeniePageGetOpaque(BufferGetPage(buffer))->next;
		UnlockReleaseBuffer(buffer);
		blkno = next;
		vacuum_delay_point();
	}
	for (blkno = meta.pending.head; blkno != InvalidBlockNumber;)
	{
		Buffer		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
												info->strategy);
		BlockNumber next;
		uint32		used;

		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		used = blkno == meta.pending.tail ? meta.pending_tail_bytes
			: GeniePageGetOpaque(BufferGetPage(buffer))->n_entries;
		removed += bulkdelete_pending_page(index, buffer, used, callback, callback_state, &live,
										   &last_object);
		next = blkno == meta.pending.tail ? InvalidBlockNumber
			: GeniePageGetOpaque(BufferGetPage(buffer))->next;
		UnlockReleaseBuffer(buffer);
		blkno = next;
		vacuum_delay_point();
	}

	if (removed > 0)
	{
		Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
		GenericXLogState *state;
		GenieMetaPage m;

		LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
		state = GenericXLogStart(index);
		m = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));
		m->n_dead += (int32) removed;
		m->stamp++;
		GenericXLogFinish(state);
		UnlockReleaseBuffer(metabuf);
	}
	GENIE_CONTENT_UNLOCK_SHARE(index);

	stats->tuples_removed += removed;
	stats->num_index_tuples = live;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	return stats;
}

/*
 * Rewrites the index without its dead objects and with the pending list
 * merged into the main postings.  The exclusive content lock keeps every
 * reader and writer out (they wait, cancellably) while the new chains are
 * written to free or new pages; one metapage record then switches to them,
 * and the old pages are recycled.  No buffer lock is held for long, so the
 * merge itself can be cancelled.
 */
void
genie_merge_pending(Relation index, bool wait)
{
	MemoryContext cxt;
	MemoryContext old;
	Buffer		metabuf;
	GenieIndexContent content;
	GenieMetaPageData before;
	GenieMetaPageData permutation;	/* the permutation and cluster-list fields */
	GenieChain	old_chains[3];
	int32	   *new_ids;
	int32		n_live = 0;
	GeniePostingsSorter *sorter;
	GenieChainWriter directory;
	GenieChainWriter stored;
	GenieChain	new_directory;
	GenieChain	new_values = {InvalidBlockNumber, InvalidBlockNumber, 0};
	int64		value_bytes = 0;
	GenieWrittenPostings written;
	GenericXLogState *state;
	Page		metapage;
	GenieMetaPage meta;

	if (wait)
		GENIE_CONTENT_LOCK_EXCLUSIVE(index);
	else if (!ConditionalLockPage(index, GENIE_METAPAGE_BLKNO, ExclusiveLock))
		return;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "genie merge context",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	genie_read_meta(index, &before);
	if (before.n_dead == 0 && before.n_objects == before.n_main_objects)
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		GENIE_CONTENT_UNLOCK_EXCLUSIVE(index);
		return;
	}
	genie_read_content(index, &content, true);
	genie_read_values(index, &content);
	if (content.values_stored)
		genie_chain_writer_init(&stored, index, GENIE_PAGE_VALUES, 1, true);

	/* dense renumbering of the live objects, in their old order */
	new_ids = MemoryContextAllocHuge(cxt, sizeof(int32) * Max(content.n_objects, 1));
	genie_chain_writer_init(&directory, index, GENIE_PAGE_DIRECTORY, sizeof(GenieObjectEntry),
							true);
	for (int32 id = 0; id < content.n_objects; id++)
	{
		if (content.objects[id].flags & GENIE_OBJECT_DEAD)
			new_ids[id] = -1;
		else
		{
			new_ids[id] = n_live++;
			genie_chain_writer_append(&directory, &content.objects[id], 1);
			if (content.values_stored)
			{
				int64		size = content.value_offsets[id + 1] - content.value_offsets[id];

				genie_values_append(&stored, content.value_data + content.value_offsets[id], size);
				value_bytes += sizeof(int32) + size;
			}
		}
		if ((id & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	new_directory = genie_chain_writer_finish(&directory);
	if (content.values_stored)
		new_values = genie_chain_writer_finish(&stored);

	sorter = genie_sorter_begin(maintenance_work_mem);
	for (int32 k = 0; k < content.n_keywords; k++)
	{
		for (int64 p = content.keyword_offsets[k]; p < content.keyword_offsets[k + 1]; p++)
		{
			int32		id = new_ids[content.postings[p]];

			if (id >= 0)
				genie_sorter_add(sorter, &content.keywords[k], 1, id);
		}
		CHECK_FOR_INTERRUPTS();
	}
	for (int32 id = content.n_main_objects; id < content.n_objects; id++)
	{
		int32		local = id - content.n_main_objects;
		int64		first = content.pending_offsets[local];

		if (new_ids[id] >= 0)
			genie_sorter_add(sorter, content.pending_keywords + first,
							 (int) (content.pending_offsets[local + 1] - first), new_ids[id]);
	}
	genie_sorter_write(sorter, index, true, &written);
	genie_permutation_merge(index, &before, &content, new_ids, n_live, &permutation, old_chains);
	genie_clusters_merge(index, &before, &content, new_ids, n_live, &permutation, &old_chains[2]);

	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	state = GenericXLogStart(index);
	metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
	/* a format-4 metapage ends before the fields written here */
	genie_metapage_set_lower(metapage);
	meta = GeniePageGetMeta(metapage);
	meta->directory = new_directory;
	genie_meta_set_postings(meta, &written);
	meta->pending.head = meta->pending.tail = InvalidBlockNumber;
	meta->pending.pages = 0;
	meta->pending_tail_bytes = 0;
	meta->pending_bytes = 0;
	meta->n_pending = 0;
	meta->n_objects = n_live;
	meta->n_main_objects = n_live;
	meta->n_dead = 0;
	if (content.values_stored)
	{
		meta->values = new_values;
		meta->value_bytes = value_bytes;
	}
	/* (genie.write_format = 4, a test hook, writes int32 postings: format 4 then) */
	if (permutation.permutants > 0 && meta->postings_codec == GENIE_POSTINGS_PACKED)
		meta->format_version = GENIE_FORMAT_PERMUTATION;
	meta->permutants = permutation.permutants;
	meta->permutation_seed = permutation.permutation_seed;
	meta->permutants_chosen = permutation.permutants_chosen;
	meta->permutant_bytes = permutation.permutant_bytes;
	meta->permutant_values = permutation.permutant_values;
	meta->permutations = permutation.permutations;
	if (permutation.cluster_size > 0 && meta->postings_codec == GENIE_POSTINGS_PACKED)
		meta->format_version = GENIE_FORMAT_CLUSTERS;
	meta->cluster_size = permutation.cluster_size;
	meta->supercluster_clusters = permutation.supercluster_clusters;
	meta->cluster_centres = permutation.cluster_centres;
	meta->cluster_list_bytes = permutation.cluster_list_bytes;
	meta->cluster_list = permutation.cluster_list;
	meta->main_version++;
	meta->stamp++;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(metabuf);

	genie_free_chain(index, before.directory);
	genie_free_chain(index, before.keywords);
	genie_free_chain(index, before.postings);
	genie_free_chain(index, before.pending);
	if (content.values_stored)
		genie_free_chain(index, before.values);
	for (int i = 0; i < 3; i++)
		if (old_chains[i].pages > 0)
			genie_free_chain(index, old_chains[i]);
	GENIE_CONTENT_UNLOCK_EXCLUSIVE(index);

	IndexFreeSpaceMapVacuum(index);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/* Marks the pages of a chain, up to its tail, in reachable[]. */
static void
mark_chain(Relation index, GenieChain chain, bool *reachable, BlockNumber npages)
{
	BlockNumber blkno = chain.head;

	while (blkno != InvalidBlockNumber && blkno < npages && !reachable[blkno])
	{
		Buffer		buffer;
		BlockNumber next;

		reachable[blkno] = true;
		if (blkno == chain.tail)
			break;
		buffer = ReadBuffer(index, blkno);
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		next = GeniePageGetOpaque(BufferGetPage(buffer))->next;
		UnlockReleaseBuffer(buffer);
		blkno = next;
	}
}

/*
 * Recycles every page no chain reaches: pages freed by a merge, and pages
 * left behind by a merge or insert that failed or crashed half-way.  Runs
 * under the exclusive content lock, so no chain is being written.
 */
static BlockNumber
reclaim_pages(IndexVacuumInfo *info)
{
	Relation	index = info->index;
	GenieMetaPageData meta;
	BlockNumber npages;
	BlockNumber free_pages = 0;
	bool	   *reachable;

	GENIE_CONTENT_LOCK_EXCLUSIVE(index);
	genie_read_meta(index, &meta);
	npages = RelationGetNumberOfBlocks(index);
	reachable = palloc0(sizeof(bool) * Max(npages, 1));
	reachable[GENIE_METAPAGE_BLKNO] = true;
	mark_chain(index, meta.directory, reachable, npages);
	mark_chain(index, meta.keywords, reachable, npages);
	mark_chain(index, meta.postings, reachable, npages);
	mark_chain(index, meta.pending, reachable, npages);
	if (GENIE_ENCODING_HAS_DICTIONARY(meta.encoding.kind))
		mark_chain(index, meta.rows.dictionary, reachable, npages);
	if (meta.values_stored)
		mark_chain(index, meta.values, reachable, npages);
	if (meta.permutants_chosen > 0)
	{
		mark_chain(index, meta.permutant_values, reachable, npages);
		mark_chain(index, meta.permutations, reachable, npages);
	}
	if (meta.cluster_list_bytes > 0)
		mark_chain(index, meta.cluster_list, reachable, npages);

	for (BlockNumber blkno = GENIE_METAPAGE_BLKNO + 1; blkno < npages; blkno++)
	{
		Buffer		buffer;
		Page		page;

		if (reachable[blkno])
			continue;
		/* no vacuum_delay_point(): it would sleep holding the exclusive lock */
		CHECK_FOR_INTERRUPTS();
		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL, info->strategy);
		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		page = BufferGetPage(buffer);
		if (!PageIsNew(page) && GeniePageGetOpaque(page)->kind != GENIE_PAGE_DELETED)
		{
			GenericXLogState *state = GenericXLogStart(index);

			genie_init_page(GenericXLogRegisterBuffer(state, buffer, GENERIC_XLOG_FULL_IMAGE),
							GENIE_PAGE_DELETED);
			GenericXLogFinish(state);
		}
		UnlockReleaseBuffer(buffer);
		RecordFreeIndexPage(index, blkno);
		free_pages++;
	}
	GENIE_CONTENT_UNLOCK_EXCLUSIVE(index);
	IndexFreeSpaceMapVacuum(index);
	pfree(reachable);
	return free_pages;
}

IndexBulkDeleteResult *
genie_amvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	Relation	index = info->index;
	GenieMetaPageData meta;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));

	/*
	 * A merge holds the content lock exclusively for as long as it rewrites
	 * the index, and PostgreSQL cancels an autovacuum worker that blocks
	 * anyone, so under autovacuum the merge (and the reclaim sweep) would
	 * mostly be cancelled half-way.  Autovacuum therefore only flags dead
	 * rows (ambulkdelete, which blocks nobody); scans exclude flagged rows,
	 * and the merge happens in a manual VACUUM or when inserts outgrow the
	 * pending list limit.
	 */
	if (!genie_am_autovacuum_worker())
	{
		genie_merge_pending(index, true);
		stats->pages_free = reclaim_pages(info);
	}

	genie_read_meta(index, &meta);
	stats->num_index_tuples = meta.n_objects - meta.n_dead;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	stats->estimated_count = false;
	return stats;
}

/* ---- an insert clearing the rows of another length that never were ---- */

/* The most objects an insert checks one by one in the heap. */
#define GENIE_REMOVE_DEAD_MAX_OBJECTS 10000

/*
 * Whether the row at tid can be seen by no transaction, here or on a
 * standby, without a record that tells a standby so: its line pointer is
 * dead (pruning, which logged its conflict horizon, made it so), or its
 * inserting transaction aborted (HeapTupleSatisfiesVacuum then calls it
 * dead and sets HEAP_XMIN_INVALID).  A row that was deleted is left to
 * VACUUM, whose pruning tells the standbys; so is anything else, or in
 * doubt.  No index lock is held here.
 */
static bool
tid_dead(Relation heap, BlockNumber nblocks, TransactionId oldest_xmin, ItemPointer tid)
{
	BlockNumber blkno = ItemPointerGetBlockNumber(tid);
	OffsetNumber off = ItemPointerGetOffsetNumber(tid);
	Buffer		buffer;
	Page		page;
	bool		dead = false;

	if (blkno >= nblocks)
		return false;
	buffer = ReadBuffer(heap, blkno);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	if (off >= FirstOffsetNumber && off <= PageGetMaxOffsetNumber(page))
	{
		ItemId		lp = PageGetItemId(page, off);

		if (ItemIdIsDead(lp))
			dead = true;
		else if (ItemIdIsNormal(lp))
		{
			HeapTupleData tuple;

			tuple.t_data = (HeapTupleHeader) PageGetItem(page, lp);
			tuple.t_len = ItemIdGetLength(lp);
			tuple.t_tableOid = RelationGetRelid(heap);
			tuple.t_self = *tid;
			dead = HeapTupleSatisfiesVacuum(&tuple, oldest_xmin, buffer) == HEAPTUPLE_DEAD &&
				HeapTupleHeaderXminInvalid(tuple.t_data) &&
				!HeapTupleHeaderIsHotUpdated(tuple.t_data);
		}
	}
	UnlockReleaseBuffer(buffer);
	return dead;
}

typedef struct DeadTids
{
	ItemPointerData *tids;		/* sorted */
	int64		n;
} DeadTids;

/* ambulkdelete's callback: the TIDs found dead beforehand, an in-memory lookup */
static bool
tid_in(ItemPointer tid, void *arg)
{
	DeadTids   *d = arg;

	return bsearch(tid, d->tids, d->n, sizeof(ItemPointerData), genie_tid_cmp) != NULL;
}

bool
genie_remove_dead_objects(Relation index, Relation heap)
{
	GenieMetaPageData meta;
	GenieIndexContent content;
	IndexVacuumInfo info;
	DeadTids	dead;
	MemoryContext cxt;
	MemoryContext old;
	BlockNumber nblocks;
	TransactionId oldest_xmin;
	bool		all = true;
	bool		empty = false;

	genie_read_meta(index, &meta);
	if (meta.n_objects == 0)
		return true;
	if (meta.n_objects > GENIE_REMOVE_DEAD_MAX_OBJECTS ||
		heap->rd_tableam != GetHeapamTableAmRoutine())
		return false;
	/*
	 * As VACUUM's own lock: never beside a VACUUM of the table, never
	 * waiting (an error releases it with the transaction's locks).
	 */
	if (!ConditionalLockRelation(heap, ShareUpdateExclusiveLock))
		return false;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "genie dead objects", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	GENIE_CONTENT_LOCK_SHARE(index);
	genie_read_content(index, &content, false);
	GENIE_CONTENT_UNLOCK_SHARE(index);

	/* the heap is read with no index lock held; one row that may be seen ends it */
	nblocks = RelationGetNumberOfBlocks(heap);
	oldest_xmin = GetOldestNonRemovableTransactionId(heap);
	dead.tids = palloc(sizeof(ItemPointerData) * Max(content.n_objects, 1));
	dead.n = 0;
	for (int32 o = 0; o < content.n_objects && all; o++)
	{
		CHECK_FOR_INTERRUPTS();
		if (content.objects[o].flags & GENIE_OBJECT_DEAD)
			continue;
		if (tid_dead(heap, nblocks, oldest_xmin, &content.objects[o].tid))
			dead.tids[dead.n++] = content.objects[o].tid;
		else
			all = false;
	}
	if (all)
	{
		qsort(dead.tids, dead.n, sizeof(ItemPointerData), genie_tid_cmp);
		memset(&info, 0, sizeof(info));
		info.index = index;
		info.message_level = DEBUG2;
		info.num_heap_tuples = -1;
		(void) genie_ambulkdelete(&info, NULL, tid_in, &dead);
		/* an insert since the content was read keeps a live object: no merge */
		genie_read_meta(index, &meta);
		if (meta.n_dead == meta.n_objects)
		{
			genie_merge_pending(index, false);
			genie_read_meta(index, &meta);
			empty = meta.n_objects == 0;
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	UnlockRelation(heap, ShareUpdateExclusiveLock);
	return empty;
}
