/*
 * genie.h: the C API of genie (capi/), the only interface extension/ calls.
 * It binds core/ (the model and the CPU engines) and gpu/ (the CUDA
 * engine); the plain data types it shares with core/ (genie_status,
 * genie_engine_kind, genie_query_batch, genie_device_info) are defined in
 * core's genie/types.h, included here, so their names are the same for
 * every user of this header.
 *
 * Every function returns a genie_status and, when it fails and err is not
 * NULL, writes a NUL-terminated message into err->message.  No C++ exception
 * and no CUDA error ever crosses this boundary.  Objects are opaque handles
 * released with their *_free function (NULL is accepted and ignored).
 */
#ifndef GENIE_GENIE_H
#define GENIE_GENIE_H

#include <stddef.h>
#include <stdint.h>

#include "genie/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GENIE_MESSAGE_MAX 512

typedef struct genie_error
{
	genie_status status;
	char		message[GENIE_MESSAGE_MAX];
} genie_error;

/*
 * Name of a status value, e.g. "device out of memory"; GENIE_CANCELLED
 * (defined in genie/types.h, the last value) is "cancelled".
 */
const char *genie_status_name(genie_status status);

/* ---- build and devices ---- */

typedef struct genie_build_info
{
	const char *version;		/* genie's version, e.g. "0.2.0" */
	int			with_cuda;		/* 1 when the GPU engine was compiled in */
	int			cuda_version;	/* CUDA runtime version built against (e.g. 13000), 0 without CUDA */
} genie_build_info;

void		genie_get_build_info(genie_build_info *info);

/* genie_device_kind and genie_device_info: see genie/types.h. */

/*
 * Lists the compute devices: the CPU first, then each GPU.  *count receives
 * the number of entries written (at most capacity).  Never fails because a
 * driver or device is missing: the GPU rows are then simply absent.  The
 * first call probes CUDA; later calls reuse the probe.
 */
genie_status genie_list_devices(genie_device_info *devices, size_t capacity,
								size_t *count, genie_error *err);

/*
 * Starts making the CUDA context of GPU ordinal (and loading genie's kernels
 * into it) on a thread of its own, once per process, and returns at once:
 * a backend calls it before it reads an index for a GPU search, so that the
 * two overlap.  A no-op without CUDA or when already started; failures are
 * left for the search to meet.  Before the process exits, call
 * genie_gpu_prepare_wait: the thread must not be inside the CUDA runtime
 * while it is torn down.
 */
void		genie_gpu_prepare(int32_t ordinal);
/*
 * 1 when the preparation is done (its thread then joined) or was never
 * started; waits at most timeout_ms.  Call it from one thread only.
 */
int			genie_gpu_prepare_wait(int32_t timeout_ms);

/* ---- single-object scores (genie/match_count.h: the match count) ---- */

/*
 * score(Q, O) of one object against the single query of a batch
 * (query->n_queries must be 1): the sum over items of weight times the
 * number of the object's distinct keywords the item's ranges contain.
 */
genie_status genie_score_int4(const int32_t *object, size_t object_len,
							  const genie_query_batch *query,
							  int64_t *score, genie_error *err);

/* ---- inverted index ---- */

typedef struct genie_index genie_index;

typedef struct genie_index_options
{
	int32_t		split_length;	/* postings sublist length for load balancing; 0 = default 4096 */
} genie_index_options;

/*
 * Builds an index of n_objects objects from CSR input: object i owns
 * keywords[offsets[i] .. offsets[i+1]).  offsets has n_objects + 1 entries,
 * offsets[0] == 0.  Duplicate keywords within an object count once.
 */
genie_status genie_index_create(const int64_t *offsets, int32_t n_objects,
								const int32_t *keywords,
								const genie_index_options *options,
								genie_index **index, genie_error *err);
/*
 * Adopts a List Array grouped by keyword: keywords[0..n_keywords) strictly
 * ascending, keyword i's object ids postings[keyword_offsets[i] ..
 * keyword_offsets[i+1]) strictly ascending in [0, n_objects).  No sort.
 */
genie_status genie_index_create_from_postings(int32_t n_objects, int32_t n_keywords,
											  const int32_t *keywords,
											  const int64_t *keyword_offsets,
											  const int32_t *postings,
											  const genie_index_options *options,
											  genie_index **index, genie_error *err);
/*
 * The same List Array read in place, not copied: the arrays must stay
 * unchanged and mapped until the index is freed (the genie service's copy
 * in shared memory, which each backend maps).  max_object_keywords < 0:
 * checked as genie_index_create_from_postings checks them (O(postings));
 * else the arrays are a copy of ones checked before, which had that many
 * keywords at most in one object, and only their shape is checked.
 */
genie_status genie_index_borrow(int32_t n_objects, int32_t n_keywords, const int32_t *keywords,
								const int64_t *keyword_offsets, const int32_t *postings,
								int32_t max_object_keywords, const genie_index_options *options,
								genie_index **index, genie_error *err);
/* The largest number of distinct keywords of one object of the index. */
int32_t		genie_index_max_object_keywords(const genie_index *index);
void		genie_index_free(genie_index *index);
/* Host bytes held by the index (for a borrowed one: the bytes it reads). */
size_t		genie_index_memory_bytes(const genie_index *index);
int32_t		genie_index_num_objects(const genie_index *index);
int64_t		genie_index_num_postings(const genie_index *index);

