/*-------------------------------------------------------------------------
 *
 * genie_content.h
 *	  The decoded content of an index (genie_content.c): its main postings,
 *	  pending objects and stored values read from the pages into memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_CONTENT_H
#define GENIE_CONTENT_H

#include "storage/genie_storage.h"

/*
 * Reads the index (the main Position Map and List Array only when
 * with_postings); the caller holds the content lock (share or exclusive).
 */
/*
 * Set just before the error that a statement's version of an index is gone
 * (a merge renumbered its objects while the statement still needed to read
 * them: "was merged while this statement searched it"), by every reader
 * that raises it; genie_search_batch_retrying reads it to tell that error
 * from any other serialization failure.
 */
extern bool genie_content_version_gone;

extern void genie_read_content(Relation index, GenieIndexContent *content, bool with_postings);
/* The same without the List Array but with the main Position Map (keyword counts). */
extern void genie_read_content_counts(Relation index, GenieIndexContent *content);
/* Reads only the counts and the main Position Map and List Array, as above. */
extern void genie_read_main_postings(Relation index, GenieIndexContent *content);

/*
 * Reads every object's stored value into content (read by
 * genie_read_content with the same content lock held): value_data and
 * value_offsets.  Nothing when the index keeps no values.
 */
extern void genie_read_values(Relation index, GenieIndexContent *content);
/*
 * Each main object's stored value, in object order, read straight from the
 * values chain's pages (no copy of the whole chain): each(arg, id, value,
 * length), value valid during the call; a NULL object's length is 0.  The
 * same locks as genie_read_values.  For loading a large set of values
 * where it goes: ids stay below n_main, and a version other than the
 * caller's (n_main main objects, main_version) is a serialization error.
 */
/*
 * The serialization failure of a reader whose version of the main objects
 * a merge replaced, one replayed on a standby included
 * (genie_content_version_gone set first: genie_retry_on_version_gone runs
 * the search again on the current version).
 */
extern void genie_main_version_gone(const char *index_name) pg_attribute_noreturn();

typedef void (*GenieValueFn) (void *arg, int32 id, const char *value, int32 length);
extern void genie_read_main_values(Relation index, int32 n_main, uint32 main_version,
								   GenieValueFn each, void *arg);

/*
 * A copy of the metapage for a reader of several chains: on a standby (where
 * the content lock excludes nothing) the metapage stays share-locked in
 * *metabuf until the caller releases it, so that replay of a merge waits;
 * elsewhere *metabuf is InvalidBuffer.
 */
extern void genie_read_meta_for_content(Relation index, GenieMetaPageData *meta, Buffer *metabuf);

/*
 * Another chain of value records (the permutation index's permutants):
 * each(arg, i, value, length) for its count records, an error when the
 * chain holds another number.  The caller holds the content lock.
 */
extern void genie_read_value_chain(Relation index, GenieChain chain, int64 bytes, int32 count,
								   GenieValueFn each, void *arg);

/* Appends one main object's value record to a values chain being written. */
extern void genie_values_append(GenieChainWriter *w, const char *value, size_t size);

#endif							/* GENIE_CONTENT_H */
