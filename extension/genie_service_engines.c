/*-------------------------------------------------------------------------
 *
 * genie_service_engines.c
 *	  What the genie service worker does with a cycle's requests: index
 *	  versions handed over in pieces, the versions and engines it holds
 *	  (LRU within genie.cache_size and genie.device_memory_limit), searches
 *	  batched per (version, engine, k), genie_similar's verification, and
 *	  the statistics genie_service_stats() shows.
 *
 * Engine choice follows genie.device of each request: cpu the CPU engine,
 * gpu the GPU engine (an error without one), auto the GPU when the worker
 * found one usable.  A GPU that runs out of memory (after the engine's own
 * multiple loading) answers auto requests on the CPU engine, flagged so
 * that the backend says so, and gpu requests with the error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "genie_cache.h"
#include "genie_search.h"
#include "genie_service_worker.h"

/* ---- answers ---- */

static char *
begin_reply(ServiceState *st, TakenRequest *t)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = &sh->slots[t->slot];
	bool		ours;

	if (t->replied)
		return NULL;
	SpinLockAcquire(&sh->mutex);
	ours = slot->seq == t->seq && slot->state == GENIE_SLOT_TAKEN;
	if (ours)
		slot->busy = true;
	else if (slot->seq == t->seq && slot->state == GENIE_SLOT_WITHDRAWN)
		slot->state = GENIE_SLOT_FREE;
	SpinLockRelease(&sh->mutex);
	if (!ours)
	{
		t->replied = true;
		return NULL;
	}
	return (char *) dsm_segment_address(st->mapped[t->slot]) + t->req.response_offset;
}

static void
end_reply(TakenRequest *t, GenieSlotState final)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = &sh->slots[t->slot];
	Latch	   *latch = NULL;

	SpinLockAcquire(&sh->mutex);
	slot->busy = false;
	if (slot->seq == t->seq)
	{
		slot->state = final;
		latch = slot->latch;
	}
	SpinLockRelease(&sh->mutex);
	t->replied = true;
	if (latch != NULL)
		SetLatch(latch);
}

/* A request whose segment could not be read: the backend searches in-process. */
static void
fail_request(TakenRequest *t)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = &sh->slots[t->slot];
	Latch	   *latch = NULL;

	SpinLockAcquire(&sh->mutex);
	if (slot->seq == t->seq && slot->state == GENIE_SLOT_TAKEN)
	{
		slot->state = GENIE_SLOT_FAILED;
		latch = slot->latch;
	}
	else if (slot->seq == t->seq && slot->state == GENIE_SLOT_WITHDRAWN)
		slot->state = GENIE_SLOT_FREE;
	SpinLockRelease(&sh->mutex);
	t->replied = true;
	if (latch != NULL)
		SetLatch(latch);
}

/* Starts an answer: the response header, zeroed; NULL when the backend withdrew. */
static GenieResponse *
begin_response(ServiceState *st, TakenRequest *t, GenieServiceOutcome outcome,
			   const genie_error *err)
{
	GenieResponse *resp;

	if (t->req.response_capacity < sizeof(GenieResponse))
	{
		fail_request(t);
		return NULL;
	}
	resp = (GenieResponse *) begin_reply(st, t);
	if (resp == NULL)
		return NULL;
	memset(resp, 0, sizeof(GenieResponse));
	resp->outcome = outcome;
	if (err != NULL)
	{
		resp->status = err->status;
		strlcpy(resp->message, err->message, sizeof(resp->message));
	}
	return resp;
}

void
genie_worker_reply_outcome(ServiceState *st, TakenRequest *t, GenieServiceOutcome outcome,
						   const genie_error *err)
{
	if (begin_response(st, t, outcome, err) != NULL)
		end_reply(t, GENIE_SLOT_DONE);
}

static void
reply_error(ServiceState *st, TakenRequest *t, genie_status status, const char *message)
{
	genie_error err;

	err.status = status;
	strlcpy(err.message, message, sizeof(err.message));
	genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
}

