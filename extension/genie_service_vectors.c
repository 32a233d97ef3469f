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
 * concatenated, the largest k): one device pass over the vectors serves
 * every session's queries, which is what makes many sessions cheap.  The
 * LSH mode's re-ranking of candidates stays in the backend.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "genie_search.h"
#include "genie_service_worker.h"

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

/* A scan request's parts, checked against its payload and the vectors; false when malformed. */
static bool
read_scan(TakenRequest *t, int32 dim, const float **queries, const int32 **excluded_ids)
{
	GenieRequest *r = &t->req;
	int			nq = r->n_queries;
	Size		need;

	if (nq < 1 || r->k < 1 || r->scan_excluded < 0 || r->vector_dim != dim)
		return false;
	need = sizeof(float) * (Size) nq * (Size) dim + sizeof(int32) * (Size) r->scan_excluded;
	if (need > t->payload_size || answer_bytes(nq, r->k) > r->response_capacity)
		return false;
	*queries = (const float *) t->payload;
	*excluded_ids = (const int32 *) (t->payload + sizeof(float) * (Size) nq * (Size) dim);
	return true;
}

/* Whether two scan requests can share one engine call: same vectors, engine and skipped objects. */
static bool
same_scan(ServiceState *st, TakenRequest *a, genie_engine_kind kind, TakenRequest *b, int32 dim)
{
	genie_engine_kind kb;
	genie_error err;

	return genie_service_keys_equal(&a->req.key, &b->req.key) &&
		genie_worker_resolve_kind(st, b->req.device, &kb, &err) == GENIE_OK && kb == kind &&
		a->req.scan_excluded == b->req.scan_excluded &&
		memcmp(a->payload + sizeof(float) * (Size) a->req.n_queries * dim,
			   b->payload + sizeof(float) * (Size) b->req.n_queries * dim,
			   sizeof(int32) * (Size) a->req.scan_excluded) == 0;
}

/* Writes member t's answer: its queries [q0, q0 + n) of found, at most its k rows each. */
static void
reply_scan(ServiceState *st, TakenRequest *t, const genie_vector_results *found, int q0,
		   bool fallback)
{
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

/* One engine call for the group: their queries concatenated, the largest k of them. */
static void
scan_group(ServiceState *st, ServedValues *s, genie_engine_kind kind, TakenRequest **group, int n)
{
	int32		dim = genie_vectors_dim(s->vectors);
	int32		n_main = s->key.n_main_objects;
	int			nq = 0;
	int32		k = 0;
	float	   *queries;
	uint8	   *excluded = NULL;
	genie_vector_scan scan;
	genie_vector_results *found = NULL;
	genie_engine_options options;
	CancelGroup cancel = {group, n};
	genie_error err;
	genie_status status;
	bool		fallback = false;
	TimestampTz started;
	GenieServiceIndexStats *stats;

	for (int i = 0; i < n; i++)
	{
		nq += group[i]->req.n_queries;
		k = Max(k, group[i]->req.k);
	}
	queries = palloc_extended(sizeof(float) * (Size) nq * dim, MCXT_ALLOC_HUGE);
	nq = 0;
	for (int i = 0; i < n; i++)
	{
		const float *q;
		const int32 *ids;

		(void) read_scan(group[i], dim, &q, &ids);
		memcpy(queries + (Size) nq * dim, q, sizeof(float) * (Size) group[i]->req.n_queries * dim);
		nq += group[i]->req.n_queries;
		if (i == 0 && group[0]->req.scan_excluded > 0)
		{
			excluded = palloc_extended(n_main, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			for (int32 j = 0; j < group[0]->req.scan_excluded; j++)
				if (ids[j] >= 0 && ids[j] < n_main)
					excluded[ids[j]] = 1;
		}
	}
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.queries = queries;
	scan.k = k;
	scan.excluded = excluded;
	genie_worker_engine_options(kind, &cancel, &options);
	started = GetCurrentTimestamp();
	status = genie_vectors_scan(s->vectors, kind, &options, &scan, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY)
	{
		/* those of the group that allow it run on the CPU; genie.device = gpu gets the error */
		fallback = true;
		for (int i = 0; i < n; i++)
			if (group[i]->req.device == GENIE_DEVICE_SETTING_GPU)
				genie_worker_reply_outcome(st, group[i], GENIE_SERVICE_ENGINE_ERROR, &err);
		genie_worker_engine_options(GENIE_ENGINE_CPU, &cancel, &options);
		status = genie_vectors_scan(s->vectors, GENIE_ENGINE_CPU, &options, &scan, &found, &err);
	}
	if (status == GENIE_DEVICE_ERROR)
		st->device_failed = true;
	for (int i = 0, q0 = 0; i < n; q0 += group[i]->req.n_queries, i++)
	{
		if (group[i]->replied)
			continue;
		if (status == GENIE_CANCELLED)
			genie_worker_fail_request(group[i]);
		else if (status != GENIE_OK)
			genie_worker_reply_outcome(st, group[i], GENIE_SERVICE_ENGINE_ERROR, &err);
		else
			reply_scan(st, group[i], found, q0, fallback);
	}
	if (status == GENIE_OK)
	{
		stats = &s->stats[found->device == GENIE_ENGINE_GPU ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU];
		stats->batches++;
		stats->requests += n;
		stats->queries += nq;
		stats->max_batch_queries = Max(stats->max_batch_queries, nq);
		for (int i = 0; i < n; i++)
			stats->queue_wait_ms += group[i]->queue_wait_ms;
		stats->engine_ms += (double) (GetCurrentTimestamp() - started) / 1000.0;
	}
	genie_vector_results_free(found);
	pfree(queries);
	if (excluded != NULL)
		pfree(excluded);
}

void
genie_worker_scan_vectors(ServiceState *st, TakenRequest **scans, int n)
{
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(n, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		TakenRequest *t = scans[i];
		const float *q;
		const int32 *ids;
		ServedValues *s;
		genie_engine_kind kind;
		genie_error err;
		int32		dim;
		int			m = 0;

		if (done[i])
			continue;
		done[i] = true;
		s = genie_worker_find_values(st, &t->req.key);
		if (s == NULL || s->vectors == NULL)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
			continue;
		}
		dim = genie_vectors_dim(s->vectors);
		if (!read_scan(t, dim, &q, &ids))
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie vector scan request");
			continue;
		}
		s->last_used = ++st->clock;
		if (genie_worker_resolve_kind(st, t->req.device, &kind, &err) != GENIE_OK)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
			continue;
		}
		group[m++] = t;
		for (int j = i + 1; j < n; j++)
			if (!done[j] && read_scan(scans[j], dim, &q, &ids) && same_scan(st, t, kind, scans[j], dim))
			{
				done[j] = true;
				group[m++] = scans[j];
			}
		scan_group(st, s, kind, group, m);
	}
	pfree(group);
	pfree(done);
}
