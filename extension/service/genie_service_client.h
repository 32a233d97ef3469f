/*-------------------------------------------------------------------------
 *
 * genie_service_client.h
 *	  A backend's side of the genie service (genie_service_client.c): its
 *	  request segment, and the requests it sends: load, search, verify, and
 *	  the hand-over and scans of stored values.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SERVICE_CLIENT_H
#define GENIE_SERVICE_CLIENT_H

#include "service/genie_service.h"

/* Whether the worker is running and taking requests. */
extern bool genie_service_ready(void);

/*
 * Whether the worker holds this version of the main postings (not only its
 * stored strings); shared_segment (may be NULL) gets the segment it shares
 * them in (GenieSharedPostings), or DSM_HANDLE_INVALID.
 */
extern bool genie_service_resident(const GenieServiceKey *key, dsm_handle *shared_segment);

/*
 * While another backend hands a version over (a request said NOT_RESIDENT
 * since then): waits 2 ms, cancel honoured, and true, for asking again;
 * false once a second has passed (the service has dropped a hand-over
 * stalled that long: this backend hands it over itself).
 */
extern bool genie_service_wait_handover(TimestampTz since);

/*
 * Hands the worker a version of the main postings (as genie_read_content
 * reads them), in pieces that fit the backend's segment.  NOT_RESIDENT
 * when another backend is handing over the same version: ask again later.
 */
extern GenieServiceOutcome genie_service_load(const GenieServiceKey *key, Oid index_oid,
											  int32 split_length, const int32 *keywords,
											  const int64 *keyword_offsets,
											  const int32 *postings, genie_error *err);

/*
 * Work a backend does while the service answers one of its requests: run
 * is called once (done is then true), after the request is submitted and
 * before the backend waits for the answer.  An error it raises withdraws
 * the request.
 */
typedef struct GenieServiceOverlap
{
	void		(*run) (void *arg);
	void	   *arg;
	bool		done;
} GenieServiceOverlap;

/*
 * The top k of each query of the batch over the key's main postings, on
 * the engine the device setting (genie.device) asks for.  The arrays of
 * *results are palloc'd (not for genie_results_free).  *engine: the engine
 * that answered; *device_fallback: auto ran out of device memory and the
 * CPU answered.  overlap (or NULL) runs while the first request is out.
 */
/*
 * The segment of the key's main postings in shared memory, in *segment
 * (GenieSharedPostings; DSM_HANDLE_INVALID when the service holds them in
 * its own memory); NOT_RESIDENT when it does not hold the version.
 */
extern GenieServiceOutcome genie_service_share(const GenieServiceKey *key, Oid index_oid,
											   dsm_handle *segment, genie_error *err);

extern GenieServiceOutcome genie_service_search(const GenieServiceKey *key, Oid index_oid,
												int device, const genie_query_batch *batch,
												int32 k, genie_results *results,
												genie_engine_kind *engine,
												bool *device_fallback,
												GenieServiceOverlap *overlap,
												genie_error *err);

/*
 * Hands the worker the main objects' stored values of a version
 * (key->n_main_objects of them, in values) and the index's List of
 * Clusters of them in its stored form (list_bytes of list; 0: the index
 * keeps none), which its range searches then prune by.  NOT_RESIDENT when another
 * backend is handing over the same version: ask again later.
 */
extern GenieServiceOutcome genie_service_load_values(const GenieServiceKey *key, Oid index_oid,
													 const GenieValueBatch *values,
													 const void *list, Size list_bytes,
													 genie_error *err);

/*
 * The k nearest main values of each query (same kind as the index's), in
 * (distance, length, id) order, over the values of the key's version
 * without the main objects in excluded (genie_strings_scan or
 * genie_vectors_scan in the worker, on the engine genie.device asks for;
 * vectors through the version's List of Clusters as list_use, the
 * backend's genie.cluster_list_knn, says); list_counts (NULL: not wanted)
 * gets the queries read through the list and their distances, the scan
 * then an engine call of its own (EXPLAIN (ANALYZE)).  rows->lengths is
 * palloc'd for vectors too.  NOT_RESIDENT: the worker does not hold them.
 */
extern GenieServiceOutcome genie_service_scan_values(const GenieServiceKey *key, Oid index_oid,
													 int device, const GenieValueBatch *queries,
													 int32 k, int list_use, int64 *list_counts,
													 const int32 *excluded,
													 int32 n_excluded, GenieValueRows *rows,
													 genie_engine_kind *engine,
													 bool *device_fallback, genie_error *err);

/* What a range search in the worker read and discarded (EXPLAIN's counts). */
typedef struct GenieWithinCounts
{
	int64		distances_computed;
	int64		superclusters_discarded;
	int64		clusters_discarded;
} GenieWithinCounts;

/*
 * The range search of the main objects' stored values in the worker:
 * every main object within radius of each query, skipping the excluded
 * main objects, in (distance, object) order per query, as
 * genie_value_set_within answers it (through the version's List of
 * Clusters when the index keeps one).  rows is palloc'd (lengths NULL);
 * *counts is what the worker read and discarded.  *too_large: the answer
 * is past what the service hands back (64 MB; rows incomplete), for the
 * caller to search in-process.
 * NOT_RESIDENT: the worker does not hold the values.
 */
extern GenieServiceOutcome genie_service_within(const GenieServiceKey *key, Oid index_oid, int device,
												const GenieValueBatch *queries, double radius,
												const int32 *excluded, int32 n_excluded,
												GenieValueRows *rows, GenieWithinCounts *counts,
												bool *too_large, genie_engine_kind *engine,
												bool *device_fallback, genie_error *err);

/* genie_similar_verify in the worker; verdict as the caller allocated it. */
extern GenieServiceOutcome genie_service_verify(int device, const genie_similar_batch *batch,
												genie_similar_verdict *verdict,
												bool *device_fallback, genie_error *err);

#endif							/* GENIE_SERVICE_CLIENT_H */
