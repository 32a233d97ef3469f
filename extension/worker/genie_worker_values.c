/*-------------------------------------------------------------------------
 *
 * genie_service_values.c
 *	  The genie service worker's stored values (the main objects' strings or
 *	  vectors of an index version): the table of those held, and the scans
 *	  of them that the cycle's requests ask for, grouped into one engine
 *	  call per set of values, engine and skipped objects.  What differs
 *	  between strings and vectors (the request's layout, the scan, the
 *	  answer) comes from a ValuesScanKind (genie_service_strings.c,
 *	  genie_service_vectors.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

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

/*
 * The skipped objects (scan_excluded int32 ids) follow each request's
 * queries, at an offset the kind computes.
 */
static bool
same_skips(const ValuesScanKind *vk, TakenRequest *a, TakenRequest *b)
{
	return a->req.scan_excluded == b->req.scan_excluded &&
		memcmp(a->payload + vk->excluded_offset(a), b->payload + vk->excluded_offset(b),
			   sizeof(int32) * (Size) a->req.scan_excluded) == 0;
}

/*
 * Whether two scans of s can share one engine call: same values, engine and
 * skipped objects, and k within a factor of two (the group runs with its
 * largest k, so a backend widening k for invisible rows does not make every
 * other member's scan gather that many rows).
 */
static bool
same_scan(ServiceState *st, const ValuesScanKind *vk, ServedValues *s, TakenRequest *a,
		  genie_engine_kind kind, TakenRequest *b)
{
	genie_engine_kind kb;
	genie_error err;
	int64		ka = a->req.k;
	int64		kb_k = b->req.k;

	return genie_service_keys_equal(&a->req.key, &b->req.key) && vk->well_formed(s, b) &&
		Max(ka, kb_k) <= 2 * Min(ka, kb_k) &&
		genie_worker_resolve_kind(st, b->req.device, &kb, &err) == GENIE_OK && kb == kind &&
		same_skips(vk, a, b);
}

/*
 * The skipped main objects of a group (all members skip the same) as one
 * flag per main object; NULL when none is skipped.
 */
uint8 *
genie_worker_excluded_flags(const ValuesScanKind *vk, TakenRequest *t, int32 n_main)
{
	const int32 *ids = (const int32 *) (t->payload + vk->excluded_offset(t));
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
 * One engine call for the group (their queries concatenated, the largest
 * k: rows come in the order of the answer, so the first k of a larger k
 * are the answer for k), on the CPU for the members that allow it when the
 * GPU runs out of memory; then every member's answer and the statistics.
 */
static void
scan_group(ServiceState *st, const ValuesScanKind *vk, ServedValues *s, genie_engine_kind kind,
		   TakenRequest **group, int n)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "genie service scan",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	int			nq = 0;
	void	   *input = vk->prepare(s, group, n);
	void	   *found = NULL;
	genie_engine_options options;
	CancelGroup cancel = {group, n};
	genie_error err;
	genie_status status;
	bool		fallback = false;
	TimestampTz started = GetCurrentTimestamp();

	for (int i = 0; i < n; i++)
		nq += group[i]->req.n_queries;
	genie_worker_engine_options(kind, &cancel, &options);
	status = vk->scan(s, input, kind, &options, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY)
	{
		/* those of the group that allow it run on the CPU; genie.device = gpu gets the error */
		fallback = true;
		for (int i = 0; i < n; i++)
			if (group[i]->req.device == GENIE_DEVICE_SETTING_GPU)
				genie_worker_reply_outcome(st, group[i], GENIE_SERVICE_ENGINE_ERROR, &err);
		genie_worker_engine_options(GENIE_ENGINE_CPU, &cancel, &options);
		status = vk->scan(s, input, GENIE_ENGINE_CPU, &options, &found, &err);
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
			vk->reply(st, s, group[i], found, q0, fallback);
	}
	if (status == GENIE_OK)
	{
		GenieServiceIndexStats *stats = &s->stats[vk->answered_on(found) == GENIE_ENGINE_GPU ?
												  GENIE_ENGINE_GPU : GENIE_ENGINE_CPU];

		stats->batches++;
		stats->requests += n;
		stats->queries += nq;
		stats->max_batch_queries = Max(stats->max_batch_queries, nq);
		for (int i = 0; i < n; i++)
			stats->queue_wait_ms += group[i]->queue_wait_ms;
		stats->engine_ms += (double) (GetCurrentTimestamp() - started) / 1000.0;
	}
	vk->free_found(found);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

void
genie_worker_scan_values(ServiceState *st, TakenRequest **scans, int n, const ValuesScanKind *vk)
{
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(n, 1));
	bool	   *done = palloc0(sizeof(bool) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		TakenRequest *t = scans[i];
		ServedValues *s;
		genie_engine_kind kind;
		genie_error err;
		int			m = 0;
		int64		nq;

		if (done[i])
			continue;
		done[i] = true;
		s = genie_worker_find_values(st, &t->req.key);
		if (s == NULL || !vk->holds(s))
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
			continue;
		}
		if (!vk->well_formed(s, t))
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, vk->malformed);
			continue;
		}
		s->last_used = ++st->clock;
		if (genie_worker_resolve_kind(st, t->req.device, &kind, &err) != GENIE_OK)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
			continue;
		}
		group[m++] = t;
		nq = t->req.n_queries;
		for (int j = i + 1; j < n; j++)
			if (!done[j] && nq + (int64) scans[j]->req.n_queries <= GENIE_SERVICE_MAX_GROUP_QUERIES &&
				same_scan(st, vk, s, t, kind, scans[j]))
			{
				done[j] = true;
				nq += scans[j]->req.n_queries;
				group[m++] = scans[j];
			}
		scan_group(st, vk, s, kind, group, m);
	}
	pfree(group);
	pfree(done);
}
