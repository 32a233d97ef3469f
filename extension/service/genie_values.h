/*-------------------------------------------------------------------------
 *
 * genie_values.h
 *	  Stored values, the one kind table of both sides of the genie service
 *	  (genie_values.c): an index of genie_ngram_ops with store_strings keeps
 *	  each row's string (searched by edit distance), one of genie_vector_ops
 *	  each row's vector (searched by Euclidean distance), one of
 *	  genie_bit_ops each row's binary code (searched by Hamming distance).
 *	  Vectors and codes are rows of one width (dim elements, dim bits), so
 *	  most of what they need is written once for both.  Backends scan
 *	  them in-process or hand them to the service, which scans them for
 *	  every session; both go through the functions here, so that what
 *	  differs between the kinds (the C API calls, the layout of a
 *	  batch) is written once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_VALUES_H
#define GENIE_VALUES_H

#include "postgres.h"

#include "genie/genie.h"
#include "storage/genie_content.h"

typedef enum GenieValuesKind
{
	GENIE_VALUES_STRINGS,		/* genie_ngram_ops with store_strings: by edit distance */
	GENIE_VALUES_VECTORS,		/* genie_vector_ops: by Euclidean distance */
	GENIE_VALUES_CODES			/* genie_bit_ops: by Hamming distance */
} GenieValuesKind;

/*
 * n values of one kind: an index version's objects (as handed to the
 * service) or a batch of queries; strings as UTF-8 in CSR form (text, n + 1
 * byte offsets from 0), vectors as n rows of dim float4, codes as n rows
 * of dim bits in genie_code_words(dim) uint64 each (bits beyond dim zero).
 */
typedef struct GenieValueBatch
{
	GenieValuesKind kind;
	int32		n;
	const char *text;			/* strings */
	const int64 *text_offsets;
	const float *vectors;		/* vectors */
	const uint64 *codes;		/* codes */
	int32		dim;			/* a vector's elements, a code's bits */
} GenieValueBatch;

/*
 * The nearest values of each query of a batch, palloc'd: per query q, rows
 * [offsets[q], offsets[q + 1]) of objects and distances, ordered by
 * (distance, length, object id).  Edit and Hamming distances are whole numbers;
 * lengths are the strings' in code points (the second sort key of edit
 * distance scans; zero for vectors, and where the order is settled NULL).
 */
typedef struct GenieValueRows
{
	int			n_queries;
	int64	   *offsets;
	int32	   *objects;
	float8	   *distances;
	int32	   *lengths;
} GenieValueRows;

/* The C API's copy of a batch of values, searchable; its GPU copy lives and dies with it. */
typedef struct GenieValueSet
{
	GenieValuesKind kind;
	genie_strings *strings;
	genie_vectors *vectors;
	genie_codes *codes;
} GenieValueSet;

/* A scan's rows as the C API returned them (malloc'd: genie_value_found_free). */
typedef struct GenieValueFound
{
	GenieValuesKind kind;
	genie_string_results *strings;
	genie_vector_results *vectors;
	genie_code_results *codes;
} GenieValueFound;

/*
 * The wire layout of values [first, first + n) of a batch, which requests
 * and hand-overs carry: strings as offsets (n + 1 int64, from 0) | text,
 * vectors and codes as n rows of their width.  genie_value_batch_read checks a layout
 * (false when malformed) and points out into src.
 */
extern Size genie_value_batch_bytes(const GenieValueBatch *batch, int32 first, int32 n);
extern void genie_value_batch_write(const GenieValueBatch *batch, int32 first, int32 n, char *dst);
extern bool genie_value_batch_read(GenieValuesKind kind, int32 n, int32 dim, const char *src,
								   Size size, GenieValueBatch *out);

/* Values which[0 .. n) of all, as a batch (palloc'd: genie_value_batch_free_copy). */
extern void genie_value_batch_select(const GenieValueBatch *all, const int *which, int n,
									 GenieValueBatch *out);
extern void genie_value_batch_free_copy(GenieValueBatch *copy);

/* The batches of parts[0 .. n) in one (palloc'd; for one engine call). */
extern void genie_value_batch_concat(const GenieValueBatch *parts, int n, GenieValueBatch *out);

/* The set of batch's values: GENIE_OK, or the C API's error (invalid values among them). */
extern genie_status genie_value_set_create(const GenieValueBatch *batch, GenieValueSet *set,
										   genie_error *err);
