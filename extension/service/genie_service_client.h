/*-------------------------------------------------------------------------
 *
 * genie_service_client.h
 *	  A backend's side of the genie service (genie_service_client.c): its
 *	  request segment, and the requests it sends: load, search, verify, and
 *	  the hand-over of stored values (their scans: genie_service_scan.h).
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

/* genie_similar_verify in the worker; verdict as the caller allocated it. */
extern GenieServiceOutcome genie_service_verify(int device, const genie_similar_batch *batch,
												genie_similar_verdict *verdict,
												bool *device_fallback, genie_error *err);

/* ---- for the service folder's other request files (genie_service_scan.c) ---- */

/*
 * A request of kind with payload bytes after its header and room for an
 * answer of response bytes, at the start of the session's segment (made or
 * grown).  A request submitted without waiting (genie_service_submit) is
 * answered first, by its take.
 */
extern GenieRequest *genie_service_begin_request(GenieRequestKind kind, Size payload, Size response);

/*
 * The same while the caller's own request is out (submitted without
 * waiting with take and arg), written beside it where the worker has taken
 * that one and the new request ends before its answer; else as
 * genie_service_begin_request (the request out, the caller's or another's,
 * is taken first, by its take).  The caller takes the answer of its
 * request out before it submits this one: a stored array's next piece is
 * then written while the service searches the piece before.
 */
extern GenieRequest *genie_service_begin_beside(GenieRequestKind kind, Size payload, Size response,
												void (*take) (void *arg), void *arg);

/* The payload of a request begun by genie_service_begin_request or _beside. */
extern char *genie_service_request_payload(GenieRequest *req);

/*
 * Submits the request in the segment and returns its answer's outcome; *resp
 * is the answer when the outcome is OK or NOT_RESIDENT.  overlap (or NULL)
 * runs after the submission, before the wait.  UNAVAILABLE when no worker
 * takes requests or the worker went away before answering.  Cancel and
 * statement_timeout withdraw the request and raise the error.
 */
extern GenieServiceOutcome genie_service_call_for_answer(GenieResponse **resp,
														 GenieServiceOverlap *overlap,
														 genie_error *err);

/*
 * The same in two halves, for a backend that works while the service
 * answers: submits the request in the segment (false: no worker takes
 * requests); take(arg) is called if another request is begun before
 * genie_service_await, and must await the answer and take it out of the
 * segment.  genie_service_await waits for the answer, as
 * genie_service_call_for_answer.  The submitter calls genie_service_withdraw
 * on every way out of an error while its request is out.
 */
extern bool genie_service_submit(void (*take) (void *arg), void *arg);
extern GenieServiceOutcome genie_service_await(GenieResponse **resp, genie_error *err);

/*
 * Takes back the request out, if any: the worker will not write its answer
 * (for its submitter, which alone knows that its request is the one out).
 */
extern void genie_service_withdraw(void);

#endif							/* GENIE_SERVICE_CLIENT_H */