/* Serialisation to a flat byte buffer (the access method stores it in pages). */
genie_status genie_index_serialized_size(const genie_index *index, size_t *size,
										 genie_error *err);
genie_status genie_index_serialize(const genie_index *index, void *buffer,
								   size_t size, genie_error *err);
genie_status genie_index_deserialize(const void *buffer, size_t size,
									 genie_index **index, genie_error *err);

/*
 * Packed postings, the List Array as a genie index keeps it in its pages
 * (the codec: genie/postings_codec.hpp): each keyword's ids, ascending,
 * as blocks of 128 bit-packed gaps.  genie_postings_pack packs one
 * keyword's ids into out, which has room for genie_postings_pack_bound(count)
 * bytes; genie_postings_unpack unpacks the lists of n_keywords keywords
 * (keyword i's into postings[keyword_offsets[i] .. keyword_offsets[i+1]),
 * offsets from 0, never decreasing, at most n_postings, which postings has
 * room for) from exactly size bytes, every id below n_objects, and fails
 * (GENIE_INVALID_ARGUMENT) on damaged offsets or packing without reading or
 * writing out of bounds.  cancel (may be NULL) is polled about every 64K
 * postings.
 */
size_t		genie_postings_pack_bound(int64_t count);
genie_status genie_postings_pack(const int32_t *ids, int64_t count, uint8_t *out,
								 size_t *written, genie_error *err);
genie_status genie_postings_unpack(const uint8_t *in, size_t size, int32_t n_keywords,
								   const int64_t *keyword_offsets, int32_t n_objects,
								   int32_t *postings, int64_t n_postings,
								   int (*cancel) (void *arg), void *cancel_arg, genie_error *err);

/*
 * An index build's (keyword, object) pairs, sorted in memory: keys[0..n)
 * ascending as signed integers, on up to threads threads (0: every core),
 * with a scratch copy of n keys (GENIE_OUT_OF_MEMORY when it cannot be
 * had, before any key changed); cancel (may be NULL) is polled between
 * passes and every million keys a thread (on GENIE_CANCELLED the keys are
 * left changed: discard them).
 */
genie_status genie_sort_int64(int64_t *keys, size_t n, int32_t threads, int (*cancel) (void *arg),
							  void *cancel_arg, genie_error *err);

/*
 * body(i, arg) for every i in [0, n), each once, in no particular order, on
 * up to threads threads (0: every core), the caller's included.  body runs
 * off the caller's thread, so it may call only functions that touch no
 * shared state and cannot raise errors (no memory contexts, no ereport); it
 * records its own failures.  cancel (may be NULL) is polled before each i:
 * when it asks, the rest are skipped and GENIE_CANCELLED is returned.
 */
genie_status genie_parallel_for(int64_t n, int32_t threads, void (*body) (int64_t i, void *arg),
								void *arg, int (*cancel) (void *arg), void *cancel_arg,
								genie_error *err);

/*
 * bytes at data set to zero in pieces of 8 MB on up to threads threads (0:
 * every core), where a fresh allocation's pages fault in side by side.
 * cancel (may be NULL) is polled before each piece: GENIE_CANCELLED leaves
 * the rest unwritten.
 */
genie_status genie_parallel_zero(void *data, size_t bytes, int32_t threads, int (*cancel) (void *arg),
								 void *cancel_arg, genie_error *err);

/*
 * Set predicates from the postings (int4[] @>, && and <@ on a keyword
 * index): the ids of the objects whose keyword set contains the query's
 * keywords (GENIE_SET_CONTAINS), shares one with them (GENIE_SET_OVERLAPS)
 * or holds none other (GENIE_SET_CONTAINED_BY, which includes the objects
 * without keywords), ascending, in *ids (free with genie_ids_free; NULL
 * when *count is 0).  An empty query is contained in every object and
 * overlaps none.  cancel may be NULL.  GENIE_SET_CONTAINED_BY reads each
 * object's number of distinct keywords, computed once per index and kept
 * with it.
 */
typedef enum genie_set_predicate
{
	GENIE_SET_CONTAINS = 1,
	GENIE_SET_OVERLAPS = 2,
	GENIE_SET_CONTAINED_BY = 3
} genie_set_predicate;

genie_status genie_index_match_set(const genie_index *index, genie_set_predicate predicate,
								   const int32_t *keywords, int32_t n_keywords,
								   int (*cancel) (void *arg), void *cancel_arg,
								   int32_t **ids, int64_t *count, genie_error *err);
void		genie_ids_free(int32_t *ids);

/* ---- queries ---- */

/* genie_query_batch, the batch of queries in CSR form: see genie/types.h. */

/*
 * Top-k results of a batch: for query q, entries [query_offsets[q],
 * query_offsets[q+1]) of objects/scores, highest score first, ties by
 * ascending object id.  Only objects with score >= 1 appear.
 */
typedef struct genie_results
{
	int32_t		n_queries;
	int64_t    *query_offsets;	/* n_queries + 1 */
	int32_t    *objects;
	int32_t    *scores;
} genie_results;