/* The engines' cancel callback: stop when every backend of the call withdrew. */
static int
group_cancelled(void *arg)
{
	const CancelGroup *g = (const CancelGroup *) arg;
	volatile GenieServiceSlot *slots = genie_service_shared->slots;

	if (ProcDiePending)
		return 1;
	for (int i = 0; i < g->n; i++)
	{
		const TakenRequest *t = g->members[i];

		if (slots[t->slot].seq == t->seq && slots[t->slot].state == GENIE_SLOT_TAKEN)
			return 0;
	}
	return 1;
}

static void
engine_options(genie_engine_kind kind, CancelGroup *group, genie_engine_options *options)
{
	memset(options, 0, sizeof(*options));
	options->threads = genie_cpu_threads;
	if (kind == GENIE_ENGINE_GPU)
		options->memory_budget_bytes = (uint64) genie_device_memory_limit_mb * 1024 * 1024;
	options->cancel = group_cancelled;
	options->cancel_arg = group;
}

/* ---- the versions held ---- */

static ServedIndex *
find_served(ServiceState *st, const GenieServiceKey *key)
{
	for (int i = 0; i < st->n_served; i++)
		if (genie_service_keys_equal(&st->served[i]->key, key))
			return st->served[i];
	return NULL;
}

static void
drop_engine(ServedIndex *s, genie_engine_kind kind)
{
	genie_engine_free(s->engines[kind]);	/* device memory included */
	s->engines[kind] = NULL;
	s->stats[kind].resident = false;
	s->stats[kind].device_bytes = 0;
}

static void
free_served(ServedIndex *s)
{
	drop_engine(s, GENIE_ENGINE_CPU);
	drop_engine(s, GENIE_ENGINE_GPU);
	genie_index_free(s->index);
	free(s);
}

/* Evicts least recently used versions (not keep) while over genie.cache_size. */
static void
evict_host(ServiceState *st, ServedIndex *keep)
{
	int64		budget = (int64) genie_cache_size_mb * 1024 * 1024;

	for (;;)
	{
		int64		total = 0;
		int			victim = -1;

		for (int i = 0; i < st->n_served; i++)
		{
			total += st->served[i]->host_bytes;
			if (st->served[i] != keep &&
				(victim < 0 || st->served[i]->last_used < st->served[victim]->last_used))
				victim = i;
		}
		if ((total <= budget && st->n_served < GENIE_SERVICE_MAX_SERVED) || victim < 0)
			return;
		free_served(st->served[victim]);
		st->served[victim] = st->served[--st->n_served];
	}
}

/* Drops least recently used GPU copies (not keep's) until bytes more fit the limit. */
static void
evict_device(ServiceState *st, ServedIndex *keep, int64 bytes)
{
	int64		limit = (int64) genie_device_memory_limit_mb * 1024 * 1024;

	for (;;)
	{
		int64		used = 0;
		ServedIndex *victim = NULL;

		for (int i = 0; i < st->n_served; i++)
		{
			ServedIndex *s = st->served[i];

			if (s->engines[GENIE_ENGINE_GPU] == NULL)
				continue;
			used += s->stats[GENIE_ENGINE_GPU].device_bytes;
			if (s != keep && (victim == NULL || s->last_used < victim->last_used))
				victim = s;
		}
		if ((limit == 0 || used + bytes <= limit) || victim == NULL)
			return;
		drop_engine(victim, GENIE_ENGINE_GPU);
	}
}

/*
 * The engine of kind holding s, made when missing.  A GPU out of memory at
 * upload drops the other GPU copies and tries once more.
 */
