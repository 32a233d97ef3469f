/*-------------------------------------------------------------------------
 *
 * genie_worker_engines.c
 *	  The genie service worker's answers to backends, the index versions and
 *	  engines it holds (LRU within genie.cache_size and
 *	  genie.device_memory_limit; a version a runner thread is searching
 *	  is never evicted), and the index versions handed over to it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "common/relpath.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "search/genie_cache.h"
#include "search/genie_search.h"
#include "service/genie_slot_wake.h"
#include "worker/genie_worker_internal.h"

bool		genie_worker_shared_dropped = false;

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

void
genie_worker_end_reply(TakenRequest *t, GenieSlotState final)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = &sh->slots[t->slot];
	bool		wake = false;

	SpinLockAcquire(&sh->mutex);
	slot->busy = false;
	if (slot->seq == t->seq)
	{
		slot->state = final;
		wake = true;
	}
	SpinLockRelease(&sh->mutex);
	t->replied = true;
	if (wake)
		genie_slot_wake(slot);
}

/* A request whose segment could not be read: the backend searches in-process. */
void
genie_worker_fail_request(TakenRequest *t)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = &sh->slots[t->slot];
	bool		wake = false;

	SpinLockAcquire(&sh->mutex);
	if (slot->seq == t->seq && slot->state == GENIE_SLOT_TAKEN)
	{
		slot->state = GENIE_SLOT_FAILED;
		wake = true;
	}
	else if (slot->seq == t->seq && slot->state == GENIE_SLOT_WITHDRAWN)
		slot->state = GENIE_SLOT_FREE;
	SpinLockRelease(&sh->mutex);
	t->replied = true;
	if (wake)
		genie_slot_wake(slot);
}

/* Starts an answer: the response header, zeroed; NULL when the backend withdrew. */
GenieResponse *
genie_worker_begin_response(ServiceState *st, TakenRequest *t, GenieServiceOutcome outcome,
							const genie_error *err)
{
	GenieResponse *resp;

	if (t->req.response_capacity < sizeof(GenieResponse))
	{
		genie_worker_fail_request(t);
		return NULL;
	}
	resp = (GenieResponse *) begin_reply(st, t);
	if (resp == NULL)
		return NULL;
	memset(resp, 0, sizeof(GenieResponse));
	resp->outcome = outcome;
	resp->queue_ms = t->queue_wait_ms;
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
	if (genie_worker_begin_response(st, t, outcome, err) != NULL)
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

void
genie_worker_reply_error(ServiceState *st, TakenRequest *t, genie_status status,
						 const char *message)
{
	genie_error err;

	err.status = status;
	strlcpy(err.message, message, sizeof(err.message));
	genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
}

void
genie_worker_count_batch(GenieServiceIndexStats *stats, TakenRequest *const *members, int n,
						 int32 n_queries, double engine_ms)
{
	stats->batches++;
	stats->requests += n;
	stats->queries += n_queries;
	stats->max_batch_queries = Max(stats->max_batch_queries, n_queries);
	for (int i = 0; i < n; i++)
		stats->queue_wait_ms += members[i]->queue_wait_ms;
	stats->engine_ms += engine_ms;
}

void
genie_worker_engine_options(genie_engine_kind kind, CancelGroup *group,
							genie_engine_options *options)
{
	genie_search_engine_options(kind, genie_cancel_group_cancelled, group, options);
}

genie_status
genie_worker_resolve_kind(ServiceState *st, int device, genie_engine_kind *kind, genie_error *err)
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

/* ---- the versions held ---- */

ServedIndex *
genie_worker_find_served(ServiceState *st, const GenieServiceKey *key)
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
	s->dropped[kind] = 0;
	s->stats[kind].resident = false;
	s->stats[kind].device_bytes = 0;
}

static void
free_served(ServedIndex *s)
{
	drop_engine(s, GENIE_ENGINE_CPU);
	drop_engine(s, GENIE_ENGINE_GPU);
	genie_index_free(s->index);
	/* backends that mapped it keep it until they let go (and hear of this) */
	if (s->shared != NULL)
	{
		dsm_detach(s->shared);
		genie_worker_shared_dropped = true;
	}
	free(s);
}

int64
genie_worker_host_bytes(ServiceState *st)
{
	int64		total = 0;

	for (int i = 0; i < st->n_served; i++)
		total += st->served[i]->host_bytes;
	for (int i = 0; i < st->n_values; i++)
		total += st->values[i]->host_bytes;
	return total;
}

void
genie_worker_free_values(ServedValues *s)
{
	/* their GPU copies included */
	genie_value_set_free(&s->set);
	genie_cluster_list_free(s->list);
	free(s);
}

