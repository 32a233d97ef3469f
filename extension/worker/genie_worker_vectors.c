/*-------------------------------------------------------------------------
 *
 * genie_service_vectors.c
 *	  The genie service worker's stored vectors: the main objects' vectors
 *	  of a genie_vector_ops index version, handed over by a backend like the
 *	  postings and kept under the same key, and the exact nearest-neighbour
 *	  scans of them (genie_vectors_scan) on the GPU or the CPU engine.
 *
 * A backend asks for the k nearest main vectors of its queries, skipping
 * the main objects it knows are dead or NULL; it scans its own pending
 * vectors and merges by (distance, id), so the answer is what the
 * in-process scan gives.  The scans of one cycle that share the vectors,
 * the engine and the skipped objects are one engine call (their queries
 * concatenated, the largest k: genie_service_values.c groups them): one
 * device pass over the vectors serves every session's queries, which is
 * what makes many sessions cheap.  The LSH mode's re-ranking of
 * candidates stays in the backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "search/genie_search.h"
#include "worker/genie_worker_internal.h"

/* The stream is the main objects' vectors, n_main_objects * vector_dim float4. */
void
genie_worker_finish_vectors_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	int32		n = load->key.n_main_objects;
	int32		dim = load->vector_dim;
	ServedValues *s;
	genie_error err;

	if (n < 1 || dim < 1 || load->total != sizeof(float) * (Size) n * (Size) dim)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed hand-over of stored vectors");
		return;
	}
	s = calloc(1, sizeof(ServedValues));
	if (s == NULL)
	{
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
		return;
	}
	if (genie_vectors_create((const float *) load->buffer, n, dim, &s->vectors, &err) != GENIE_OK)
	{
		free(s);
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	s->key = load->key;
	s->index_oid = load->index_oid;
	s->host_bytes = (int64) genie_vectors_memory_bytes(s->vectors);
	for (int e = 0; e < 2; e++)
		s->stats[e].content = GENIE_SERVED_VECTORS;
	genie_worker_add_values(st, s, t);
}

/* Bytes of a scan's answer: header, query offsets, k distances and k ids a query. */
static Size
answer_bytes(int nq, int32 k)
{
	return GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) nq + 1) +
		(sizeof(double) + sizeof(int32)) * (Size) nq * (Size) k;
}

/* The queries (n_queries * vector_dim float4) open the payload; the skipped ids follow. */
static Size
excluded_offset(TakenRequest *t)
{
	return sizeof(float) * (Size) t->req.n_queries * (Size) t->req.vector_dim;
}

static bool
holds(const ServedValues *s)
{
	return s->vectors != NULL;
}

/* A scan request's parts, checked against its payload and the vectors; false when malformed. */
static bool
well_formed(const ServedValues *s, TakenRequest *t)
{
	GenieRequest *r = &t->req;

	if (r->n_queries < 1 || r->k < 1 || r->scan_excluded < 0 ||
		r->vector_dim != genie_vectors_dim(s->vectors))
		return false;
	return excluded_offset(t) + sizeof(int32) * (Size) r->scan_excluded <= t->payload_size &&
		answer_bytes(r->n_queries, r->k) <= r->response_capacity;
}

/* The group's queries concatenated, the largest k, the first member's skipped objects. */
static void *
prepare(ServedValues *s, TakenRequest **group, int n)
{
	genie_vector_scan *scan = palloc0(sizeof(genie_vector_scan));
	int32		dim = genie_vectors_dim(s->vectors);
	float	   *queries;
	int			nq = 0;

	for (int i = 0; i < n; i++)
	{
		nq += group[i]->req.n_queries;
		scan->k = Max(scan->k, group[i]->req.k);
	}
	queries = palloc_extended(sizeof(float) * (Size) nq * dim, MCXT_ALLOC_HUGE);
	nq = 0;
	for (int i = 0; i < n; i++)
	{
		memcpy(queries + (Size) nq * dim, group[i]->payload, excluded_offset(group[i]));
		nq += group[i]->req.n_queries;
	}
	scan->n_queries = nq;
	scan->queries = queries;
	scan->excluded = genie_worker_excluded_flags(&genie_worker_vector_scans, group[0],
												 s->key.n_main_objects);
	return scan;
}

static genie_status
scan(ServedValues *s, void *input, genie_engine_kind kind, const genie_engine_options *options,
	 void **found, genie_error *err)
{
	return genie_vectors_scan(s->vectors, kind, options, (const genie_vector_scan *) input,
							  (genie_vector_results **) found, err);
}

/* Writes member t's answer: its queries [q0, q0 + n) of found, at most its k rows each. */
static void
reply(ServiceState *st, ServedValues *s, TakenRequest *t, const void *results, int q0, bool fallback)
{
	const genie_vector_results *found = results;
	int			nq = t->req.n_queries;
	int32		k = t->req.k;
	Size		slots = (Size) nq * (Size) k;
	GenieResponse *resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	int64	   *offsets;
	double	   *distances;
	int32	   *objects;
	int64		n = 0;

	if (resp == NULL)
		return;
	resp->engine = found->device;
	resp->device_fallback = fallback;
	offsets = (int64 *) ((char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
	distances = (double *) (offsets + nq + 1);
	objects = (int32 *) (distances + slots);
	offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		from = found->query_offsets[q0 + q];
		int64		take = Min((int64) k, found->query_offsets[q0 + q + 1] - from);

		/* rows come by (distance, id): the first k of the group's larger k are this k's */
		memcpy(distances + n, found->distances + from, sizeof(double) * take);
		memcpy(objects + n, found->objects + from, sizeof(int32) * take);
		n += take;
		offsets[q + 1] = n;
	}
	resp->n_hits = n;
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

static genie_engine_kind
answered_on(const void *found)
{
	return ((const genie_vector_results *) found)->device;
}

static void
free_found(void *found)
{
	genie_vector_results_free(found);
}

const ValuesScanKind genie_worker_vector_scans = {
	"a malformed genie vector scan request",
	holds, well_formed, excluded_offset, prepare, scan, reply, answered_on, free_found
};
