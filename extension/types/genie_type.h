/*-------------------------------------------------------------------------
 *
 * genie_type.h
 *	  What each indexed data type gives the genie access method: a struct of
 *	  callbacks that turn its values and queries into keywords (pgvector's
 *	  type-info pattern).
 *
 * An operator class's support function 1 returns a pointer to its type's
 * GenieTypeInfo.  The access method never looks at a type itself: building,
 * inserting, scanning, planning and the batch functions all go through
 * these callbacks, so a new data type is one new file with one struct and
 * one support function, not new cases in the access method.  The type's
 * encoding code is kept in the metapage at build time; a built index is
 * read with the type that built it (genie_index_type), so it never mixes
 * two encodings, even after ALTER INDEX ... SET (n = ...).
 *
 * The types: genie_int4.c (int4[] keyword sets, genie_int4_ops),
 * genie_ngram.c (text as ordered n-grams, genie_ngram_ops), genie_rows.c
 * (whole rows as range tuples, genie_row_ops), genie_vector.c (real[]
 * vectors by Euclidean distance, with LSH keywords, genie_vector_ops),
 * genie_bit.c (bit(n) codes by Hamming distance, genie_bit_ops) and
 * documents/genie_document.c (tsvector documents by shared words,
 * genie_tsvector_ops).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_TYPE_H
#define GENIE_TYPE_H

#include "postgres.h"

#include "access/stratnum.h"
#include "nodes/execnodes.h"

#include "service/genie_values.h"
#include "types/genie_query.h"
#include "storage/genie_storage.h"

/* support function 1: (internal) RETURNS internal, a const GenieTypeInfo * */
#define GENIE_TYPE_PROC			1

/* ordering strategies */
#define GENIE_MATCH_STRATEGY		1	/* col <~> query: negated match count (every type) */
#define GENIE_NGRAM_EDIT_STRATEGY	2	/* text <%> text: edit distance, rechecked */
/* a distance over stored values: real[] <-> real[] (Euclidean), bit <-> bit (Hamming) */
#define GENIE_VALUE_DISTANCE_STRATEGY 3
/* the gram length of text <~> text, and the default of the reloption n */
#define GENIE_NGRAM_DEFAULT_N		3

/* An ORDER BY argument (or a batch function's query) as an engine query. */
typedef struct GenieOrderBy
{
	GenieQuery *query;
	bool		edit_distance;	/* order by a lower bound on the edit distance, rechecked */
	int32		query_length;	/* code points of the text query */
	int32		query_lost;		/* its grams merged by hash collisions */

	/*
	 * A vector query (genie_vector_ops): its elements, ordered by distance
	 * over the stored vectors (query is NULL: approximate_query gives the LSH
	 * keywords when genie.vector_search = lsh asks for them; the EWH buckets
	 * of a code when genie.bit_search = ewh does).
	 */
	float	   *vector;
	int32		vector_dim;

	/*
	 * A code query (genie_bit_ops): its genie_code_words(code_bits) words,
	 * ordered by Hamming distance over the stored codes (query is NULL).
	 */
	uint64	   *code;
	int32		code_bits;
} GenieOrderBy;

