/*-------------------------------------------------------------------------
 *
 * genie_worker_batch.c
 *	  What the genie service worker does with one batch of requests (a
 *	  cycle's): loads and genie_similar's verifications at once, and the
 *	  searches grouped by (index version, engine, k) into jobs, one engine
 *	  search each over the group's queries concatenated, which a runner
 *	  thread runs; when it is done, each backend gets the slice of the
 *	  answers that is its own.  And the statistics genie_service_stats()
 *	  shows.
 *
 * Engine choice follows genie.device of each request: cpu the CPU engine,
 * gpu the GPU engine (an error without one), auto the GPU when the worker
 * found one usable.  A GPU that runs out of memory (after the engine's own
 * multiple loading) answers auto requests on the CPU engine, flagged so
 * that the backend says so, and gpu requests with the error.  Everything
 * here runs on the worker's thread, in the batch's memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "search/genie_search.h"
#include "worker/genie_worker_internal.h"

/* ---- searches ---- */

/* A search request's query batch, read from its payload (checked against its size). */
static bool
read_batch(TakenRequest *t, genie_query_batch *b)
{
	GenieRequest *r = &t->req;
	char	   *p = t->payload;
	Size		need;

	if (r->n_queries < 1 || r->n_items < 0 || r->n_ranges < 0 || r->k < 1)
		return false;
	need = sizeof(int64) * (r->n_queries + 1) + sizeof(int64) * (r->n_items + 1) +
		(r->weighted ? sizeof(int32) * r->n_items : 0) + 2 * sizeof(int32) * r->n_ranges;
	if (need > t->payload_size ||
		GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * (r->n_queries + 1) +
		2 * sizeof(int32) * (Size) r->n_queries * r->k > r->response_capacity)
		return false;
	b->n_queries = r->n_queries;
	b->query_offsets = (int64 *) p;
	p += sizeof(int64) * (r->n_queries + 1);
	b->item_offsets = (int64 *) p;
	p += sizeof(int64) * (r->n_items + 1);
	b->item_weights = NULL;
	if (r->weighted)
	{
		b->item_weights = (int32 *) p;
		p += sizeof(int32) * r->n_items;
	}
	b->ranges_lo = (int32 *) p;
	p += sizeof(int32) * r->n_ranges;
	b->ranges_hi = (int32 *) p;
	return b->query_offsets[r->n_queries] == r->n_items &&
		b->item_offsets[r->n_items] == r->n_ranges;
}

