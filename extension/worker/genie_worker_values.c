/*-------------------------------------------------------------------------
 *
 * genie_worker_values.c
 *	  The genie service worker's stored values: the main objects' strings,
 *	  vectors or codes of an index version (service/genie_values.h), handed
 *	  over by a backend like the postings and kept under the same key, and
 *	  the scans of them (edit, Euclidean or Hamming distance) on the GPU or
 *	  the CPU engine.
 *
 * A backend asks for the k nearest main values of its queries, skipping
 * the main objects it knows are dead or NULL; it scans its own pending
 * values and merges by (distance, length, id), so the answer is what the
 * in-process scan gives.  The scans of one cycle that share the values,
 * the engine and the skipped objects are one engine call (their queries
 * concatenated, the largest k): one device pass over the values serves
 * every session's queries, which is what makes many sessions cheap.  A
 * runner thread makes the call (a lone small one: the worker's own thread);
 * a scan stops when every backend of the call withdrew.  The
 * LSH mode's re-ranking of candidates stays in the backend.  Range searches
 * of the values run on the range runner (genie_worker_within.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "search/genie_search.h"
#include "worker/genie_worker_internal.h"

/* the queries one engine call takes at most (the engines count them in int32) */
#define GENIE_SERVICE_MAX_GROUP_QUERIES (1 << 24)

ServedValues *
genie_worker_find_values(ServiceState *st, const GenieServiceKey *key)
{
	for (int i = 0; i < st->n_values; i++)
		if (genie_service_keys_equal(&st->values[i]->key, key))
			return st->values[i];
	return NULL;
}

void
genie_worker_add_values(ServiceState *st, ServedValues *s, TakenRequest *t)
{
	GenieResponse *resp;

	s->last_used = ++st->clock;
	for (int e = 0; e < 2; e++)
	{
		s->stats[e].key = s->key;
		s->stats[e].index_oid = s->index_oid;
		s->stats[e].engine = (genie_engine_kind) e;
		s->stats[e].host_bytes = s->host_bytes;
		s->stats[e].loads = 1;	/* handed over once, whichever engine scans */
	}
	genie_worker_evict_host(st, NULL, NULL, false, true);
	if (st->n_values == GENIE_SERVICE_MAX_SERVED)
	{
		genie_worker_free_values(s);
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY,
								 "the genie service holds as many versions of stored values as it can");
		return;
	}
	st->values[st->n_values++] = s;
	genie_worker_evict_host(st, NULL, s, false, false);

	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
	{
		resp->resident = true;
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
	}
}

/* The host memory s holds: its values and list (with the rows the list's first CPU search copied). */
static int64
host_bytes(const ServedValues *s)
{
	return (int64) genie_value_set_host_bytes(&s->set) +
		(s->list != NULL ? (int64) genie_cluster_list_memory_bytes(s->list) : 0);
}

void
genie_worker_finish_values_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	GenieValueBatch batch;
	ServedValues *s;
	genie_error err;

	if (!genie_value_batch_read(load->values_kind, load->key.n_main_objects, load->value_dim,
								load->buffer, load->total - load->list_bytes, &batch))
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed hand-over of stored values");
		return;
	}
	s = calloc(1, sizeof(ServedValues));
	if (s == NULL)
	{
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
		return;
	}
	if (load->list_bytes > 0)
	{
		/* checked as the backend checks it when it reads the list itself, and said as it says it */
		if (genie_cluster_list_load(load->list_buffer, load->list_bytes, &s->list, &err) != GENIE_OK)
		{
			genie_cluster_list_free(s->list);
			free(s);
			/* out of memory is not corruption */
			genie_worker_reply_outcome(st, t, err.status == GENIE_OUT_OF_MEMORY ? GENIE_SERVICE_ENGINE_ERROR
									   : GENIE_SERVICE_CORRUPT, &err);
			return;
		}
		if (genie_cluster_list_objects(s->list) != load->key.n_main_objects)
		{
			err.status = GENIE_INVALID_ARGUMENT;
			snprintf(err.message, sizeof(err.message), "It names %d objects, the index has %d.",
					 genie_cluster_list_objects(s->list), load->key.n_main_objects);
			genie_cluster_list_free(s->list);
			free(s);
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_CORRUPT, &err);
			return;
		}
	}
	if (load->vectors != NULL)
	{
		/* the pieces went straight into the set's rows: check them, and take the set */
		if (genie_vectors_seal(load->vectors, &err) != GENIE_OK)
		{
			genie_cluster_list_free(s->list);
			free(s);
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
			return;
		}
		s->set.kind = GENIE_VALUES_VECTORS;
		s->set.vectors = load->vectors;
		load->vectors = NULL;
		load->buffer = NULL;
	}
	else if (genie_value_set_create(&batch, &s->set, &err) != GENIE_OK)
	{
		genie_cluster_list_free(s->list);
		free(s);
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	s->key = load->key;
	s->index_oid = load->index_oid;
	s->host_bytes = host_bytes(s);
	for (int e = 0; e < 2; e++)
		s->stats[e].content = s->set.kind == GENIE_VALUES_STRINGS ? GENIE_SERVED_STRINGS
			: s->set.kind == GENIE_VALUES_CODES ? GENIE_SERVED_CODES : GENIE_SERVED_VECTORS;
	genie_worker_add_values(st, s, t);
}

