/*-------------------------------------------------------------------------
 *
 * genie_cache_values.c
 *	  The stored values of a cached index version (genie_cache_values.h):
 *	  the strings of genie_ngram_ops (with store_strings), the vectors of
 *	  genie_vector_ops or the codes of genie_bit_ops, all of them for a scan
 *	  in this backend or, with the
 *	  genie service, the pending objects' alone here and the main objects'
 *	  handed to the service.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "search/genie_cache_values.h"
#include "genie_utils.h"
#include "storage/genie_content.h"
#include "service/genie_service_client.h"
#include "profile/genie_profile.h"

/*
 * The entry's content read again from the index, with the main objects'
 * values when with_main: into content, or with each given, to each(arg,
 * id, value, length) straight from the pages (the pending objects' come
 * with the pending list).
 * Inserts since the entry was read only add objects beyond its own, but a
 * merge renumbers them: then the entry's objects are gone.
 */
static void
read_entry_values(GenieCachedIndex *entry, GenieIndexContent *content, bool with_main,
				  GenieValueFn each, void *arg)
{
	Relation	index = index_open(entry->index_oid, NoLock);
	GenieServiceKey key;

	Assert(entry->values_stored);
	GENIE_CONTENT_LOCK_SHARE(index);
	PG_TRY();
	{
		genie_read_content(index, content, false);
		if (with_main && each != NULL)
			genie_read_main_values(index, entry->n_main_objects, entry->main_key.main_version,
								   each, arg);
		else if (with_main)
			genie_read_values(index, content);
	}
	PG_FINALLY();
	{
		GENIE_CONTENT_UNLOCK_SHARE(index);
	}
	PG_END_TRY();
	genie_cache_make_key(index, content, &key);
	index_close(index, NoLock);
	if (!genie_service_keys_equal(&key, &entry->main_key) || content->n_objects < entry->n_objects)
	{
		genie_content_version_gone = true;
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("genie index \"%s\" was merged while this statement searched it",
						get_rel_name(entry->index_oid)),
				 errhint("Retry the statement.")));
	}
}

/*
 * The flags of the objects a scan of the entry's values skips (dead or
 * NULL), by object id; NULL when none is.  Made before the values they go
 * with are published, so that a scan never sees the values without them.
 */
static void
make_excluded(GenieCachedIndex *entry)
{
	if (entry->excluded_ready)
		return;
	for (int32 id = 0; id < entry->n_objects; id++)
	{
		if ((entry->objects[id].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) == 0)
			continue;
		if (entry->excluded == NULL)
		{
			entry->excluded = MemoryContextAllocExtended(GetMemoryChunkContext(entry),
														 Max(entry->n_objects, 1),
														 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			entry->bytes += Max(entry->n_objects, 1);
		}
		entry->excluded[id] = 1;
	}
	entry->excluded_ready = true;
}

/* value_batch's codes: each code's bytes (its bit string as stored) at the start of its row. */
static void
code_batch(GenieCachedIndex *entry, const char *data, const int64 *offsets, int32 first,
		   int32 n, GenieValueBatch *batch)
{
	int32		bits = entry->value_dim;
	Size		words = (Size) genie_code_words(bits);
	int64		bytes = (bits + 7) / 8;
	uint64	   *rows = genie_palloc_zeroed(sizeof(uint64) * words * (Size) Max(n, 1));

	for (int32 i = 0; i < n; i++)
	{
		int64		size = offsets[i + 1] - offsets[i];

		if (size == 0 && (entry->objects[first + i].flags & GENIE_OBJECT_NULL))
			continue;
		if (size != bytes)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" stores a code of %lld bytes where %d bits need %lld",
							get_rel_name(entry->index_oid), (long long) size, bits,
							(long long) bytes),
					 errhint("REINDEX the index.")));
		memcpy(rows + (Size) i * words, data + offsets[i], size);
		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	batch->codes = rows;
	batch->dim = bits;
}

/*
 * Objects [first, first + n) of the entry as a batch of values, from their
 * stored values data/offsets (indexed from first's): strings as they are
 * (a NULL one is empty, and excluded), vectors as a matrix of dim floats a
 * row, codes as rows of genie_code_words(dim) words holding the code's
 * bytes as stored (a NULL one stays zero, and excluded).  In the current
 * context.
 */