extern void genie_value_set_free(GenieValueSet *set);
extern bool genie_value_set_made(const GenieValueSet *set);
extern size_t genie_value_set_host_bytes(const GenieValueSet *set);
extern size_t genie_value_set_device_bytes(const GenieValueSet *set);
/*
 * The permutation index's row of every value of objects against the
 * permutants (same kind, strings or vectors), into rows (objects' count x
 * genie_permutation_stride(permutants' count) bytes), on device.
 */
extern genie_status genie_value_set_permutations(const GenieValueSet *objects,
												 const GenieValueSet *permutants,
												 genie_engine_kind device,
												 const genie_engine_options *options,
												 uint8 *rows, genie_error *err);
/* The vectors' dimension or the codes' bits (0 for strings). */
extern int32 genie_value_set_dim(const GenieValueSet *set);
/* The second sort key of value id: a string's length in code points, 0 for a vector or a code. */
extern int32 genie_value_set_length(const GenieValueSet *set, int32 id);

/*
 * The k nearest values of set to each query, skipping the objects flagged
 * in excluded (NULL: none), on device (CPU, GPU or AUTO; nothing falls back:
 * GENIE_DEVICE_OUT_OF_MEMORY goes to the caller).  With candidates (the
 * LSH, EWH and permutation re-ranks, always on the CPU) only query q's
 * candidates[candidate_offsets[q] .. candidate_offsets[q + 1]).  Vectors:
 * list (NULL: none) is the set's List of Clusters, read as list_use says
 * (genie_vector_scan.list).
 */
extern genie_status genie_value_set_scan(const GenieValueSet *set, genie_engine_kind device,
										 const genie_engine_options *options,
										 const GenieValueBatch *queries, int32 k,
										 const uint8 *excluded, const int64 *candidate_offsets,
										 const int32 *candidates, const genie_cluster_list *list,
										 genie_list_use list_use, GenieValueFound *found,
										 genie_error *err);

/*
 * Every value of set within radius of each query (strings or vectors),
 * skipping the objects flagged in excluded (NULL: none), pruned by list
 * (NULL: every object is read; else a list of the first objects, the rest
 * read one by one), on device (CPU, GPU or AUTO, nothing falls back; on
 * the GPU strings are read by length window, not through the list).  With
 * candidate_offsets (else NULL), only each
 * query's candidates are read, on the CPU: the permutation index's search.
 */
extern genie_status genie_value_set_within(const GenieValueSet *set, genie_engine_kind device,
										   const genie_engine_options *options,
										   const GenieValueBatch *queries, double radius,
										   const uint8 *excluded, const genie_cluster_list *list,
										   const int64 *candidate_offsets, const int32 *candidates,
										   genie_range_results **results, genie_error *err);

/*
 * Values [first, first + n) of an index's content as a batch (strings in
 * place, vectors copied into a palloc'd matrix of dim columns, a NULL
 * one zero).
 */
extern void genie_value_batch_from_content(const GenieIndexContent *content, GenieValuesKind kind,
										   int32 dim, int32 first, int32 n, GenieValueBatch *batch);

/* Excluded flags (palloc'd) of objects [first, first + n) of content: NULL or dead. */
extern uint8 *genie_content_excluded(const GenieIndexContent *content, int32 first, int32 n);

/*
 * A List of Clusters (of superclusters of supercluster_clusters clusters;
 * 0: none) of set's objects whose excluded flag is zero, its centres picked
 * by `centres` (GENIE_CLUSTER_CENTRES_*), on the CPU.
 */
extern genie_status genie_value_set_cluster_list(const GenieValueSet *set, const uint8 *excluded,
												 int32 cluster_size, int32 supercluster_clusters,
												 int32 centres,
												 const genie_engine_options *options,
												 genie_cluster_list **list, genie_error *err);

/* A scan's rows: queries, query offsets, row i's object and distance, where it ran. */
extern int32 genie_value_found_queries(const GenieValueFound *found);
extern const int64 *genie_value_found_offsets(const GenieValueFound *found);
extern int32 genie_value_found_object(const GenieValueFound *found, int64 i);
extern float8 genie_value_found_distance(const GenieValueFound *found, int64 i);
extern genie_engine_kind genie_value_found_device(const GenieValueFound *found);
extern void genie_value_found_free(GenieValueFound *found);

#endif							/* GENIE_VALUES_H */