/* A job for the group's requests: their batches concatenated; NULL after answering them all. */
static SearchJob *
make_job(ServiceState *st, ServedIndex *s, genie_engine_kind kind, int32 k,
		 TakenRequest **members, int n, bool device_fallback)
{
	SearchJob  *job = palloc0(sizeof(SearchJob));
	int64		nq = 0,
				n_items = 0,
				n_ranges = 0,
				q = 0,
				item = 0,
				range = 0;
	bool		weighted = false;
	int64	   *query_offsets,
			   *item_offsets;
	int32	   *weights = NULL,
			   *lo,
			   *hi;
	genie_error err;

	job->served = s;
	job->kind = kind;
	job->k = k;
	job->members = palloc(sizeof(TakenRequest *) * n);
	memcpy(job->members, members, sizeof(TakenRequest *) * n);
	job->n_members = n;
	job->device_fallback = device_fallback;
	job->parts = palloc(sizeof(genie_query_batch) * n);
	for (int i = 0; i < n; i++)
	{
		(void) read_batch(members[i], &job->parts[i]);	/* checked by the caller */
		nq += job->parts[i].n_queries;
		n_items += members[i]->req.n_items;
		n_ranges += members[i]->req.n_ranges;
		weighted |= job->parts[i].item_weights != NULL;
	}
	query_offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	item_offsets = palloc_extended(sizeof(int64) * (n_items + 1), MCXT_ALLOC_HUGE);
	lo = palloc_extended(sizeof(int32) * Max(n_ranges, 1), MCXT_ALLOC_HUGE);
	hi = palloc_extended(sizeof(int32) * Max(n_ranges, 1), MCXT_ALLOC_HUGE);
	if (weighted)
		weights = palloc_extended(sizeof(int32) * Max(n_items, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < n; i++)
	{
		const genie_query_batch *b = &job->parts[i];
		int64		bi = members[i]->req.n_items;
		int64		br = members[i]->req.n_ranges;

		for (int j = 0; j < b->n_queries; j++)
			query_offsets[q + j] = item + b->query_offsets[j];
		for (int64 j = 0; j < bi; j++)
		{
			item_offsets[item + j] = range + b->item_offsets[j];
			if (weighted)
				weights[item + j] = b->item_weights ? b->item_weights[j] : 1;
		}
		memcpy(lo + range, b->ranges_lo, sizeof(int32) * br);
		memcpy(hi + range, b->ranges_hi, sizeof(int32) * br);
		q += b->n_queries;
		item += bi;
		range += br;
	}
	query_offsets[nq] = item;
	item_offsets[n_items] = range;
	job->batch.n_queries = (int32) nq;
	job->batch.query_offsets = query_offsets;
	job->batch.item_offsets = item_offsets;
	job->batch.item_weights = weights;
	job->batch.ranges_lo = lo;
	job->batch.ranges_hi = hi;

	/* made here, on the worker's thread: the runners only search */
	if (genie_worker_ensure_engine(st, s, kind, &err) != GENIE_OK)
	{
		job->status = err.status;
		job->err = err;
		return job;				/* nothing to run: finish_job answers */
	}
	job->runnable = true;
	return job;
}

/* Answers the job's requests from its outcome (running the CPU fallback here). */
static void
finish_job(ServiceState *st, SearchJob *job)
{
	ServedIndex *s = job->served;
	int64		q0 = 0;

	/* in the server log: a GPU of its device group failed (the answers stay exact) */
	if (job->runnable)
		genie_search_note_dropped_devices(s->engines[job->kind], &s->dropped[job->kind]);
	if (job->status == GENIE_DEVICE_OUT_OF_MEMORY && job->kind == GENIE_ENGINE_GPU)
	{
		/* gpu requests get the error; auto ones are answered by the CPU engine */
		TakenRequest **rest = palloc(sizeof(TakenRequest *) * job->n_members);
		int			n_rest = 0;

		genie_results_free(job->results);
		job->results = NULL;
		for (int i = 0; i < job->n_members; i++)
		{
			if (job->members[i]->req.device == GENIE_DEVICE_SETTING_GPU)
				genie_worker_reply_outcome(st, job->members[i], GENIE_SERVICE_ENGINE_ERROR, &job->err);
			else
				rest[n_rest++] = job->members[i];
		}
		if (n_rest > 0)
		{
			/* beside any runner's search of this CPU engine: its calls run concurrently */
			SearchJob  *cpu = make_job(st, s, GENIE_ENGINE_CPU, job->k, rest, n_rest, true);

			if (cpu->runnable)
				genie_run_job(cpu, GENIE_WORKER_SEARCHER);
			finish_job(st, cpu);
		}
		return;
	}
	if (job->status != GENIE_OK)
	{
		genie_results_free(job->results);
		if (job->status == GENIE_DEVICE_ERROR)
			st->device_failed = true;
		for (int i = 0; i < job->n_members; i++)
		{
			if (job->status == GENIE_CANCELLED)
				genie_worker_fail_request(job->members[i]);	/* only a shutdown leaves one waiting */
			else
				genie_worker_reply_outcome(st, job->members[i], GENIE_SERVICE_ENGINE_ERROR, &job->err);
		}
		return;
	}

	genie_worker_count_batch(&s->stats[job->kind], job->members, job->n_members, job->batch.n_queries,
							 job->engine_ms);
	s->last_used = ++st->clock;

	for (int i = 0; i < job->n_members; i++)
	{
		TakenRequest *t = job->members[i];
		const genie_results *results = job->results;
		int32		mq = job->parts[i].n_queries;
		int64		first = results->query_offsets[q0];
		int64		hits = results->query_offsets[q0 + mq] - first;
		GenieResponse *resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);

		if (resp != NULL)
		{
			char	   *p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
			int64	   *offs = (int64 *) p;

			resp->engine = job->kind;
			resp->device_fallback = job->device_fallback;
			resp->engine_ms = job->engine_ms;
			resp->n_hits = hits;
			for (int j = 0; j <= mq; j++)
				offs[j] = results->query_offsets[q0 + j] - first;
			p += sizeof(int64) * (mq + 1);
			memcpy(p, results->objects + first, sizeof(int32) * hits);
			memcpy(p + sizeof(int32) * (Size) mq * job->k, results->scores + first,
				   sizeof(int32) * hits);
			genie_worker_end_reply(t, GENIE_SLOT_DONE);
		}
		q0 += mq;
	}
	genie_results_free(job->results);
	job->results = NULL;
}

