/*-------------------------------------------------------------------------
 *
 * genie_storage.c
 *	  Pages and chains of pages of a genie index: making and freeing pages,
 *	  writing whole chains (build, merge), appending records at a chain's
 *	  committed end (pending list, dictionary), reading chains and the
 *	  metapage.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/indexfsm.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"

#include "storage/genie_storage.h"

void
genie_init_page(Page page, uint16 kind)
{
	GeniePageOpaque opaque;

	PageInit(page, BLCKSZ, sizeof(GeniePageOpaqueData));
	opaque = GeniePageGetOpaque(page);
	opaque->next = InvalidBlockNumber;
	opaque->n_entries = 0;
	opaque->kind = kind;
	opaque->page_id = GENIE_PAGE_ID;
}

static void
empty_chain(GenieChain *chain)
{
	chain->head = InvalidBlockNumber;
	chain->tail = InvalidBlockNumber;
	chain->pages = 0;
}

int			genie_write_format = GENIE_FORMAT_WRITTEN;

void
genie_init_metapage(Page page, int32 split_length, const GenieEncoding *encoding)
{
	GenieMetaPage meta;

	genie_init_page(page, GENIE_PAGE_META);
	meta = GeniePageGetMeta(page);
	memset(meta, 0, sizeof(GenieMetaPageData));
	meta->magic = GENIE_MAGIC;
	meta->format_version = genie_write_format;
	meta->postings_codec = genie_write_format >= 5 ? GENIE_POSTINGS_PACKED : GENIE_POSTINGS_INT32;
	meta->stamp = 1;
	meta->split_length = split_length;
	meta->encoding = *encoding;
	empty_chain(&meta->directory);
	empty_chain(&meta->keywords);
	empty_chain(&meta->postings);
	empty_chain(&meta->pending);
	empty_chain(&meta->values);
	genie_metapage_set_lower(page);
	/* format 4's metapage ended before the postings codec */
	if (genie_write_format < 5)
		((PageHeader) page)->pd_lower -= sizeof(GenieMetaPageData) -
			offsetof(GenieMetaPageData, postings_codec);
}

/*
 * pd_lower just past the metapage's content: full-page images leave out the
 * unused middle of the page, and GenericXLog logs what lies below it.  A
 * metapage written by a genie whose GenieMetaPageData was shorter must get
 * it before fields beyond its old end are changed under WAL.
 */
void
genie_metapage_set_lower(Page page)
{
	((PageHeader) page)->pd_lower = (char *) GeniePageGetMeta(page) + sizeof(GenieMetaPageData) -
		(char *) page;
}

/*
 * A new or recycled page, pinned and exclusively locked.  Free pages come
 * from the free space map, where compaction records the pages it released.
 */
Buffer
genie_new_buffer(Relation index)
{
	Buffer		buffer;
	bool		needLock;

	for (;;)
	{
		BlockNumber blkno = GetFreeIndexPage(index);

		if (blkno == InvalidBlockNumber)
			break;
		buffer = ReadBuffer(index, blkno);
		/* another backend may be taking the same page: only take it if it is free */
		if (ConditionalLockBuffer(buffer))
		{
			Page		page = BufferGetPage(buffer);

			if (PageIsNew(page) ||
				GeniePageGetOpaque(page)->kind == GENIE_PAGE_DELETED)
				return buffer;
			LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
		}
		ReleaseBuffer(buffer);
	}

	needLock = !RELATION_IS_LOCAL(index);
	if (needLock)
		LockRelationForExtension(index, ExclusiveLock);
	buffer = ReadBuffer(index, P_NEW);
	LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
	if (needLock)
		UnlockRelationForExtension(index, ExclusiveLock);
	return buffer;
}

/*
 * Marks every page of a chain deleted and hands it to the free space map.
 * It stops at the chain's tail: the tail's next link may be stale.
 */
