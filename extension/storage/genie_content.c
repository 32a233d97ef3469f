/*-------------------------------------------------------------------------
 *
 * genie_content.c
 *	  The decoded content of a genie index: the main postings (directory,
 *	  Position Map, List Array) and the pending list, read in one consistent
 *	  state for the cache and for merges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "genie/genie.h"
#include "storage/genie_storage.h"
#include "storage/genie_content.h"
#include "storage/genie_pending.h"

bool		genie_content_version_gone = false;

/* The main Position Map (keywords and their postings counts) as of meta. */
static void
read_position_map(Relation index, const GenieMetaPageData *meta, GenieIndexContent *content)
{
	int64		count;
	GenieKeywordEntry *keyword_entries;

	keyword_entries = genie_chain_read(index, meta->keywords, sizeof(GenieKeywordEntry),
									   meta->n_keywords, &count);
	content->keywords = genie_alloc_huge(sizeof(int32) * content->n_keywords);
	content->keyword_offsets = genie_alloc_huge(sizeof(int64) * (content->n_keywords + 1));
	content->keyword_offsets[0] = 0;
	for (int32 i = 0; i < content->n_keywords; i++)
	{
		/* a damaged page: later readers index the postings by these offsets */
		if (keyword_entries[i].count < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" has a negative postings count for keyword %d",
							RelationGetRelationName(index), keyword_entries[i].keyword),
					 errhint("REINDEX the index.")));
		content->keywords[i] = keyword_entries[i].keyword;
		content->keyword_offsets[i + 1] = content->keyword_offsets[i] + keyword_entries[i].count;
	}
	pfree(keyword_entries);
	if (content->keyword_offsets[content->n_keywords] != content->n_postings)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has inconsistent postings counts",
						RelationGetRelationName(index))));
}

/* The main Position Map and List Array as of meta. */
static void
read_main_postings(Relation index, const GenieMetaPageData *meta, GenieIndexContent *content)
{
	int64		count;

	read_position_map(index, meta, content);
	if (meta->postings_codec == GENIE_POSTINGS_INT32)
		content->postings = genie_chain_read(index, meta->postings, sizeof(int32),
											 meta->n_postings, &count);
	else
	{
		uint8	   *packed = genie_chain_read(index, meta->postings, 1, meta->postings_bytes,
											  &count);
		genie_error err;
		genie_status status;

		content->postings = genie_alloc_huge(sizeof(int32) * Max(content->n_postings, 1));
		status = genie_postings_unpack(packed, (size_t) count, content->n_keywords,
									   content->keyword_offsets, meta->n_main_objects,
									   content->postings, content->n_postings,
									   genie_cancel_requested, NULL, &err);

		if (status == GENIE_CANCELLED)
			genie_report_error(&err, "genie: reading the postings");
		if (status != GENIE_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" has corrupt postings", RelationGetRelationName(index)),
					 errdetail("%s", err.message),
					 errhint("REINDEX the index.")));
		pfree(packed);
	}
}

/*
 * A copy of the metapage for a reader of several chains.  On a standby the
 * content lock excludes nothing (heavyweight locks are not replayed), so the
 * metapage stays share-locked for the whole read (returned in *metabuf, to
 * be released by the caller): replay of a merge's switch then waits.  Every
 * WAL record that touches the metapage and other pages registers the
 * metapage first, so replay takes the locks in the order this reader does.
 */
void
genie_read_meta_for_content(Relation index, GenieMetaPageData *meta, Buffer *metabuf)
{
	*metabuf = InvalidBuffer;
	if (RecoveryInProgress())
	{
		*metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
		LockBuffer(*metabuf, BUFFER_LOCK_SHARE);
		genie_check_metapage(index, BufferGetPage(*metabuf));
		memcpy(meta, GeniePageGetMeta(BufferGetPage(*metabuf)), sizeof(GenieMetaPageData));
	}
	else
		genie_read_meta(index, meta);
}

static void
copy_counts(const GenieMetaPageData *meta, GenieIndexContent *content)
{
	content->stamp = meta->stamp;
	content->split_length = meta->split_length;
	content->encoding = meta->encoding;
	content->n_objects = meta->n_objects;
	content->n_main_objects = meta->n_main_objects;
	content->n_dead = meta->n_dead;
	content->n_postings = meta->n_postings;
	content->n_keywords = meta->n_keywords;
	content->postings_head = meta->postings.head;
	content->main_version = meta->main_version;
	content->vectors = meta->vectors;
}

/* What read_content reads of the main postings beside the objects and the pending list. */
typedef enum ContentParts
{
	READ_OBJECTS,				/* nothing more */
	READ_POSITION_MAP,			/* the keywords and their postings counts */
	READ_POSTINGS				/* and the List Array */
} ContentParts;