void		genie_results_free(genie_results *results);

/*
 * Merges the top-k of object parts searched separately (part p's object ids
 * are local; its global ids are local + part_first_object[p], and parts are
 * given in ascending, non-overlapping object order) into one top-k, highest
 * score first, ties by ascending global object id, as one engine over all
 * objects would give.  n_parts >= 1, k >= 1; each part's results may have
 * fewer than k hits per query; all parts have the same n_queries.  *merged
 * is released with genie_results_free.
 */
genie_status genie_results_merge(const genie_results *const *parts,
								 const int32_t *part_first_object, int32_t n_parts,
								 int32_t k, genie_results **merged, genie_error *err);

/* ---- engines ---- */

/* genie_engine_kind (CPU, GPU, AUTO, CPU_REFERENCE): see genie/types.h. */

typedef struct genie_engine genie_engine;

typedef enum genie_placement
{
	GENIE_PLACEMENT_AUTO = 0,	/* replicated when it fits every GPU, else sharded */
	GENIE_PLACEMENT_REPLICATE = 1,
	GENIE_PLACEMENT_SHARD = 2
} genie_placement;

typedef struct genie_engine_options
{
	int32_t		threads;		/* CPU threads; 0 = hardware concurrency */
	int32_t		device_ordinal; /* CUDA device; default 0 */
	/*
	 * Memory budget in bytes for the index plus a batch's search state (device
	 * memory for the GPU engine, host memory for the CPU engines); 0 = the
	 * default (most of the free device memory; unlimited on the CPU).  When
	 * exceeded, the objects are split into parts searched in turn (multiple
	 * loading) and the per-part top-k merged.
	 */
	uint64_t	memory_budget_bytes;
	/*
	 * Polled while an engine works; when it returns nonzero the call stops
	 * and returns GENIE_CANCELLED.  NULL: never.  It may be called from any
	 * thread, so it must only read flags.  cancel_arg is passed to it.
	 */
	int			(*cancel) (void *arg);
	void	   *cancel_arg;
	/*
	 * Several GPUs: bit i names CUDA device i (0: device_ordinal alone).
	 * When it names more than one usable GPU, an engine, a vector set's scan
	 * and a string set's scan spread over them: an index that fits each
	 * one's budget is replicated (a batch's queries split among the copies),
	 * a larger one, or any with placement GENIE_PLACEMENT_SHARD, is sharded
	 * (contiguous object ranges, each GPU answering every query for its
	 * range, the top-k merged exactly).  A GPU that fails is dropped and its
	 * work redone on the others or the CPU (genie_engine_devices says so).
	 */
	uint64_t	device_mask;
	int32_t		placement;		/* genie_placement */
} genie_engine_options;

genie_status genie_engine_create(genie_engine_kind kind,
								 const genie_engine_options *options,
								 genie_engine **engine, genie_error *err);
void		genie_engine_free(genie_engine *engine);
/* The kind actually running (AUTO resolves to CPU or GPU). */
genie_engine_kind genie_engine_get_kind(const genie_engine *engine);

/*
 * The GPUs an engine spreads over (device_mask naming several), one entry
 * each into devices[0 .. capacity); *count gets how many there are (0 for
 * an engine on one GPU or the CPU).  dropped: the GPU failed and its work
 * now runs on the others or the CPU, failure says why.
 */
typedef struct genie_engine_device
{
	int32_t		ordinal;
	int32_t		dropped;
	int32_t		sharded;
	int32_t		first_object;	/* its range of the uploaded index */
	int32_t		end_object;
	uint64_t	index_bytes;	/* host bytes of its part */
	uint64_t	searches;
	double		seconds;		/* in its searches */
	char		failure[256];
} genie_engine_device;

genie_status genie_engine_devices(const genie_engine *engine, genie_engine_device *devices,
								  size_t capacity, size_t *count, genie_error *err);

/* Makes index the one the engine searches (copies it to the device for the GPU). */
genie_status genie_engine_upload(genie_engine *engine, const genie_index *index,
								 genie_error *err);
/* Releases the engine's copy of the index (device memory included). */
genie_status genie_engine_drop(genie_engine *engine, genie_error *err);

/*
 * Several threads may search (and match sets on) one engine at once: the CPU
 * engine runs the searches concurrently, a GPU engine does their host work
 * concurrently and takes its device one call at a time, a device group a
 * few whole batches a GPU; set matches on a GPU run one at a time; upload
 * and drop wait for them (free must not overlap any).  _with_cancel polls
 * its own cancel, also while the call waits for the device: it stops that
 * call alone.
 */
genie_status genie_engine_search(genie_engine *engine,
								 const genie_query_batch *queries, int32_t k,
								 genie_results **results, genie_error *err);
genie_status genie_engine_search_with_cancel(genie_engine *engine,
											 const genie_query_batch *queries, int32_t k,
											 int (*cancel) (void *arg), void *cancel_arg,
											 genie_results **results, genie_error *err);

