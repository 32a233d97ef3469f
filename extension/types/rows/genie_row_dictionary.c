/*-------------------------------------------------------------------------
 *
 * genie_row_dictionary.c
 *	  The row schema and the dictionary of a row index, as a backend holds
 *	  them, and the keywords of a row: a VALUES attribute's value gets its
 *	  code from the dictionary, and an insert of an unseen value appends it
 *	  (one WAL record, under the metapage lock), so no two values ever share
 *	  a keyword.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "types/rows/genie_row_dictionary.h"
#include "types/rows/genie_row_values.h"

/* ---- the dictionary, as a backend holds it ---- */

static inline uint32
code_key_hash(const GenieRowCodeKey *k)
{
	return hash_bytes((const unsigned char *) k->bytes, k->length) ^
		hash_bytes_uint32((uint32) k->slot);
}

static inline bool
code_key_equal(const GenieRowCodeKey *x, const GenieRowCodeKey *y)
{
	return x->slot == y->slot && x->length == y->length &&
		memcmp(x->bytes, y->bytes, x->length) == 0;
}

static inline void
prefetch(const void *p)
{
#if defined(__GNUC__) || defined(__clang__)
	__builtin_prefetch(p);
#endif
}

/*
 * Open addressing (simplehash), sized for the committed entries: a new
 * backend reads every entry before its first search (a document index's
 * 168k lexemes), where dynahash's inserts cost twice as much.
 */
#define SH_PREFIX row_codes
#define SH_ELEMENT_TYPE GenieRowCode
#define SH_KEY_TYPE GenieRowCodeKey
#define SH_KEY key
#define SH_HASH_KEY(tb, k) code_key_hash(&(k))
#define SH_EQUAL(tb, a, b) code_key_equal(&(a), &(b))
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

GenieRowDictionary *
genie_row_dictionary_create(MemoryContext parent, Relation index, const GenieRowSchema *schema)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "genie row dictionary",
											  ALLOCSET_DEFAULT_SIZES);
	GenieRowDictionary *d = MemoryContextAllocZero(cxt, sizeof(GenieRowDictionary));

	d->cxt = cxt;
	d->index = RelationGetRelid(index);
	d->relfilenode = GENIE_REL_FILE_NUMBER(index);
	d->schema = *schema;
	d->schema_id = schema->schema_id;
	d->block = InvalidBlockNumber;
	/* once, not per entry: getBaseType is a catalog cache lookup */
	for (int i = 0; i < schema->n_attributes; i++)
		genie_row_type_supported(schema->attributes[i].type, &d->numeric[i]);
	/* sized for the committed entries, which a reader adds next */
	d->codes = row_codes_create(cxt, Max(256, schema->n_dictionary), NULL);
	return d;
}

int32
genie_row_dictionary_lookup(GenieRowDictionary *d, int slot, const char *bytes, int length)
{
	GenieRowCodeKey key;
	GenieRowCode *e;

	key.slot = slot;
	key.length = length;
	key.bytes = bytes;
	e = row_codes_lookup(d->codes, key);
	return e != NULL ? e->code : -1;
}

/*
 * Adds a value and its code; hash is code_key_hash of (slot, bytes).  The
 * entry is the table's: valid until the next insert.
 */