void
genie_free_chain(Relation index, GenieChain chain)
{
	BlockNumber blkno = chain.head;

	while (blkno != InvalidBlockNumber)
	{
		Buffer		buffer = ReadBuffer(index, blkno);
		GenericXLogState *state;
		Page		page;
		BlockNumber next;

		LockBuffer(buffer, BUFFER_LOCK_EXCLUSIVE);
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buffer, GENERIC_XLOG_FULL_IMAGE);
		next = blkno == chain.tail ? InvalidBlockNumber : GeniePageGetOpaque(page)->next;
		genie_init_page(page, GENIE_PAGE_DELETED);
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buffer);
		RecordFreeIndexPage(index, blkno);
		blkno = next;
	}
}

/* ---- writing chains of fixed-size entries ---- */

void
genie_chain_writer_init(GenieChainWriter *w, Relation index, uint16 kind, Size entry_size,
						bool wal)
{
	w->index = index;
	w->kind = kind;
	w->entry_size = entry_size;
	w->buffer = InvalidBuffer;
	w->wal = wal;
	empty_chain(&w->chain);
}

static int
entries_per_page(GenieChainWriter *w)
{
	return GENIE_PAGE_CAPACITY / w->entry_size;
}

static void
set_pd_lower(Page page, Size used)
{
	((PageHeader) page)->pd_lower = (GeniePageGetData(page) + used) - (char *) page;
}

/*
 * Writes out the current page (locked by the caller), linking it to next,
 * and lets it go.  With WAL the page is logged whole: its content is new.
 */
static void
flush_page(GenieChainWriter *w, BlockNumber next)
{
	Page		page;
	GenericXLogState *state = NULL;

	if (w->wal)
	{
		state = GenericXLogStart(w->index);
		/* the registered copy starts as the content written so far */
		page = GenericXLogRegisterBuffer(state, w->buffer, GENERIC_XLOG_FULL_IMAGE);
	}
	else
		page = BufferGetPage(w->buffer);

	GeniePageGetOpaque(page)->next = next;
	set_pd_lower(page, GeniePageGetOpaque(page)->n_entries * w->entry_size);

	if (w->wal)
		GenericXLogFinish(state);
	else
		MarkBufferDirty(w->buffer);
	UnlockReleaseBuffer(w->buffer);
	w->buffer = InvalidBuffer;
}

/* Starts a new page; it stays locked, as the previous one was. */
static void
start_page(GenieChainWriter *w)
{
	Buffer		buffer = genie_new_buffer(w->index);
	BlockNumber blkno = BufferGetBlockNumber(buffer);

	if (BufferIsValid(w->buffer))
		flush_page(w, blkno);
	else
		w->chain.head = blkno;
	/*
	 * The page is filled through its buffer; with WAL it is logged as a full
	 * image when flushed.  Until the metapage links the chain nobody reads it,
	 * and a page left behind by an error is reclaimed by VACUUM.
	 */
	genie_init_page(BufferGetPage(buffer), w->kind);
	w->buffer = buffer;
	w->chain.tail = blkno;
	w->chain.pages++;
}

/*
 * Buffer locks are taken only inside each call, so that a long build can
 * still be cancelled between calls.
 */
void
genie_chain_writer_append(GenieChainWriter *w, const void *entries, int64 count)
{
	const char *src = entries;
	int			per_page = entries_per_page(w);

	if (count <= 0)
		return;
	if (BufferIsValid(w->buffer))
		LockBuffer(w->buffer, BUFFER_LOCK_EXCLUSIVE);
	while (count > 0)
	{
		Page		page;
		GeniePageOpaque opaque;
		int64		room;
		int64		n;

		if (!BufferIsValid(w->buffer) ||
			GeniePageGetOpaque(BufferGetPage(w->buffer))->n_entries >= (uint32) per_page)
			start_page(w);
		page = BufferGetPage(w->buffer);
		opaque = GeniePageGetOpaque(page);
		room = per_page - opaque->n_entries;
		n = Min(room, count);
		memcpy(GeniePageGetData(page) + opaque->n_entries * w->entry_size, src,
			   n * w->entry_size);
		opaque->n_entries += n;
		src += n * w->entry_size;
		count -= n;
	}
	LockBuffer(w->buffer, BUFFER_LOCK_UNLOCK);
}

