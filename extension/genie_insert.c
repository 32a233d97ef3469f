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
 * keywords do not fit on one page.  Each piece is one WAL record covering
 * the metapage and at most two pending pages.
 */
static void
append_pending(Relation index, Buffer metabuf, ItemPointer tid, uint16 flags,
			   const int32 *keywords, int n)
{
	int			done = 0;
	int32		object_id;

	object_id = GeniePageGetMeta(BufferGetPage(metabuf))->n_objects;
	if (object_id >= PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("genie index \"%s\" cannot hold more rows",
						RelationGetRelationName(index)),
				 errhint("REINDEX the index to reclaim the ids of deleted rows.")));

	do
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
		GenieMetaPage meta = GeniePageGetMeta(metapage);
		Buffer		tailbuf = InvalidBuffer;
		Buffer		newbuf = InvalidBuffer;
		Page		page = NULL;
		GeniePageOpaque opaque;
		Size		room = 0;
		int			piece;
		GeniePendingRecord *rec;

		if (meta->pending.tail != InvalidBlockNumber)
		{
			tailbuf = ReadBuffer(index, meta->pending.tail);
			LockBuffer(tailbuf, BUFFER_LOCK_EXCLUSIVE);
			page = GenericXLogRegisterBuffer(state, tailbuf, 0);
			room = GENIE_PAGE_CAPACITY - GeniePageGetOpaque(page)->n_entries;
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
				meta->pending.head = BufferGetBlockNumber(newbuf);
			meta->pending.tail = BufferGetBlockNumber(newbuf);
			meta->pending.pages++;
			page = newpage;
			room = GENIE_PAGE_CAPACITY;
		}

		opaque = GeniePageGetOpaque(page);
		piece = Min((int) ((room - GENIE_PENDING_HEADER_SIZE) / sizeof(int32)), n - done);
		rec = (GeniePendingRecord *) (GeniePageGetData(page) + opaque->n_entries);
		memset(rec, 0, GENIE_PENDING_HEADER_SIZE);
		rec->object_id = object_id;
		rec->tid = *tid;
		rec->flags = flags;
		rec->n_keywords = piece;
		memcpy((char *) rec + GENIE_PENDING_HEADER_SIZE, keywords + done, sizeof(int32) * piece);
		opaque->n_entries += MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * piece);
		((PageHeader) page)->pd_lower = (GeniePageGetData(page) + opaque->n_entries) - (char *) page;
		meta->pending_bytes += MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * piece);
		done += piece;
		if (done == n)
		{
			meta->n_objects++;
			meta->n_pending++;
		}
		meta->stamp++;

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

	if (!isnull[0])
		keywords = genie_int4_array_values(DatumGetArrayTypeP(values[0]), "indexed array", &n);

	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	append_pending(index, metabuf, ht_ctid, isnull[0] ? GENIE_OBJECT_NULL : 0, keywords, n);
	merge = GeniePageGetMeta(BufferGetPage(metabuf))->pending_bytes >
		(int64) pending_list_limit_kb(index) * 1024;
	UnlockReleaseBuffer(metabuf);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);

	if (merge)
		genie_merge_pending(index, NULL);
	return false;
}
