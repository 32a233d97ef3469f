/*
 * genie/codes.h: the C API of binary codes (capi/src/codes.cpp): the exact
 * nearest codes by Hamming distance and Error Weighted Hashing (seed 003).
 * Part of genie.h, which includes it at its end; included first, it
 * includes genie.h, whose error, engine and result types it uses.
 */
#ifndef GENIE_CODES_H
#define GENIE_CODES_H

#include "genie/genie.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- codes: the exact nearest binary codes by Hamming distance ---- */

/*
 * The codes of an index's objects (object id = position), bits bits each,
 * held as genie_code_words(bits) 64-bit words with the bits beyond `bits`
 * zero (genie/codes.hpp); distances are popcounts of the words' XOR, so
 * any bit order works if queries and codes share it.  At most
 * GENIE_MAX_CODE_BITS bits.  The GPU copy is made on the first GPU scan
 * and kept with the set until genie_codes_free.
 */
#define GENIE_MAX_CODE_BITS 65520
typedef struct genie_codes genie_codes;

int32_t		genie_code_words(int32_t bits);
/* sum of popcount(a[i] ^ b[i]) over words words */
int32_t		genie_hamming_distance(const uint64_t *a, const uint64_t *b, int32_t words);

/*
 * n zero codes whose words (*rows, n * genie_code_words(bits), row-major)
 * the caller writes, then genie_codes_seal checks (a bit set beyond the
 * length is GENIE_INVALID_ARGUMENT); a scan of an unsealed set is
 * GENIE_INVALID_ARGUMENT.  The zeros are written on up to threads threads
 * (0: every core).
 */
genie_status genie_codes_create_unsealed(int32_t n, int32_t bits, int32_t threads, genie_codes **codes,
										 uint64_t **rows, genie_error *err);
genie_status genie_codes_seal(genie_codes *codes, genie_error *err);
void		genie_codes_free(genie_codes *codes);
size_t		genie_codes_memory_bytes(const genie_codes *codes);
size_t		genie_codes_device_bytes(const genie_codes *codes);
int32_t		genie_codes_count(const genie_codes *codes);
int32_t		genie_codes_bits(const genie_codes *codes);

typedef struct genie_code_scan
{
	int32_t		n_queries;
	const uint64_t *queries;	/* n_queries codes of the set's length and layout */
	int32_t		k;
	/* NULL, or one flag per code: nonzero = not a candidate (dead, NULL) */
	const uint8_t *excluded;
	/*
	 * NULL: every code is a candidate.  Otherwise (re-ranking, the EWH
	 * mode): query q's candidates are candidates[candidate_offsets[q] ..
	 * candidate_offsets[q + 1]), always on the CPU; duplicates count once.
	 */
	const int64_t *candidate_offsets;
	const int32_t *candidates;
} genie_code_scan;

/*
 * Per query q, rows [query_offsets[q], query_offsets[q + 1]) of objects and
 * distances by (distance, object id) ascending: at most k, fewer only when
 * fewer codes are candidates.
 */
typedef struct genie_code_results
{
	int32_t		n_queries;
	int64_t    *query_offsets;
	int32_t    *objects;
	int32_t    *distances;
	genie_engine_kind device;	/* where the scan ran: CPU or GPU */
} genie_code_results;

void		genie_code_results_free(genie_code_results *results);

/*
 * The k nearest codes of each query, exact: the CPU and the GPU give the
 * same rows, distances and order.  device: CPU, GPU
 * (GENIE_DEVICE_UNAVAILABLE without a usable GPU) or AUTO; nothing falls
 * back after a failure (GENIE_DEVICE_OUT_OF_MEMORY, also for a set beyond
 * the memory budget, goes to the caller).  options: threads, device
 * ordinal, memory budget, cancel; a device_mask of several GPUs holds the
 * set on each (replicated, a batch's queries split among them) or a range
 * of it on each (sharded, as placement and the budget say; the rows merged
 * by distance, then id), a GPU that fails dropped for the others or the
 * CPU, as for vectors; a mask of one GPU scans on that GPU.
 */
genie_status genie_codes_scan(genie_codes *codes, genie_engine_kind device,
							  const genie_engine_options *options, const genie_code_scan *scan,
							  genie_code_results **results, genie_error *err);

/* ---- Error Weighted Hashing for codes (seed 003; genie/ewh.hpp) ---- */

#define GENIE_EWH_MAX_SAMPLE_BITS	24
#define GENIE_EWH_MAX_ERRORS		3

typedef struct genie_ewh_params
{
	int32_t		bits;			/* the codes' length */
	int32_t		functions;		/* m */
	int32_t		sample_bits;	/* h: bits each function reads */
	uint64_t	seed;
} genie_ewh_params;

typedef struct genie_ewh genie_ewh;

genie_status genie_ewh_create(const genie_ewh_params *params, genie_ewh **ewh, genie_error *err);
void		genie_ewh_free(genie_ewh *ewh);
/* functions keywords of a code, i * 2^h + its h bits for function i, ascending */
void		genie_ewh_keywords(const genie_ewh *ewh, const uint64_t *code, int32_t *keywords);
/* the buckets a query asks with errors (0..GENIE_EWH_MAX_ERRORS, at most h) */
int64_t		genie_ewh_query_buckets(const genie_ewh *ewh, int32_t errors);
/*
 * Their keywords: function by function, r = 0..errors within a function,
 * C(h, r) buckets at r errors, each group ascending.
 */
void		genie_ewh_query_keywords(const genie_ewh *ewh, const uint64_t *code, int32_t errors,
									 int32_t *keywords);

#ifdef __cplusplus
}
#endif

#endif							/* GENIE_CODES_H */