void
genie_worker_evict_host(ServiceState *st, ServedIndex *keep_index, ServedValues *keep_values,
						bool room_index, bool room_values)
{
	int64		budget = (int64) genie_cache_size_mb * 1024 * 1024;

	for (;;)
	{
		bool		over = genie_worker_host_bytes(st) > budget;
		bool		full_index = room_index && st->n_served == GENIE_SERVICE_MAX_SERVED;
		bool		full_values = room_values && st->n_values == GENIE_SERVICE_MAX_SERVED;
		int			vi = -1;
		int			vs = -1;

		if (!over && !full_index && !full_values)
			return;
		/* within the budget, only a table that must take one more gives way */
		if (over || full_index)
			for (int i = 0; i < st->n_served; i++)
				if (st->served[i] != keep_index && st->served[i]->busy == 0 &&
					(vi < 0 || st->served[i]->last_used < st->served[vi]->last_used))
					vi = i;
		if (over || full_values)
			for (int i = 0; i < st->n_values; i++)
				if (st->values[i] != keep_values && st->values[i]->busy == 0 &&
					(vs < 0 || st->values[i]->last_used < st->values[vs]->last_used))
					vs = i;
		if (vi >= 0 && (vs < 0 || st->served[vi]->last_used <= st->values[vs]->last_used))
		{
			free_served(st->served[vi]);
			st->served[vi] = st->served[--st->n_served];
		}
		else if (vs >= 0)
		{
			genie_worker_free_values(st->values[vs]);
			st->values[vs] = st->values[--st->n_values];
		}
		else
			return;
	}
}

/*
 * Whether the relation file of a version is gone: DROP (of the index or
 * its table), TRUNCATE and REINDEX leave the old relfilenode's main fork
 * missing or, until the next checkpoint unlinks it, empty; a genie index's
 * file always holds its metapage.
 */
static bool
version_dropped(const GenieServiceKey *key)
{
	char	   *path = relpathbackend(key->node, key->backend, MAIN_FORKNUM);
	struct stat st;
	bool		gone;

	gone = stat(path, &st) != 0 ? errno == ENOENT : st.st_size == 0;
	pfree(path);
	return gone;
}