/*
 * genie_index_match_set on the index uploaded to engine (index must be that one: it
 * keeps the object sizes GENIE_SET_CONTAINED_BY reads).  A GPU engine with
 * the index resident matches on the device when the query's lists hold at
 * least device_min_postings postings (list intersection with range
 * contraction; a negative value keeps the engine's setting, 16,384 unless
 * made otherwise); the CPU engines, and the GPU engine otherwise, on the host.
 * The engine's cancel callback is polled.
 */
genie_status genie_engine_match_set(genie_engine *engine, const genie_index *index,
									genie_set_predicate predicate, const int32_t *keywords,
									int32_t n_keywords, int64_t device_min_postings,
									int32_t **ids, int64_t *count, genie_error *err);

/* ---- sequences (ordered n-grams, edit distance) ---- */

/*
 * The ordered n-gram keyword set of a UTF-8 string (see genie/sequence.hpp
 * for the exact rule: padding, occurrence numbers, hashing).  keywords must
 * have room for size + n - 1 entries; *n_keywords receives the number of
 * distinct keywords (ascending), *length the length in code points, *lost
 * the grams merged by hash collisions.  n in [2, 8].  Invalid UTF-8 is
 * GENIE_INVALID_ARGUMENT.
 */
genie_status genie_ngram_keywords(const char *text, size_t size, int32_t n,
								  int32_t *keywords, size_t capacity,
								  int32_t *n_keywords, int32_t *length,
								  int32_t *lost, genie_error *err);

/*
 * The same for count strings at once (string i: text[offsets[i],
 * offsets[i + 1])), on threads threads, polling cancel: string i's keywords
 * in keywords[starts[i], starts[i + 1]).  keywords has room for
 * genie_ngram_keywords_bound entries, starts for count + 1.
 */
int64_t		genie_ngram_keywords_bound(const int64_t *offsets, int32_t count, int32_t n);
genie_status genie_ngram_keywords_batch(const char *text, const int64_t *offsets, int32_t count,
										int32_t n, int32_t threads, int (*cancel) (void *arg),
										void *cancel_arg, int32_t *keywords, int64_t *starts,
										genie_error *err);

/* |K(a) ∩ K(b)|: the set count an index computes between two strings. */
genie_status genie_ngram_count(const char *a, size_t a_size, const char *b, size_t b_size,
							   int32_t n, int32_t *count, genie_error *err);

/*
 * Levenshtein distance with unit costs, counting code points.  options:
 * only its cancel callback is read, polled about every millisecond of work
 * (GENIE_CANCELLED); NULL: none.
 */
genie_status genie_edit_distance(const char *a, size_t a_size, const char *b, size_t b_size,
								 const genie_engine_options *options, int32_t *distance,
								 genie_error *err);

/*
 * The lower bound on ed(q, s) for every string s whose set count with q is
 * at most count: ceil((query_length + n - 1 - (count + query_lost)) / n),
 * clamped at 0 (Theorem 5.1 with the padding).
 */
int32_t		genie_ngram_distance_lower_bound(int32_t query_length, int32_t query_lost,
											 int32_t count, int32_t n);

/*
 * One verification round of genie_similar for a batch of queries: query q's
 * candidates are candidates [candidate_offsets[q], candidate_offsets[q+1]),
 * each with its set count, and unseen_count_bound[q] bounds the set count of
 * every string that is not a candidate (-1: every string is one).  Strings
 * are UTF-8 in CSR form (text + byte offsets).
 */
typedef struct genie_similar_batch
{
	int32_t		n_queries;
	int32_t		n;				/* gram length of the index */
	int32_t		k;
	const char *query_text;
	const int64_t *query_text_offsets;	/* n_queries + 1 */
	const int64_t *candidate_offsets;	/* n_queries + 1 */
	const char *candidate_text;
	const int64_t *candidate_text_offsets;	/* n_candidates + 1 */
	const int32_t *candidate_counts;	/* n_candidates */
	const int32_t *unseen_count_bound;	/* n_queries */
} genie_similar_batch;

/* Caller-allocated outputs of genie_similar_verify. */
typedef struct genie_similar_verdict
{
	int32_t    *distances;		/* n_candidates: the distance when exact, else a lower bound */
	uint8_t    *exact;			/* n_candidates */
	uint8_t    *certified;		/* n_queries: the k smallest exact distances are a true top-k */
	/*
	 * n_queries: every string not verified has a distance >= this bound
	 * (INT32_MAX when all were), so among the k smallest exact distances
	 * those <= it are certainly in a true top-k even when the query as a
	 * whole is not certified.
	 */
	int32_t    *open_bound;
	int64_t		distances_computed; /* pairs whose distance was computed */
	genie_engine_kind device;	/* where they were computed: CPU or GPU */
} genie_similar_verdict;

/*
 * Verifies the candidates with the count and length filters (Algorithm 2,
 * batched) and certifies each query's top-k (Theorem 5.2).  device is
 * GENIE_ENGINE_CPU, GENIE_ENGINE_GPU (GENIE_DEVICE_UNAVAILABLE without a
 * usable GPU) or GENIE_ENGINE_AUTO (the GPU when usable, else the CPU).
 * Nothing falls back after a failure: a GPU that runs out of device memory
 * returns GENIE_DEVICE_OUT_OF_MEMORY (with AUTO too) and the caller decides
 * whether to retry on the CPU.  options: threads, device ordinal and the
 * cancel callback (GENIE_CANCELLED), as for engines (NULL: defaults).
 */