/* ---- a shared copy of the main postings ---- */

/*
 * The segment a backend maps to search the version itself: the worker's
 * answer is quick (no engine call), so it is given on this thread.
 */
static void
handle_share(ServiceState *st, TakenRequest *t)
{
	ServedIndex *s = genie_worker_find_served(st, &t->req.key);
	GenieResponse *resp;

	if (s == NULL)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
		return;
	}
	s->last_used = ++st->clock;
	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
	{
		resp->shared_segment = s->shared != NULL ? dsm_segment_handle(s->shared)
			: DSM_HANDLE_INVALID;
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
	}
}

/* ---- genie_similar's verification ---- */

static void
handle_verify(ServiceState *st, TakenRequest *t)
{
	GenieRequest *r = &t->req;
	int			nq = r->n_queries;
	int64		nc = r->verify_candidates;
	Size		need = sizeof(int64) * (nq + 1) * 2 + sizeof(int64) * (nc + 1) +
		sizeof(int32) * nc + sizeof(int32) * nq + r->verify_query_bytes + r->verify_candidate_bytes;
	Size		answer = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int32) * nc + nc +
		nq + sizeof(int32) * nq;
	genie_similar_batch batch;
	genie_similar_verdict verdict;
	genie_engine_options options;
	genie_engine_kind kind;
	CancelGroup group;
	genie_error err;
	genie_status status;
	bool		fallback = false;
	TimestampTz started;
	char	   *p = t->payload;
	GenieResponse *resp;

	if (nq < 1 || nc < 0 || need > t->payload_size || answer > r->response_capacity)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie_similar verification request");
		return;
	}
	if (genie_worker_resolve_kind(st, r->device, &kind, &err) != GENIE_OK)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	batch.n_queries = nq;
	batch.n = r->verify_n;
	batch.k = r->verify_k;
	batch.query_text_offsets = (int64 *) p;
	p += sizeof(int64) * (nq + 1);
	batch.candidate_offsets = (int64 *) p;
	p += sizeof(int64) * (nq + 1);
	batch.candidate_text_offsets = (int64 *) p;
	p += sizeof(int64) * (nc + 1);
	batch.candidate_counts = (int32 *) p;
	p += sizeof(int32) * nc;
	batch.unseen_count_bound = (int32 *) p;
	p += sizeof(int32) * nq;
	batch.query_text = p;
	p += r->verify_query_bytes;
	batch.candidate_text = p;

	memset(&verdict, 0, sizeof(verdict));
	verdict.distances = palloc_extended(sizeof(int32) * Max(nc, 1), MCXT_ALLOC_HUGE);
	verdict.exact = palloc_extended(Max(nc, 1), MCXT_ALLOC_HUGE);
	verdict.certified = palloc(nq);
	verdict.open_bound = palloc(sizeof(int32) * nq);
	genie_cancel_group_one(&group, &t, 1);
	genie_worker_engine_options(kind, &group, &options);
	started = GetCurrentTimestamp();
	status = genie_similar_verify(&batch, kind, &options, &verdict, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && r->device != GENIE_DEVICE_SETTING_GPU)
	{
		fallback = true;
		genie_worker_engine_options(GENIE_ENGINE_CPU, &group, &options);
		status = genie_similar_verify(&batch, GENIE_ENGINE_CPU, &options, &verdict, &err);
	}
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
		return;
	resp->engine = verdict.device;
	resp->device_fallback = fallback;
	resp->engine_ms = (double) (GetCurrentTimestamp() - started) / 1000.0;
	resp->distances_computed = verdict.distances_computed;
	p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
	memcpy(p, verdict.distances, sizeof(int32) * nc);
	p += sizeof(int32) * nc;
	memcpy(p, verdict.exact, nc);
	p += nc;
	memcpy(p, verdict.certified, nq);
	p += nq;
	memcpy(p, verdict.open_bound, sizeof(int32) * nq);
	genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

/* ---- a batch ---- */

/*
 * Whether b has GPU searches; *alone (when not NULL): whether they must be
 * the only GPU batch in flight: scans of stored values, or a search of an
 * index without its GPU engine yet (made on the worker's thread as the batch
 * starts, its upload sized by the device's free memory, which another
 * batch's search state would take).
 */