static GenieRowCode *
dictionary_add_hashed(GenieRowDictionary *d, int slot, const char *bytes, int length, int32 code,
					  uint32 hash)
{
	GenieRowCodeKey key;
	GenieRowCode *e;
	bool		found;
	char	   *copy = MemoryContextAlloc(d->cxt, Max(length, 1));

	memcpy(copy, bytes, length);
	key.slot = slot;
	key.length = length;
	key.bytes = copy;
	e = row_codes_insert_hash(d->codes, key, hash, &found);
	if (found)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index has a duplicate dictionary entry for attribute %d", slot + 1),
				 errhint("REINDEX the index.")));
	e->code = code;
	if (d->numeric[slot])
	{
		float8		v;

		if (length != sizeof(float8))
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index has a numeric dictionary entry of %d bytes", length),
					 errhint("REINDEX the index.")));
		memcpy(&v, bytes, sizeof(float8));
		if (d->n_numeric[slot] == d->numeric_capacity[slot])
		{
			int32		cap = Max(16, d->numeric_capacity[slot] * 2);

			if (d->numeric_values[slot] == NULL)
			{
				d->numeric_values[slot] = MemoryContextAlloc(d->cxt, sizeof(float8) * cap);
				d->numeric_codes[slot] = MemoryContextAlloc(d->cxt, sizeof(int32) * cap);
			}
			else
			{
				d->numeric_values[slot] = repalloc_huge(d->numeric_values[slot], sizeof(float8) * cap);
				d->numeric_codes[slot] = repalloc_huge(d->numeric_codes[slot], sizeof(int32) * cap);
			}
			d->numeric_capacity[slot] = cap;
		}
		d->numeric_values[slot][d->n_numeric[slot]] = v;
		d->numeric_codes[slot][d->n_numeric[slot]] = code;
		d->n_numeric[slot]++;
	}
	if (code >= d->schema.attributes[slot].n_values)
		d->schema.attributes[slot].n_values = code + 1;
	return e;
}

static GenieRowCode *
dictionary_add(GenieRowDictionary *d, int slot, const char *bytes, int length, int32 code)
{
	GenieRowCodeKey key = {slot, length, bytes};

	return dictionary_add_hashed(d, slot, bytes, length, code, code_key_hash(&key));
}

static void
dictionary_corrupt(Relation index)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("genie index \"%s\" has a corrupt dictionary", RelationGetRelationName(index)),
			 errhint("REINDEX the index.")));
}

/* Reads the entries the backend has not seen, up to the committed count. */
static void
dictionary_read(Relation index, GenieRowDictionary *d, const GenieRowSchema *schema)
{
	/* a page's entries: at least sizeof(GenieDictionaryEntry) bytes each */
	static GenieRowCode entries[GENIE_PAGE_CAPACITY / sizeof(GenieDictionaryEntry) + 1];

	while (d->n_entries < schema->n_dictionary)
	{
		Buffer		buf;
		Page		page;
		GeniePageOpaque opaque;
		uint32		used;
		BlockNumber next;
		int			n_page;

		/*
		 * A page at a time the dictionary is consistent (what was read
		 * stays, the next read goes on from d->block): a million entries
		 * take over 100 ms.
		 */
		CHECK_FOR_INTERRUPTS();
		if (d->block == InvalidBlockNumber)
		{
			d->block = schema->dictionary.head;
			d->offset = 0;
		}
		if (d->block == InvalidBlockNumber || d->block == GENIE_METAPAGE_BLKNO ||
			d->block >= RelationGetNumberOfBlocks(index))
			dictionary_corrupt(index);
		buf = ReadBuffer(index, d->block);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		opaque = GeniePageGetOpaque(page);
		if (opaque->kind != GENIE_PAGE_DICTIONARY || opaque->n_entries > GENIE_PAGE_CAPACITY)
		{
			UnlockReleaseBuffer(buf);
			dictionary_corrupt(index);
		}
		used = opaque->n_entries;

		/*
		 * The page's entries are checked and hashed first, and their
		 * buckets prefetched, then added: each insert's bucket is a cache
		 * miss in a table of a few MB (a new backend reads 168k lexemes of
		 * a dictionary before its first document search).
		 */
		n_page = 0;
		for (uint32 offset = d->offset;
			 offset < used && d->n_entries + n_page < schema->n_dictionary;
			 offset += INTALIGN(sizeof(GenieDictionaryEntry) + entries[n_page++].key.length))
		{
			GenieDictionaryEntry *e = (GenieDictionaryEntry *) (GeniePageGetData(page) + offset);
			GenieRowCode *c = &entries[n_page];

			if (offset + sizeof(GenieDictionaryEntry) > used ||
				offset + sizeof(GenieDictionaryEntry) + e->length > used ||
				e->slot < 0 || e->slot >= schema->n_attributes || e->code < 0 ||
				e->code >= GENIE_ROW_MAX_CODES || n_page == lengthof(entries))
			{
				UnlockReleaseBuffer(buf);
				dictionary_corrupt(index);
			}
			c->key.slot = e->slot;
			c->key.length = e->length;
			c->key.bytes = (char *) e + sizeof(GenieDictionaryEntry);
			c->code = e->code;
			c->hash = code_key_hash(&c->key);
			prefetch(&d->codes->data[row_codes_initial_bucket(d->codes, c->hash)]);
		}
		for (int i = 0; i < n_page; i++)
		{
			const GenieRowCode *c = &entries[i];

			dictionary_add_hashed(d, c->key.slot, c->key.bytes, c->key.length, c->code, c->hash);
			d->offset += INTALIGN(sizeof(GenieDictionaryEntry) + c->key.length);
			d->n_entries++;
		}
		next = opaque->next;
		UnlockReleaseBuffer(buf);
		if (d->n_entries < schema->n_dictionary)
		{
			d->block = next;
			d->offset = 0;
		}
	}
	for (int i = 0; i < schema->n_attributes; i++)
		d->schema.attributes[i].n_values = Max(d->schema.attributes[i].n_values,
											   schema->attributes[i].n_values);
}

