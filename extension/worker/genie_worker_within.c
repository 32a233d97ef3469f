/*-------------------------------------------------------------------------
 *
 * genie_worker_within.c
 *	  Range searches of stored values in the genie service: every main
 *	  object within a radius of each query (edit or Euclidean distance), on
 *	  the GPU or the CPU engine, through the index's List of Clusters when
 *	  the backend handed one over with the values.
 *
 * A range search is one engine call of its own (its radius is its own).
 * It runs on a runner thread like a batch's searches (genie_run_job), so
 * that a long one does not hold up the requests the worker collects and
 * answers meanwhile; the worker's thread checks the request and makes the
 * job's inputs before, and writes the answer after.  Its values stay held
 * (busy) until then.  An answer larger than the room its backend left is
 * kept for the backend's second ask, which names it, instead of being
 * searched twice.
 *
 * Limits: range searches wait for each other (one at a time); a scan of the
 * same vectors while one runs waits for it where the set is streamed
 * through a device budget (the part buffer is one); and the range runner's
 * GPU work runs beside a batch's, outside the one-GPU-batch-at-a-time rule
 * of the runners (the engines share the device's memory budget).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "search/genie_search.h"
#include "worker/genie_worker_internal.h"

/* Whether t is a well-formed range search of s's values. */
static bool
within_well_formed(const ServedValues *s, TakenRequest *t)
{
	GenieRequest *r = &t->req;
	GenieValueBatch queries;

	if (r->n_queries < 1 || r->scan_excluded < 0 || r->scan_excluded > s->key.n_main_objects ||
		r->scan_query_bytes < 0 || r->values_kind != s->set.kind || isnan(r->within_radius) ||
		r->within_radius < 0 ||
		(s->set.kind != GENIE_VALUES_STRINGS && r->value_dim != genie_value_set_dim(&s->set)) ||
		s->set.kind == GENIE_VALUES_CODES)
		return false;
	return TYPEALIGN(8, (Size) r->scan_query_bytes) + sizeof(int32) * (Size) r->scan_excluded <=
		t->payload_size &&
		genie_worker_read_queries(t, &queries) &&
		GENIE_WITHIN_ANSWER_BYTES(r->n_queries, 0) <= r->response_capacity;
}

/* The pid of the backend in slot (under the mutex that guards it). */
static int
slot_pid(int slot)
{
	GenieServiceShared *sh = genie_service_shared;
	int			pid;

	SpinLockAcquire(&sh->mutex);
	pid = sh->slots[slot].pid;
	SpinLockRelease(&sh->mutex);
	return pid;
}

/* Drops kept answer i. */
static void
drop_kept(ServiceState *st, int i)
{
	genie_range_results_free(st->kept[i].found);
	st->n_kept--;
	memmove(&st->kept[i], &st->kept[i + 1], sizeof(KeptAnswer) * (st->n_kept - i));
}

/*
 * Writes t's range answer, or, when it needs more room than t gave, its
 * size alone and the token under which the worker keeps it for the
 * backend's next ask (true: kept, found is the kept answer's now).
 */