GenieChain
genie_chain_writer_finish(GenieChainWriter *w)
{
	if (BufferIsValid(w->buffer))
	{
		LockBuffer(w->buffer, BUFFER_LOCK_EXCLUSIVE);
		flush_page(w, InvalidBlockNumber);
	}
	return w->chain;
}

/* ---- reading ---- */

void *
genie_alloc_huge(Size size)
{
	return MemoryContextAllocHuge(CurrentMemoryContext, Max(size, 1));
}

void
genie_check_page(Relation index, Page page, BlockNumber blkno, uint16 kind)
{
	GeniePageOpaque opaque = GeniePageGetOpaque(page);

	if (PageIsNew(page) || opaque->page_id != GENIE_PAGE_ID || opaque->kind != kind)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has an unexpected page at block %u",
						RelationGetRelationName(index), blkno),
				 errhint("REINDEX the index.")));
}

int64
genie_chain_walk(Relation index, GenieChain chain, Size entry_size, int64 expected,
				 GenieChainPageFn each, void *arg)
{
	int64		n = 0;
	BlockNumber blkno = chain.head;
	uint16		kind = 0;
	/*
	 * A chain larger than a quarter of shared_buffers is read through a ring
	 * of buffers, as PostgreSQL's own large sequential scans are, so that it
	 * does not push everything else out; a smaller one stays cached.
	 */
	double		pages = (double) expected * entry_size / GENIE_PAGE_CAPACITY;
	BufferAccessStrategy strategy = pages > NBuffers / 4 ? GetAccessStrategy(BAS_BULKREAD) : NULL;

	while (blkno != InvalidBlockNumber)
	{
		Buffer		buffer = ReadBufferExtended(index, MAIN_FORKNUM, blkno, RBM_NORMAL, strategy);
		Page		page;
		GeniePageOpaque opaque;

		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		opaque = GeniePageGetOpaque(page);
		if (kind == 0)
			kind = opaque->kind;
		genie_check_page(index, page, blkno, kind);
		if (n + opaque->n_entries > expected ||
			opaque->n_entries * entry_size > GENIE_PAGE_CAPACITY)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" holds more entries than its metapage says",
							RelationGetRelationName(index))));
		each(arg, GeniePageGetData(page), opaque->n_entries * entry_size);
		n += opaque->n_entries;
		blkno = blkno == chain.tail ? InvalidBlockNumber : opaque->next;
		UnlockReleaseBuffer(buffer);
		/* a large index takes a while to read: a cancel is served between pages */
		CHECK_FOR_INTERRUPTS();
	}
	if (strategy != NULL)
		FreeAccessStrategy(strategy);
	if (n != expected)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" holds fewer entries than its metapage says",
						RelationGetRelationName(index))));
	return n;
}

/* genie_chain_read's page copy: appends a page's entries to the output. */
typedef struct ChainCopy
{
	char	   *out;
	Size		used;
} ChainCopy;

static void
copy_page_entries(void *arg, const char *data, Size bytes)
{
	ChainCopy  *c = arg;

	memcpy(c->out + c->used, data, bytes);
	c->used += bytes;
}

void *
genie_chain_read(Relation index, GenieChain chain, Size entry_size, int64 expected,
				 int64 *count)
{
	ChainCopy	c = {genie_alloc_huge(expected * entry_size), 0};

	*count = genie_chain_walk(index, chain, entry_size, expected, copy_page_entries, &c);
	return c.out;
}

void
genie_check_metapage(Relation index, Page page)
{
	GenieMetaPage meta = GeniePageGetMeta(page);

	if (PageIsNew(page) || meta->magic != GENIE_MAGIC)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("\"%s\" is not a genie index", RelationGetRelationName(index))));
	if (meta->format_version < GENIE_FORMAT_VERSION_MIN ||
		meta->format_version > GENIE_FORMAT_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has on-disk format %u, this genie reads %u to %u",
						RelationGetRelationName(index), meta->format_version,
						GENIE_FORMAT_VERSION_MIN, GENIE_FORMAT_VERSION),
				 errhint("REINDEX the index.")));
	if (meta->postings_codec != (meta->format_version >= 5 ? GENIE_POSTINGS_PACKED : GENIE_POSTINGS_INT32))
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has postings codec %u, unknown in format %u",
						RelationGetRelationName(index), meta->postings_codec,
						meta->format_version),
				 errhint("REINDEX the index.")));
}