/*
 * The backend's dictionaries, one per row index, valid for one relfilenode
 * (REINDEX and TRUNCATE give a new one).  A relcache invalidation of the
 * index (DROP among others) flags its entry, and the next lookup frees
 * flagged entries: never the callback itself, which may run while an entry
 * is in use.
 */
static List *row_dictionaries = NIL;
static bool row_dictionaries_callback = false;

static void
dictionary_invalidate(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, row_dictionaries)
	{
		GenieRowDictionary *d = lfirst(lc);

		if (relid == InvalidOid || d->index == relid)
			d->stale = true;
	}
}

static GenieRowDictionary *
genie_row_cached_dictionary(Relation index)
{
	ListCell   *lc;

	if (!row_dictionaries_callback)
	{
		CacheRegisterRelcacheCallback(dictionary_invalidate, (Datum) 0);
		row_dictionaries_callback = true;
	}
	foreach(lc, row_dictionaries)
	{
		GenieRowDictionary *d = lfirst(lc);

		if (d->stale)
		{
			row_dictionaries = foreach_delete_current(row_dictionaries, lc);
			MemoryContextDelete(d->cxt);
		}
	}
	foreach(lc, row_dictionaries)
	{
		GenieRowDictionary *d = lfirst(lc);

		if (d->index == RelationGetRelid(index))
		{
			if (d->relfilenode == GENIE_REL_FILE_NUMBER(index))
				return d;
			row_dictionaries = foreach_delete_current(row_dictionaries, lc);
			MemoryContextDelete(d->cxt);
			return NULL;
		}
	}
	return NULL;
}

/* Reads a cached dictionary's new entries; one that fails half-way is dropped. */
static void
catch_up(Relation index, GenieRowDictionary *d, const GenieRowSchema *schema)
{
	PG_TRY();
	{
		dictionary_read(index, d, schema);
	}
	PG_CATCH();
	{
		row_dictionaries = list_delete_ptr(row_dictionaries, d);
		MemoryContextDelete(d->cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* The backend's dictionary of a row index, caught up with schema (the metapage's). */
GenieRowDictionary *
genie_row_index_dictionary(Relation index, const GenieRowSchema *schema)
{
	GenieRowDictionary *d = genie_row_cached_dictionary(index);
	MemoryContext old;

	if (d != NULL && d->schema_id != schema->schema_id)
	{
		row_dictionaries = list_delete_ptr(row_dictionaries, d);
		MemoryContextDelete(d->cxt);
		d = NULL;
	}
	if (d == NULL)
	{
		d = genie_row_dictionary_create(TopMemoryContext, index, schema);
		old = MemoryContextSwitchTo(TopMemoryContext);
		row_dictionaries = lappend(row_dictionaries, d);
		MemoryContextSwitchTo(old);
	}
	catch_up(index, d, schema);
	return d;
}

/* The dictionary's schema of an index that has one (rows, documents). */
void
genie_dictionary_schema(Relation index, GenieRowSchema *schema)
{
	GenieMetaPageData meta;

	genie_read_meta(index, &meta);
	if (!GENIE_ENCODING_HAS_DICTIONARY(meta.encoding.kind))
		elog(ERROR, "genie index \"%s\" has no dictionary", RelationGetRelationName(index));
	*schema = meta.rows;
}

void
genie_row_schema(Relation index, GenieRowSchema *schema)
{
	GenieMetaPageData meta;

	genie_read_meta(index, &meta);
	if (meta.encoding.kind != GENIE_ENCODING_ROW)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("genie index \"%s\" is not a row index", RelationGetRelationName(index)),
				 errhint("Range queries need an index built with genie_row_ops: CREATE INDEX ... USING genie ((table_name)).")));
	*schema = meta.rows;
}

