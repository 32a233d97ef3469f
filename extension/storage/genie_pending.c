/*-------------------------------------------------------------------------
 *
 * genie_pending.c
 *	  The pending list of a genie index: objects inserted since the last
 *	  merge, as GIN's fast update keeps them (ginfast.c).
 *
 * An insert appends one record (object id, TID, flags, keywords) at the
 * list's committed end, which the metapage keeps (pending.tail and
 * pending_tail_bytes); searches read the records up to it and count them
 * with the CPU engine beside the main postings.  When the list outgrows
 * pending_list_limit, the inserting backend merges it into the main
 * postings (genie_merge_pending, genie_vacuum.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "storage/genie_storage.h"
#include "storage/genie_pending.h"

int			genie_pending_list_limit_kb = 4096;

int
genie_pending_limit_kb(Relation index)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	if (opts != NULL && opts->pending_list_limit > 0)
		return opts->pending_list_limit;
	return genie_pending_list_limit_kb;
}

/*
 * Appends one object's record, in pieces when its keywords do not fit on
 * one page.  When the index stores values, the record's words are its
 * keywords, then its value's bytes (UTF-8 text, float4 elements) padded to
 * whole words, then the value's byte length (0 for a NULL value): readers
 * find the length in the last word and split the value off.  Each piece is one WAL record of at most three pages; only the
 * last one also updates the metapage, moving the committed end past the
 * whole object, so a crash or an error between pieces leaves nothing a
 * reader sees (the next append overwrites it).
 */
void
genie_pending_append(Relation index, Buffer metabuf, ItemPointer tid, uint16 flags,
					 const int32 *keywords, int n, const char *value, size_t value_size)
{
	GenieMetaPage meta = GeniePageGetMeta(BufferGetPage(metabuf));
	int32		object_id = meta->n_objects;
	BlockNumber block = meta->pending.tail;
	uint32		offset = meta->pending_tail_bytes;
	BlockNumber head = meta->pending.head;
	int64		pages_added = 0;
	int64		bytes_added = 0;
	int			done = 0;

	if (meta->values_stored)
	{
		/* the payload: keywords, the value's words, its byte length */
		int			value_words = (int) ((value_size + sizeof(int32) - 1) / sizeof(int32));
		int32	   *payload;

		if (value_size > (size_t) MaxAllocSize / 2)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a value of %zu bytes is too long for a genie index", value_size)));
		payload = palloc_extended(sizeof(int32) * ((Size) n + value_words + 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		if (n > 0)
			memcpy(payload, keywords, sizeof(int32) * n);
		if (value_size > 0)
			memcpy(payload + n, value, value_size);
		payload[n + value_words] = (int32) value_size;
		keywords = payload;
		n += value_words + 1;
	}

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
		GenieAppendSpot spot;
		Size		size;
		int			piece;
		GeniePendingRecord *rec;

		/* a piece needs its header and one keyword, unless there is none left */
		genie_chain_append_begin(state, index, GENIE_PAGE_PENDING, block, offset,
								 GENIE_PENDING_HEADER_SIZE + (n > done ? sizeof(int32) : 0),
								 &spot);
		if (spot.new_head)
			head = spot.block;
		if (spot.new_page)
			pages_added++;

		piece = Min((int) ((spot.room - GENIE_PENDING_HEADER_SIZE) / sizeof(int32)), n - done);
		size = MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * piece);
		rec = (GeniePendingRecord *) (GeniePageGetData(spot.page) + spot.offset);
		memset(rec, 0, GENIE_PENDING_HEADER_SIZE);
		rec->object_id = object_id;
		rec->tid = *tid;
		rec->flags = flags;
		rec->n_keywords = piece;
		if (piece > 0)
			memcpy((char *) rec + GENIE_PENDING_HEADER_SIZE, keywords + done, sizeof(int32) * piece);
		genie_chain_append_written(&spot, size);
		block = spot.block;
		offset = spot.offset;
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
		genie_chain_append_release(&spot);
	} while (done < n);
}

/*
 * Takes each pending object's value off the end of its words (see
 * genie_pending_append), leaving its keywords in the CSR, compacted.
 */