static genie_status
ensure_engine(ServiceState *st, ServedIndex *s, genie_engine_kind kind, CancelGroup *group,
			  genie_error *err)
{
	genie_engine_options options;
	genie_status status;

	if (s->engines[kind] != NULL)
		return GENIE_OK;
	if (kind == GENIE_ENGINE_GPU)
		evict_device(st, s, s->host_bytes);
	engine_options(kind, group, &options);
	for (int attempt = 0; attempt < 2; attempt++)
	{
		genie_engine *engine = NULL;

		status = genie_engine_create(kind, &options, &engine, err);
		if (status == GENIE_OK)
			status = genie_engine_upload(engine, s->index, err);
		if (status == GENIE_OK)
		{
			s->engines[kind] = engine;
			s->stats[kind].resident = true;
			s->stats[kind].loads++;
			/* the device copy is about the host copy's size */
			s->stats[kind].device_bytes = kind == GENIE_ENGINE_GPU ? s->host_bytes : 0;
			return GENIE_OK;
		}
		genie_engine_free(engine);
		if (status != GENIE_DEVICE_OUT_OF_MEMORY || kind != GENIE_ENGINE_GPU)
			break;
		evict_device(st, s, INT64_MAX / 2);
	}
	return status;
}

/* ---- loads ---- */

static Size
stream_size(const GenieServiceKey *key)
{
	return sizeof(int32) * key->n_keywords + sizeof(int64) * (key->n_keywords + 1) +
		sizeof(int32) * key->n_postings;
}

static void
drop_load(ServiceState *st, int i)
{
	free(st->loads[i].buffer);
	st->loads[i] = st->loads[--st->n_loads];
}

/* Whether the backend handing over load i is still at it. */
static bool
load_alive(ServiceState *st, PendingLoad *load)
{
	GenieServiceSlot *slot = &genie_service_shared->slots[load->slot];
	int			pid;

	SpinLockAcquire(&genie_service_shared->mutex);
	pid = slot->pid;
	SpinLockRelease(&genie_service_shared->mutex);
	return pid == load->pid &&
		!TimestampDifferenceExceeds(load->last_piece, GetCurrentTimestamp(), 10000);
}

static void
finish_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	const GenieServiceKey *key = &load->key;
	int32	   *keywords = (int32 *) load->buffer;
	int64	   *offsets = (int64 *) (load->buffer + sizeof(int32) * key->n_keywords);
	int32	   *postings = (int32 *) ((char *) offsets + sizeof(int64) * (key->n_keywords + 1));
	genie_index_options options;
	genie_error err;
	ServedIndex *s = calloc(1, sizeof(ServedIndex));
	GenieResponse *resp;

	if (s == NULL)
	{
		reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
		return;
	}
	memset(&options, 0, sizeof(options));
	options.split_length = load->split_length;
	if (genie_index_create_from_postings(key->n_main_objects, key->n_keywords, keywords,
										 offsets, postings, &options, &s->index,
										 &err) != GENIE_OK)
	{
		free(s);
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	s->key = *key;
	s->index_oid = load->index_oid;
	s->host_bytes = (int64) genie_index_memory_bytes(s->index);
	s->last_used = ++st->clock;
	for (int e = 0; e < 2; e++)
	{
		s->stats[e].key = *key;
		s->stats[e].index_oid = load->index_oid;
		s->stats[e].engine = (genie_engine_kind) e;
		s->stats[e].host_bytes = s->host_bytes;
	}
	st->served[st->n_served++] = s;
	evict_host(st, s);

	resp = begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
	{
		resp->resident = true;
		end_reply(t, GENIE_SLOT_DONE);
	}
}