bool
genie_worker_batch_wants_gpu(ServiceState *st, CycleBatch *b, bool *alone)
{
	bool		wants = false;

	if (alone != NULL)
		*alone = false;
	for (int i = 0; i < b->n_taken; i++)
	{
		TakenRequest *t = &b->taken[i];
		genie_engine_kind kind;
		genie_error err;

		if (!t->broken &&
			(t->req.kind == GENIE_REQUEST_SEARCH || t->req.kind == GENIE_REQUEST_SCAN_VALUES) &&
			genie_worker_resolve_kind(st, t->req.device, &kind, &err) == GENIE_OK &&
			kind == GENIE_ENGINE_GPU)
		{
			ServedIndex *s;

			wants = true;
			if (alone == NULL)
				break;
			if (t->req.kind == GENIE_REQUEST_SCAN_VALUES)
			{
				*alone = true;
				break;
			}
			/* (a version the service does not hold is answered "not resident") */
			s = genie_worker_find_served(st, &t->req.key);
			if (s != NULL && s->engines[GENIE_ENGINE_GPU] == NULL)
			{
				*alone = true;
				break;
			}
		}
	}
	return wants;
}

/* The query ranges of b's searches (can_start's measure of their host work). */
int64
genie_worker_batch_ranges(CycleBatch *b)
{
	int64		ranges = 0;

	for (int i = 0; i < b->n_taken; i++)
		if (!b->taken[i].broken && b->taken[i].req.kind == GENIE_REQUEST_SEARCH)
			ranges += b->taken[i].req.n_ranges;
	return ranges;
}

bool
genie_worker_start_batch(ServiceState *st, CycleBatch *b, GenieRunner *runner, bool *uses_gpu)
{
	MemoryContext old = MemoryContextSwitchTo(b->cxt);
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(b->n_taken, 1));
	bool	   *grouped = palloc0(sizeof(bool) * Max(b->n_taken, 1));
	int			n_runnable = 0;
	TakenRequest **scans = palloc(sizeof(TakenRequest *) * Max(b->n_taken, 1));
	int			n_scans = 0;

	b->jobs = palloc(sizeof(SearchJob *) * Max(b->n_taken, 1));
	b->n_jobs = 0;
	*uses_gpu = false;
	for (int i = 0; i < b->n_taken; i++)
	{
		TakenRequest *t = &b->taken[i];

		if (!t->broken && t->req.kind != GENIE_REQUEST_LOAD)
			genie_worker_forget_loads(st, t->slot);
		/* a range search's second ask takes its kept answer (genie_worker_within_job) */
		if (!t->broken && t->req.kind != GENIE_REQUEST_WITHIN)
			genie_worker_forget_kept(st, t->slot);
		if (t->broken)
			genie_worker_fail_request(t);
		else if (t->req.kind == GENIE_REQUEST_LOAD)
			genie_worker_handle_load(st, t);
		else if (t->req.kind == GENIE_REQUEST_VERIFY)
			handle_verify(st, t);
		else if (t->req.kind == GENIE_REQUEST_SHARE)
			handle_share(st, t);
		else if (t->req.kind == GENIE_REQUEST_SCAN_VALUES)
			scans[n_scans++] = t;
		else if (t->req.kind == GENIE_REQUEST_WITHIN)
			genie_worker_take_within(st, t);
		else if (t->req.kind != GENIE_REQUEST_SEARCH)
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "an unknown genie service request");
		else
			continue;
		grouped[i] = true;
	}
	/* scans of stored values: one engine call per group that can share one, on the runner */
	genie_worker_scan_values(st, scans, n_scans, b->jobs, &b->n_jobs);
	for (int i = 0; i < b->n_jobs; i++)
	{
		n_runnable++;
		*uses_gpu |= b->jobs[i]->kind == GENIE_ENGINE_GPU;
	}

	/* searches: one engine call per (version, engine, k) */
	for (int i = 0; i < b->n_taken; i++)
	{
		TakenRequest *t = &b->taken[i];
		ServedIndex *s;
		genie_engine_kind kind;
		genie_query_batch qb;
		genie_error err;
		SearchJob  *job;
		int			n = 0;

		if (grouped[i])
			continue;
		grouped[i] = true;
		if (!read_batch(t, &qb))
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie search request");
			continue;
		}
		s = genie_worker_find_served(st, &t->req.key);
		if (s == NULL)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
			continue;
		}
		if (genie_worker_resolve_kind(st, t->req.device, &kind, &err) != GENIE_OK)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
			continue;
		}
		group[n++] = t;
		for (int j = i + 1; j < b->n_taken; j++)
		{
			TakenRequest *u = &b->taken[j];
			genie_engine_kind ukind;
			genie_error uerr;

			if (grouped[j] || u->req.k != t->req.k ||
				!genie_service_keys_equal(&u->req.key, &t->req.key) ||
				genie_worker_resolve_kind(st, u->req.device, &ukind, &uerr) != GENIE_OK || ukind != kind ||
				!read_batch(u, &qb))
				continue;
			grouped[j] = true;
			group[n++] = u;
		}
		job = make_job(st, s, kind, t->req.k, group, n, false);
		b->jobs[b->n_jobs++] = job;
		/* no eviction frees s before the job is answered */
		s->busy++;
		if (job->runnable)
		{
			n_runnable++;
			*uses_gpu |= kind == GENIE_ENGINE_GPU;
		}
	}
	MemoryContextSwitchTo(old);
	if (b->n_jobs == 0)
		return false;
	if (n_runnable > 0)
	{
		SearchJob **runnable = MemoryContextAlloc(b->cxt, sizeof(SearchJob *) * n_runnable);
		int			n = 0;

		for (int i = 0; i < b->n_jobs; i++)
			if (b->jobs[i]->runnable)
				runnable[n++] = b->jobs[i];
		if (runner != NULL)
			genie_runner_submit(runner, runnable, n_runnable);
		else
			for (int i = 0; i < n_runnable; i++)
				genie_run_job(runnable[i], GENIE_WORKER_SEARCHER);
	}
	return true;
}