static void read_content(Relation index, GenieIndexContent *content, ContentParts parts);

/*
 * Reads the index as of the metapage's state when it starts (without the
 * main Position Map and List Array unless with_postings).  The caller's
 * content lock keeps every chain but the pending list unchanged, and the
 * pending list is read only up to the committed end copied here.
 */
void
genie_read_content(Relation index, GenieIndexContent *content, bool with_postings)
{
	read_content(index, content, with_postings ? READ_POSTINGS : READ_OBJECTS);
}

/* As genie_read_content without the List Array, with the main Position Map. */
void
genie_read_content_counts(Relation index, GenieIndexContent *content)
{
	read_content(index, content, READ_POSITION_MAP);
}

static void
read_content(Relation index, GenieIndexContent *content, ContentParts parts)
{
	GenieMetaPageData meta;
	int64		count;
	Buffer		metabuf;

	memset(content, 0, sizeof(*content));
	genie_read_meta_for_content(index, &meta, &metabuf);
	copy_counts(&meta, content);

	content->objects = genie_alloc_huge(sizeof(GenieObjectEntry) * content->n_objects);
	if (content->n_main_objects > 0)
	{
		GenieObjectEntry *main_objects = genie_chain_read(index, meta.directory,
														  sizeof(GenieObjectEntry),
														  meta.n_main_objects, &count);

		memcpy(content->objects, main_objects, sizeof(GenieObjectEntry) * count);
		pfree(main_objects);
	}
	if (parts == READ_POSTINGS)
		read_main_postings(index, &meta, content);
	else if (parts == READ_POSITION_MAP)
		read_position_map(index, &meta, content);
	genie_pending_read(index, &meta, content);
	content->n_pages = RelationGetNumberOfBlocks(index);
	if (BufferIsValid(metabuf))
		UnlockReleaseBuffer(metabuf);
}

void
genie_read_main_postings(Relation index, GenieIndexContent *content)
{
	GenieMetaPageData meta;
	Buffer		metabuf;

	memset(content, 0, sizeof(*content));
	genie_read_meta_for_content(index, &meta, &metabuf);
	copy_counts(&meta, content);
	read_main_postings(index, &meta, content);
	if (BufferIsValid(metabuf))
		UnlockReleaseBuffer(metabuf);
}

/* ---- stored values ---- */

void
genie_values_append(GenieChainWriter *w, const char *value, size_t size)
{
	int32		length = (int32) size;

	if (size > (size_t) PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a value of %zu bytes is too long for a genie index", size)));
	genie_chain_writer_append(w, &length, sizeof(int32));
	if (size > 0)
		genie_chain_writer_append(w, value, (int64) size);
}

/*
 * The values chain parsed as it is read: records of an int32 length and
 * that many bytes, one per main object, split anywhere by page ends.  A
 * value inside one page goes to each() from the page itself; one split
 * across pages is put together in piece first.
 */
typedef struct ValueStream
{
	Relation	index;
	GenieValueFn each;
	void	   *arg;
	int32		n_main;
	int64		remaining;		/* bytes of the chain not parsed yet */
	int32		id;				/* the object whose record comes next */
	char		length_bytes[sizeof(int32)];
	int			length_have;	/* bytes of the length word read */
	int32		length;			/* the value's, once its length word is whole */
	int64		have;			/* bytes of the value read */
	char	   *piece;			/* a split value put together */
	int64		piece_size;
} ValueStream;

static void
value_stream_corrupt(Relation index)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("genie index \"%s\" has a corrupt values chain",
					RelationGetRelationName(index))));
}

static void
value_stream_page(void *arg, const char *data, Size bytes)
{
	ValueStream *vs = arg;
	const char *end = data + bytes;

	vs->remaining -= (int64) bytes;
	while (data < end)
	{
		if (vs->length_have < (int) sizeof(int32))
		{
			if (vs->id >= vs->n_main)
				value_stream_corrupt(vs->index);
			vs->length_bytes[vs->length_have++] = *data++;
			if (vs->length_have < (int) sizeof(int32))
				continue;
			memcpy(&vs->length, vs->length_bytes, sizeof(int32));
			/* a value longer than what is left of the chain: corrupt, not an allocation */
			if (vs->length < 0 || vs->length > (end - data) + vs->remaining)
				value_stream_corrupt(vs->index);
			vs->have = 0;
		}
		if (vs->have == 0 && end - data >= vs->length)
		{
			/* the whole value is on this page */
			vs->each(vs->arg, vs->id, data, vs->length);
			data += vs->length;
		}
		else
		{
			int64		take = Min((int64) (end - data), (int64) vs->length - vs->have);

			if (vs->piece_size < vs->length)
			{
				vs->piece = vs->piece == NULL ? palloc(vs->length) : repalloc(vs->piece, vs->length);
				vs->piece_size = vs->length;
			}
			memcpy(vs->piece + vs->have, data, take);
			vs->have += take;
			data += take;
			if (vs->have < vs->length)
				continue;
			vs->each(vs->arg, vs->id, vs->piece, vs->length);
		}
		vs->id++;
		vs->length_have = 0;
	}
}