bool
genie_worker_release_unused(ServiceState *st)
{
	int			before = st->n_served + st->n_values;
	int64		bytes = genie_worker_host_bytes(st);

	for (int i = 0; i < st->n_served;)
	{
		if (st->served[i]->busy == 0 && version_dropped(&st->served[i]->key))
		{
			free_served(st->served[i]);
			st->served[i] = st->served[--st->n_served];
		}
		else
			i++;
	}
	for (int i = 0; i < st->n_values;)
	{
		if (st->values[i]->busy == 0 && version_dropped(&st->values[i]->key))
		{
			genie_worker_free_values(st->values[i]);
			st->values[i] = st->values[--st->n_values];
		}
		else
			i++;
	}
	/* and a version loaded beyond genie.cache_size for the search that needed it */
	genie_worker_evict_host(st, NULL, NULL, false, false);
	return st->n_served + st->n_values != before || genie_worker_host_bytes(st) != bytes;
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
			if (s != keep && s->busy == 0 && (victim == NULL || s->last_used < victim->last_used))
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
genie_status
genie_worker_ensure_engine(ServiceState *st, ServedIndex *s, genie_engine_kind kind,
						   genie_error *err)
{
	genie_engine_options options;
	genie_status status;

	if (s->engines[kind] != NULL)
		return GENIE_OK;
	if (kind == GENIE_ENGINE_GPU)
		evict_device(st, s, s->host_bytes);
	genie_worker_engine_options(kind, &s->cancel[kind], &options);
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

/* ---- a version handed over (the hand-over itself: genie_worker_loads.c) ---- */

/*
 * Without a GPU, the worker holds the main postings in a segment of shared
 * memory that backends map and search themselves (GenieSharedPostings):
 * the segment, the stream copied in, its header but max_object_keywords
 * written; or NULL, said in the log, when no segment can be had (the
 * worker then keeps its own copy and backends send it their searches).
 */
static dsm_segment *
make_shared_postings(const PendingLoad *load, Size stream_bytes)
{
	MemoryContext cxt = CurrentMemoryContext;
	Size		data_offset = TYPEALIGN(8, sizeof(GenieSharedPostings));
	dsm_segment *volatile seg = NULL;
	GenieSharedPostings *header;

	PG_TRY();
	{
		seg = dsm_create(data_offset + stream_bytes, DSM_CREATE_NULL_IF_MAXSEGMENTS);
		/* the worker's until it drops the version, whatever the resource owner */
		if (seg != NULL)
			dsm_pin_mapping(seg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errmsg("genie service: no shared memory for the postings of index %u: %s",
						load->index_oid, edata->message),
				 errdetail("Backends send their searches of it to the service.")));
		FreeErrorData(edata);
		seg = NULL;
	}
	PG_END_TRY();
	if (seg == NULL)
		return NULL;
	header = dsm_segment_address(seg);
	memset(header, 0, data_offset);
	header->key = load->key;
	header->split_length = load->split_length;
	header->data_offset = data_offset;
	header->data_bytes = stream_bytes;
	memcpy((char *) header + data_offset, load->buffer, stream_bytes);
	return seg;
}

/*
 * The served version's index over its main postings: read in place from
 * its shared segment, checked here once (backends take it as checked), or
 * a copy of the hand-over's buffer.
 */
static genie_status
make_served_index(ServedIndex *s, const PendingLoad *load, const genie_index_options *options,
				  genie_error *err)
{
	const GenieServiceKey *key = &load->key;
	/* keywords | keyword_offsets | postings, keywords padded to 8 bytes */
	Size		keywords_bytes = TYPEALIGN(8, sizeof(int32) * key->n_keywords);
	Size		stream_bytes = keywords_bytes + sizeof(int64) * (key->n_keywords + 1) +
		sizeof(int32) * key->n_postings;
	char	   *data = load->buffer;
	const int32 *keywords;
	const int64 *offsets;
	const int32 *postings;
	genie_status status;

	/* its own genie.shared_postings: postgresql.conf's */
	if (!genie_service_shared->gpu_usable && genie_shared_postings)
		s->shared = make_shared_postings(load, stream_bytes);
	if (s->shared != NULL)
		data = (char *) dsm_segment_address(s->shared) +
			((GenieSharedPostings *) dsm_segment_address(s->shared))->data_offset;
	keywords = (const int32 *) data;
	offsets = (const int64 *) (data + keywords_bytes);
	postings = (const int32 *) (data + keywords_bytes + sizeof(int64) * (key->n_keywords + 1));
	status = s->shared != NULL
		? genie_index_borrow(key->n_main_objects, key->n_keywords, keywords, offsets, postings, -1,
							 options, &s->index, err)
		: genie_index_create_from_postings(key->n_main_objects, key->n_keywords, keywords, offsets,
										   postings, options, &s->index, err);
	if (status != GENIE_OK)
		return status;
	if (s->shared != NULL)
	{
		GenieSharedPostings *header = dsm_segment_address(s->shared);

		header->max_object_keywords = genie_index_max_object_keywords(s->index);
		/* last: a segment without it is not one a backend maps */
		pg_write_barrier();
		header->magic = GENIE_SHARED_POSTINGS_MAGIC;
		s->host_bytes = (int64) (header->data_offset + header->data_bytes);
	}
	else
		s->host_bytes = (int64) genie_index_memory_bytes(s->index);
	return GENIE_OK;
}

void
genie_worker_finish_load(ServiceState *st, PendingLoad *load, TakenRequest *t)
{
	const GenieServiceKey *key = &load->key;
	genie_index_options options;
	genie_error err;
	ServedIndex *s = calloc(1, sizeof(ServedIndex));
	GenieResponse *resp;

	if (s == NULL)
	{
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
		return;
	}
	memset(&options, 0, sizeof(options));
	options.split_length = load->split_length;
	if (make_served_index(s, load, &options, &err) != GENIE_OK)
	{
		free_served(s);
		genie_worker_reply_outcome(st, t, GENIE_SERVICE_ENGINE_ERROR, &err);
		return;
	}
	s->key = *key;
	s->index_oid = load->index_oid;
	s->last_used = ++st->clock;
	for (int e = 0; e < 2; e++)
	{
		s->stats[e].key = *key;
		s->stats[e].index_oid = load->index_oid;
		s->stats[e].engine = (genie_engine_kind) e;
		s->stats[e].host_bytes = s->host_bytes;
		s->stats[e].shared_segment = s->shared != NULL ? dsm_segment_handle(s->shared) : DSM_HANDLE_INVALID;
	}
	/* room in the table first; every version held may be in use */
	genie_worker_evict_host(st, NULL, NULL, true, false);
	if (st->n_served == GENIE_SERVICE_MAX_SERVED)
	{
		free_served(s);
		genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY,
								 "the genie service holds as many index versions as it can, all in use");
		return;
	}
	st->served[st->n_served++] = s;
	genie_worker_evict_host(st, s, NULL, false, false);

	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
	{
		resp->resident = true;
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
	}
}