static void
check_code_room(Relation index, int slot, int32 n_values)
{
	if (n_values >= GENIE_ROW_MAX_CODES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("attribute %d of genie index \"%s\" cannot hold more than %d distinct values",
						slot + 1, RelationGetRelationName(index), GENIE_ROW_MAX_CODES)));
}

/* Building: gives a value its attribute's next code and keeps it to be written. */
int32
genie_row_dictionary_add_building(Relation index, GenieRowDictionary *d, int slot, const char *bytes, int length)
{
	int32		code = d->schema.attributes[slot].n_values;
	GenieRowCode *e;

	check_code_room(index, slot, code);
	e = dictionary_add(d, slot, bytes, length, code);
	if (d->n_entries == d->order_capacity)
	{
		d->order_capacity = Max(1024, d->order_capacity * 2);
		d->order = d->order == NULL ?
			MemoryContextAllocHuge(d->cxt, sizeof(GenieRowCode) * d->order_capacity) :
			repalloc_huge(d->order, sizeof(GenieRowCode) * d->order_capacity);
	}
	d->order[d->n_entries++] = *e;	/* the key's bytes stay where they are */
	return code;
}

/*
 * Gives a value its dictionary code, appending it unless another backend
 * did so first: one WAL record, the metapage registered first as in every
 * record that readers on a standby depend on.  The caller holds the content
 * lock in share mode, so that VACUUM's sweep for unreachable pages, which
 * holds it exclusively, never sees a page being linked.
 */
static int32
dictionary_append(Relation index, GenieRowDictionary *d, int slot, const char *bytes, int length)
{
	Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	GenieMetaPage meta;
	GenericXLogState *state;
	GenieAppendSpot spot;
	Size		size = INTALIGN(sizeof(GenieDictionaryEntry) + length);
	GenieDictionaryEntry *entry;
	int32		code;

	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	meta = GeniePageGetMeta(BufferGetPage(metabuf));
	if (meta->rows.schema_id != d->schema_id)
		elog(ERROR, "genie: index \"%s\" was rebuilt during an insert", RelationGetRelationName(index));
	catch_up(index, d, &meta->rows);
	code = genie_row_dictionary_lookup(d, slot, bytes, length);
	if (code >= 0)
	{
		UnlockReleaseBuffer(metabuf);
		return code;
	}
	check_code_room(index, slot, meta->rows.attributes[slot].n_values);

	state = GenericXLogStart(index);
	meta = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));
	genie_chain_append_begin(state, index, GENIE_PAGE_DICTIONARY, meta->rows.dictionary.tail,
							 meta->rows.dictionary_tail_bytes, size, &spot);
	if (spot.new_head)
		meta->rows.dictionary.head = spot.block;
	if (spot.new_page)
	{
		meta->rows.dictionary.tail = spot.block;
		meta->rows.dictionary.pages++;
	}
	code = meta->rows.attributes[slot].n_values;
	entry = (GenieDictionaryEntry *) (GeniePageGetData(spot.page) + spot.offset);
	memset(entry, 0, size);
	entry->code = code;
	entry->slot = slot;
	entry->length = length;
	memcpy((char *) entry + sizeof(GenieDictionaryEntry), bytes, length);
	genie_chain_append_written(&spot, size);
	meta->rows.attributes[slot].n_values++;
	meta->rows.n_dictionary++;
	meta->rows.dictionary_tail_bytes = spot.offset;
	GenericXLogFinish(state);

	dictionary_add(d, slot, bytes, length, code);
	d->n_entries++;
	d->block = spot.block;
	d->offset = spot.offset;

	genie_chain_append_release(&spot);
	UnlockReleaseBuffer(metabuf);
	return code;
}