void
genie_worker_finish_batch(ServiceState *st, CycleBatch *b)
{
	MemoryContext old = MemoryContextSwitchTo(b->cxt);

	for (int i = 0; i < b->n_jobs; i++)
	{
		if (b->jobs[i]->scan != NULL)
			genie_worker_finish_scan(st, b->jobs[i]);	/* the values' busy too */
		else
		{
			finish_job(st, b->jobs[i]);
			b->jobs[i]->served->busy--;
		}
	}
	MemoryContextSwitchTo(old);
	/* after a GPU error (device_failed) the worker's loop exits once no batch is in flight */
}

void
genie_worker_publish_stats(ServiceState *st)
{
	GenieServiceShared *sh = genie_service_shared;
	int			n = 0;

	LWLockAcquire(sh->stats_lock, LW_EXCLUSIVE);
	for (int i = 0; i < st->n_served && n < GENIE_SERVICE_MAX_STATS; i++)
	{
		ServedIndex *s = st->served[i];

		for (int e = GENIE_ENGINE_CPU; e <= GENIE_ENGINE_GPU && n < GENIE_SERVICE_MAX_STATS; e++)
		{
			/* every version held has a row, even before its first search */
			if (s->engines[e] == NULL && s->stats[e].batches == 0 &&
				!(e == GENIE_ENGINE_CPU && s->engines[GENIE_ENGINE_GPU] == NULL &&
				  s->stats[GENIE_ENGINE_GPU].batches == 0))
				continue;
			sh->stats[n] = s->stats[e];
			sh->stats[n].resident = true;
			n++;
		}
	}
	for (int i = 0; i < st->n_values && n < GENIE_SERVICE_MAX_STATS; i++)
	{
		ServedValues *s = st->values[i];

		for (int e = GENIE_ENGINE_CPU; e <= GENIE_ENGINE_GPU && n < GENIE_SERVICE_MAX_STATS; e++)
		{
			/* a row per engine that scanned them, a CPU row before the first scan */
			if (s->stats[e].batches == 0 &&
				!(e == GENIE_ENGINE_CPU && s->stats[GENIE_ENGINE_GPU].batches == 0))
				continue;
			sh->stats[n] = s->stats[e];
			sh->stats[n].resident = true;
			sh->stats[n].device_bytes = e != GENIE_ENGINE_GPU ? 0
				: (int64) genie_value_set_device_bytes(&s->set);
			n++;
		}
	}
	sh->n_stats = n;
	LWLockRelease(sh->stats_lock);
	/* after the stats: a backend that hears of it finds the versions gone */
	if (genie_worker_shared_dropped)
	{
		genie_worker_shared_dropped = false;
		pg_atomic_fetch_add_u64(&sh->shared_dropped, 1);
	}
}