genie_status genie_similar_verify(const genie_similar_batch *batch, genie_engine_kind device,
								  const genie_engine_options *options,
								  genie_similar_verdict *verdict, genie_error *err);

/* ---- string sets: the exact nearest strings by edit distance ---- */

/*
 * The strings of an index's objects (object id = position), for the exact
 * k nearest strings by edit distance over all of them (see
 * genie/string_scan.hpp: length buckets, bit-parallel Myers with early
 * exit).  The GPU copy is made on the first GPU scan and kept with the set
 * until genie_strings_free.
 */
typedef struct genie_strings genie_strings;

/* n strings, UTF-8 in CSR form (text + n + 1 byte offsets); invalid UTF-8 is GENIE_INVALID_ARGUMENT. */
genie_status genie_strings_create(const char *text, const int64_t *offsets, int32_t n,
								  genie_strings **strings, genie_error *err);
void		genie_strings_free(genie_strings *strings);
/* Host bytes held by the set. */
size_t		genie_strings_memory_bytes(const genie_strings *strings);
/* Device bytes held by its GPU copy (0 without one). */
size_t		genie_strings_device_bytes(const genie_strings *strings);
int32_t		genie_strings_count(const genie_strings *strings);
/* The length in code points of string id (-1 when there is no such string). */
int32_t		genie_strings_length(const genie_strings *strings, int32_t id);

typedef struct genie_string_scan
{
	int32_t		n_queries;
	const char *query_text;		/* UTF-8 */
	const int64_t *query_text_offsets;	/* n_queries + 1 */
	int32_t		k;
	/*
	 * NULL, or n_queries caps: only strings within that distance are
	 * reported (< 0: no limit).  A known upper bound on the k-th distance
	 * narrows the scan.
	 */
	const int32_t *caps;
	/* NULL, or one flag per string: nonzero = not a candidate (dead). */
	const uint8_t *excluded;
	/*
	 * NULL: the k nearest of every string.  Else re-rank only (the
	 * permutation index): query q's candidates are
	 * candidates[candidate_offsets[q] .. candidate_offsets[q + 1]), each by
	 * its exact distance (caps ignored), always on the CPU.
	 */
	const int64_t *candidate_offsets;
	const int32_t *candidates;
} genie_string_scan;

/*
 * Per query q, rows [query_offsets[q], query_offsets[q + 1]) of objects and
 * distances, by (distance, length in code points, object id) ascending: at
 * most k, fewer only when fewer strings are candidates within the cap.
 */
typedef struct genie_string_results
{
	int32_t		n_queries;
	int64_t    *query_offsets;
	int32_t    *objects;
	int32_t    *distances;
	genie_engine_kind device;	/* where the scan ran: CPU or GPU */
} genie_string_results;

void		genie_string_results_free(genie_string_results *results);

/*
 * The k nearest strings of each query.  device: CPU, GPU
 * (GENIE_DEVICE_UNAVAILABLE without a usable GPU) or AUTO (the GPU when
 * usable).  As for genie_similar_verify nothing falls back after a failure:
 * GENIE_DEVICE_OUT_OF_MEMORY goes to the caller.  The CPU and the GPU give
 * the same rows in the same order.  options: threads, device ordinal,
 * cancel (polled every 1024 strings on the CPU, between groups of 512
 * queries on the GPU).
 */
genie_status genie_strings_scan(genie_strings *strings, genie_engine_kind device,
								const genie_engine_options *options,
								const genie_string_scan *scan,
								genie_string_results **results, genie_error *err);

/* ---- vectors: the exact nearest vectors by Euclidean distance ---- */

/*
 * The distance every engine reports and real[] <-> real[] returns:
 * sqrt(sum ((double) a[i] - (double) b[i])^2) in element order, each
 * operation rounded on its own (genie/vectors.hpp).
 */
double		genie_l2_distance(const float *a, const float *b, int32_t dim);

/*
 * The vectors of an index's objects (object id = position), dim floats
 * each, row-major.  The GPU copy is made on the first GPU scan (with the
 * memory budget of that scan's options: a set beyond it is streamed through
 * the device in parts) and kept with the set until genie_vectors_free.
 */
typedef struct genie_vectors genie_vectors;

/* Copies n vectors; NaN or infinity is GENIE_INVALID_ARGUMENT. */
genie_status genie_vectors_create(const float *values, int32_t n, int32_t dim,
								  genie_vectors **vectors, genie_error *err);
/*
 * The same without a copy of the caller's: n zero vectors whose rows
 * (*rows, n * dim floats, row-major) the caller writes, then
 * genie_vectors_seal checks (NaN or infinity is GENIE_INVALID_ARGUMENT,
 * and the set stays unsealed); a scan of an unsealed set is
 * GENIE_INVALID_ARGUMENT.  For loading a large set straight from where it
 * is stored.  The zeros are written on up to threads threads (0: every
 * core), where a fresh set's pages fault in.
 */
genie_status genie_vectors_create_unsealed(int32_t n, int32_t dim, int32_t threads, genie_vectors **vectors,
										   float **rows, genie_error *err);
