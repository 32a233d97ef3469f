/*-------------------------------------------------------------------------
 *
 * genie_cache_values.c
 *	  The stored values of a cached index version: the strings of
 *	  genie_ngram_ops (with store_strings), all of them for a scan in this
 *	  backend or, with the genie service, the pending objects' alone here and
 *	  the main objects' handed to the service; the vectors of
 *	  genie_vector_ops, the same way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "search/genie_cache.h"
#include "genie_utils.h"

/*
 * The entry's content read again from the index, with the main objects'
 * values when with_main (the pending objects' come with the pending list).
 * Inserts since the entry was read only add objects beyond its own, but a
 * merge renumbers them: then the entry's objects are gone.
 */
static void
read_entry_values(GenieCachedIndex *entry, GenieIndexContent *content, bool with_main)
{
	Relation	index = index_open(entry->index_oid, NoLock);
	GenieServiceKey key;

	Assert(entry->values_stored);
	GENIE_CONTENT_LOCK_SHARE(index);
	PG_TRY();
	{
		genie_read_content(index, content, false);
		if (with_main)
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
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("genie index \"%s\" was merged while this statement searched it",
						get_rel_name(entry->index_oid)),
				 errhint("Retry the statement.")));
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

genie_strings *
genie_cache_strings(GenieCachedIndex *entry)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;
	genie_error err;

	if (entry->strings != NULL)
		return entry->strings;
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie strings load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	read_entry_values(entry, &content, true);
	MemoryContextSwitchTo(old);
	make_excluded(entry);
	GENIE_CHECK(genie_strings_create(content.value_data, content.value_offsets, entry->n_objects,
									 &entry->strings, &err),
				&err, "genie: loading the stored strings");
	entry->bytes += genie_strings_memory_bytes(entry->strings);
	MemoryContextDelete(tmpcxt);
	return entry->strings;
}

genie_strings *
genie_cache_pending_strings(GenieCachedIndex *entry)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;
	genie_error err;
	int32		n = entry->n_objects - entry->n_main_objects;

	if (entry->pending_strings != NULL)
		return entry->pending_strings;
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie strings load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	read_entry_values(entry, &content, false);
	/* the entry's pending objects come first in the pending list */
	GENIE_CHECK(genie_strings_create(content.pending_value_data, content.pending_value_offsets, n,
									 &entry->pending_strings, &err),
				&err, "genie: loading the stored strings");
	entry->bytes += genie_strings_memory_bytes(entry->pending_strings);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	return entry->pending_strings;
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

GenieServiceOutcome
genie_cache_ship_strings(GenieCachedIndex *entry, genie_error *err)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie strings load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	GenieServiceOutcome outcome;

	read_entry_values(entry, &content, true);
	/* the main objects' are the first n_main_objects + 1 offsets, from 0 */
	outcome = genie_service_load_strings(&entry->main_key, entry->index_oid, content.value_data,
										 content.value_offsets, err);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	return outcome;
}

/*
 * Objects [first, first + n) of the entry as a matrix of dim floats a row
 * (row i: object first + i), from their stored values data/offsets (indexed
 * from first's); NULL rows stay zero (and excluded).
 */
static float *
vector_matrix(GenieCachedIndex *entry, const char *data, const int64 *offsets, int32 first,
			  int32 n)
{
	int32		dim = entry->vector_dim;
	float	   *matrix = palloc_extended(sizeof(float) * (Size) Max(n, 1) * dim,
										 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

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
	return matrix;
}

genie_vectors *
genie_cache_vectors(GenieCachedIndex *entry)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;
	genie_error err;
	float	   *matrix;

	if (entry->vectors != NULL)
		return entry->vectors;
	Assert(entry->values_stored && entry->vector_dim > 0);
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie vectors load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	read_entry_values(entry, &content, true);
	matrix = vector_matrix(entry, content.value_data, content.value_offsets, 0, entry->n_objects);
	MemoryContextSwitchTo(old);
	make_excluded(entry);
	GENIE_CHECK(genie_vectors_create(matrix, entry->n_objects, entry->vector_dim, &entry->vectors, &err),
				&err, "genie: loading the stored vectors");
	entry->bytes += genie_vectors_memory_bytes(entry->vectors);
	MemoryContextDelete(tmpcxt);
	return entry->vectors;
}

genie_vectors *
genie_cache_pending_vectors(GenieCachedIndex *entry)
{
	MemoryContext tmpcxt;
	MemoryContext old;
	GenieIndexContent content;
	genie_error err;
	int32		n = entry->n_objects - entry->n_main_objects;
	float	   *matrix;

	if (entry->pending_vectors != NULL)
		return entry->pending_vectors;
	Assert(entry->values_stored && entry->vector_dim > 0);
	tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie vectors load context",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(tmpcxt);
	read_entry_values(entry, &content, false);
	/* the entry's pending objects come first in the pending list */
	matrix = vector_matrix(entry, content.pending_value_data, content.pending_value_offsets,
						   entry->n_main_objects, n);
	MemoryContextSwitchTo(old);
	GENIE_CHECK(genie_vectors_create(matrix, n, entry->vector_dim, &entry->pending_vectors, &err),
				&err, "genie: loading the stored vectors");
	entry->bytes += genie_vectors_memory_bytes(entry->pending_vectors);
	MemoryContextDelete(tmpcxt);
	return entry->pending_vectors;
}

GenieServiceOutcome
genie_cache_ship_vectors(GenieCachedIndex *entry, genie_error *err)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie vectors load context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	GenieIndexContent content;
	GenieServiceOutcome outcome;
	float	   *matrix;

	read_entry_values(entry, &content, true);
	/* the main objects' are the first n_main_objects */
	matrix = vector_matrix(entry, content.value_data, content.value_offsets, 0, entry->n_main_objects);
	outcome = genie_service_load_vectors(&entry->main_key, entry->index_oid, entry->vector_dim,
										 matrix, err);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);
	return outcome;
}