typedef struct GenieTypeInfo
{
	int16		encoding;		/* GENIE_ENCODING_*: kept in the metapage */
	const char *name;			/* genie_index_info's encoding, e.g. "int4 set" */
	const char *opclass;		/* the operator class, for messages */
	const char *batch_function; /* the SQL function that answers batches on it */

	/* At build: the encoding's parameters, from the index's options. */
	void		(*build_encoding) (Relation index, GenieEncoding *encoding);

	/*
	 * At build, when the type needs more than encode_value (NULL otherwise):
	 * a state made before the table scan (scan false: for an empty index,
	 * without reading the table), the keywords of each value through it, and
	 * what it leaves in the metapage.
	 */
	void	   *(*build_begin) (Relation heap, Relation index, IndexInfo *indexInfo, bool scan);
	int32	   *(*build_value) (void *state, Datum value, int *n);
	void		(*build_finish) (void *state, GenieMetaPageData *meta);

	/*
	 * The bytes an index that stores values keeps with each value (not
	 * NULL): the text as UTF-8 (genie_ngram_ops), the float4 elements
	 * (genie_vector_ops).  NULL: the type stores none.  Whether an index
	 * stores them is fixed at build (store_strings for genie_ngram_ops).
	 */
	const char *(*value_bytes_of) (Datum value, size_t *size);
	bool		values_required;	/* stored whatever store_strings says */

	/* The keywords of an indexed value (not NULL), palloc'd; duplicates allowed. */
	int32	   *(*encode_value) (Relation index, const GenieEncoding *encoding, Datum value,
								 int *n);

	/*
	 * At build, when encoding is worth doing on every core: the keywords of
	 * count values at once (as build_value's or encode_value's, build_begin's
	 * state given where the type has one), given by their value_bytes_of
	 * bytes (value i's from offsets[i] to offsets[i + 1]), on
	 * genie.cpu_threads threads: value i's in keywords[starts[i],
	 * starts[i + 1]), both palloc'd.  NULL: the build encodes value by value.
	 */
	void		(*encode_batch) (void *state, const GenieEncoding *encoding, const char *bytes,
								 const int64 *offsets, int count, int32 **keywords,
								 int64 **starts);
	/*
	 * The values a batch of this build may hold (0: none, the build encodes
	 * value by value), so that a batch's keywords stay some tens of MB.
	 * NULL: the build's own limit.
	 */
	int			(*encode_batch_values) (void *state);

	/*
	 * The same for genie_index_check, which must not change the index: an
	 * error where encode_value would add to it (a row index's dictionary).
	 * NULL: encode_value changes nothing.
	 */
	int32	   *(*encode_check) (Relation index, const GenieEncoding *encoding, Datum value,
								 int *n);

	/*
	 * At insert, under the metapage's exclusive lock and before the row's
	 * pending record: checks the value against what the metapage holds (a
	 * vector's dimension), and may record it there (WAL-logged).  NULL:
	 * nothing to check.
	 */
	void		(*insert_prepare) (Relation index, Buffer metabuf, Datum value);

	/*
	 * At insert, before encode_value: true when the value's length (a
	 * vector's dimension, a code's bits) differs from the one the index's
	 * objects fixed, which encode_value would refuse.  The insert then first
	 * removes the objects of dead rows (genie_remove_dead_objects), after
	 * which an index left empty takes the new length (rows whose insert
	 * rolled back; deleted rows wait for VACUUM).  NULL: no such length.
	 */
	bool		(*length_conflict) (Relation index, Datum value);

	/*
	 * An ORDER BY argument of the given strategy and type (not NULL) as a
	 * query; errors when the index cannot answer it.
	 */
	void		(*encode_query) (Relation index, const GenieEncoding *encoding,
								 StrategyNumber strategy, Datum value, Oid type,
								 GenieOrderBy *out);

	/*
	 * At plan time: false when a scan of the index for this ordering would
	 * raise an error, so that the planner avoids it.  query is the argument
	 * when it folds to a constant, else 0 with query_known false.  NULL:
	 * always serves.
	 */
	bool		(*plan_serves) (Relation index, const GenieEncoding *encoding,
								StrategyNumber strategy, Datum query, bool query_known);

	/*
	 * For a type ordered by a distance over its stored values: the
	 * match-count query whose top rows approximate the nearest values of
	 * query q of queries (the LSH keywords of a vector, the EWH buckets of a
	 * code, weighted), or NULL when the index has none.  NULL: the type has
	 * no such query.
	 */
	GenieQuery *(*approximate_query) (Relation index, const GenieValueBatch *queries, int q);

	/*
	 * The same for every query of the batch at once, into out[0..n) (a
	 * batch function's queries, on genie.cpu_threads cores).  NULL: query
	 * by query through approximate_query.
	 */
	void		(*approximate_queries) (Relation index, const GenieValueBatch *queries,
										GenieQuery **out);
} GenieTypeInfo;

/* A built index's encoding and the type that reads it. */
typedef struct GenieIndexType
{
	GenieEncoding encoding;
	const GenieTypeInfo *info;
} GenieIndexType;

/* The type and encoding an index is about to be built with. */
extern void genie_type_for_build(Relation index, GenieIndexType *type);

/*
 * Whether an index about to be built keeps its values: its type has them
 * (and, for genie_ngram_ops, store_strings is on).
 */
extern bool genie_index_stores_values(Relation index, const GenieTypeInfo *info);

/*
 * The type and encoding of a built index, read once per relcache entry
 * (rd_amcache) and copied out: a relcache rebuild, which any catalog lookup
 * may trigger, frees rd_amcache, so no pointer into it is handed out.
 * Errors when the operator class's type is not the one that built the index.
 */
extern void genie_index_type(Relation index, GenieIndexType *type);

/* The type of the index's operator class, without reading the index. */
extern const GenieTypeInfo *genie_opclass_type(Relation index);

/* Checks an operator class's support function 1 for amvalidate. */
extern bool genie_type_proc_valid(Oid proc);

#endif							/* GENIE_TYPE_H */
