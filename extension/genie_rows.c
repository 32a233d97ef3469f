/*-------------------------------------------------------------------------
 *
 * genie_rows.c
 *	  Row indexes (genie_row_ops): range-tuple scoring over relational rows,
 *	  the paper's Example 2.1 and section V-C.
 *
 * The index is on the table's whole row, CREATE INDEX ... USING genie ((t))
 * WITH (attributes = 'a, b, c', buckets = 1024), and gives each row one
 * keyword per non-NULL attribute:
 *	- a numeric attribute (int2/4/8, float4/8, numeric, date, timestamp[tz])
 *	  whose build saw at most `buckets` distinct values keeps exact values
 *	  (VALUES); otherwise (BUCKETS) its value v falls into the equal-width
 *	  bucket floor((v - lo) / ((hi - lo) / buckets)), clamped to the edge
 *	  buckets, where lo and hi are the smallest and largest finite values the
 *	  build saw or the bounds the attribute list gives ('age 0..100');
 *	  NaN goes to the top bucket;
 *	- a categorical attribute (text, varchar, char, bool, enums) keeps exact
 *	  values (VALUES).
 * VALUES attributes get their codes from the dictionary, which the build
 * writes and inserts of unseen values append to (one WAL record each, under
 * the metapage lock), so no two values ever share a keyword.  Numeric
 * attributes are compared as float8.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/generic_xlog.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/reloptions.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/inval.h"
#include "utils/typcache.h"

#include "genie_am.h"

PG_FUNCTION_INFO_V1(genie_row_encoding);

/* support function 1 of genie_row_ops */
Datum
genie_row_encoding(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GENIE_ENCODING_ROW);
}

/* ---- values ---- */

bool
genie_row_type_supported(Oid type, bool *numeric)
{
	type = getBaseType(type);
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			*numeric = true;
			return true;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BOOLOID:
			*numeric = false;
			return true;
		default:
			*numeric = false;
			return type_is_enum(type);
	}
}

/* A numeric attribute's value as float8: infinities stay, -0 becomes 0. */
float8
genie_row_numeric(Oid type, Datum value)
{
	float8		v;

	switch (getBaseType(type))
	{
		case INT2OID:
			v = DatumGetInt16(value);
			break;
		case INT4OID:
			v = DatumGetInt32(value);
			break;
		case INT8OID:
			v = (float8) DatumGetInt64(value);
			break;
		case FLOAT4OID:
			v = DatumGetFloat4(value);
			break;
		case FLOAT8OID:
			v = DatumGetFloat8(value);
			break;
		case NUMERICOID:
			/* beyond float8's range: +-infinity or 0, never an error */
			v = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, value));
			break;
		case DATEOID:
			{
				DateADT		d = DatumGetDateADT(value);

				if (DATE_IS_NOBEGIN(d))
					v = -get_float8_infinity();
				else if (DATE_IS_NOEND(d))
					v = get_float8_infinity();
				else
					v = d;
				break;
			}
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			{
				Timestamp	t = DatumGetTimestamp(value);

				if (TIMESTAMP_IS_NOBEGIN(t))
					v = -get_float8_infinity();
				else if (TIMESTAMP_IS_NOEND(t))
					v = get_float8_infinity();
				else
					v = (float8) t;
				break;
			}
		default:
			elog(ERROR, "genie: type %u is not a numeric row attribute", type);
			v = 0;				/* keep compiler quiet */
	}
	if (v == 0)
		v = 0;					/* -0 */
	if (isnan(v))
		v = get_float8_nan();
	return v;
}

/*
 * A categorical attribute's value as the bytes its equality compares: the
 * characters of text and varchar, of char without trailing blanks, the enum
 * value's oid, one byte for bool.  The result may point into value.
 */
char *
genie_row_value_bytes(Oid type, Datum value, int *length)
{
	Oid			base = getBaseType(type);

	if (base == BOOLOID)
	{
		char	   *b = palloc(1);

		b[0] = DatumGetBool(value) ? 1 : 0;
		*length = 1;
		return b;
	}
	if (base == TEXTOID || base == VARCHAROID || base == BPCHAROID)
	{
		text	   *t = DatumGetTextPP(value);
		char	   *s = VARDATA_ANY(t);
		int			len = VARSIZE_ANY_EXHDR(t);

		if (base == BPCHAROID)
			while (len > 0 && s[len - 1] == ' ')
				len--;
		*length = len;
		return s;
	}
	/* an enum */
	{
		Oid		   *o = palloc(sizeof(Oid));

		*o = DatumGetObjectId(value);
		*length = sizeof(Oid);
		return (char *) o;
	}
}

