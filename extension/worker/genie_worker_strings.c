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
 * largest k: genie_service_values.c groups them), as searches by match
 * count are.  The worker scans on its own
 * thread, as it verifies genie_similar candidates; the scan stops when
 * every backend of the call withdrew.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "search/genie_search.h"
#include "worker/genie_worker_internal.h"

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

/* The query offsets (n_queries + 1 int64) open the payload; the skipped ids follow. */
static Size
excluded_offset(TakenRequest *t)
{
	return sizeof(int64) * ((Size) t->req.n_queries + 1);
}

static const char *
query_text(TakenRequest *t)
{
	return t->payload + excluded_offset(t) + sizeof(int32) * (Size) t->req.scan_excluded;
}

static bool
holds(const ServedValues *s)
{
	return s->strings != NULL;
}

/* A scan request's parts, checked against its payload; false when malformed. */
static bool
well_formed(const ServedValues *s, TakenRequest *t)
{
	GenieRequest *r = &t->req;
	int			nq = r->n_queries;
	const int64 *query_offsets = (const int64 *) t->payload;
	Size		need;
	Size		answer;

	if (nq < 1 || r->k < 1 || r->scan_excluded < 0 || r->scan_text_bytes < 0)
		return false;
	need = excluded_offset(t) + sizeof(int32) * (Size) r->scan_excluded + (Size) r->scan_text_bytes;
	answer = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) nq + 1) +
		3 * sizeof(int32) * (Size) nq * (Size) r->k;
	if (need > t->payload_size || answer > r->response_capacity)
		return false;
	return query_offsets[0] == 0 && query_offsets[nq] == r->scan_text_bytes;
}

/* The group's queries concatenated, the largest k, the first member's skipped objects. */
static void *
prepare(ServedValues *s, TakenRequest **group, int n)
{
	genie_string_scan *scan = palloc0(sizeof(genie_string_scan));
	int			nq = 0;
	int64		text_bytes = 0;
	char	   *text;
	int64	   *offsets;

	for (int i = 0; i < n; i++)
	{
		nq += group[i]->req.n_queries;
		scan->k = Max(scan->k, group[i]->req.k);
		text_bytes += group[i]->req.scan_text_bytes;
	}
	text = palloc_extended(Max(text_bytes, 1), MCXT_ALLOC_HUGE);
	offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	offsets[0] = 0;
	nq = 0;
	for (int i = 0; i < n; i++)
	{
		const int64 *qo = (const int64 *) group[i]->payload;
		int64		base = offsets[nq];

		memcpy(text + base, query_text(group[i]), group[i]->req.scan_text_bytes);
		for (int q = 1; q <= group[i]->req.n_queries; q++)
			offsets[nq + q] = base + qo[q];
		nq += group[i]->req.n_queries;
	}
	scan->n_queries = nq;
	scan->query_text = text;
	scan->query_text_offsets = offsets;
	scan->excluded = genie_worker_excluded_flags(&genie_worker_string_scans, group[0],
												 s->key.n_main_objects);
	return scan;
}

static genie_status
scan(ServedValues *s, void *input, genie_engine_kind kind, const genie_engine_options *options,
	 void **found, genie_error *err)
{
	return genie_strings_scan(s->strings, kind, options, (const genie_string_scan *) input,
							  (genie_string_results **) found, err);
}

/* Writes member t's answer: its queries [q0, q0 + n) of found, at most its k rows each. */
static void
reply(ServiceState *st, ServedValues *s, TakenRequest *t, const void *results, int q0, bool fallback)
{
	const genie_string_results *found = results;
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

static genie_engine_kind
answered_on(const void *found)
{
	return ((const genie_string_results *) found)->device;
}

static void
free_found(void *found)
{
	genie_string_results_free(found);
}

/* A scan's rows come in (distance, length, id) order. */
const ValuesScanKind genie_worker_string_scans = {
	"a malformed genie string scan request",
	holds, well_formed, excluded_offset, prepare, scan, reply, answered_on, free_found
};
