/*-------------------------------------------------------------------------
 *
 * genie_worker_loads.c
 *	  Index versions handed over to the genie service worker in pieces: the
 *	  main postings (genie_worker_engines.c makes the served version of
 *	  them) or the main objects' stored values, strings, vectors or codes
 *	  (genie_worker_values.c).
 *	  One backend hands a version over at a time; another that asks meanwhile
 *	  is told to wait, and a hand-over whose backend went away is dropped.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/spin.h"
#include "utils/timestamp.h"

#include "worker/genie_worker_internal.h"

/* ---- loads ---- */

/* keywords | keyword_offsets | postings, keywords padded to 8 bytes */
static Size
keywords_bytes(const GenieServiceKey *key)
{
	return TYPEALIGN(8, sizeof(int32) * key->n_keywords);
}

static Size
stream_size(const GenieServiceKey *key)
{
	return keywords_bytes(key) + sizeof(int64) * (key->n_keywords + 1) +
		sizeof(int32) * key->n_postings;
}


/* Frees a hand-over's buffer: the vector set it is the rows of, or itself. */
static void
free_load_buffer(PendingLoad *load)
{
	if (load->vectors != NULL)
		genie_vectors_free(load->vectors);
	else
		free(load->buffer);
	free(load->list_buffer);
	load->vectors = NULL;
	load->buffer = NULL;
	load->list_buffer = NULL;
}

static void
drop_load(ServiceState *st, int i)
{
	free_load_buffer(&st->loads[i]);
	st->loads[i] = st->loads[--st->n_loads];
}

/*
 * The buffers a hand-over's pieces are copied into: for vectors, the rows
 * of the set that will be served (no copy of 100s of MB at the end); else
 * malloc'd; and the list's, malloc'd.  False when out of memory.
 */
static bool
make_load_buffer(PendingLoad *load, const GenieRequest *req, Size values_bytes, Size list_bytes)
{
	int32		n = req->key.n_main_objects;
	int32		dim = req->value_dim;

	if (list_bytes > 0 && (load->list_buffer = malloc(list_bytes)) == NULL)
		return false;
	if (req->load_values && req->values_kind == GENIE_VALUES_VECTORS && n >= 1 && dim >= 1 &&
		values_bytes == sizeof(float) * (Size) n * (Size) dim)
	{
		float	   *rows;
		genie_error err;

		if (genie_vectors_create_unsealed(n, dim, genie_cpu_threads, &load->vectors, &rows, &err) == GENIE_OK)
			load->buffer = (char *) rows;
	}
	else
	{
		/* a malformed hand-over is refused when it is whole (finish_values_load) */
		load->buffer = malloc(Max(values_bytes, 1));
	}
	if (load->buffer == NULL)
	{
		free(load->list_buffer);
		load->list_buffer = NULL;
	}
	return load->buffer != NULL;
}

/* Copies a piece of a hand-over's stream, from offset on, into its buffers. */
static void
copy_piece(PendingLoad *load, const char *piece, Size offset, Size bytes)
{
	Size		values_bytes = load->total - load->list_bytes;

	if (offset < values_bytes)
	{
		Size		take = Min(bytes, values_bytes - offset);

		memcpy(load->buffer + offset, piece, take);
		piece += take;
		offset += take;
		bytes -= take;
	}
	if (bytes > 0)
		memcpy(load->list_buffer + (offset - values_bytes), piece, bytes);
}

void
genie_worker_forget_loads(ServiceState *st, int slot)
{
	for (int i = st->n_loads - 1; i >= 0; i--)
		if (st->loads[i].slot == slot)
			drop_load(st, i);
}

/*
 * Whether the backend handing over load i is still at it: its next piece
 * is waiting (submitted, or taken in this cycle), or its last one came
 * within a second.  (The worker can spend longer than that on a scan of
 * stored strings between two pieces; a backend that went on to other
 * requests dropped its hand-over then, see genie_worker_forget_loads.)
 */