int32
genie_row_bucket(const GenieRowAttribute *attribute, float8 value)
{
	float8		b;

	if (isnan(value))
		return attribute->n_buckets - 1;
	/* the same float8 operations as the documented SQL expression */
	b = floor((value - attribute->lo) / ((attribute->hi - attribute->lo) / attribute->n_buckets));
	if (!(b > 0))
		return 0;
	if (b > attribute->n_buckets - 1)
		return attribute->n_buckets - 1;
	return (int32) b;
}

/* ---- the dictionary, as a backend holds it ---- */

typedef struct DictionaryKey
{
	int32		slot;
	int32		length;
	const char *bytes;
} DictionaryKey;

typedef struct DictionaryEntry
{
	DictionaryKey key;
	int32		code;
} DictionaryEntry;

typedef struct RowDictionary
{
	Oid			index;
	Oid			relfilenode;
	uint64		schema_id;
	bool		stale;			/* flagged by a relcache invalidation */
	MemoryContext cxt;
	HTAB	   *codes;
	GenieRowSchema schema;		/* n_values kept up to date */
	int32		n_entries;		/* entries read (or, building, made) */
	BlockNumber block;			/* where reading goes on */
	uint32		offset;
	/* numeric VALUES attributes: their (value, code) pairs, for ranges */
	int32		n_numeric[GENIE_ROW_MAX_ATTRIBUTES];
	int32		numeric_capacity[GENIE_ROW_MAX_ATTRIBUTES];
	float8	   *numeric_values[GENIE_ROW_MAX_ATTRIBUTES];
	int32	   *numeric_codes[GENIE_ROW_MAX_ATTRIBUTES];
	/* building: the entries in the order they are written */
	DictionaryEntry **order;
	int32		order_capacity;
} RowDictionary;

static uint32
dictionary_hash(const void *key, Size keysize)
{
	const DictionaryKey *k = key;

	return hash_bytes((const unsigned char *) k->bytes, k->length) ^
		hash_bytes_uint32((uint32) k->slot);
}

static int
dictionary_match(const void *a, const void *b, Size keysize)
{
	const DictionaryKey *x = a;
	const DictionaryKey *y = b;

	if (x->slot != y->slot || x->length != y->length)
		return 1;
	return memcmp(x->bytes, y->bytes, x->length);
}