void
genie_read_meta(Relation index, GenieMetaPageData *meta)
{
	Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	Page		page;

	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(metabuf);
	genie_check_metapage(index, page);
	memcpy(meta, GeniePageGetMeta(page), sizeof(GenieMetaPageData));
	UnlockReleaseBuffer(metabuf);
}

uint64
genie_read_stamp(Relation index)
{
	Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	uint64		stamp;

	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	stamp = GeniePageGetMeta(BufferGetPage(metabuf))->stamp;
	UnlockReleaseBuffer(metabuf);
	return stamp;
}

/* ---- appending records at a chain's committed end ---- */

static const char *
chain_name(uint16 kind)
{
	switch (kind)
	{
		case GENIE_PAGE_PENDING:
			return "pending list";
		case GENIE_PAGE_DICTIONARY:
			return "dictionary";
		default:
			return "page chain";
	}
}

static void
append_corrupt(Relation index, uint16 kind)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("genie index \"%s\" has a corrupt %s",
					RelationGetRelationName(index), chain_name(kind)),
			 errhint("REINDEX the index.")));
}

void
genie_chain_append_begin(GenericXLogState *state, Relation index, uint16 kind,
						 BlockNumber tail, uint32 tail_bytes, Size min_room,
						 GenieAppendSpot *spot)
{
	memset(spot, 0, sizeof(*spot));
	spot->index = index;
	spot->tailbuf = InvalidBuffer;
	spot->newbuf = InvalidBuffer;
	spot->block = tail;
	spot->offset = tail_bytes;
	if (tail != InvalidBlockNumber)
	{
		GeniePageOpaque opaque;

		if (tail == GENIE_METAPAGE_BLKNO || tail >= RelationGetNumberOfBlocks(index))
			append_corrupt(index, kind);
		spot->tailbuf = ReadBuffer(index, tail);
		LockBuffer(spot->tailbuf, BUFFER_LOCK_EXCLUSIVE);
		spot->page = GenericXLogRegisterBuffer(state, spot->tailbuf, 0);
		opaque = GeniePageGetOpaque(spot->page);
		if (opaque->kind != kind || tail_bytes > GENIE_PAGE_CAPACITY)
			append_corrupt(index, kind);
		/* drop whatever an interrupted write left beyond the committed end */
		opaque->n_entries = tail_bytes;
		opaque->next = InvalidBlockNumber;
		spot->room = GENIE_PAGE_CAPACITY - tail_bytes;
	}
	if (spot->page == NULL || spot->room < min_room)
	{
		Page		newpage;

		spot->newbuf = genie_new_buffer(index);
		newpage = GenericXLogRegisterBuffer(state, spot->newbuf, GENERIC_XLOG_FULL_IMAGE);
		genie_init_page(newpage, kind);
		spot->block = BufferGetBlockNumber(spot->newbuf);
		if (spot->page != NULL)
			GeniePageGetOpaque(spot->page)->next = spot->block;
		else
			spot->new_head = true;
		spot->new_page = true;
		spot->page = newpage;
		spot->offset = 0;
		spot->room = GENIE_PAGE_CAPACITY;
	}
}

void
genie_chain_append_written(GenieAppendSpot *spot, Size size)
{
	Assert(size <= spot->room);
	spot->offset += size;
	spot->room -= size;
	GeniePageGetOpaque(spot->page)->n_entries = spot->offset;
	((PageHeader) spot->page)->pd_lower = (GeniePageGetData(spot->page) + spot->offset) -
		(char *) spot->page;
}

void
genie_chain_append_release(GenieAppendSpot *spot)
{
	if (BufferIsValid(spot->tailbuf))
		UnlockReleaseBuffer(spot->tailbuf);
	if (BufferIsValid(spot->newbuf))
		UnlockReleaseBuffer(spot->newbuf);
	spot->tailbuf = spot->newbuf = InvalidBuffer;
}
