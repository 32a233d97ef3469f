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
 * The worker scans on its own thread, request by request, as it verifies
 * genie_similar candidates; the scan polls the backend's cancel.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "genie_search.h"
#include "genie_service_worker.h"

static ServedStrings *
find_strings(ServiceState *st, const GenieServiceKey *key)
{
	for (int i = 0; i < st->n_strings; i++)
		if (genie_service_keys_equal(&st->strings[i]->key, key))
			return st->strings[i];
	return NULL;
}

bool
genie_worker_has_strings(ServiceState *st, const GenieServiceKey *key)
{
	return find_strings(st, key) != NULL;
}

static void
free_strings(ServedStrings *s)
{
	genie_strings_free(s->strings);	/* its GPU copy included */
	free(s);
}

void
genie_worker_evict_strings(ServiceState *st, ServedStrings *keep)
{
	int64		budget = (int64) genie_cache_size_mb * 1024 * 1024;

	while (genie_worker_host_bytes(st) > budget || st->n_strings == GENIE_SERVICE_MAX_SERVED)
	{
		int			victim = -1;

		for (int i = 0; i < st->n_strings; i++)
			if (st->strings[i] != keep &&
				(victim < 0 || st->strings[i]->last_used < st->strings[victim]->last_used))
				victim = i;
		if (victim < 0)
			return;
		free_strings(st->strings[victim]);
		st->strings[victim] = st->strings[--st->n_strings];
	}
}

/* The stream is byte_offsets (n_main_objects + 1 int64) | text. */
void
genie_worker_finish_strings_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	int32		n = load->key.n_main_objects;
	Size		head = sizeof(int64) * ((Size) n + 1);
	const int64 *offsets = (const int64 *) load->buffer;
	ServedStrings *s;
	genie_error err;
	GenieResponse *resp;

	if (n < 0 || load->total < head || offsets[0] != 0 || offsets[n] < 0 ||
		(Size) offsets[n] != load->total - head)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed hand-over of stored strings");
		return;
	}
	s = calloc(1, sizeof(ServedStrings));
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
	s->last_used = ++st->clock;
	for (int e = 0; e < 2; e++)
	{
		s->stats[e].key = s->key;
		s->stats[e].index_oid = s->index_oid;
		s->stats[e].engine = (genie_engine_kind) e;
		s->stats[e].strings = true;
		s->stats[e].host_bytes = s->host_bytes;
	}
	s->stats[GENIE_ENGINE_CPU].loads = 1;
	genie_worker_evict_strings(st, NULL);
	st->strings[st->n_strings++] = s;
	genie_worker_evict_strings(st, s);

	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
	{
		resp->resident = true;
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
	}
}

void
genie_worker_handle_scan_strings(ServiceState *st, TakenRequest *t)
{
	GenieRequest *r = &t->req;
	int			nq = r->n_queries;
	int32		k = r->k;
	Size		need = sizeof(int64) * ((Size) nq + 1) + sizeof(int32) * (Size) Max(r->scan_excluded, 0) +
		(Size) Max(r->scan_text_bytes, 0);
	Size		slots = (Size) Max(nq, 0) * (Size) Max(k, 0);
	Size		answer = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) nq + 1) +
		3 * sizeof(int32) * slots;
	ServedStrings *s = find_strings(st, &r->key);
	int32		n_main = r->key.n_main_objects;
	const int64 *query_offsets = (const int64 *) t->payload;
	const int32 *excluded_ids = (const int32 *) (t->payload + sizeof(int64) * ((Size) nq + 1));
	genie_string_scan scan;
	genie_string_results *found = NULL;
	genie_engine_options options;
	genie_engine_kind kind;
	CancelGroup group = {&t, 1};
	genie_error err;
	genie_status status;
	uint8	   *excluded = NULL;
	bool		fallback = false;
	GenieResponse *resp;
	char	   *p;
	int64	   *offsets;
	int32	   *objects;
	TimestampTz started;
	GenieServiceIndexStats *stats;

	if (nq < 1 || k < 1 || r->scan_excluded < 0 || r->scan_text_bytes < 0 ||
		need > t->payload_size || answer > r->response_capacity ||
		query_offsets[0] != 0 || query_offsets[nq] != r->scan_text_bytes)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie string scan request");
		return;
	}
	if (s == NULL)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
		return;
	}
	s->last_used = ++st->clock;
	if (genie_worker_resolve_kind(st, r->device, &kind, &err) != GENIE_OK)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	if (r->scan_excluded > 0)
	{
		excluded = calloc(Max(n_main, 1), 1);
		if (excluded == NULL)
		{
			genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
			return;
		}
		for (int32 i = 0; i < r->scan_excluded; i++)
			if (excluded_ids[i] >= 0 && excluded_ids[i] < n_main)
				excluded[excluded_ids[i]] = 1;
	}
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.query_text = (const char *) excluded_ids + sizeof(int32) * r->scan_excluded;
	scan.query_text_offsets = query_offsets;
	scan.k = k;
	scan.excluded = excluded;
	genie_worker_engine_options(kind, &group, &options);
	started = GetCurrentTimestamp();
	status = genie_strings_scan(s->strings, kind, &options, &scan, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && r->device != GENIE_DEVICE_SETTING_GPU)
	{
		fallback = true;
		genie_worker_engine_options(GENIE_ENGINE_CPU, &group, &options);
		status = genie_strings_scan(s->strings, GENIE_ENGINE_CPU, &options, &scan, &found, &err);
	}
	free(excluded);
	if (status == GENIE_DEVICE_ERROR)
		st->device_failed = true;
	if (status == GENIE_CANCELLED)
	{
		genie_worker_fail_request(t);
		return;
	}
	if (status != GENIE_OK)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp == NULL)
	{
		genie_string_results_free(found);
		return;
	}
	stats = &s->stats[found->device == GENIE_ENGINE_GPU ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU];
	stats->batches++;
	stats->requests++;
	stats->queries += nq;
	stats->max_batch_queries = Max(stats->max_batch_queries, nq);
	stats->queue_wait_ms += t->queue_wait_ms;
	stats->engine_ms += (double) (GetCurrentTimestamp() - started) / 1000.0;
	resp->engine = found->device;
	resp->device_fallback = fallback;
	p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
	offsets = (int64 *) p;
	objects = (int32 *) (p + sizeof(int64) * ((Size) nq + 1));
	/* at most k rows per query, packed: slots are the capacity, not the layout */
	memcpy(offsets, found->query_offsets, sizeof(int64) * ((Size) nq + 1));
	resp->n_hits = found->query_offsets[nq];
	memcpy(objects, found->objects, sizeof(int32) * resp->n_hits);
	memcpy(objects + slots, found->distances, sizeof(int32) * resp->n_hits);
	for (int64 i = 0; i < resp->n_hits; i++)
		objects[2 * slots + i] = genie_strings_length(s->strings, found->objects[i]);
	genie_string_results_free(found);
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
}