genie_status genie_vectors_seal(genie_vectors *vectors, genie_error *err);
void		genie_vectors_free(genie_vectors *vectors);
size_t		genie_vectors_memory_bytes(const genie_vectors *vectors);
size_t		genie_vectors_device_bytes(const genie_vectors *vectors);
int32_t		genie_vectors_count(const genie_vectors *vectors);
int32_t		genie_vectors_dim(const genie_vectors *vectors);
/* Vector id's dim floats (NULL when there is no such vector). */
const float *genie_vectors_row(const genie_vectors *vectors, int32_t id);

/* Whether an exact vector scan with a List of Clusters reads it (genie_vector_scan.list). */
typedef enum genie_list_use
{
	/*
	 * On the CPU engine, when a query took less time through the list than
	 * by the exact scan lately (the list keeps both times, single queries
	 * and batches apart; a batch times the list on its first queries); the
	 * GPU reads every vector (faster: bench/range.md).
	 */
	GENIE_LIST_AUTO = 0,
	GENIE_LIST_ALWAYS = 1,		/* the CPU engine reads it, whatever the device */
	GENIE_LIST_NEVER = 2		/* every vector is read */
} genie_list_use;

typedef struct genie_vector_scan
{
	int32_t		n_queries;
	const float *queries;		/* n_queries * dim, finite */
	int32_t		k;
	/* NULL, or one flag per vector: nonzero = not a candidate (dead, NULL) */
	const uint8_t *excluded;
	/*
	 * NULL: the exact k nearest of every vector.  Else re-rank only (the
	 * LSH mode): query q's candidates are candidates[candidate_offsets[q]
	 * .. candidate_offsets[q + 1]), always on the CPU.
	 */
	const int64_t *candidate_offsets;
	const int32_t *candidates;
	/*
	 * NULL, or a List of Clusters of the set's first objects
	 * (genie_vectors_cluster_list; the rest are read one by one): the CPU
	 * engine may read its clusters nearest first and stop once no cluster
	 * left can hold a row nearer than the k-th found (the same rows).
	 */
	const struct genie_cluster_list *list;
	genie_list_use list_use;
} genie_vector_scan;

/*
 * Per query q, rows [query_offsets[q], query_offsets[q + 1]) of objects and
 * distances by (distance, object id) ascending: at most k, fewer only when
 * fewer vectors are candidates.
 */
typedef struct genie_vector_results
{
	int32_t		n_queries;
	int64_t    *query_offsets;
	int32_t    *objects;
	double	   *distances;
	genie_engine_kind device;	/* where the scan ran: CPU or GPU */
	int32_t		parts;			/* parts the GPU streamed the set in (1: resident; 0 on the CPU) */
	int32_t		listed;			/* the queries answered through the list */
	int64_t		list_distances;	/* the distances those computed (centres and members) */
} genie_vector_results;

void		genie_vector_results_free(genie_vector_results *results);

/*
 * The k nearest vectors of each query, exact (genie/vectors.hpp): the CPU
 * and the GPU give the same rows, distances and order.  device: CPU, GPU
 * (GENIE_DEVICE_UNAVAILABLE without a usable GPU) or AUTO; nothing falls
 * back after a failure (GENIE_DEVICE_OUT_OF_MEMORY goes to the caller).
 * options: threads, device ordinal, memory budget, cancel.
 */
genie_status genie_vectors_scan(genie_vectors *vectors, genie_engine_kind device,
								const genie_engine_options *options,
								const genie_vector_scan *scan,
								genie_vector_results **results, genie_error *err);

/* ---- range search and the List of Clusters (genie/cluster_list.hpp) ---- */

/*
 * A List of Clusters, or of Superclusters, over the objects of a string or
 * vector set (object id = position): built by genie_strings_cluster_list or
 * genie_vectors_cluster_list, or loaded from its stored form.
 */
typedef struct genie_cluster_list genie_cluster_list;

/*
 * How a list's next centre is picked among the objects not yet listed
 * (genie::ClusterCentres): the largest sum of distances to the centres so
 * far (the paper's), or the largest distance to the nearest of them.
 */
typedef enum genie_cluster_centres
{
	GENIE_CLUSTER_CENTRES_SUM = 0,
	GENIE_CLUSTER_CENTRES_FARTHEST = 1
} genie_cluster_centres;

/*
 * Lists the objects whose excluded flag is zero (excluded NULL: all) in
 * clusters of cluster_size (2 .. 65536) grouped in superclusters of
 * supercluster_clusters clusters (0: a plain List of Clusters), the centres
 * picked by `centres`, on the CPU (options: threads, cancel).
 */
genie_status genie_strings_cluster_list(const genie_strings *objects, const uint8_t *excluded,
										int32_t cluster_size, int32_t supercluster_clusters,
										genie_cluster_centres centres,
										const genie_engine_options *options,
										genie_cluster_list **list, genie_error *err);
genie_status genie_vectors_cluster_list(const genie_vectors *objects, const uint8_t *excluded,
										int32_t cluster_size, int32_t supercluster_clusters,
										genie_cluster_centres centres,
										const genie_engine_options *options,
										genie_cluster_list **list, genie_error *err);