void
genie_main_version_gone(const char *index_name)
{
	genie_content_version_gone = true;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("genie index \"%s\" was merged while this statement searched it",
					index_name),
			 errdetail("The index's version that the statement started with is gone."),
			 errhint("Retry the statement.")));
}

void
genie_read_main_values(Relation index, int32 n_main, uint32 main_version, GenieValueFn each,
					   void *arg)
{
	GenieMetaPageData meta;
	Buffer		metabuf;
	ValueStream vs;

	memset(&vs, 0, sizeof(vs));
	vs.index = index;
	vs.each = each;
	vs.arg = arg;
	genie_read_meta_for_content(index, &meta, &metabuf);
	/*
	 * The caller sized its output for this version's main objects: another
	 * one (a merge since, or on a standby one replayed since the caller read
	 * the content) is an error before a value is read.
	 */
	if (meta.n_main_objects != n_main || meta.main_version != main_version)
	{
		if (BufferIsValid(metabuf))
			UnlockReleaseBuffer(metabuf);
		genie_main_version_gone(RelationGetRelationName(index));
	}
	vs.n_main = meta.n_main_objects;
	vs.remaining = meta.value_bytes;
	if (meta.values_stored)
		(void) genie_chain_walk(index, meta.values, 1, meta.value_bytes, value_stream_page, &vs);
	if (BufferIsValid(metabuf))
		UnlockReleaseBuffer(metabuf);
	/* every main object has its record, and nothing follows */
	if (meta.values_stored && (vs.id != vs.n_main || vs.length_have != 0))
		value_stream_corrupt(index);
	if (vs.piece != NULL)
		pfree(vs.piece);
}

void
genie_read_value_chain(Relation index, GenieChain chain, int64 bytes, int32 count,
					   GenieValueFn each, void *arg)
{
	ValueStream vs;

	memset(&vs, 0, sizeof(vs));
	vs.index = index;
	vs.each = each;
	vs.arg = arg;
	vs.n_main = count;
	vs.remaining = bytes;
	if (count > 0)
		(void) genie_chain_walk(index, chain, 1, bytes, value_stream_page, &vs);
	if (vs.id != count || vs.length_have != 0)
		value_stream_corrupt(index);
	if (vs.piece != NULL)
		pfree(vs.piece);
}

/* genie_read_values' copy of each main value into the content's CSR arrays. */
typedef struct ValueCopy
{
	Relation	index;
	GenieIndexContent *content;
	int64		main_bytes;		/* the main values' bytes: the chain less the length words */
} ValueCopy;

static void
copy_value(void *arg, int32 id, const char *value, int32 length)
{
	ValueCopy  *c = arg;
	int64		used = c->content->value_offsets[id];

	if (used + length > c->main_bytes)
		value_stream_corrupt(c->index);
	memcpy(c->content->value_data + used, value, length);
	c->content->value_offsets[id + 1] = used + length;
}

void
genie_read_values(Relation index, GenieIndexContent *content)
{
	GenieMetaPageData meta;
	Buffer		metabuf;
	ValueCopy	c;
	int32		n_pending = content->n_objects - content->n_main_objects;

	if (!content->values_stored)
		return;
	genie_read_meta_for_content(index, &meta, &metabuf);
	if (BufferIsValid(metabuf))
		UnlockReleaseBuffer(metabuf);
	/* the records hold a length word per object: the values are shorter than the chain */
	c.index = index;
	c.content = content;
	c.main_bytes = meta.value_bytes - (int64) sizeof(int32) * content->n_main_objects;
	if (c.main_bytes < 0)
		value_stream_corrupt(index);
	content->value_data = genie_alloc_huge(Max(c.main_bytes + content->pending_value_bytes, 1));
	content->value_offsets = genie_alloc_huge(sizeof(int64) * (content->n_objects + 1));
	content->value_offsets[0] = 0;
	/* one parser of the values chain, genie_read_main_values' (no copy of the chain) */
	genie_read_main_values(index, content->n_main_objects, content->main_version, copy_value, &c);
	for (int32 i = 0; i < n_pending; i++)
	{
		int32		id = content->n_main_objects + i;
		int64		size = content->pending_value_offsets[i + 1] - content->pending_value_offsets[i];

		memcpy(content->value_data + content->value_offsets[id],
			   content->pending_value_data + content->pending_value_offsets[i], size);
		content->value_offsets[id + 1] = content->value_offsets[id] + size;
	}
}