static void
handle_load(ServiceState *st, TakenRequest *t)
{
	GenieRequest *req = &t->req;
	Size		total = stream_size(&req->key);
	PendingLoad *load = NULL;
	GenieResponse *resp;

	if (req->load_offset == 0)
	{
		if (find_served(st, &req->key) != NULL)
		{
			resp = begin_response(st, t, GENIE_SERVICE_OK, NULL);
			if (resp != NULL)
			{
				resp->resident = true;
				end_reply(t, GENIE_SLOT_DONE);
			}
			return;
		}
		for (int i = st->n_loads - 1; i >= 0; i--)
		{
			PendingLoad *other = &st->loads[i];

			if (other->slot == t->slot || !load_alive(st, other))
				drop_load(st, i);
			else if (genie_service_keys_equal(&other->key, &req->key))
			{
				/* someone else is handing it over: the backend waits */
				genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
				return;
			}
		}
		if (st->n_loads == GENIE_SERVICE_MAX_LOADS)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
			return;
		}
		load = &st->loads[st->n_loads];
		memset(load, 0, sizeof(*load));
		load->buffer = malloc(Max(total, 1));
		if (load->buffer == NULL)
		{
			reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
			return;
		}
		st->n_loads++;
		load->key = req->key;
		load->index_oid = req->index_oid;
		load->slot = t->slot;
		load->pid = genie_service_shared->slots[t->slot].pid;
		load->split_length = req->split_length;
		load->total = total;
	}
	else
	{
		for (int i = 0; i < st->n_loads; i++)
			if (st->loads[i].slot == t->slot && genie_service_keys_equal(&st->loads[i].key, &req->key))
				load = &st->loads[i];
		if (load == NULL || load->received != (Size) req->load_offset)
		{
			reply_error(st, t, GENIE_INTERNAL_ERROR, "the genie service lost an index hand-over");
			return;
		}
	}
	if (req->load_bytes > t->payload_size || load->received + req->load_bytes > load->total)
	{
		reply_error(st, t, GENIE_INTERNAL_ERROR, "a genie index hand-over does not fit");
		return;
	}
	memcpy(load->buffer + load->received, t->payload, req->load_bytes);
	load->received += req->load_bytes;
	load->last_piece = GetCurrentTimestamp();
	if (load->received == load->total)
	{
		PendingLoad done = *load;

		/* off the list first: finish_load may evict, and the buffer is ours */
		load->buffer = NULL;
		drop_load(st, (int) (load - st->loads));
		finish_load(st, &done, t);
		free(done.buffer);
		return;
	}
	resp = begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
		end_reply(t, GENIE_SLOT_DONE);
}

/* ---- searches ---- */

static genie_status
resolve_kind(ServiceState *st, int device, genie_engine_kind *kind, genie_error *err)
{
	switch (device)
	{
		case GENIE_DEVICE_SETTING_CPU:
			*kind = GENIE_ENGINE_CPU;
			return GENIE_OK;
		case GENIE_DEVICE_SETTING_GPU:
			*kind = GENIE_ENGINE_GPU;
			if (st->gpu_usable)
				return GENIE_OK;
			err->status = GENIE_DEVICE_UNAVAILABLE;
			snprintf(err->message, sizeof(err->message), "the genie service has no usable GPU: %s",
					 genie_service_shared->gpu_reason);
			return GENIE_DEVICE_UNAVAILABLE;
		default:
			*kind = st->gpu_usable ? GENIE_ENGINE_GPU : GENIE_ENGINE_CPU;
			return GENIE_OK;
	}
}

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