void		genie_cluster_list_free(genie_cluster_list *list);
/* The stored form: its size, then the bytes (what index pages hold). */
size_t		genie_cluster_list_stored_size(const genie_cluster_list *list);
void		genie_cluster_list_store(const genie_cluster_list *list, void *out);
/* Back from the stored form, checked: GENIE_INVALID_ARGUMENT when corrupt. */
genie_status genie_cluster_list_load(const void *data, size_t size, genie_cluster_list **list,
									 genie_error *err);
int32_t		genie_cluster_list_objects(const genie_cluster_list *list);	/* ids it may name */
int32_t		genie_cluster_list_clusters(const genie_cluster_list *list);
int32_t		genie_cluster_list_superclusters(const genie_cluster_list *list);
size_t		genie_cluster_list_memory_bytes(const genie_cluster_list *list);

typedef struct genie_range_scan
{
	int32_t		n_queries;
	const char *query_text;		/* strings: UTF-8 */
	const int64_t *query_text_offsets;	/* strings: n_queries + 1 */
	const float *queries;		/* vectors: n_queries * dim, finite */
	double		radius;			/* >= 0: every object within it, the boundary included */
	/* NULL, or one flag per object: nonzero = not an answer (dead, NULL) */
	const uint8_t *excluded;
	/* NULL: every object is read; else a list of the set's first objects (genie_cluster_list_objects
	 * of them; the rest, an index's pending rows, are read one by one) that prunes */
	const genie_cluster_list *list;
	/* NULL, or per query q only candidates[candidate_offsets[q] .. [q + 1]) are read (on the CPU) */
	const int64_t *candidate_offsets;
	const int32_t *candidates;	/* the permutation index's; duplicates allowed */
	/* vectors with a list: 0 reads each cluster met only where its members' distances to its centre
	 * allow an answer (the query's ring, by the triangle inequality) where that reads less (the CPU
	 * engine; one query over a set streamed to a GPU); < 0 reads rings wherever the CPU or one GPU
	 * reads a list (a device group's GPUs read whole clusters), > 0 every member (the same rows
	 * either way: for comparisons) */
	int32_t		whole_clusters;
} genie_range_scan;

/* Per query q, rows [query_offsets[q], query_offsets[q + 1]) by (distance, object id): every
 * object within the radius (edit distances are whole numbers), and what the search read. */
typedef struct genie_range_results
{
	int32_t		n_queries;
	int64_t    *query_offsets;
	int32_t    *objects;
	double	   *distances;
	genie_engine_kind device;	/* where the search ran */
	int64_t		distances_computed; /* all queries' (the GPU counts excluded members it read) */
	int64_t		superclusters_discarded;
	int64_t		clusters_discarded;
} genie_range_results;

void		genie_range_results_free(genie_range_results *results);

/*
 * Every object within the radius of each query, exact (the distances of
 * genie_strings_scan and genie_vectors_scan), the same rows on every
 * engine.  Vectors: device CPU, GPU (GENIE_DEVICE_UNAVAILABLE without a
 * usable GPU; GENIE_DEVICE_OUT_OF_MEMORY when the set is beyond the device
 * budget) or AUTO (the GPU when usable and the set fits, else the CPU);
 * on the GPU the CPU plans (the list's centres) and the device reads the
 * members.  Strings: device CPU, GPU or AUTO as for vectors; on the GPU
 * the device reads each query's length window whole (strings of lengths
 * within the radius of the query's), not through the list, which orders
 * no lengths; distances_computed counts the pairs it read.  options:
 * threads, device ordinal or device_mask, placement, memory budget, cancel.
 * With device_mask naming several usable GPUs and a set whole on each
 * (replicated), each GPU reads a share of every batch (vectors: by the
 * rows each query reads, a query's own rows split when there are enough;
 * strings: by whole queries); a GPU that fails is dropped and its share
 * read by another; the same rows as one GPU.
 */
genie_status genie_strings_within(genie_strings *strings, genie_engine_kind device,
								  const genie_engine_options *options,
								  const genie_range_scan *scan, genie_range_results **results,
								  genie_error *err);
genie_status genie_vectors_within(genie_vectors *vectors, genie_engine_kind device,
								  const genie_engine_options *options,
								  const genie_range_scan *scan, genie_range_results **results,
								  genie_error *err);

/* ---- the permutation index (genie/permutation.hpp) ---- */

/*
 * Each object of an index with m permutants keeps one row: byte j is the
 * rank of permutant j by its distance to the object (ties by j), and the
 * row is padded with zeros to genie_permutation_stride(m) bytes.  The
 * candidates of a query are the objects whose rows are nearest to the
 * query's by Spearman's footrule (ties by object id).
 */
#define GENIE_MAX_PERMUTANTS 128
int32_t		genie_permutation_stride(int32_t m);

/*
 * m distinct object ids of [0, n) whose excluded flag is 0 (excluded NULL:
 * all), drawn from seed alone (SplitMix64): the same objects and seed give
 * the same ids on every machine.  GENIE_INVALID_ARGUMENT when fewer than m
 * are eligible.
 */