static bool
reply_within(ServiceState *st, TakenRequest *t, genie_range_results *found, bool fallback,
			 double engine_ms)
{
	int			nq = t->req.n_queries;
	int64		n = found->query_offsets[nq];
	Size		need = GENIE_WITHIN_ANSWER_BYTES(nq, n);
	bool		keep = need > t->req.response_capacity && need <= GENIE_SERVICE_MAX_ANSWER_BYTES;
	GenieResponse *resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	int64	   *offsets;
	float8	   *distances;

	if (resp == NULL)
		return false;
	resp->engine = found->device;
	resp->device_fallback = fallback;
	resp->engine_ms = engine_ms;
	resp->n_hits = n;
	resp->answer_bytes = (int64) need;
	resp->distances_computed = found->distances_computed;
	resp->superclusters_discarded = found->superclusters_discarded;
	resp->clusters_discarded = found->clusters_discarded;
	if (need <= t->req.response_capacity)
	{
		offsets = (int64 *) ((char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
		distances = (float8 *) (offsets + nq + 1);
		memcpy(offsets, found->query_offsets, sizeof(int64) * (nq + 1));
		memcpy(distances, found->distances, sizeof(float8) * n);
		memcpy(distances + n, found->objects, sizeof(int32) * n);
	}
	else if (keep)
	{
		KeptAnswer *k;
		Size		kept_bytes = need;

		/* the oldest go first: their backends search again if they still ask */
		for (int i = 0; i < st->n_kept; i++)
			kept_bytes += st->kept[i].bytes;
		while (st->n_kept > 0 &&
			   (st->n_kept == GENIE_SERVICE_MAX_KEPT || kept_bytes > GENIE_SERVICE_MAX_KEPT_BYTES))
		{
			kept_bytes -= st->kept[0].bytes;
			drop_kept(st, 0);
		}
		k = &st->kept[st->n_kept++];
		k->slot = t->slot;
		k->pid = slot_pid(t->slot);
		k->token = ++st->last_token;
		k->key = t->req.key;
		k->n_queries = nq;
		k->radius = t->req.within_radius;
		k->found = found;
		k->bytes = need;
		k->device_fallback = fallback;
		k->engine_ms = engine_ms;
		k->kept_at = GetCurrentTimestamp();
		resp->answer_token = k->token;
	}
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
	return keep;
}

void
genie_worker_forget_kept(ServiceState *st, int slot)
{
	TimestampTz now = GetCurrentTimestamp();

	for (int i = st->n_kept - 1; i >= 0; i--)
	{
		KeptAnswer *k = &st->kept[i];

		if (slot >= 0 ? k->slot == slot : TimestampDifferenceExceeds(k->kept_at, now, 1000))
			drop_kept(st, i);
	}
}

/*
 * The answer t's backend was told its first ask's is kept under (and its
 * slot's other kept answers dropped); false when it is not kept (any more).
 */
static bool
answer_kept(ServiceState *st, TakenRequest *t)
{
	bool		answered = false;

	for (int i = st->n_kept - 1; i >= 0 && t->req.within_answer != 0; i--)
	{
		KeptAnswer *k = &st->kept[i];

		if (k->slot == t->slot && k->token == t->req.within_answer && k->pid == slot_pid(t->slot) &&
			genie_service_keys_equal(&k->key, &t->req.key) && k->n_queries == t->req.n_queries &&
			k->radius == t->req.within_radius && k->bytes <= t->req.response_capacity)
		{
			ServedValues *s = genie_worker_find_values(st, &t->req.key);

			(void) reply_within(st, t, k->found, k->device_fallback, k->engine_ms);
			/* a request, not another engine call */
			if (s != NULL)
				s->stats[k->found->device == GENIE_ENGINE_GPU ? GENIE_ENGINE_GPU
						 : GENIE_ENGINE_CPU].requests++;
			answered = true;
			break;
		}
	}
	genie_worker_forget_kept(st, t->slot);
	return answered;
}

/*
 * A job for range search t: its inputs in a memory context of its own,
 * with a copy of t (the cycle's batch is reset before the search ends).
 */
static SearchJob *
make_job(ServiceState *st, ServedValues *s, genie_engine_kind kind, TakenRequest *t)
{
	MemoryContext cxt = AllocSetContextCreate(st->top_cxt, "genie service range search",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	SearchJob  *job = palloc0(sizeof(SearchJob));
	WithinJob  *w = palloc0(sizeof(WithinJob));
	TakenRequest *copy = palloc(sizeof(TakenRequest));

	*copy = *t;
	copy->payload = palloc_extended(Max(t->payload_size, 1), MCXT_ALLOC_HUGE);
	memcpy(copy->payload, t->payload, t->payload_size);
	job->within = w;
	job->kind = kind;
	job->members = palloc(sizeof(TakenRequest *));
	job->members[0] = copy;
	job->n_members = 1;
	job->runnable = true;
	w->cxt = cxt;
	w->values = s;
	(void) genie_worker_read_queries(copy, &w->queries);	/* within_well_formed read them */
	w->excluded = genie_worker_excluded_flags(copy, s->key.n_main_objects);
	w->radius = t->req.within_radius;
	/* auto: the CPU answers; genie.device = gpu gets the error */
	w->cpu_fallback = kind == GENIE_ENGINE_GPU && t->req.device != GENIE_DEVICE_SETTING_GPU;
	/* the runner sets the cancel: the job's request withdrawn */
	genie_search_engine_options(kind, NULL, NULL, &w->options);
	genie_search_engine_options(GENIE_ENGINE_CPU, NULL, NULL, &w->cpu_options);
	MemoryContextSwitchTo(old);
	/* no eviction frees the values before the job is answered */
	s->busy++;
	return job;
}

void
genie_worker_take_within(ServiceState *st, TakenRequest *t)
{
	ServedValues *s;
	genie_engine_kind kind;
	MemoryContext old;

	if (answer_kept(st, t))
		return;
	s = genie_worker_values_for(st, t, within_well_formed, "a malformed genie range search request", &kind);
	if (s == NULL)
		return;
	old = MemoryContextSwitchTo(st->top_cxt);
	st->range_waiting = lappend(st->range_waiting, make_job(st, s, kind, t));
	MemoryContextSwitchTo(old);
	(void) genie_worker_poll_within(st);
}

/* Answers the job's request from its outcome, and frees the job. */
static void
finish_job(ServiceState *st, SearchJob *job)
{
	WithinJob  *w = job->within;
	ServedValues *s = w->values;
	TakenRequest *t = job->members[0];
	genie_range_results *found = w->found;

	s->busy--;
	w->found = NULL;
	if (job->status == GENIE_DEVICE_ERROR)
		st->device_failed = true;
	if (job->status == GENIE_CANCELLED)
		genie_worker_fail_request(t);
	else if (job->status != GENIE_OK)
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &job->err);
	else
	{
		genie_worker_count_batch(&s->stats[found->device == GENIE_ENGINE_GPU ? GENIE_ENGINE_GPU
										   : GENIE_ENGINE_CPU],
								 &t, 1, t->req.n_queries, job->engine_ms);
		if (reply_within(st, t, found, job->device_fallback, job->engine_ms))
			found = NULL;		/* kept for the backend's next ask */
		genie_worker_count_list_bytes(s);
	}
	genie_range_results_free(found);
	MemoryContextDelete(w->cxt);
}

bool
genie_worker_poll_within(ServiceState *st)
{
	bool		answered = false;

	for (;;)
	{
		if (st->range_running != NULL)
		{
			if (!genie_runner_done(&st->range_runner))
				break;
			finish_job(st, st->range_running);
			st->range_running = NULL;
			answered = true;
		}
		/* after a GPU error none starts: the worker exits once none runs */
		if (st->range_waiting == NIL || st->device_failed)
			break;
		st->range_running = linitial(st->range_waiting);
		st->range_waiting = list_delete_first(st->range_waiting);
		/* one whose backend withdrew while it waited is not searched */
		if (genie_worker_job_cancelled(st->range_running))
			st->range_running->status = GENIE_CANCELLED;
		else
			genie_runner_submit(&st->range_runner, &st->range_running, 1);
		/* (without its thread the job ran here: done at once, and the loop goes on) */
	}
	return answered;
}