/*
 * The code of a value; one missing from the dictionary is added to it: in
 * memory while building, on disk at an insert (GENIE_ROW_ENCODE_CHECK: an
 * error, the index lacks it).
 */
int32
genie_row_dictionary_code(Relation index, GenieRowDictionary *d, int slot, const char *bytes,
						  int length, GenieRowEncodeMode mode)
{
	int32		code = genie_row_dictionary_lookup(d, slot, bytes, length);

	if (code >= 0)
		return code;
	if (mode == GENIE_ROW_ENCODE_BUILD)
		return genie_row_dictionary_add_building(index, d, slot, bytes, length);
	if (mode == GENIE_ROW_ENCODE_CHECK)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\": a value of attribute %d of a row is missing from the dictionary",
						RelationGetRelationName(index), slot + 1),
				 errhint("REINDEX the index.")));
	GENIE_CONTENT_LOCK_SHARE(index);
	code = dictionary_append(index, d, slot, bytes, length);
	GENIE_CONTENT_UNLOCK_SHARE(index);
	return code;
}

/* Writes a built dictionary (without WAL: the build logs every page after) and fills schema. */
void
genie_row_dictionary_write(Relation index, GenieRowDictionary *d, GenieRowSchema *schema)
{
	Buffer		buf = InvalidBuffer;
	Page		page = NULL;
	uint32		offset = 0;

	*schema = d->schema;
	schema->dictionary.head = schema->dictionary.tail = InvalidBlockNumber;
	schema->dictionary.pages = 0;
	for (int32 i = 0; i < d->n_entries; i++)
	{
		const GenieRowCode *e = &d->order[i];
		Size		size = INTALIGN(sizeof(GenieDictionaryEntry) + e->key.length);
		GenieDictionaryEntry *out;

		if (page == NULL || GENIE_PAGE_CAPACITY - offset < size)
		{
			Buffer		newbuf = genie_new_buffer(index);

			genie_init_page(BufferGetPage(newbuf), GENIE_PAGE_DICTIONARY);
			if (page != NULL)
			{
				GeniePageGetOpaque(page)->next = BufferGetBlockNumber(newbuf);
				MarkBufferDirty(buf);
				UnlockReleaseBuffer(buf);
			}
			else
				schema->dictionary.head = BufferGetBlockNumber(newbuf);
			buf = newbuf;
			page = BufferGetPage(buf);
			offset = 0;
			schema->dictionary.pages++;
		}
		out = (GenieDictionaryEntry *) (GeniePageGetData(page) + offset);
		memset(out, 0, size);
		out->code = e->code;
		out->slot = e->key.slot;
		out->length = e->key.length;
		memcpy((char *) out + sizeof(GenieDictionaryEntry), e->key.bytes, e->key.length);
		offset += size;
		GeniePageGetOpaque(page)->n_entries = offset;
		((PageHeader) page)->pd_lower = (GeniePageGetData(page) + offset) - (char *) page;
	}
	if (page != NULL)
	{
		schema->dictionary.tail = BufferGetBlockNumber(buf);
		MarkBufferDirty(buf);
		UnlockReleaseBuffer(buf);
	}
	schema->n_dictionary = d->n_entries;
	schema->dictionary_tail_bytes = offset;
}

/* The backend's dictionary of an index, for encoding a value in mode. */
GenieRowDictionary *
genie_row_dictionary_of(Relation index, GenieRowEncodeMode mode)
{
	GenieRowDictionary *d = genie_row_cached_dictionary(index);

	/*
	 * A cached dictionary serves as it is (a DROP flags it, a rebuild changes
	 * the relfilenode): codes never change, and a value it lacks goes to
	 * dictionary_append, which catches up under the metapage lock.
	 */
	if (d == NULL || mode == GENIE_ROW_ENCODE_CHECK)
		d = genie_dictionary_current(index);	/* a check reads up to the committed end */
	return d;
}