static RowDictionary *
dictionary_create(MemoryContext parent, Relation index, const GenieRowSchema *schema)
{
	MemoryContext cxt = AllocSetContextCreate(parent, "genie row dictionary",
											  ALLOCSET_DEFAULT_SIZES);
	RowDictionary *d = MemoryContextAllocZero(cxt, sizeof(RowDictionary));
	HASHCTL		ctl;

	d->cxt = cxt;
	d->index = RelationGetRelid(index);
	d->relfilenode = index->rd_node.relNode;
	d->schema = *schema;
	d->schema_id = schema->schema_id;
	d->block = InvalidBlockNumber;
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(DictionaryKey);
	ctl.entrysize = sizeof(DictionaryEntry);
	ctl.hash = dictionary_hash;
	ctl.match = dictionary_match;
	ctl.hcxt = cxt;
	d->codes = hash_create("genie row dictionary", 256, &ctl,
						   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	return d;
}

static int32
dictionary_lookup(RowDictionary *d, int slot, const char *bytes, int length)
{
	DictionaryKey key;
	DictionaryEntry *e;

	key.slot = slot;
	key.length = length;
	key.bytes = bytes;
	e = hash_search(d->codes, &key, HASH_FIND, NULL);
	return e != NULL ? e->code : -1;
}

static DictionaryEntry *
dictionary_add(RowDictionary *d, int slot, const char *bytes, int length, int32 code)
{
	DictionaryKey key;
	DictionaryEntry *e;
	bool		found;
	char	   *copy = MemoryContextAlloc(d->cxt, Max(length, 1));
	bool		numeric;

	memcpy(copy, bytes, length);
	key.slot = slot;
	key.length = length;
	key.bytes = copy;
	e = hash_search(d->codes, &key, HASH_ENTER, &found);
	if (found)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index has a duplicate dictionary entry for attribute %d", slot + 1),
				 errhint("REINDEX the index.")));
	e->code = code;
	genie_row_type_supported(d->schema.attributes[slot].type, &numeric);
	if (numeric)
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
dictionary_read(Relation index, RowDictionary *d, const GenieRowSchema *schema)
{
	while (d->n_entries < schema->n_dictionary)
	{
		Buffer		buf;
		Page		page;
		GeniePageOpaque opaque;
		uint32		used;
		BlockNumber next;

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
		while (d->offset < used && d->n_entries < schema->n_dictionary)
		{
			GenieDictionaryEntry *e = (GenieDictionaryEntry *) (GeniePageGetData(page) + d->offset);

			if (d->offset + sizeof(GenieDictionaryEntry) > used ||
				d->offset + sizeof(GenieDictionaryEntry) + e->length > used ||
				e->slot < 0 || e->slot >= schema->n_attributes || e->code < 0 ||
				e->code >= GENIE_ROW_MAX_CODES)
			{
				UnlockReleaseBuffer(buf);
				dictionary_corrupt(index);
			}
			dictionary_add(d, e->slot, (char *) e + sizeof(GenieDictionaryEntry), e->length, e->code);
			d->offset += INTALIGN(sizeof(GenieDictionaryEntry) + e->length);
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
		RowDictionary *d = lfirst(lc);

		if (relid == InvalidOid || d->index == relid)
			d->stale = true;
	}
}

static RowDictionary *
cached_dictionary(Relation index)
{
	ListCell   *lc;

	if (!row_dictionaries_callback)
	{
		CacheRegisterRelcacheCallback(dictionary_invalidate, (Datum) 0);
		row_dictionaries_callback = true;
	}
	foreach(lc, row_dictionaries)
	{
		RowDictionary *d = lfirst(lc);

		if (d->stale)
		{
			row_dictionaries = foreach_delete_current(row_dictionaries, lc);
			MemoryContextDelete(d->cxt);
		}
	}
	foreach(lc, row_dictionaries)
	{
		RowDictionary *d = lfirst(lc);

		if (d->index == RelationGetRelid(index))
		{
			if (d->relfilenode == index->rd_node.relNode)
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
catch_up(Relation index, RowDictionary *d, const GenieRowSchema *schema)
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
static RowDictionary *
index_dictionary(Relation index, const GenieRowSchema *schema)
{
	RowDictionary *d = cached_dictionary(index);
	MemoryContext old;

	if (d != NULL && d->schema_id != schema->schema_id)
	{
		row_dictionaries = list_delete_ptr(row_dictionaries, d);
		MemoryContextDelete(d->cxt);
		d = NULL;
	}
	if (d == NULL)
	{
		d = dictionary_create(TopMemoryContext, index, schema);
		old = MemoryContextSwitchTo(TopMemoryContext);
		row_dictionaries = lappend(row_dictionaries, d);
		MemoryContextSwitchTo(old);
	}
	catch_up(index, d, schema);
	return d;
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
static int32
dictionary_add_building(Relation index, RowDictionary *d, int slot, const char *bytes, int length)
{
	int32		code = d->schema.attributes[slot].n_values;
	DictionaryEntry *e;

	check_code_room(index, slot, code);
	e = dictionary_add(d, slot, bytes, length, code);
	if (d->n_entries == d->order_capacity)
	{
		d->order_capacity = Max(1024, d->order_capacity * 2);
		d->order = d->order == NULL ?
			MemoryContextAllocHuge(d->cxt, sizeof(DictionaryEntry *) * d->order_capacity) :
			repalloc_huge(d->order, sizeof(DictionaryEntry *) * d->order_capacity);
	}
	d->order[d->n_entries++] = e;
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
dictionary_append(Relation index, RowDictionary *d, int slot, const char *bytes, int length)
{
	Buffer		metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	GenieMetaPage meta;
	GenericXLogState *state;
	Page		metapage;
	Buffer		tailbuf = InvalidBuffer;
	Buffer		newbuf = InvalidBuffer;
	Page		page = NULL;
	BlockNumber block;
	uint32		offset;
	Size		size = INTALIGN(sizeof(GenieDictionaryEntry) + length);
	GenieDictionaryEntry *entry;
	int32		code;

	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	meta = GeniePageGetMeta(BufferGetPage(metabuf));
	if (meta->rows.schema_id != d->schema_id)
		elog(ERROR, "genie: index \"%s\" was rebuilt during an insert", RelationGetRelationName(index));
	catch_up(index, d, &meta->rows);
	code = dictionary_lookup(d, slot, bytes, length);
	if (code >= 0)
	{
		UnlockReleaseBuffer(metabuf);
		return code;
	}
	check_code_room(index, slot, meta->rows.attributes[slot].n_values);

	state = GenericXLogStart(index);
	metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
	meta = GeniePageGetMeta(metapage);
	block = meta->rows.dictionary.tail;
	offset = meta->rows.dictionary_tail_bytes;
	if (block != InvalidBlockNumber)
	{
		if (block == GENIE_METAPAGE_BLKNO || block >= RelationGetNumberOfBlocks(index))
			dictionary_corrupt(index);
		tailbuf = ReadBuffer(index, block);
		LockBuffer(tailbuf, BUFFER_LOCK_EXCLUSIVE);
		page = GenericXLogRegisterBuffer(state, tailbuf, 0);
		if (GeniePageGetOpaque(page)->kind != GENIE_PAGE_DICTIONARY || offset > GENIE_PAGE_CAPACITY)
			dictionary_corrupt(index);
	}
	if (page == NULL || GENIE_PAGE_CAPACITY - offset < size)
	{
		Page		newpage;

		newbuf = genie_new_buffer(index);
		newpage = GenericXLogRegisterBuffer(state, newbuf, GENERIC_XLOG_FULL_IMAGE);
		genie_init_page(newpage, GENIE_PAGE_DICTIONARY);
		block = BufferGetBlockNumber(newbuf);
		if (page != NULL)
			GeniePageGetOpaque(page)->next = block;
		else
			meta->rows.dictionary.head = block;
		meta->rows.dictionary.tail = block;
		meta->rows.dictionary.pages++;
		page = newpage;
		offset = 0;
	}
	code = meta->rows.attributes[slot].n_values;
	entry = (GenieDictionaryEntry *) (GeniePageGetData(page) + offset);
	memset(entry, 0, size);
	entry->code = code;
	entry->slot = slot;
	entry->length = length;
	memcpy((char *) entry + sizeof(GenieDictionaryEntry), bytes, length);
	offset += size;
	GeniePageGetOpaque(page)->n_entries = offset;
	((PageHeader) page)->pd_lower = (GeniePageGetData(page) + offset) - (char *) page;
	meta->rows.attributes[slot].n_values++;
	meta->rows.n_dictionary++;
	meta->rows.dictionary_tail_bytes = offset;
	GenericXLogFinish(state);

	dictionary_add(d, slot, bytes, length, code);
	d->n_entries++;
	d->block = block;
	d->offset = offset;

	if (BufferIsValid(tailbuf))
		UnlockReleaseBuffer(tailbuf);
	if (BufferIsValid(newbuf))
		UnlockReleaseBuffer(newbuf);
	UnlockReleaseBuffer(metabuf);
	return code;
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
static HeapTupleData
row_tuple(Datum row, Oid rowtype)
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
static int32 *
encode_row(Relation index, RowDictionary *d, TupleDesc desc, Oid rowtype, Datum row,
		   bool building, int *n)
{
	HeapTupleData tuple = row_tuple(row, rowtype);
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
		code = dictionary_lookup(d, slot, bytes, length);
		if (code < 0)
		{
			if (building)
				code = dictionary_add_building(index, d, slot, bytes, length);
			else
			{
				GENIE_CONTENT_LOCK_SHARE(index);
				code = dictionary_append(index, d, slot, bytes, length);
				GENIE_CONTENT_UNLOCK_SHARE(index);
			}
		}
		keywords[count++] = GENIE_ROW_KEYWORD(slot, code);
	}
	*n = count;
	return keywords;
}

int32 *
genie_row_keywords(Relation index, Datum row, int *n)
{
	RowDictionary *d = cached_dictionary(index);
	Relation	heap;
	int32	   *keywords;

	/*
	 * A cached dictionary serves as it is (a DROP flags it, a rebuild changes
	 * the relfilenode): codes never change, and a value it lacks goes to
	 * dictionary_append, which catches up under the metapage lock.
	 */
	if (d == NULL)
	{
		GenieRowSchema schema;

		genie_row_schema(index, &schema);
		d = index_dictionary(index, &schema);
	}
	/* the caller holds a lock on the table: its descriptor stays */
	heap = relation_open(index->rd_index->indrelid, NoLock);
	keywords = encode_row(index, d, RelationGetDescr(heap), heap->rd_rel->reltype, row, false, n);
	relation_close(heap, NoLock);
	return keywords;
}

/* ---- the attribute list ---- */

typedef struct AttributeSpec
{
	char	   *name;
	char	   *lo;				/* given bounds, or NULL */
	char	   *hi;
} AttributeSpec;

/*
 * Parses 'name, name lo..hi, "Quoted Name"' into specs; returns the count,
 * or -1 with *error set.  Used to validate the reloption too.
 */
static int
parse_attribute_list(const char *list, AttributeSpec *specs, int max, const char **error)
{
	const char *p = list;
	int			n = 0;

	for (;;)
	{
		StringInfoData name;
		const char *start;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		if (n == max)
		{
			*error = "too many attributes";
			return -1;
		}
		initStringInfo(&name);
		if (*p == '"')
		{
			p++;
			for (;;)
			{
				if (*p == '\0')
				{
					*error = "unterminated quoted name";
					return -1;
				}
				if (*p == '"' && p[1] == '"')
				{
					appendStringInfoChar(&name, '"');
					p += 2;
				}
				else if (*p == '"')
				{
					p++;
					break;
				}
				else
					appendStringInfoChar(&name, *p++);
			}
		}
		else
		{
			while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t' && *p != '\n')
				appendStringInfoChar(&name, pg_tolower((unsigned char) *p++));
		}
		if (name.len == 0)
		{
			*error = "empty attribute name";
			return -1;
		}
		specs[n].name = name.data;
		specs[n].lo = specs[n].hi = NULL;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p != ',' && *p != '\0')
		{
			/* bounds: everything up to the comma, split at ".." */
			const char *dots;
			const char *end;

			start = p;
			end = strchr(p, ',');
			if (end == NULL)
				end = p + strlen(p);
			dots = strstr(start, "..");
			if (dots == NULL || dots >= end)
			{
				*error = "bounds must be written lo..hi";
				return -1;
			}
			specs[n].lo = pnstrdup(start, dots - start);
			specs[n].hi = pnstrdup(dots + 2, end - dots - 2);
			p = end;
		}
		n++;
		if (*p == ',')
			p++;
	}
	return n;
}

void
genie_validate_attribute_list(const char *value)
{
	AttributeSpec specs[GENIE_ROW_MAX_ATTRIBUTES];
	const char *error = NULL;

	if (value != NULL &&
		parse_attribute_list(value, specs, GENIE_ROW_MAX_ATTRIBUTES, &error) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for genie option \"attributes\": %s", error),
				 errhint("Write column names separated by commas, each optionally followed by bounds lo..hi, at most %d.",
						 GENIE_ROW_MAX_ATTRIBUTES)));
}

/* ---- building ---- */

struct GenieRowBuild
{
	Relation	index;
	Oid			rowtype;
	TupleDesc	desc;
	RowDictionary *dictionary;
	/* pass 1 statistics of numeric attributes without given bounds */
	bool		measure[GENIE_ROW_MAX_ATTRIBUTES];
	bool		have_finite[GENIE_ROW_MAX_ATTRIBUTES];
	float8		min[GENIE_ROW_MAX_ATTRIBUTES];
	float8		max[GENIE_ROW_MAX_ATTRIBUTES];
	HTAB	   *distinct[GENIE_ROW_MAX_ATTRIBUTES];	/* NULL once over budget */
	MemoryContext tmpcxt;
};

static float8
bound_value(Relation heap, Form_pg_attribute att, const char *text)
{
	Oid			typinput;
	Oid			typioparam;
	float8		v;
	char	   *trimmed = pstrdup(text);
	int			len = strlen(trimmed);

	while (len > 0 && (trimmed[len - 1] == ' ' || trimmed[len - 1] == '\t'))
		trimmed[--len] = '\0';
	while (*trimmed == ' ' || *trimmed == '\t')
		trimmed++;
	getTypeInputInfo(att->atttypid, &typinput, &typioparam);
	v = genie_row_numeric(att->atttypid,
						  OidInputFunctionCall(typinput, trimmed, typioparam, att->atttypmod));
	if (!isfinite(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("bounds of genie attribute \"%s\" must be finite", NameStr(att->attname))));
	return v;
}

static void
stats_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state_)
{
	GenieRowBuild *b = (GenieRowBuild *) state_;
	RowDictionary *d = b->dictionary;
	HeapTupleData tuple;
	MemoryContext old;

	if (isnull[0])
		return;
	old = MemoryContextSwitchTo(b->tmpcxt);
	tuple = row_tuple(values[0], b->rowtype);
	for (int slot = 0; slot < d->schema.n_attributes; slot++)
	{
		const GenieRowAttribute *a = &d->schema.attributes[slot];
		bool		null;
		Datum		value;
		float8		v;

		if (!b->measure[slot])
			continue;
		value = heap_getattr(&tuple, a->attnum, b->desc, &null);
		if (null)
			continue;
		v = genie_row_numeric(a->type, value);
		if (isfinite(v))
		{
			if (!b->have_finite[slot] || v < b->min[slot])
				b->min[slot] = v;
			if (!b->have_finite[slot] || v > b->max[slot])
				b->max[slot] = v;
			b->have_finite[slot] = true;
		}
		if (b->distinct[slot] != NULL)
		{
			hash_search(b->distinct[slot], &v, HASH_ENTER, NULL);
			if (hash_get_num_entries(b->distinct[slot]) > a->n_buckets)
			{
				hash_destroy(b->distinct[slot]);
				b->distinct[slot] = NULL;
			}
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(b->tmpcxt);
}

static int
float8_order(const void *a, const void *b)
{
	return float8_cmp_internal(*(const float8 *) a, *(const float8 *) b);
}

GenieRowBuild *
genie_row_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	int			buckets = opts != NULL ? opts->buckets : GENIE_ROW_DEFAULT_BUCKETS;
	const char *list = (opts != NULL && opts->attributes != 0) ?
		(const char *) opts + opts->attributes : NULL;
	AttributeSpec specs[GENIE_ROW_MAX_ATTRIBUTES];
	int			n_specs = 0;
	TupleDesc	desc = RelationGetDescr(heap);
	GenieRowSchema schema;
	GenieRowBuild *b = palloc0(sizeof(GenieRowBuild));
	List	   *exprs = RelationGetIndexExpressions(index);
	bool		any_measured = false;

	if (indexInfo->ii_NumIndexAttrs != 1 || indexInfo->ii_IndexAttrNumbers[0] != 0 ||
		list_length(exprs) != 1 || !IsA(linitial(exprs), Var) ||
		((Var *) linitial(exprs))->varattno != InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genie_row_ops indexes the whole row of its table"),
				 errhint("CREATE INDEX ... ON %s USING genie ((%s)) WITH (attributes = '...');",
						 quote_identifier(RelationGetRelationName(heap)),
						 quote_identifier(RelationGetRelationName(heap)))));

	memset(&schema, 0, sizeof(schema));
	if (list != NULL)
	{
		const char *error = NULL;

		n_specs = parse_attribute_list(list, specs, GENIE_ROW_MAX_ATTRIBUTES, &error);
		if (n_specs < 0)
			genie_validate_attribute_list(list);
		if (n_specs == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genie option \"attributes\" names no column")));
	}
	else
	{
		/* every column of a supported type */
		for (int i = 0; i < desc->natts && n_specs < GENIE_ROW_MAX_ATTRIBUTES; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			bool		numeric;

			if (!att->attisdropped && genie_row_type_supported(att->atttypid, &numeric))
			{
				specs[n_specs].name = pstrdup(NameStr(att->attname));
				specs[n_specs].lo = specs[n_specs].hi = NULL;
				n_specs++;
			}
		}
		if (n_specs == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" has no column genie_row_ops can index",
							RelationGetRelationName(heap)),
					 errhint("Supported types: int2, int4, int8, float4, float8, numeric, date, timestamp, timestamptz, text, varchar, char, bool and enums.")));
	}

	schema.n_attributes = n_specs;
	schema.schema_id = ((uint64) GetCurrentTimestamp() << 16) ^ (uint64) MyProcPid ^
		((uint64) RelationGetRelid(index) << 40);
	schema.dictionary.head = schema.dictionary.tail = InvalidBlockNumber;
	for (int slot = 0; slot < n_specs; slot++)
	{
		AttrNumber attnum = InvalidAttrNumber;
		Form_pg_attribute att = NULL;
		GenieRowAttribute *a = &schema.attributes[slot];
		bool		numeric;

		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), specs[slot].name) == 0)
			{
				att = TupleDescAttr(desc, i);
				attnum = i + 1;
			}
		if (att == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of genie option \"attributes\" does not exist in table \"%s\"",
							specs[slot].name, RelationGetRelationName(heap)),
					 errhint("After renaming or dropping a column, name the columns anew: ALTER INDEX %s SET (attributes = '...').",
							 quote_identifier(RelationGetRelationName(index)))));
		for (int j = 0; j < slot; j++)
			if (schema.attributes[j].attnum == attnum)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("column \"%s\" appears twice in genie option \"attributes\"",
								specs[slot].name)));
		if (!genie_row_type_supported(att->atttypid, &numeric))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" has type %s, which genie_row_ops cannot index",
							specs[slot].name, format_type_be(att->atttypid)),
					 errhint("Supported types: int2, int4, int8, float4, float8, numeric, date, timestamp, timestamptz, text, varchar, char, bool and enums.")));
		a->attnum = attnum;
		a->type = att->atttypid;
		a->n_buckets = buckets;
		a->mode = GENIE_ROW_VALUES;
		if (specs[slot].lo != NULL)
		{
			if (!numeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("categorical column \"%s\" cannot have bounds", specs[slot].name)));
			a->mode = GENIE_ROW_BUCKETS;
			a->lo = bound_value(heap, att, specs[slot].lo);
			a->hi = bound_value(heap, att, specs[slot].hi);
			if (!(a->lo < a->hi))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("bounds of genie attribute \"%s\" must have lo < hi", specs[slot].name)));
		}
		else if (numeric)
		{
			HASHCTL		ctl;

			memset(&ctl, 0, sizeof(ctl));
			ctl.keysize = sizeof(float8);
			ctl.entrysize = sizeof(float8);
			ctl.hcxt = CurrentMemoryContext;
			b->distinct[slot] = hash_create("genie distinct values", 1024, &ctl,
											HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
			b->measure[slot] = true;
			any_measured = true;
		}
	}

	b->index = index;
	b->rowtype = heap->rd_rel->reltype;
	b->desc = desc;
	b->dictionary = dictionary_create(CurrentMemoryContext, index, &schema);
	b->tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie row statistics",
									  ALLOCSET_DEFAULT_SIZES);

	/* pass 1: bounds and distinct counts of numeric attributes */
	if (any_measured && scan)
		table_index_build_scan(heap, index, indexInfo, true, false, stats_callback, b, NULL);

	for (int slot = 0; slot < n_specs; slot++)
	{
		GenieRowAttribute *a = &b->dictionary->schema.attributes[slot];

		if (!b->measure[slot])
			continue;
		if (b->distinct[slot] != NULL && hash_get_num_entries(b->distinct[slot]) == 0 && scan)
			ereport(NOTICE,
					(errmsg("genie index \"%s\": attribute \"%s\" has no values to take bounds from, so it keeps exact values",
							RelationGetRelationName(index),
							NameStr(TupleDescAttr(desc, a->attnum - 1)->attname)),
					 errhint("Give it bounds in the attribute list (%s lo..hi), or REINDEX after loading rows.",
							 quote_identifier(NameStr(TupleDescAttr(desc, a->attnum - 1)->attname)))));
		if (b->distinct[slot] != NULL)
		{
			/* few distinct values: each keeps its own code, in value order */
			long		n = hash_get_num_entries(b->distinct[slot]);
			float8	   *sorted = palloc(sizeof(float8) * Max(n, 1));
			HASH_SEQ_STATUS seq;
			float8	   *v;
			int			i = 0;

			hash_seq_init(&seq, b->distinct[slot]);
			while ((v = hash_seq_search(&seq)) != NULL)
				sorted[i++] = *v;
			qsort(sorted, n, sizeof(float8), float8_order);
			a->mode = GENIE_ROW_VALUES;
			for (i = 0; i < n; i++)
				dictionary_add_building(index, b->dictionary, slot, (char *) &sorted[i],
										sizeof(float8));
			hash_destroy(b->distinct[slot]);
			b->distinct[slot] = NULL;
		}
		else
		{
			a->mode = GENIE_ROW_BUCKETS;
			a->lo = b->have_finite[slot] ? b->min[slot] : 0;
			a->hi = b->have_finite[slot] ? b->max[slot] : 1;
			if (!(a->lo < a->hi))
				a->hi = a->lo + 1;
		}
	}
	return b;
}