static void
value_batch(GenieCachedIndex *entry, const char *data, const int64 *offsets, int32 first,
			int32 n, GenieValueBatch *batch)
{
	int32		dim = entry->value_dim;
	float	   *matrix;

	memset(batch, 0, sizeof(*batch));
	batch->kind = entry->values_kind;
	batch->n = n;
	if (entry->values_kind == GENIE_VALUES_STRINGS)
	{
		/* the offsets of the objects from first count from 0 */
		Assert(offsets[0] == 0);
		batch->text = data;
		batch->text_offsets = offsets;
		return;
	}
	if (entry->values_kind == GENIE_VALUES_CODES)
	{
		code_batch(entry, data, offsets, first, n, batch);
		return;
	}
	matrix = genie_palloc_zeroed(sizeof(float) * (Size) Max(n, 1) * dim);
	for (int32 i = 0; i < n; i++)
	{
		int64		size = offsets[i + 1] - offsets[i];

		if (size == 0 && (entry->objects[first + i].flags & GENIE_OBJECT_NULL))
			continue;
		if (size != (int64) sizeof(float) * dim)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" stores a vector of %lld bytes where %d dimensions need %d",
							get_rel_name(entry->index_oid), (long long) size, dim,
							(int) sizeof(float) * dim),
					 errhint("REINDEX the index.")));
		memcpy(matrix + (Size) i * dim, data + offsets[i], size);
		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	batch->vectors = matrix;
	batch->dim = dim;
}

/* Where the vectors being read go: rows of the entry's dimension. */
typedef struct VectorRows
{
	GenieCachedIndex *entry;
	float	   *rows;
	int32		n;				/* rows there is room for */
} VectorRows;

/* Object id's stored vector into its row; a NULL one leaves the row zero. */
static void
put_vector(void *arg, int32 id, const char *value, int32 length)
{
	VectorRows *v = arg;
	int32		dim = v->entry->value_dim;

	/* genie_read_main_values keeps main ids below the entry's: this is the rows' guard */
	if (id < 0 || id >= v->n)
		elog(ERROR, "genie: vector %d beyond the %d rows being loaded", id, v->n);
	if (length == 0 && (v->entry->objects[id].flags & GENIE_OBJECT_NULL))
		return;
	if (length != (int32) sizeof(float) * dim)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" stores a vector of %d bytes where %d dimensions need %d",
						get_rel_name(v->entry->index_oid), length, dim, (int) sizeof(float) * dim),
				 errhint("REINDEX the index.")));
	memcpy(v->rows + (Size) id * dim, value, length);
}

/*
 * The entry's vectors, main ones (and with pending the pending ones too),
 * into rows (zeroed, n * value_dim floats), read straight from the pages:
 * one copy of each vector, where a set of hundreds of megabytes used to be
 * copied four times on its way (chain, values, matrix, set).
 */
static void
read_vectors(GenieCachedIndex *entry, GenieIndexContent *content, bool pending, float *rows)
{
	VectorRows	v = {entry, rows, pending ? entry->n_objects : entry->n_main_objects};

	read_entry_values(entry, content, true, put_vector, &v);
	if (!pending)
		return;
	/* the entry's pending objects come first in the pending list */
	for (int32 i = 0; i < entry->n_objects - entry->n_main_objects; i++)
		put_vector(&v, entry->n_main_objects + i,
				   content->pending_value_data + content->pending_value_offsets[i],
				   (int32) (content->pending_value_offsets[i + 1] - content->pending_value_offsets[i]));
}

/*
 * Every object's vector as the entry's set: the C API's rows written
 * straight from the pages, then sealed (checked finite).
 */
