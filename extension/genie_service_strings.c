/*-------------------------------------------------------------------------
 *
 * genie_service_strings.c
 *	  The genie service worker's stored strings: the main objects' strings
 *	  of an index version (genie_ngram_ops with store_strings), handed over
 *	  by a backend like the postings and kept under the same key, and the
 *	  edit-distance scans of them (genie_strings_scan) on the GPU or the CPU
 *	  engine.
 *
 * A backend asks for the k nearest main strings of its queries, skipping
 * the main objects it knows are dead or NULL; it scans its own pending
 * strings and merges, so the answer is what the in-process scan gives.
 * The scans of one cycle that share the strings, the engine and the
 * skipped objects are one engine call (their queries concatenated, the
 * largest k), as searches by match count are.  The worker scans on its own
 * thread, as it verifies genie_similar candidates; the scan stops when
 * every backend of the call withdrew.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "genie_search.h"
#include "genie_service_worker.h"

/* The stream is byte_offsets (n_main_objects + 1 int64) | text. */
void
genie_worker_finish_strings_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	int32		n = load->key.n_main_objects;
	Size		head = sizeof(int64) * ((Size) n + 1);
	const int64 *offsets = (const int64 *) load->buffer;
	ServedValues *s;
	genie_error err;

	if (n < 0 || load->total < head || offsets[0] != 0 || offsets[n] < 0 ||
		(Size) offsets[n] != load->total - head)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed hand-over of stored strings");
		return;
	}
	s = calloc(1, sizeof(ServedValues));
	if (s == NULL)
	{
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
		return;
	}
	if (genie_strings_create(load->buffer + head, offsets, n, &s->strings, &err) != GENIE_OK)
	{
		free(s);
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	s->key = load->key;
	s->index_oid = load->index_oid;
	s->host_bytes = (int64) genie_strings_memory_bytes(s->strings);
	for (int e = 0; e < 2; e++)
		s->stats[e].content = GENIE_SERVED_STRINGS;
	genie_worker_add_values(st, s, t);
}

/* A scan request's parts, checked against its payload; false when malformed. */
static bool
read_scan(TakenRequest *t, const int64 **query_offsets, const int32 **excluded_ids,
		  const char **query_text)
{
	GenieRequest *r = &t->req;
	int			nq = r->n_queries;
	Size		need;
	Size		answer;

	if (nq < 1 || r->k < 1 || r->scan_excluded < 0 || r->scan_text_bytes < 0)
		return false;
	need = sizeof(int64) * ((Size) nq + 1) + sizeof(int32) * (Size) r->scan_excluded +
		(Size) r->scan_text_bytes;
	answer = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) nq + 1) +
		3 * sizeof(int32) * (Size) nq * (Size) r->k;
	if (need > t->payload_size || answer > r->response_capacity)
		return false;
	*query_offsets = (const int64 *) t->payload;
	*excluded_ids = (const int32 *) (t->payload + sizeof(int64) * ((Size) nq + 1));
	*query_text = (const char *) (*excluded_ids + r->scan_excluded);
	return (*query_offsets)[0] == 0 && (*query_offsets)[nq] == r->scan_text_bytes;
}

/* Whether two scan requests can share one engine call: same strings, engine and skipped objects. */
static bool
same_scan(ServiceState *st, TakenRequest *a, genie_engine_kind kind, TakenRequest *b)
{
	genie_engine_kind kb;
	genie_error err;

	return genie_service_keys_equal(&a->req.key, &b->req.key) &&
		genie_worker_resolve_kind(st, b->req.device, &kb, &err) == GENIE_OK && kb == kind &&
		a->req.scan_excluded == b->req.scan_excluded &&
		memcmp(a->payload + sizeof(int64) * ((Size) a->req.n_queries + 1),
			   b->payload + sizeof(int64) * ((Size) b->req.n_queries + 1),
			   sizeof(int32) * (Size) a->req.scan_excluded) == 0;
}