void
genie_worker_count_list_bytes(ServedValues *s)
{
	int64		now;

	if (s->list == NULL)
		return;
	now = host_bytes(s);
	if (now == s->host_bytes)
		return;
	s->host_bytes = now;
	for (int e = 0; e < 2; e++)
		s->stats[e].host_bytes = now;
}

/* ---- scans ---- */

/* The skipped objects' ids (scan_excluded int32) follow the queries, from an 8-byte boundary. */
static const int32 *
skipped_ids(TakenRequest *t)
{
	return (const int32 *) (t->payload + TYPEALIGN(8, (Size) t->req.scan_query_bytes));
}

bool
genie_worker_read_queries(TakenRequest *t, GenieValueBatch *queries)
{
	GenieRequest *r = &t->req;

	return r->scan_query_bytes >= 0 && (Size) r->scan_query_bytes <= t->payload_size &&
		genie_value_batch_read(r->values_kind, r->n_queries, r->value_dim, t->payload,
							   (Size) r->scan_query_bytes, queries);
}

/* Whether t is a well-formed scan of s's values (its payload, its answer's room). */
static bool
well_formed(const ServedValues *s, TakenRequest *t)
{
	GenieRequest *r = &t->req;
	GenieValueBatch queries;

	/* k is at most the main objects (the client's cap), so the answer's size cannot wrap */
	if (r->n_queries < 1 || r->k < 1 || r->k > Max(s->key.n_main_objects, 1) ||
		r->scan_excluded < 0 || r->scan_excluded > s->key.n_main_objects ||
		r->scan_query_bytes < 0 || r->values_kind != s->set.kind ||
		(s->set.kind != GENIE_VALUES_STRINGS && r->value_dim != genie_value_set_dim(&s->set)) ||
		r->scan_list_use < GENIE_LIST_AUTO || r->scan_list_use > GENIE_LIST_NEVER)
		return false;
	/* the queries first: their layout bounds n_queries by the payload's size */
	return TYPEALIGN(8, (Size) r->scan_query_bytes) + sizeof(int32) * (Size) r->scan_excluded <=
		t->payload_size &&
		genie_worker_read_queries(t, &queries) &&
		GENIE_SCAN_ANSWER_BYTES(r->n_queries, r->k) <= r->response_capacity;
}

static bool
same_skips(TakenRequest *a, TakenRequest *b)
{
	return a->req.scan_excluded == b->req.scan_excluded &&
		memcmp(skipped_ids(a), skipped_ids(b), sizeof(int32) * (Size) a->req.scan_excluded) == 0;
}

/*
 * Whether two scans of s can share one engine call: same values, engine and
 * skipped objects, and k within a factor of two (the group runs with its
 * largest k, so a backend widening k for invisible rows does not make every
 * other member's scan gather that many rows); vectors with a list, the same
 * genie.cluster_list_knn; and neither under EXPLAIN (ANALYZE) (scan_alone:
 * its list counts are its own).
 */