static void
load_vector_set(GenieCachedIndex *entry, GenieIndexContent *content, GenieValueSet *set)
{
	genie_vectors *volatile vectors = NULL;
	float	   *rows;
	genie_error err;

	GENIE_CHECK(genie_vectors_create_unsealed(entry->n_objects, entry->value_dim, genie_cpu_threads,
											  (genie_vectors **) &vectors, &rows, &err),
				&err, "genie: loading the stored vectors");
	PG_TRY();
	{
		read_vectors(entry, content, true, rows);
	}
	PG_CATCH();
	{
		genie_vectors_free(vectors);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (genie_vectors_seal(vectors, &err) != GENIE_OK)
	{
		genie_vectors_free(vectors);
		genie_report_error(&err, "genie: loading the stored vectors");
	}
	set->kind = GENIE_VALUES_VECTORS;
	set->vectors = vectors;
	entry->bytes += genie_value_set_host_bytes(set);
}

/* The C API's copy of a batch of values, its bytes counted in the entry. */
static void
create_set(GenieCachedIndex *entry, const GenieValueBatch *batch, GenieValueSet *set)
{
	genie_error err;

	GENIE_CHECK(genie_value_set_create(batch, set, &err), &err, "genie: loading the stored values");
	entry->bytes += genie_value_set_host_bytes(set);
}

/*
 * Reads the values of the entry's objects (pending: the pending objects'
 * alone) into set, with a scan's view of them.
 */
static void
load_set(GenieCachedIndex *entry, bool pending, GenieValueSet *set)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;
	GenieValueBatch batch;

	Assert(entry->values_stored);
	genie_profile_push(GENIE_PHASE_LOAD);
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie values load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	if (!pending && entry->values_kind == GENIE_VALUES_VECTORS)
	{
		/* the flags first: a set published without them would scan dead rows */
		MemoryContextSwitchTo(old);
		make_excluded(entry);
		MemoryContextSwitchTo(tmpcxt);
		load_vector_set(entry, &content, set);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(tmpcxt);
		genie_profile_pop();
		return;
	}
	read_entry_values(entry, &content, !pending, NULL, NULL);
	if (pending)
		/* the entry's pending objects come first in the pending list */
		value_batch(entry, content.pending_value_data, content.pending_value_offsets,
					entry->n_main_objects, entry->n_objects - entry->n_main_objects, &batch);
	else
		value_batch(entry, content.value_data, content.value_offsets, 0, entry->n_objects, &batch);
	MemoryContextSwitchTo(old);
	if (!pending)
		make_excluded(entry);
	create_set(entry, &batch, set);
	MemoryContextDelete(tmpcxt);
	genie_profile_pop();
}

const GenieValueSet *
genie_cache_values(GenieCachedIndex *entry)
{
	if (!genie_value_set_made(&entry->values))
		load_set(entry, false, &entry->values);
	return &entry->values;
}

const GenieValueSet *
genie_cache_pending_values(GenieCachedIndex *entry)
{
	if (!genie_value_set_made(&entry->pending_values))
		load_set(entry, true, &entry->pending_values);
	return &entry->pending_values;
}

const int32 *
genie_cache_excluded_main(GenieCachedIndex *entry, int32 *n)
{
	if (!entry->excluded_main_ready)
	{
		int32		count = 0;

		for (int32 id = 0; id < entry->n_main_objects; id++)
			if ((entry->objects[id].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) != 0)
				count++;
		entry->excluded_main = MemoryContextAllocExtended(GetMemoryChunkContext(entry),
														  sizeof(int32) * Max(count, 1),
														  MCXT_ALLOC_HUGE);
		entry->bytes += sizeof(int32) * Max(count, 1);
		count = 0;
		for (int32 id = 0; id < entry->n_main_objects; id++)
			if ((entry->objects[id].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) != 0)
				entry->excluded_main[count++] = id;
		entry->n_excluded_main = count;
		entry->excluded_main_ready = true;
	}
	*n = entry->n_excluded_main;
	return entry->excluded_main;
}

uint8 *
genie_cache_excluded_pending(GenieCachedIndex *entry)
{
	int32		n_main = entry->n_main_objects;
	int32		n_pending = entry->n_objects - n_main;
	uint8	   *excluded = palloc(Max(n_pending, 1));

	for (int32 i = 0; i < n_pending; i++)
		excluded[i] = (entry->objects[n_main + i].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) != 0;
	return excluded;
}

GenieServiceOutcome
genie_cache_ship_values(GenieCachedIndex *entry, const char *list, int64 list_bytes, genie_error *err)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie values load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	GenieValueBatch batch;
	GenieServiceOutcome outcome;

	genie_profile_push(GENIE_PHASE_LOAD);
	if (entry->values_kind == GENIE_VALUES_VECTORS)
	{
		/* zeroed on genie.cpu_threads: a NULL row stays the zero vector */
		float	   *rows = genie_palloc_zeroed(sizeof(float) * (Size) Max(entry->n_main_objects, 1) *
											   entry->value_dim);

		read_vectors(entry, &content, false, rows);
		memset(&batch, 0, sizeof(batch));
		batch.kind = GENIE_VALUES_VECTORS;
		batch.n = entry->n_main_objects;
		batch.vectors = rows;
		batch.dim = entry->value_dim;
	}
	else
	{
		read_entry_values(entry, &content, true, NULL, NULL);
		/* the main objects' are the first n_main_objects (their offsets from 0) */
		value_batch(entry, content.value_data, content.value_offsets, 0, entry->n_main_objects,
					&batch);
	}
	outcome = genie_service_load_values(&entry->main_key, entry->index_oid, &batch, list, (Size) list_bytes,
										err);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	genie_profile_pop();
	return outcome;
}