/* One engine search for the group's requests, each then answered with its own queries. */
static void
run_search(ServiceState *st, ServedIndex *s, genie_engine_kind kind, int32 k,
		   TakenRequest **members, int n, bool device_fallback)
{
	CancelGroup group = {members, n};
	genie_query_batch *parts = palloc(sizeof(genie_query_batch) * n);
	int64		nq = 0,
				n_items = 0,
				n_ranges = 0;
	bool		weighted = false;
	int64	   *query_offsets,
			   *item_offsets;
	int32	   *weights = NULL,
			   *lo,
			   *hi;
	genie_query_batch batch;
	genie_results *results = NULL;
	genie_error err;
	genie_status status;
	TimestampTz start;
	int64		q0 = 0;

	for (int i = 0; i < n; i++)
	{
		(void) read_batch(members[i], &parts[i]);	/* checked by the caller */
		nq += parts[i].n_queries;
		n_items += members[i]->req.n_items;
		n_ranges += members[i]->req.n_ranges;
		weighted |= parts[i].item_weights != NULL;
	}
	query_offsets = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int64) * (nq + 1));
	item_offsets = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int64) * (n_items + 1));
	lo = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int32) * Max(n_ranges, 1));
	hi = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int32) * Max(n_ranges, 1));
	if (weighted)
		weights = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int32) * Max(n_items, 1));
	{
		int64		q = 0,
					item = 0,
					range = 0;

		for (int i = 0; i < n; i++)
		{
			const genie_query_batch *b = &parts[i];
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
	}
	batch.n_queries = (int32) nq;
	batch.query_offsets = query_offsets;
	batch.item_offsets = item_offsets;
	batch.item_weights = weights;
	batch.ranges_lo = lo;
	batch.ranges_hi = hi;

	start = GetCurrentTimestamp();
	status = ensure_engine(st, s, kind, &group, &err);
	if (status == GENIE_OK)
		status = genie_engine_search(s->engines[kind], &batch, k, &results, &err);

	if (status == GENIE_DEVICE_OUT_OF_MEMORY && kind == GENIE_ENGINE_GPU)
	{
		/* gpu requests get the error; auto ones are answered by the CPU engine */
		int			rest = 0;

		genie_results_free(results);
		for (int i = 0; i < n; i++)
		{
			if (members[i]->req.device == GENIE_DEVICE_SETTING_GPU)
				genie_worker_reply_outcome(st, members[i], GENIE_SERVICE_ENGINE_ERROR, &err);
			else
				members[rest++] = members[i];
		}
		if (rest > 0)
			run_search(st, s, GENIE_ENGINE_CPU, k, members, rest, true);
		return;
	}
	if (status != GENIE_OK)
	{
		genie_results_free(results);
		if (status == GENIE_DEVICE_ERROR)
			st->device_failed = true;
		for (int i = 0; i < n; i++)
		{
			if (status == GENIE_CANCELLED)
				fail_request(members[i]);	/* only a shutdown leaves one waiting */
			else
				genie_worker_reply_outcome(st, members[i], GENIE_SERVICE_ENGINE_ERROR, &err);
		}
		return;
	}

	{
		GenieServiceIndexStats *stats = &s->stats[kind];

		stats->batches++;
		stats->requests += n;
		stats->queries += nq;
		stats->max_batch_queries = Max(stats->max_batch_queries, nq);
		stats->engine_ms += (double) (GetCurrentTimestamp() - start) / 1000.0;
		for (int i = 0; i < n; i++)
			stats->queue_wait_ms += members[i]->queue_wait_ms;
	}
	s->last_used = ++st->clock;

	for (int i = 0; i < n; i++)
	{
		TakenRequest *t = members[i];
		int32		mq = parts[i].n_queries;
		int64		first = results->query_offsets[q0];
		int64		hits = results->query_offsets[q0 + mq] - first;
		GenieResponse *resp = begin_response(st, t, GENIE_SERVICE_OK, NULL);

		if (resp != NULL)
		{
			char	   *p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
			int64	   *offs = (int64 *) p;

			resp->engine = kind;
			resp->device_fallback = device_fallback;
			resp->n_hits = hits;
			for (int q = 0; q <= mq; q++)
				offs[q] = results->query_offsets[q0 + q] - first;
			p += sizeof(int64) * (mq + 1);
			memcpy(p, results->objects + first, sizeof(int32) * hits);
			memcpy(p + sizeof(int32) * (Size) mq * k, results->scores + first, sizeof(int32) * hits);
			end_reply(t, GENIE_SLOT_DONE);
		}
		q0 += mq;
	}
	genie_results_free(results);
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
	CancelGroup group = {&t, 1};
	genie_error err;
	genie_status status;
	bool		fallback = false;
	char	   *p = t->payload;
	GenieResponse *resp;

	if (nq < 1 || nc < 0 || need > t->payload_size || answer > r->response_capacity)
	{
		reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie_similar verification request");
		return;
	}
	if (resolve_kind(st, r->device, &kind, &err) != GENIE_OK)
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
	verdict.distances = MemoryContextAllocHuge(st->cycle_cxt, sizeof(int32) * Max(nc, 1));
	verdict.exact = MemoryContextAllocHuge(st->cycle_cxt, Max(nc, 1));
	verdict.certified = MemoryContextAlloc(st->cycle_cxt, nq);
	verdict.open_bound = MemoryContextAlloc(st->cycle_cxt, sizeof(int32) * nq);
	engine_options(kind, &group, &options);
	status = genie_similar_verify(&batch, kind, &options, &verdict, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && r->device != GENIE_DEVICE_SETTING_GPU)
	{
		fallback = true;
		engine_options(GENIE_ENGINE_CPU, &group, &options);
		status = genie_similar_verify(&batch, GENIE_ENGINE_CPU, &options, &verdict, &err);
	}
	if (status == GENIE_DEVICE_ERROR)
		st->device_failed = true;
	if (status == GENIE_CANCELLED)
	{
		fail_request(t);
		return;
	}
	if (status != GENIE_OK)
	{
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	resp = begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp == NULL)
		return;
	resp->engine = verdict.device;
	resp->device_fallback = fallback;
	resp->distances_computed = verdict.distances_computed;
	p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
	memcpy(p, verdict.distances, sizeof(int32) * nc);
	p += sizeof(int32) * nc;
	memcpy(p, verdict.exact, nc);
	p += nc;
	memcpy(p, verdict.certified, nq);
	p += nq;
	memcpy(p, verdict.open_bound, sizeof(int32) * nq);
	end_reply(t, GENIE_SLOT_DONE);
}