/* The backend's dictionary of an index, caught up with the metapage's committed end. */
GenieRowDictionary *
genie_dictionary_current(Relation index)
{
	GenieRowSchema schema;

	genie_dictionary_schema(index, &schema);
	return genie_row_index_dictionary(index, &schema);
}

/* A new build's schema_id: binds the queries made for it (genie_ranges) to this build. */
uint64
genie_row_schema_new_id(Relation index)
{
	return ((uint64) GetCurrentTimestamp() << 16) ^ (uint64) MyProcPid ^
		((uint64) RelationGetRelid(index) << 40);
}

/* ---- encoding rows ---- */

static void
check_value_length(Relation index, int slot, int length)
{
	if (length > GENIE_ROW_MAX_VALUE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a value of %d bytes is too long for categorical attribute %d of genie index \"%s\"",
						length, slot + 1, RelationGetRelationName(index)),
				 errdetail("Categorical values can have at most %d bytes.", GENIE_ROW_MAX_VALUE_BYTES),
				 errhint("Leave the column out of the index's attributes.")));
}

/* The row's fields, checked to be of the table's row type. */
HeapTupleData
genie_row_tuple(Datum row, Oid rowtype)
{
	HeapTupleHeader td = DatumGetHeapTupleHeader(row);
	HeapTupleData tuple;

	if (HeapTupleHeaderGetTypeId(td) != rowtype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("a genie row index must index its table's whole row"),
				 errhint("CREATE INDEX ... ON t USING genie ((t)) WITH (attributes = '...').")));
	tuple.t_len = HeapTupleHeaderGetDatumLength(td);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = td;
	return tuple;
}

/*
 * One keyword per non-NULL attribute.  A value missing from the dictionary
 * is added to it: in memory while building, else on disk.
 */
int32 *
genie_row_encode(Relation index, GenieRowDictionary *d, TupleDesc desc, Oid rowtype, Datum row,
				 GenieRowEncodeMode mode, int *n)
{
	HeapTupleData tuple = genie_row_tuple(row, rowtype);
	const GenieRowSchema *schema = &d->schema;
	int32	   *keywords = palloc(sizeof(int32) * Max(schema->n_attributes, 1));
	int			count = 0;

	for (int slot = 0; slot < schema->n_attributes; slot++)
	{
		const GenieRowAttribute *a = &schema->attributes[slot];
		bool		isnull;
		Datum		value = heap_getattr(&tuple, a->attnum, desc, &isnull);
		bool		numeric;
		float8		v = 0;
		const char *bytes;
		int			length;
		int32		code;

		if (isnull)
			continue;
		genie_row_type_supported(a->type, &numeric);
		if (numeric)
		{
			v = genie_row_numeric(a->type, value);
			if (a->mode == GENIE_ROW_BUCKETS)
			{
				keywords[count++] = GENIE_ROW_KEYWORD(slot, genie_row_bucket(a, v));
				continue;
			}
			bytes = (const char *) &v;
			length = sizeof(float8);
		}
		else
		{
			bytes = genie_row_value_bytes(a->type, value, &length);
			check_value_length(index, slot, length);
		}
		code = genie_row_dictionary_code(index, d, slot, bytes, length, mode);
		keywords[count++] = GENIE_ROW_KEYWORD(slot, code);
	}
	*n = count;
	return keywords;
}

int32 *
genie_row_keywords(Relation index, Datum row, GenieRowEncodeMode mode, int *n)
{
	GenieRowDictionary *d = genie_row_dictionary_of(index, mode);
	Relation	heap;
	int32	   *keywords;

	/* the caller holds a lock on the table: its descriptor stays */
	heap = relation_open(index->rd_index->indrelid, NoLock);
	keywords = genie_row_encode(index, d, RelationGetDescr(heap), heap->rd_rel->reltype, row, mode, n);
	relation_close(heap, NoLock);
	return keywords;
}