int32 *
genie_row_build_keywords(GenieRowBuild *b, Datum row, int *n)
{
	return encode_row(b->index, b->dictionary, b->desc, b->rowtype, row, true, n);
}

/* Writes the dictionary (without WAL: the build logs every page after) and fills schema. */
void
genie_row_build_finish(GenieRowBuild *b, GenieRowSchema *schema)
{
	RowDictionary *d = b->dictionary;
	Buffer		buf = InvalidBuffer;
	Page		page = NULL;
	uint32		offset = 0;

	*schema = d->schema;
	schema->dictionary.head = schema->dictionary.tail = InvalidBlockNumber;
	schema->dictionary.pages = 0;
	for (int32 i = 0; i < d->n_entries; i++)
	{
		DictionaryEntry *e = d->order[i];
		Size		size = INTALIGN(sizeof(GenieDictionaryEntry) + e->key.length);
		GenieDictionaryEntry *out;

		if (page == NULL || GENIE_PAGE_CAPACITY - offset < size)
		{
			Buffer		newbuf = genie_new_buffer(b->index);

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
	MemoryContextDelete(b->tmpcxt);
	MemoryContextDelete(d->cxt);
}

/* ---- range queries on the index ---- */

static void
reserve_codes(int32 **codes, int *capacity, int needed)
{
	if (*capacity >= needed)
		return;
	*capacity = Max(needed, 64);
	*codes = *codes == NULL ? palloc(sizeof(int32) * *capacity) :
		repalloc(*codes, sizeof(int32) * *capacity);
}

/* The engine query of a genie_ranges value, with the dictionary of the moment. */
GenieQuery *
genie_ranges_query(Relation index, GenieRanges *ranges)
{
	GenieRowSchema schema;
	RowDictionary *d;
	GenieQueryBuilder b;
	GenieRangesItem *items = GENIE_RANGES_ITEMS(ranges);
	const char *area = GENIE_RANGES_VALUES(ranges);
	int32	   *codes = NULL;
	int			codes_capacity = 0;

	genie_row_schema(index, &schema);
	if (ranges->index != RelationGetRelid(index) || ranges->schema_id != schema.schema_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("this genie_ranges value was not made for the current build of index \"%s\"",
						RelationGetRelationName(index)),
				 errhint("Make the query with genie_ranges('%s', ...) again: the index was rebuilt, or the query names another index.",
						 RelationGetRelationName(index))));
	d = index_dictionary(index, &schema);
	genie_query_builder_init(&b);
	b.limited = false;
	for (int i = 0; i < ranges->n_items; i++)
	{
		GenieRangesItem *item = &items[i];
		int			slot = item->slot;
		bool		numeric;
		int			n = 0;

		genie_row_type_supported(item->attribute.type, &numeric);
		if (numeric && item->attribute.mode == GENIE_ROW_BUCKETS)
		{
			genie_query_builder_begin_item(&b, item->weight);
			genie_query_builder_add_range(&b, GENIE_ROW_KEYWORD(slot, item->bucket_lo),
										  GENIE_ROW_KEYWORD(slot, item->bucket_hi));
			continue;
		}
		if (numeric)
		{
			int32		count = d->n_numeric[slot];

			reserve_codes(&codes, &codes_capacity, count);
			for (int32 j = 0; j < count; j++)
			{
				float8		v = d->numeric_values[slot][j];

				if (item->lo <= v && v <= item->hi)
					codes[n++] = d->numeric_codes[slot][j];
			}
		}
		else
		{
			const char *p = area + item->values_offset;

			reserve_codes(&codes, &codes_capacity, item->n_values);
			for (int j = 0; j < item->n_values; j++)
			{
				int32		length;
				int32		code;

				memcpy(&length, p, sizeof(int32));
				code = dictionary_lookup(d, slot, p + sizeof(int32), length);
				if (code >= 0)
					codes[n++] = code;
				p += INTALIGN(sizeof(int32) + length);
			}
		}
		if (n == 0)
			continue;			/* no row can match this item */
		genie_query_builder_begin_item(&b, item->weight);
		for (int j = 0; j < n; j++)
			genie_query_builder_add_range(&b, GENIE_ROW_KEYWORD(slot, codes[j]),
										  GENIE_ROW_KEYWORD(slot, codes[j]));
	}
	return genie_query_builder_finish(&b);
}