/* ---- a cycle ---- */

void
genie_worker_run_cycle(ServiceState *st)
{
	TakenRequest **group = palloc(sizeof(TakenRequest *) * Max(st->n_taken, 1));
	bool	   *grouped = palloc0(sizeof(bool) * Max(st->n_taken, 1));

	for (int i = 0; i < st->n_taken; i++)
	{
		TakenRequest *t = &st->taken[i];

		if (t->broken)
			fail_request(t);
		else if (t->req.kind == GENIE_REQUEST_LOAD)
			handle_load(st, t);
		else if (t->req.kind == GENIE_REQUEST_VERIFY)
			handle_verify(st, t);
		else if (t->req.kind != GENIE_REQUEST_SEARCH)
			reply_error(st, t, GENIE_INTERNAL_ERROR, "an unknown genie service request");
		else
			continue;
		grouped[i] = true;
	}

	/* searches: one engine call per (version, engine, k) */
	for (int i = 0; i < st->n_taken; i++)
	{
		TakenRequest *t = &st->taken[i];
		ServedIndex *s;
		genie_engine_kind kind;
		genie_query_batch b;
		genie_error err;
		int			n = 0;

		if (grouped[i])
			continue;
		grouped[i] = true;
		if (!read_batch(t, &b))
		{
			reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie search request");
			continue;
		}
		s = find_served(st, &t->req.key);
		if (s == NULL)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_NOT_RESIDENT, NULL);
			continue;
		}
		if (resolve_kind(st, t->req.device, &kind, &err) != GENIE_OK)
		{
			genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
			continue;
		}
		group[n++] = t;
		for (int j = i + 1; j < st->n_taken; j++)
		{
			TakenRequest *u = &st->taken[j];
			genie_engine_kind ukind;
			genie_error uerr;

			if (grouped[j] || u->req.k != t->req.k ||
				!genie_service_keys_equal(&u->req.key, &t->req.key) ||
				resolve_kind(st, u->req.device, &ukind, &uerr) != GENIE_OK || ukind != kind ||
				!read_batch(u, &b))
				continue;
			grouped[j] = true;
			group[n++] = u;
		}
		run_search(st, s, kind, t->req.k, group, n, false);
	}

	if (st->device_failed)
	{
		genie_worker_publish_stats(st);
		ereport(LOG,
				(errmsg("genie service: a GPU error; the service restarts with a fresh device context")));
		proc_exit(1);
	}
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
	sh->n_stats = n;
	LWLockRelease(sh->stats_lock);
}
