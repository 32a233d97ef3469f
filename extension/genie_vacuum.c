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
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "utils/memutils.h"

#include "genie_am.h"

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
bulkdelete_pending_page(Relation index, Buffer buffer, IndexBulkDeleteCallback callback,
						void *callback_state, int64 *live, int32 *last_object)
{
	Page		page = BufferGetPage(buffer);
	uint32		used = GeniePageGetOpaque(page)->n_entries;
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

IndexBulkDeleteResult *
genie_ambulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				   IndexBulkDeleteCallback callback, void *callback_state)
{
	Relation	index = info->index;
	Buffer		metabuf;
	GenieMetaPage meta;
	int64		removed = 0;
	int64		live = 0;
	int32		last_object = -1;
	BlockNumber blkno;
	GenericXLogState *state;

	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));

	/* writers and readers wait while the flags change */
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	meta = GeniePageGetMeta(BufferGetPage(metabuf));

	for (blkno = meta->directory.head; blkno != InvalidBlockNumber;)
	{
		Buffer		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
												info->strategy);

		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		removed += bulkdelete_directory_page(index, buffer, callback, callback_state, &live);
		blkno = GeniePageGetOpaque(BufferGetPage(buffer))->next;
		UnlockReleaseBuffer(buffer);
		vacuum_delay_point();
	}
	for (blkno = meta->pending.head; blkno != InvalidBlockNumber;)
	{
		Buffer		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL,
												info->strategy);

		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		removed += bulkdelete_pending_page(index, buffer, callback, callback_state, &live,
										   &last_object);
		blkno = GeniePageGetOpaque(BufferGetPage(buffer))->next;
		UnlockReleaseBuffer(buffer);
		vacuum_delay_point();
	}

	if (removed > 0)
	{
		state = GenericXLogStart(index);
		meta = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));
		meta->n_dead += (int32) removed;
		meta->stamp++;
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(metabuf);

	stats->tuples_removed += removed;
	stats->num_index_tuples = live;
	stats->num_pages = RelationGetNumberOfBlocks(index);
	return stats;
}

/*
 * Rewrites the index without its dead objects and with the pending list
 * merged into the main postings.  The metapage stays exclusively locked, so
 * no scan reads a half-written index and no insert interleaves; the new
 * chains go to free or new pages and replace the old ones in one metapage
 * update, after which the old pages are recycled.
 */
void
genie_merge_pending(Relation index, IndexBulkDeleteResult *stats)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "genie merge context",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	GenieIndexContent content;
	int32	   *new_ids;
	int32		n_live = 0;
	GeniePostingsSorter *sorter;
	GenieChainWriter directory;
	GenieChain	new_directory;
	GenieChain	new_keywords;
	GenieChain	new_postings;
	GenieChain	old_directory;
	GenieChain	old_keywords;
	GenieChain	old_postings;
	GenieChain	old_pending;
	int32		n_keywords;
	int64		n_postings;
	GenericXLogState *state;
	GenieMetaPage meta;

	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	genie_read_content_meta_locked(index, metabuf, &content);
	if (content.n_dead == 0 && content.n_objects == content.n_main_objects)
	{
		UnlockReleaseBuffer(metabuf);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		return;
	}

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
		}
	}
	new_directory = genie_chain_writer_finish(&directory);

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
	genie_sorter_write(sorter, index, true, &new_keywords, &new_postings, &n_keywords,
					   &n_postings);

	state = GenericXLogStart(index);
	meta = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));
	old_directory = meta->directory;
	old_keywords = meta->keywords;
	old_postings = meta->postings;
	old_pending = meta->pending;
	meta->directory = new_directory;
	meta->keywords = new_keywords;
	meta->postings = new_postings;
	meta->pending.head = meta->pending.tail = InvalidBlockNumber;
	meta->pending.pages = 0;
	meta->pending_bytes = 0;
	meta->n_pending = 0;
	meta->n_objects = n_live;
	meta->n_main_objects = n_live;
	meta->n_dead = 0;
	meta->n_keywords = n_keywords;
	meta->n_postings = n_postings;
	meta->stamp++;
	GenericXLogFinish(state);

	genie_free_chain(index, old_directory.head);
	genie_free_chain(index, old_keywords.head);
	genie_free_chain(index, old_postings.head);
	genie_free_chain(index, old_pending.head);
	UnlockReleaseBuffer(metabuf);

	IndexFreeSpaceMapVacuum(index);

	if (stats != NULL)
	{
		stats->num_index_tuples = n_live;
		stats->tuples_removed += 0;	/* counted by ambulkdelete */
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

IndexBulkDeleteResult *
genie_amvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	Relation	index = info->index;
	GenieIndexContent content;
	BlockNumber blkno;
	BlockNumber npages;
	BlockNumber free_pages = 0;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
		stats = palloc0(sizeof(IndexBulkDeleteResult));

	genie_merge_pending(index, stats);

	/* statistics of what is left */
	{
		Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
		GenieMetaPage meta;

		LockBuffer(metabuf, BUFFER_LOCK_SHARE);
		meta = GeniePageGetMeta(BufferGetPage(metabuf));
		memset(&content, 0, sizeof(content));
		stats->num_index_tuples = meta->n_objects - meta->n_dead;
		UnlockReleaseBuffer(metabuf);
	}
	npages = RelationGetNumberOfBlocks(index);
	for (blkno = GENIE_METAPAGE_BLKNO + 1; blkno < npages; blkno++)
	{
		Buffer		buffer;
		Page		page;

		vacuum_delay_point();
		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL, info->strategy);
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		if (PageIsNew(page) || GeniePageGetOpaque(page)->kind == GENIE_PAGE_DELETED)
		{
			RecordFreeIndexPage(index, blkno);
			free_pages++;
		}
		UnlockReleaseBuffer(buffer);
	}
	IndexFreeSpaceMapVacuum(index);
	stats->num_pages = npages;
	stats->pages_free = free_pages;
	stats->estimated_count = false;
	return stats;
}