static void
split_pending_values(Relation index, GenieIndexContent *content, int32 n_pending)
{
	int64		total = 0;
	int64		kept = 0;

	content->pending_value_offsets = genie_alloc_huge(sizeof(int64) * (n_pending + 1));
	content->pending_value_offsets[0] = 0;
	for (int32 i = 0; i < n_pending; i++)
	{
		int64		begin = content->pending_offsets[i];
		int64		end = content->pending_offsets[i + 1];
		int64		size = end > begin ? content->pending_keywords[end - 1] : -1;
		int64		words = size >= 0 ? (size + 3) / 4 : 0;

		if (size < 0 || end - begin < words + 1)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" has a corrupt pending value",
							RelationGetRelationName(index))));
		total += size;
	}
	content->pending_value_data = genie_alloc_huge(Max(total, 1));
	total = 0;
	for (int32 i = 0; i < n_pending; i++)
	{
		int64		begin = content->pending_offsets[i];
		int64		end = content->pending_offsets[i + 1];
		int64		size = content->pending_keywords[end - 1];
		int64		words = (size + 3) / 4;
		int64		n_keywords = end - begin - words - 1;

		memcpy(content->pending_value_data + total, content->pending_keywords + begin + n_keywords,
			   size);
		total += size;
		content->pending_value_offsets[i + 1] = total;
		memmove(content->pending_keywords + kept, content->pending_keywords + begin,
				sizeof(int32) * n_keywords);
		content->pending_offsets[i] = kept;
		kept += n_keywords;
	}
	content->pending_offsets[n_pending] = kept;
	content->pending_value_bytes = total;
}

/*
 * Reads the committed pending records into content: their TIDs and flags after the
 * main objects, and their keywords as CSR by local pending id.
 */
void
genie_pending_read(Relation index, const GenieMetaPageData *meta, GenieIndexContent *content)
{
	int32		n_pending = meta->n_objects - meta->n_main_objects;
	int64		n_keywords = 0;
	int64		capacity = 1024;
	int32		current = -1;
	BlockNumber blkno = meta->pending.head;

	content->pending_offsets = genie_alloc_huge(sizeof(int64) * (n_pending + 1));
	content->pending_keywords = genie_alloc_huge(sizeof(int32) * capacity);
	content->pending_offsets[0] = 0;

	while (blkno != InvalidBlockNumber)
	{
		Buffer		buffer = ReadBuffer(index, blkno);
		Page		page;
		GeniePageOpaque opaque;
		Size		pos = 0;

		Size		used;

		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		genie_check_page(index, page, blkno, GENIE_PAGE_PENDING);
		opaque = GeniePageGetOpaque(page);
		/* on the tail, only the committed bytes: the rest may be an insert in progress */
		used = blkno == meta->pending.tail ? meta->pending_tail_bytes : opaque->n_entries;
		if (used > GENIE_PAGE_CAPACITY)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" has a corrupt pending list",
							RelationGetRelationName(index))));
		while (pos < used)
		{
			GeniePendingRecord *rec = (GeniePendingRecord *) (GeniePageGetData(page) + pos);

			if (pos + GENIE_PENDING_HEADER_SIZE > used || rec->n_keywords < 0 ||
				pos + GENIE_PENDING_HEADER_SIZE + sizeof(int32) * rec->n_keywords > used ||
				rec->object_id < meta->n_main_objects || rec->object_id >= meta->n_objects ||
				(rec->object_id != current && rec->object_id != current + 1 && current >= 0))
				ereport(ERROR,
						(errcode(ERRCODE_INDEX_CORRUPTED),
						 errmsg("genie index \"%s\" has a corrupt pending list",
								RelationGetRelationName(index))));
			if (rec->object_id != current)
			{
				/* a new object: close the previous one */
				if (current >= 0)
					content->pending_offsets[current - meta->n_main_objects + 1] = n_keywords;
				current = rec->object_id;
				content->objects[rec->object_id].tid = rec->tid;
				content->objects[rec->object_id].flags = rec->flags;
			}
			if (n_keywords + rec->n_keywords > capacity)
			{
				while (n_keywords + rec->n_keywords > capacity)
					capacity *= 2;
				content->pending_keywords = repalloc_huge(content->pending_keywords,
														  sizeof(int32) * capacity);
			}
			memcpy(content->pending_keywords + n_keywords,
				   (char *) rec + GENIE_PENDING_HEADER_SIZE, sizeof(int32) * rec->n_keywords);
			n_keywords += rec->n_keywords;
			pos += MAXALIGN(GENIE_PENDING_HEADER_SIZE + sizeof(int32) * rec->n_keywords);
		}
		blkno = blkno == meta->pending.tail ? InvalidBlockNumber : opaque->next;
		UnlockReleaseBuffer(buffer);
		CHECK_FOR_INTERRUPTS();
	}
	if (current >= 0)
		content->pending_offsets[current - meta->n_main_objects + 1] = n_keywords;
	if (n_pending > 0 && current != meta->n_objects - 1)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" is missing pending objects",
						RelationGetRelationName(index))));
	content->values_stored = meta->values_stored != 0;
	if (content->values_stored)
		split_pending_values(index, content, n_pending);
}

