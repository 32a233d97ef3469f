/*-------------------------------------------------------------------------
 *
 * genie_insert.c
 *	  Inserting into a genie index: new rows go to the pending list (like
 *	  GIN's fast update), which scans include and which is merged into the
 *	  main postings by VACUUM or when it outgrows pending_list_limit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "genie_am.h"

static int
pending_list_limit_kb(Relation index)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	if (opts != NULL && opts->pending_list_limit > 0)
		return opts->pending_list_limit;
	return genie_pending_list_limit_kb;
}

/*
 * Appends one object's record to the pending list, in pieces when its
 * keywords do not fit on one page.  Each piece is one WAL record of at most
 * three pages; only the last one also updates the metapage, moving the
 * committed end past the whole object, so a crash or an error between
 * pieces leaves nothing a reader sees.  The caller holds the metapage
 * exclusively.
 */
static void
append_pending(Relation index, Buffer metabuf, ItemPointer tid, uint16 flags,
			   const int32 *keywords, int n)
{
	GenieMetaPage meta = GeniePageGetMeta(BufferGetPage(metabuf));
	int32		object_id = meta->n_objects;
	BlockNumber block = meta->pending.tail;
	uint32		offset = meta->pending_tail_bytes;
	BlockNumber head = meta->pending.head;
	int64		pages_added = 0;
	int64		bytes_added = 0;
	int			done = 0;

	if (object_id >= PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("genie index \"%s\" cannot hold more rows",
						RelationGetRelationName(index)),
				 errhint("REINDEX the index to reclaim the ids of deleted rows.")));

	do
	{
		GenericXLogState *state = GenericXLogStart(index);
		/* the metapage is registered first in every record: see genie_read_content */
		Page		metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
		Buffer		tailbuf = InvalidBuffer;
		Buffer		newbuf = InvalidBuffer;
		Page		page = NULL;
		GeniePageOpaque opaque;
		Size		room = 0;
		Size		size;
		int			piece;
		GeniePendingRecord *rec;

		if (block != InvalidBlockNumber)
		{
			if (block == GENIE_METAPAGE_BLKNO || block >= RelationGetNumberOfBlocks(index))
				ereport(ERROR,
						(errcode(ERRCODE_INDEX_CORRUPTED),
						 errmsg("genie index \"%s\" has a corrupt pending list",
								RelationGetRelationName(index)),
						 errhint("REINDEX the index.")));
			tailbuf = ReadBuffer(index, block);
			LockBuffer(tailbuf, BUFFER_LOCK_EXCLUSIVE);
			page = GenericXLogRegisterBuffer(state, tailbuf, 0);
			opaque = GeniePageGetOpaque(page);
			if (opaque->kind != GENIE_PAGE_PENDING || offset > GENIE_PAGE_CAPACITY)
				ereport(ERROR,
						(errcode(ERRCODE_INDEX_CORRUPTED),
						 errmsg("genie index \"%s\" has a corrupt pending list",
								RelationGetRelationName(index)),
						 errhint("REINDEX the index.")));
			/* drop whatever an interrupted insert left beyond the committed end */
			opaque->n_entries = offset;
			opaque->next = InvalidBlockNumber;
			room = GENIE_PAGE_CAPACITY - offset;
		}
		/* a piece needs its header and one keyword, unless there is none left */
		if (room < GENIE_PENDING_HEADER_SIZE + (n > done ? sizeof(int32) : 0))
		{
			Page		newpage;

			newbuf = genie_new_buffer(index);
			newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
			genie_init_page(newpage, GENIE_PAGE_PENDING);
			if (page != NULL)
				GeniePageGetOpaque(page)->next = BufferGetBlockNumber(newbuf);
			else
				head = BufferGetBlockNumber(newbuf);
			block = BufferGetBlockNumber(newbuf);
			offset = 0;
			pages_added++;
			page = newpage;
			room = GENIE_PAGE_CAPACITY;
		}

		opaque = GeniePageGetOpaque(page);
		piece = Min((int) ((room - GENIE_PENDING_HEADER_SIZE) / sizeof(int32)), n - done);
		size = MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * piece);
		rec = (GeniePendingRecord *) (GeniePageGetData(page) + offset);
		memset(rec, 0, GENIE_PENDING_HEADER_SIZE);
		rec->object_id = object_id;
		rec->tid = *tid;
		rec->flags = flags;
		rec->n_keywords = piece;
		if (piece > 0)
			memcpy((char *) rec + GENIE_PENDING_HEADER_SIZE, keywords + done, sizeof(int32) * piece);
		offset += size;
		opaque->n_entries = offset;
		((PageHeader) page)->pd_lower = (GeniePageGetData(page) + offset) - (char *) page;
		bytes_added += size;
		done += piece;

		if (done == n)
		{
			GenieMetaPage m = GeniePageGetMeta(metapage);

			m->pending.head = head;
			m->pending.tail = block;
			m->pending.pages += pages_added;
			m->pending_tail_bytes = offset;
			m->pending_bytes += bytes_added;
			m->n_objects++;
			m->n_pending++;
			m->stamp++;
		}
		GenericXLogFinish(state);
		if (BufferIsValid(tailbuf))
			UnlockReleaseBuffer(tailbuf);
		if (BufferIsValid(newbuf))
			UnlockReleaseBuffer(newbuf);
	} while (done < n);
}

bool
genie_aminsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			   Relation heapRel, IndexUniqueCheck checkUnique, bool indexUnchanged,
			   IndexInfo *indexInfo)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext,
												 "genie insert temporary context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	int32	   *keywords = NULL;
	int			n = 0;
	Buffer		metabuf;
	bool		merge;

	/* the encoding is fixed at build time: n may differ from the reloption now */
	if (!isnull[0])
		keywords = genie_encode_value(index, genie_index_encoding(index), values[0], &n);

	GENIE_CONTENT_LOCK_SHARE(index);
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	append_pending(index, metabuf, ht_ctid, isnull[0] ? GENIE_OBJECT_NULL : 0, keywords, n);
	merge = GeniePageGetMeta(BufferGetPage(metabuf))->pending_bytes >
		(int64) pending_list_limit_kb(index) * 1024;
	UnlockReleaseBuffer(metabuf);
	GENIE_CONTENT_UNLOCK_SHARE(index);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);

	/* merge unless another backend is merging or reading the index right now */
	if (merge)
		genie_merge_pending(index, false);
	return false;
}