/* Writes member t's answer: its queries [q0, q0 + n) of found, at most its k rows each. */
static void
reply_scan(ServiceState *st, ServedValues *s, TakenRequest *t, const genie_string_results *found,
		   int q0, bool fallback)
{
	int			nq = t->req.n_queries;
	int32		k = t->req.k;
	Size		slots = (Size) nq * (Size) k;
	GenieResponse *resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	int64	   *offsets;
	int32	   *objects;
	int64		n = 0;

	if (resp == NULL)
		return;
	resp->engine = found->device;
	resp->device_fallback = fallback;
	offsets = (int64 *) ((char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
	objects = (int32 *) (offsets + nq + 1);
	offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		from = found->query_offsets[q0 + q];
		int64		take = Min((int64) k, found->query_offsets[q0 + q + 1] - from);

		/* the group's k may be larger: the first k rows are this request's answer */
		for (int64 i = 0; i < take; i++, n++)
		{
			objects[n] = found->objects[from + i];
			objects[slots + n] = found->distances[from + i];
			objects[2 * slots + n] = genie_strings_length(s->strings, found->objects[from + i]);
		}
		offsets[q + 1] = n;
	}
	resp->n_hits = n;
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

/*
 * One engine call for the group: their queries concatenated, the largest k
 * of them (a scan's rows come in (distance, length, id) order, so the first
 * k of a larger k are the answer for k).
 */
static void
scan_group(ServiceState *st, ServedValues *s, genie_engine_kind kind, TakenRequest **group, int n)
{
	GenieRequest *r0 = &group[0]->req;
	int32		n_main = r0->key.n_main_objects;
	int			nq = 0;
	int32		k = 0;
	int64		text_bytes = 0;
	char	   *text;
	int64	   *offsets;
	uint8	   *excluded = NULL;
	genie_string_scan scan;
	genie_string_results *found = NULL;
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
		text_bytes += group[i]->req.scan_text_bytes;
	}
	text = palloc_extended(Max(text_bytes, 1), MCXT_ALLOC_HUGE);
	offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	offsets[0] = 0;
	nq = 0;
	for (int i = 0; i < n; i++)
	{
		const int64 *qo;
		const int32 *ids;
		const char *qt;
		int64		base = offsets[nq];

		(void) read_scan(group[i], &qo, &ids, &qt);
		memcpy(text + base, qt, group[i]->req.scan_text_bytes);
		for (int q = 1; q <= group[i]->req.n_queries; q++)
			offsets[nq + q] = base + qo[q];
		nq += group[i]->req.n_queries;
		if (i == 0 && r0->scan_excluded > 0)
		{
			excluded = palloc_extended(Max(n_main, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			for (int32 j = 0; j < r0->scan_excluded; j++)
				if (ids[j] >= 0 && ids[j] < n_main)
					excluded[ids[j]] = 1;
		}
	}
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.query_text = text;
	scan.query_text_offsets = offsets;
	scan.k = k;
	scan.excluded = excluded;
	genie_worker_engine_options(kind, &cancel, &options);
	started = GetCurrentTimestamp();
	status = genie_strings_scan(s->strings, kind, &options, &scan, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY)
	{
		/* those of the group that allow it run on the CPU; genie.device = gpu gets the error */
		fallback = true;
		for (int i = 0; i < n; i++)
			if (group[i]->req.device == GENIE_DEVICE_SETTING_GPU)
				genie_worker_reply_outcome(st, group[i], GENIE_SERVICE_ENGINE_ERROR, &err);
		genie_worker_engine_options(GENIE_ENGINE_CPU, &cancel, &options);
		status = genie_strings_scan(s->strings, GENIE_ENGINE_CPU, &options, &scan, &found, &err);
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
			reply_scan(st, s, group[i], found, q0, fallback);
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
	genie_string_results_free(found);
	pfree(text);
	pfree(offsets);
	if (excluded != NULL)
		pfree(excluded);
}

void
genie_worker_scan_strings(ServiceState *st, TakenRequest **scans, int n)
{
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(n, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		TakenRequest *t = scans[i];
		const int64 *qo;
		const int32 *ids;
		const char *qt;
		ServedValues *s;
		genie_engine_kind kind;
		genie_error err;
		int			m = 0;

		if (done[i])
			continue;
		done[i] = true;
		if (!read_scan(t, &qo, &ids, &qt))
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie string scan request");
			continue;
		}
		s = genie_worker_find_values(st, &t->req.key);
		if (s == NULL || s->strings == NULL)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
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
			if (!done[j] && read_scan(scans[j], &qo, &ids, &qt) && same_scan(st, t, kind, scans[j]))
			{
				done[j] = true;
				group[m++] = scans[j];
			}
		scan_group(st, s, kind, group, m);
	}
	pfree(group);
	pfree(done);
}