genie_status genie_permutants_choose(int32_t n, const uint8_t *excluded, int32_t m, uint64_t seed,
									 int32_t *ids, genie_error *err);

/*
 * The rows of every string of objects (or vector: same dimension) against
 * the m = count of permutants, into rows (count of objects x stride bytes,
 * the caller's).  Vectors rank by the squared L2 distance summed in double
 * in element order, strings by Levenshtein distance.  device: CPU (on
 * options.threads), GPU (GENIE_DEVICE_UNAVAILABLE without one) or AUTO (the
 * GPU when usable); both give the same bytes.
 */
genie_status genie_strings_permutations(const genie_strings *objects,
										const genie_strings *permutants,
										genie_engine_kind device,
										const genie_engine_options *options, uint8_t *rows,
										genie_error *err);
genie_status genie_vectors_permutations(const genie_vectors *objects,
										const genie_vectors *permutants,
										genie_engine_kind device,
										const genie_engine_options *options, uint8_t *rows,
										genie_error *err);

/*
 * An index version's rows, n x genie_permutation_stride(m) bytes that the
 * caller writes through *data (zeros at first) before the first
 * selection; the GPU copy is made on the first GPU selection and kept
 * until genie_permutation_rows_free.
 */
typedef struct genie_permutation_rows genie_permutation_rows;

genie_status genie_permutation_rows_create(int32_t m, int32_t n, genie_permutation_rows **rows,
										   uint8_t **data, genie_error *err);
void		genie_permutation_rows_free(genie_permutation_rows *rows);
size_t		genie_permutation_rows_device_bytes(const genie_permutation_rows *rows);

typedef struct genie_permutation_candidates
{
	int32_t		n_queries;
	int64_t    *query_offsets;	/* n_queries + 1 */
	int32_t    *objects;		/* each query's ascending by id */
	genie_engine_kind device;	/* where the selection ran */
} genie_permutation_candidates;

void		genie_permutation_candidates_free(genie_permutation_candidates *candidates);

/*
 * For each of the n_queries rows of queries (same m): the `candidates`
 * objects of rows of smallest footrule, ties by id, skipping those flagged
 * in excluded (NULL: none); all eligible ones when fewer.  device: CPU,
 * GPU (GENIE_DEVICE_UNAVAILABLE without a usable GPU) or AUTO; the CPU and
 * the GPU give the same lists.  options: threads, device ordinal, memory
 * budget of a group of queries' footrules, cancel.
 */
genie_status genie_permutation_select(genie_permutation_rows *rows, genie_engine_kind device,
									  const genie_engine_options *options, const uint8_t *excluded,
									  const uint8_t *queries, int32_t n_queries, int32_t candidates,
									  genie_permutation_candidates **out, genie_error *err);

/* ---- LSH keywords for vectors (GENIE section IV) ---- */

#define GENIE_LSH_E2LSH		1	/* Euclidean distance: p-stable projections */
#define GENIE_LSH_RBH		2	/* Laplacian kernel, L1: random binning */

typedef struct genie_lsh_params
{
	int32_t		family;			/* GENIE_LSH_* */
	int32_t		dim;
	int32_t		functions;		/* m */
	int32_t		buckets;		/* each function re-hashed into [0, buckets) */
	double		width;			/* E2LSH: bucket width w; RBH: kernel width sigma */
	uint64_t	seed;
	int32_t		threads;		/* for the draws: 0 or less every core; the same functions for any */
} genie_lsh_params;

typedef struct genie_lsh genie_lsh;

/*
 * Draws params->functions x params->dim numbers (about 55 ns of one core
 * each, spread over params->threads): cancel (may be NULL) is polled every
 * 4,096 draws.
 */
genie_status genie_lsh_create(const genie_lsh_params *params, int (*cancel) (void *arg),
							  void *cancel_arg, genie_lsh **lsh, genie_error *err);
void		genie_lsh_free(genie_lsh *lsh);
/* functions keywords, i * buckets + r_i(h_i(v)), ascending; v finite */
genie_status genie_lsh_keywords(const genie_lsh *lsh, const float *vector, int32_t *keywords,
								genie_error *err);
/* The same for count vectors one after another, on threads threads: vector k's at keywords + k * functions. */
genie_status genie_lsh_keywords_batch(const genie_lsh *lsh, const float *vectors, int64_t count,
									  int32_t threads, int (*cancel) (void *arg), void *cancel_arg,
									  int32_t *keywords, genie_error *err);
/* Equation 9: the functions for epsilon and delta in (0, 1) (0 otherwise). */
int32_t		genie_lsh_functions_for(double epsilon, double delta);
/*
 * A default width from count sample vectors (row-major), see genie/lsh.hpp:
 * count^2 x dim work, cancel (may be NULL) polled once per sample pair.
 */
genie_status genie_lsh_estimate_width(int32_t family, const float *sample, int32_t count,
									  int32_t dim, int (*cancel) (void *arg), void *cancel_arg,
									  double *width, genie_error *err);

#ifdef __cplusplus
}
#endif

/* binary codes: the Hamming scan and Error Weighted Hashing */
#include "genie/codes.h"
/* one object's match count against an int4 query */
#include "genie/match_count.h"

#endif							/* GENIE_GENIE_H */