static bool
load_alive(ServiceState *st, PendingLoad *load)
{
	GenieServiceSlot *slot = &genie_service_shared->slots[load->slot];
	int			pid;
	GenieSlotState state;

	SpinLockAcquire(&genie_service_shared->mutex);
	pid = slot->pid;
	state = slot->state;
	SpinLockRelease(&genie_service_shared->mutex);
	if (pid != load->pid)
		return false;
	return state == GENIE_SLOT_SUBMITTED || state == GENIE_SLOT_TAKEN ||
		!TimestampDifferenceExceeds(load->last_piece, GetCurrentTimestamp(), 1000);
}

void
genie_worker_handle_load(ServiceState *st, TakenRequest *t)
{
	GenieRequest *req = &t->req;
	Size		total = req->load_values ? (Size) req->load_total : stream_size(&req->key);
	Size		list_bytes = req->load_values ? (Size) req->load_list_bytes : 0;
	PendingLoad *load = NULL;
	GenieResponse *resp;

	if (req->load_offset == 0)
	{
		if (req->load_values ? genie_worker_find_values(st, &req->key) != NULL
			: genie_worker_find_served(st, &req->key) != NULL)
		{
			resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
			if (resp != NULL)
			{
				resp->resident = true;
				genie_worker_end_reply(t, GENIE_SLOT_DONE);
			}
			return;
		}
		for (int i = st->n_loads - 1; i >= 0; i--)
		{
			PendingLoad *other = &st->loads[i];

			if (other->slot == t->slot || !load_alive(st, other))
				drop_load(st, i);
			else if (other->values == req->load_values &&
					 genie_service_keys_equal(&other->key, &req->key))
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
		if (req->load_total < 0 || req->load_list_bytes < 0 || list_bytes > total ||
			(list_bytes > 0 && req->values_kind == GENIE_VALUES_CODES))
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a malformed genie index hand-over");
			return;
		}
		load = &st->loads[st->n_loads];
		memset(load, 0, sizeof(*load));
		if (!make_load_buffer(load, req, total - list_bytes, list_bytes))
		{
			genie_worker_reply_error(st, t, GENIE_OUT_OF_MEMORY, "the genie service is out of host memory");
			return;
		}
		st->n_loads++;
		load->key = req->key;
		load->values = req->load_values;
		load->values_kind = req->values_kind;
		load->value_dim = req->value_dim;
		load->index_oid = req->index_oid;
		load->slot = t->slot;
		load->pid = genie_service_shared->slots[t->slot].pid;
		load->split_length = req->split_length;
		load->total = total;
		load->list_bytes = list_bytes;
	}
	else
	{
		for (int i = 0; i < st->n_loads; i++)
			if (st->loads[i].slot == t->slot && st->loads[i].values == req->load_values &&
				genie_service_keys_equal(&st->loads[i].key, &req->key))
				load = &st->loads[i];
		if (load == NULL || load->received != (Size) req->load_offset)
		{
			genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "the genie service lost an index hand-over");
			return;
		}
	}
	if (req->load_bytes > t->payload_size || load->received + req->load_bytes > load->total)
	{
		genie_worker_reply_error(st, t, GENIE_INTERNAL_ERROR, "a genie index hand-over does not fit");
		return;
	}
	copy_piece(load, t->payload, load->received, req->load_bytes);
	load->received += req->load_bytes;
	load->last_piece = GetCurrentTimestamp();
	if (load->received == load->total)
	{
		PendingLoad done = *load;

		/* off the list first: finish_load may evict, and the buffer is ours */
		load->buffer = NULL;
		load->vectors = NULL;
		load->list_buffer = NULL;
		drop_load(st, (int) (load - st->loads));
		if (done.values)
			genie_worker_finish_values_load(st, &done, t);
		else
			genie_worker_finish_load(st, &done, t);
		/* what the finish did not take (a vector set it serves, it takes) */
		free_load_buffer(&done);
		return;
	}
	resp = genie_worker_begin_response(st, t, GENIE_SERVICE_OK, NULL);
	if (resp != NULL)
		genie_worker_end_reply(t, GENIE_SLOT_DONE);
}