static bool
same_scan(ServiceState *st, ServedValues *s, TakenRequest *a, genie_engine_kind kind,
		  TakenRequest *b)
{
	genie_engine_kind kb;
	genie_error err;
	int64		ka = a->req.k;
	int64		kb_k = b->req.k;

	return genie_service_keys_equal(&a->req.key, &b->req.key) && well_formed(s, b) &&
		Max(ka, kb_k) <= 2 * Min(ka, kb_k) &&
		(s->list == NULL || s->set.kind != GENIE_VALUES_VECTORS ||
		 a->req.scan_list_use == b->req.scan_list_use) &&
		!a->req.scan_alone && !b->req.scan_alone &&
		genie_worker_resolve_kind(st, b->req.device, &kb, &err) == GENIE_OK && kb == kind &&
		same_skips(a, b);
}

uint8 *
genie_worker_excluded_flags(TakenRequest *t, int32 n_main)
{
	const int32 *ids = skipped_ids(t);
	uint8	   *flags;

	if (t->req.scan_excluded == 0)
		return NULL;
	flags = palloc_extended(Max(n_main, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int32 j = 0; j < t->req.scan_excluded; j++)
		if (ids[j] >= 0 && ids[j] < n_main)
			flags[ids[j]] = 1;
	return flags;
}

/*
 * Writes member t's answer: its queries [q0, q0 + n) of found, at most its
 * k rows each (the group's k may be larger: rows come in the order of the
 * answer, so the first k of a larger k are the answer for k).
 */
static void
reply(ServiceState *st, ServedValues *s, TakenRequest *t, const GenieValueFound *found, int q0,
	  bool fallback, double engine_ms)
{
	int			nq = t->req.n_queries;
	int32		k = t->req.k;
	Size		slots = (Size) nq * (Size) k;
	const int64 *found_offsets = genie_value_found_offsets(found);
	GenieResponse *resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	int64	   *offsets;
	float8	   *distances;
	int32	   *objects;
	int32	   *lengths;
	int64		n = 0;

	if (resp == NULL)
		return;
	resp->engine = genie_value_found_device(found);
	resp->device_fallback = fallback;
	resp->engine_ms = engine_ms;
	if (t->req.scan_alone && found->vectors != NULL)
	{
		/* its own engine call (same_scan): the counts are its queries' */
		resp->list_queries = found->vectors->listed;
		resp->list_distances = found->vectors->list_distances;
	}
	offsets = (int64 *) ((char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
	distances = (float8 *) (offsets + nq + 1);
	objects = (int32 *) (distances + slots);
	lengths = objects + slots;
	offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		from = found_offsets[q0 + q];
		int64		take = Min((int64) k, found_offsets[q0 + q + 1] - from);

		for (int64 i = from; i < from + take; i++, n++)
		{
			objects[n] = genie_value_found_object(found, i);
			distances[n] = genie_value_found_distance(found, i);
			lengths[n] = genie_value_set_length(&s->set, objects[n]);
		}
		offsets[q + 1] = n;
	}
	resp->n_hits = n;
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

/*
 * The group's job (their queries concatenated, or a lone member's where
 * they lie; the largest k), in the
 * current (the batch's) memory, for a runner to scan; the values stay held
 * (busy) until genie_worker_finish_scan answers it.
 */
static SearchJob *
make_scan_job(ServedValues *s, genie_engine_kind kind, TakenRequest **group, int n)
{
	SearchJob  *job = palloc0(sizeof(SearchJob));
	ScanJob    *scan = palloc0(sizeof(ScanJob));
	GenieValueBatch *parts = palloc(sizeof(GenieValueBatch) * n);

	job->scan = scan;
	job->kind = kind;
	job->members = palloc(sizeof(TakenRequest *) * n);
	memcpy(job->members, group, sizeof(TakenRequest *) * n);
	job->n_members = n;
	scan->cpu_members = palloc(sizeof(TakenRequest *) * n);
	for (int i = 0; i < n; i++)
	{
		(void) genie_worker_read_queries(group[i], &parts[i]);	/* well_formed read them */
		job->k = Max(job->k, group[i]->req.k);
		if (group[i]->req.device != GENIE_DEVICE_SETTING_GPU)
			scan->cpu_members[scan->n_cpu_members++] = group[i];
	}
	scan->values = s;
	/*
	 * A lone member's queries are read where its payload lies (the batch's
	 * memory, as a concatenation's): a piece of a stored array is 3 MB or
	 * more, copied once already out of the session's segment.
	 */
	if (n == 1)
		scan->queries = parts[0];
	else
		genie_value_batch_concat(parts, n, &scan->queries);
	scan->excluded = genie_worker_excluded_flags(group[0], s->key.n_main_objects);
	/* the group shares its members' genie.cluster_list_knn (same_scan) */
	scan->list = s->set.kind == GENIE_VALUES_VECTORS ? s->list : NULL;
	scan->list_use = (genie_list_use) group[0]->req.scan_list_use;
	/* the cancel callbacks: the job's own members (run_scan, genie_worker_runner.c) */
	genie_worker_engine_options(kind, NULL, &scan->options);
	genie_worker_engine_options(GENIE_ENGINE_CPU, NULL, &scan->cpu_options);
	job->runnable = true;
	s->busy++;
	return job;
}

void
genie_worker_finish_scan(ServiceState *st, SearchJob *job)
{
	ScanJob    *scan = job->scan;
	ServedValues *s = scan->values;

	if (job->status == GENIE_DEVICE_ERROR)
		st->device_failed = true;
	for (int i = 0, q0 = 0; i < job->n_members; q0 += job->members[i]->req.n_queries, i++)
	{
		TakenRequest *t = job->members[i];

		if (job->device_fallback && t->req.device == GENIE_DEVICE_SETTING_GPU)
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &scan->gpu_err);
		else if (job->status == GENIE_CANCELLED)
			genie_worker_fail_request(t);
		else if (job->status != GENIE_OK)
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &job->err);
		else
			reply(st, s, t, &scan->found, q0, job->device_fallback, job->engine_ms);
	}
	genie_worker_count_list_bytes(s);
	if (job->status == GENIE_OK)
		genie_worker_count_batch(&s->stats[genie_value_found_device(&scan->found) == GENIE_ENGINE_GPU ?
										   GENIE_ENGINE_GPU : GENIE_ENGINE_CPU],
								 job->members, job->n_members, scan->queries.n, job->engine_ms);
	genie_value_found_free(&scan->found);
	s->busy--;
}

ServedValues *
genie_worker_values_for(ServiceState *st, TakenRequest *t, GenieValuesRequestCheck well_formed_for,
						const char *malformed, genie_engine_kind *kind)
{
	ServedValues *s = genie_worker_find_values(st, &t->req.key);
	genie_error err;

	if (s == NULL || s->set.kind != t->req.values_kind)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
		return NULL;
	}
	if (!well_formed_for(s, t))
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, malformed);
		return NULL;
	}
	s->last_used = ++st->clock;
	if (genie_worker_resolve_kind(st, t->req.device, kind, &err) != GENIE_OK)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return NULL;
	}
	return s;
}

void
genie_worker_scan_values(ServiceState *st, TakenRequest **scans, int n, SearchJob **jobs, int *n_jobs)
{
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(n, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		TakenRequest *t = scans[i];
		ServedValues *s;
		genie_engine_kind kind;
		int			m = 0;
		int64		nq;

		if (done[i])
			continue;
		done[i] = true;
		s = genie_worker_values_for(st, t, well_formed, "a malformed genie scan request", &kind);
		if (s == NULL)
			continue;
		group[m++] = t;
		nq = t->req.n_queries;
		for (int j = i + 1; j < n; j++)
			if (!done[j] && nq + (int64) scans[j]->req.n_queries <= GENIE_SERVICE_MAX_GROUP_QUERIES &&
				same_scan(st, s, t, kind, scans[j]))
			{
				done[j] = true;
				nq += scans[j]->req.n_queries;
				group[m++] = scans[j];
			}
		jobs[(*n_jobs)++] = make_scan_job(s, kind, group, m);
	}
	pfree(group);
	pfree(done);
}
