/*-------------------------------------------------------------------------
 *
 * genie_service_client.c
 *	  A backend's side of the genie service (see genie_service.h): the
 *	  session's request segment, submitting a request and waiting for its
 *	  answer interruptibly (or submitting it and waiting later), withdrawing
 *	  on cancel, and the requests: load, search, verify, and the hand-over
 *	  of stored values (genie_service_scan.c sends their scans).
 *
 * Each submission carries a sequence number; the worker writes an answer
 * only while the slot still holds the request it took (same number, still
 * TAKEN), so a backend that withdrew can submit again at once, without
 * waiting for the worker to finish a batch that no longer concerns it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <float.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "service/genie_service.h"
#include "profile/genie_profile.h"
#include "service/genie_service_client.h"
#include "service/genie_slot_wake.h"

/* the worker copies a load in pieces of at most this many bytes */
#define LOAD_PIECE_BYTES	((Size) 8 << 20)
#define MIN_SEGMENT_BYTES	((Size) 1 << 20)

static dsm_segment *segment = NULL;
static Size segment_size = 0;
static bool exit_registered = false;

static GenieServiceSlot *
my_slot(void)
{
	GenieServiceShared *sh = genie_service_shared;

	if (sh == NULL || MyProc == NULL || GENIE_MY_PROC_NUMBER < 0 || GENIE_MY_PROC_NUMBER >= sh->n_slots)
		return NULL;
	return &sh->slots[GENIE_MY_PROC_NUMBER];
}

bool
genie_service_ready(void)
{
	GenieServiceShared *sh = genie_service_shared;
	bool		ready;

	if (my_slot() == NULL)
		return false;
	SpinLockAcquire(&sh->mutex);
	ready = sh->ready;
	SpinLockRelease(&sh->mutex);
	return ready;
}

bool
genie_service_resident(const GenieServiceKey *key, dsm_handle *shared_segment)
{
	GenieServiceShared *sh = genie_service_shared;
	bool		found = false;

	if (shared_segment != NULL)
		*shared_segment = DSM_HANDLE_INVALID;
	if (sh == NULL)
		return false;
	LWLockAcquire(sh->stats_lock, LW_SHARED);
	for (int i = 0; i < sh->n_stats && !found; i++)
	{
		found = sh->stats[i].resident && sh->stats[i].content == GENIE_SERVED_POSTINGS &&
			genie_service_keys_equal(&sh->stats[i].key, key);
		if (found && shared_segment != NULL)
			*shared_segment = sh->stats[i].shared_segment;
	}
	LWLockRelease(sh->stats_lock);
	return found;
}

bool
genie_service_wait_handover(TimestampTz since)
{
	if (TimestampDifferenceExceeds(since, GetCurrentTimestamp(), 1000))
		return false;
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 2L, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return true;
}

/* At backend exit: the slot is no one's; an answer in flight is dropped. */
static void
client_exit(int code, Datum arg)
{
	GenieServiceSlot *slot = my_slot();

	if (slot == NULL)
		return;
	SpinLockAcquire(&genie_service_shared->mutex);
	if (slot->state == GENIE_SLOT_SUBMITTED || slot->state == GENIE_SLOT_DONE ||
		slot->state == GENIE_SLOT_FAILED)
		slot->state = GENIE_SLOT_FREE;
	else if (slot->state == GENIE_SLOT_TAKEN)
		slot->state = GENIE_SLOT_WITHDRAWN;
	slot->seq++;
	slot->pid = 0;
	slot->latch = NULL;
	slot->segment = DSM_HANDLE_INVALID;
	SpinLockRelease(&genie_service_shared->mutex);
}

/*
 * The session's segment with room for bytes, made or grown as needed and
 * mapped for the session.  A larger one replaces the old, which the worker
 * may still have mapped: that is harmless, since it writes only answers to
 * requests the slot still holds.
 */
static char *
request_segment(Size bytes)
{
	dsm_segment *seg;
	Size		size = MIN_SEGMENT_BYTES;

	if (segment != NULL && segment_size >= bytes)
		return dsm_segment_address(segment);
	while (size < bytes)
		size *= 2;
	seg = dsm_create(size, 0);
	dsm_pin_mapping(seg);
	if (segment != NULL)
		dsm_detach(segment);
	segment = seg;
	segment_size = size;
	if (!exit_registered)
	{
		on_shmem_exit(client_exit, (Datum) 0);
		exit_registered = true;
	}
	return dsm_segment_address(segment);
}

/* Takes the request back: the worker will not write into the segment for it. */
static void
withdraw(GenieServiceSlot *slot)
{
	for (;;)
	{
		bool		busy;

		SpinLockAcquire(&genie_service_shared->mutex);
		if (slot->state == GENIE_SLOT_TAKEN)
			slot->state = GENIE_SLOT_WITHDRAWN;
		else if (slot->state != GENIE_SLOT_WITHDRAWN)
			slot->state = GENIE_SLOT_FREE;
		slot->seq++;
		busy = slot->busy;
		SpinLockRelease(&genie_service_shared->mutex);
		if (!busy)
			return;
		/* the worker is copying from or to the segment: microseconds */
		pg_usleep(50);
	}
}

/*
 * The request out: submitted and its answer not yet taken (with the
 * service's generation at its submission), and who submitted it without
 * waiting (genie_service_submit), to take its answer before the segment
 * is written again.
 */
static bool request_out = false;
static uint32 request_generation = 0;
/* where the last request submitted has its answer (its header may be the next request's by then) */
static Size out_response_offset = 0;
static void (*out_take) (void *arg) = NULL;
static void *out_take_arg = NULL;

/*
 * Submits the request written at the start of the session's segment; false
 * when no worker takes requests.
 */
static bool
submit_request(void)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = my_slot();
	Latch	   *service_latch;

	Assert(slot != NULL && segment != NULL && !request_out);
	SpinLockAcquire(&sh->mutex);
	if (!sh->ready)
	{
		SpinLockRelease(&sh->mutex);
		return false;
	}
	/* a WITHDRAWN request may still be in a batch: the new number disowns it */
	slot->seq++;
	slot->state = GENIE_SLOT_SUBMITTED;
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->segment = dsm_segment_handle(segment);
	slot->submitted_at = GetCurrentTimestamp();
	request_generation = sh->generation;
	service_latch = sh->skip_wake ? NULL : sh->latch;
	SpinLockRelease(&sh->mutex);
	request_out = true;
	out_response_offset = ((GenieRequest *) dsm_segment_address(segment))->response_offset;
	if (service_latch != NULL)
		SetLatch(service_latch);
	return true;
}

/*
 * Waits for the answer to the request out, running overlap (when not NULL
 * and not yet done) first.  UNAVAILABLE when the worker went away before
 * answering.  Cancel and statement_timeout, and an error of overlap,
 * withdraw the request and raise the error.
 */
static GenieServiceOutcome
await_answer(GenieServiceOverlap *overlap)
{
	GenieServiceShared *sh = genie_service_shared;
	GenieServiceSlot *slot = my_slot();
	GenieSlotState state = GENIE_SLOT_FAILED;

	Assert(request_out);
	PG_TRY();
	{
		if (overlap != NULL && !overlap->done)
		{
			overlap->done = true;
			overlap->run(overlap->arg);
		}
		for (;;)
		{
			bool		gone;
			uint32		seen;

			/*
			 * A signal that came while this backend was not asleep (between
			 * two calls of a split batch, say) leaves no trace in the futex
			 * word, so its interrupt is served here, before the sleep.
			 */
			CHECK_FOR_INTERRUPTS();
			seen = genie_slot_prepare_sleep(slot);
			SpinLockAcquire(&sh->mutex);
			state = slot->state;
			gone = sh->generation != request_generation || !sh->ready;
			SpinLockRelease(&sh->mutex);
			if (state == GENIE_SLOT_DONE || state == GENIE_SLOT_FAILED)
			{
				genie_slot_cancel_sleep(slot);
				break;
			}
			if (gone)
			{
				/* the worker's exit fails its slots; this covers a lost wakeup */
				genie_slot_cancel_sleep(slot);
				withdraw(slot);
				state = GENIE_SLOT_FAILED;
				break;
			}
			/*
			 * A cancel's signal ends the sleep at once; one that lands between
			 * the check above and the sleep waits out the timeout, so it is
			 * short.
			 */
			genie_slot_sleep(slot, seen, GENIE_SLOT_SLEEP_MS);
		}
	}
	PG_CATCH();
	{
		genie_service_withdraw();
		PG_RE_THROW();
	}
	PG_END_TRY();

	request_out = false;
	out_take = NULL;
	SpinLockAcquire(&sh->mutex);
	if (slot->state == GENIE_SLOT_DONE || slot->state == GENIE_SLOT_FAILED)
		slot->state = GENIE_SLOT_FREE;
	SpinLockRelease(&sh->mutex);
	return state == GENIE_SLOT_DONE ? GENIE_SERVICE_OK : GENIE_SERVICE_UNAVAILABLE;
}

/*
 * Submits the request written at the start of the session's segment and
 * waits for the answer (await_answer).  UNAVAILABLE when no worker takes
 * requests or the worker went away before answering.
 */
static GenieServiceOutcome
call_service(GenieServiceOverlap *overlap)
{
	if (!submit_request())
		return GENIE_SERVICE_UNAVAILABLE;
	return await_answer(overlap);
}

void
genie_service_withdraw(void)
{
	GenieServiceSlot *slot = my_slot();

	if (!request_out)
		return;
	request_out = false;
	out_take = NULL;
	if (slot != NULL)
		withdraw(slot);
}

/* A request's header at the start of the segment (at base), zeroed but for its kind and answer's place. */
static GenieRequest *
write_header(char *base, GenieRequestKind kind, Size response_offset, Size response)
{
	GenieRequest *req = (GenieRequest *) base;

	memset(req, 0, sizeof(GenieRequest));
	req->kind = kind;
	req->response_offset = response_offset;
	req->response_capacity = response;
	return req;
}

GenieRequest *
genie_service_begin_request(GenieRequestKind kind, Size payload, Size response)
{
	Size		header = GENIE_SERVICE_ALIGN(sizeof(GenieRequest));
	Size		response_offset = GENIE_SERVICE_ALIGN(header + payload);
	char	   *base;

	/* a request submitted without waiting is answered first: the segment is written below */
	if (request_out && out_take != NULL)
		out_take(out_take_arg);
	Assert(!request_out);
	base = request_segment(response_offset + response);
	return write_header(base, kind, response_offset, response);
}

GenieRequest *
genie_service_begin_beside(GenieRequestKind kind, Size payload, Size response,
						   void (*take) (void *arg), void *arg)
{
	Size		header = GENIE_SERVICE_ALIGN(sizeof(GenieRequest));
	Size		response_offset = GENIE_SERVICE_ALIGN(header + payload);
	GenieServiceSlot *slot = my_slot();
	bool		copied = false;

	/*
	 * The worker copies a request's header and payload out of the segment
	 * when it takes the request (its slot TAKEN, or answered since), and
	 * afterwards writes only the answer, at out_response_offset: a new
	 * header and payload that end before it, in the segment as it is, are
	 * left alone.  Only beside the caller's own request: another's is taken
	 * first, by its take.
	 */
	if (request_out && out_take == take && out_take_arg == arg && slot != NULL && segment != NULL &&
		header + payload <= out_response_offset && response_offset + response <= segment_size)
	{
		SpinLockAcquire(&genie_service_shared->mutex);
		copied = slot->state != GENIE_SLOT_SUBMITTED && !slot->busy;
		SpinLockRelease(&genie_service_shared->mutex);
	}
	if (!copied)
		return genie_service_begin_request(kind, payload, response);
	return write_header(dsm_segment_address(segment), kind, response_offset, response);
}

char *
genie_service_request_payload(GenieRequest *req)
{
	return (char *) req + GENIE_SERVICE_ALIGN(sizeof(GenieRequest));
}

/* Copies an answer's engine error into err. */
static GenieServiceOutcome
take_outcome(const GenieResponse *resp, genie_error *err)
{
	if (resp->outcome == GENIE_SERVICE_ENGINE_ERROR || resp->outcome == GENIE_SERVICE_CORRUPT)
	{
		err->status = resp->status;
		strlcpy(err->message, resp->message, sizeof(err->message));
	}
	return resp->outcome;
}

/*
 * The answer in the segment, once the request out was answered: its
 * outcome, *resp the answer when it is OK or NOT_RESIDENT (err an engine's
 * error).  The service's own part of the round trip, its queue wait and
 * engine time, is charged to genie.profile's queue and engine phases, at
 * most waited_ms of it: a request answered while the backend went on (a
 * piece of a scan ahead) shows only the wait it left.
 */
static GenieServiceOutcome
take_answer(GenieResponse **resp, double waited_ms, genie_error *err)
{
	double		queue_ms;

	*resp = (GenieResponse *) ((char *) dsm_segment_address(segment) + out_response_offset);
	queue_ms = Min((*resp)->queue_ms, waited_ms);
	genie_profile_move(GENIE_PHASE_QUEUE, queue_ms);
	genie_profile_move(GENIE_PHASE_ENGINE, Min((*resp)->engine_ms, waited_ms - queue_ms));
	return take_outcome(*resp, err);
}

GenieServiceOutcome
genie_service_call_for_answer(GenieResponse **resp, GenieServiceOverlap *overlap, genie_error *err)
{
	GenieServiceOutcome outcome;

	genie_profile_push(GENIE_PHASE_SERVICE);
	outcome = call_service(overlap);
	if (outcome == GENIE_SERVICE_OK)
		outcome = take_answer(resp, DBL_MAX, err);
	genie_profile_pop();
	return outcome;
}

bool
genie_service_submit(void (*take) (void *arg), void *arg)
{
	if (!submit_request())
		return false;
	out_take = take;
	out_take_arg = arg;
	return true;
}

GenieServiceOutcome
genie_service_await(GenieResponse **resp, genie_error *err)
{
	GenieServiceOutcome outcome;
	instr_time	start,
				waited;

	genie_profile_push(GENIE_PHASE_SERVICE);
	INSTR_TIME_SET_CURRENT(start);
	outcome = await_answer(NULL);
	INSTR_TIME_SET_CURRENT(waited);
	INSTR_TIME_SUBTRACT(waited, start);
	if (outcome == GENIE_SERVICE_OK)
		outcome = take_answer(resp, INSTR_TIME_GET_MILLISEC(waited), err);
	genie_profile_pop();
	return outcome;
}

/* ---- load ---- */

/* Bytes [offset, offset + n) of the concatenation of parts. */
static void
copy_stream(char *dst, const char *const *parts, const Size *sizes, int n_parts,
			Size offset, Size n)
{
	for (int p = 0; p < n_parts && n > 0; p++)
	{
		Size		take;

		if (offset >= sizes[p])
		{
			offset -= sizes[p];
			continue;
		}
		take = Min(n, sizes[p] - offset);
		memcpy(dst, parts[p] + offset, take);
		dst += take;
		n -= take;
		offset = 0;
	}
}

/*
 * Sends the stream parts[0] | parts[1] | ... in pieces (the main postings,
 * or with values the stored values of that kind); NOT_RESIDENT when
 * another backend is handing over the same version (the worker took none
 * of it from this one).
 */
static GenieServiceOutcome
send_stream(const GenieServiceKey *key, Oid index_oid, int32 split_length,
			const GenieValueBatch *values, Size list_bytes, const char *const *parts,
			const Size *sizes, int n_parts, genie_error *err)
{
	Size		total = 0;
	Size		offset = 0;

	for (int p = 0; p < n_parts; p++)
		total += sizes[p];
	for (;;)
	{
		Size		piece = Min(LOAD_PIECE_BYTES, total - offset);
		GenieRequest *req = genie_service_begin_request(GENIE_REQUEST_LOAD, piece, sizeof(GenieResponse));
		GenieResponse *resp;
		GenieServiceOutcome outcome;

		req->key = *key;
		req->index_oid = index_oid;
		req->split_length = split_length;
		req->load_offset = offset;
		req->load_bytes = piece;
		req->load_values = values != NULL;
		if (values != NULL)
		{
			req->values_kind = values->kind;
			req->value_dim = values->dim;
		}
		req->load_total = total;
		req->load_list_bytes = list_bytes;
		copy_stream(genie_service_request_payload(req), parts, sizes, n_parts, offset, piece);
		outcome = genie_service_call_for_answer(&resp, NULL, err);
		if (outcome != GENIE_SERVICE_OK)
			return outcome;
		/* the version was already there, or this was the last piece */
		if (resp->resident || offset + piece >= total)
			return GENIE_SERVICE_OK;
		offset += piece;
	}
}

GenieServiceOutcome
genie_service_load(const GenieServiceKey *key, Oid index_oid, int32 split_length,
				   const int32 *keywords, const int64 *keyword_offsets,
				   const int32 *postings, genie_error *err)
{
	/* keywords | keyword_offsets | postings, keywords padded to 8 bytes */
	static const char padding[8] = {0};
	const char *parts[4] = {(const char *) keywords, padding, (const char *) keyword_offsets,
	(const char *) postings};
	Size		sizes[4] = {sizeof(int32) * key->n_keywords,
		TYPEALIGN(8, sizeof(int32) * key->n_keywords) - sizeof(int32) * key->n_keywords,
		sizeof(int64) * (key->n_keywords + 1),
	sizeof(int32) * key->n_postings};

	return send_stream(key, index_oid, split_length, NULL, 0, parts, sizes, 4, err);
}

GenieServiceOutcome
genie_service_load_values(const GenieServiceKey *key, Oid index_oid, const GenieValueBatch *values,
						  const void *list, Size list_bytes, genie_error *err)
{
	/* the wire layout of the values, in the pieces the batch already holds, then the list */
	static const char nothing[1] = {0};
	int32		n = values->n;
	const char *parts[3] = {(const char *) values->text_offsets, values->text, list};
	Size		sizes[3] = {sizeof(int64) * ((Size) n + 1), 0, list_bytes};

	Assert(n == key->n_main_objects);
	if (values->kind == GENIE_VALUES_STRINGS)
		sizes[1] = (Size) values->text_offsets[n];	/* the offsets count from 0 */
	else
	{
		parts[0] = values->kind == GENIE_VALUES_CODES ? (const char *) values->codes
			: (const char *) values->vectors;
		sizes[0] = genie_value_batch_bytes(values, 0, n);
		parts[1] = nothing;
	}
	return send_stream(key, index_oid, 0, values, list_bytes, parts, sizes, 3, err);
}

GenieServiceOutcome
genie_service_share(const GenieServiceKey *key, Oid index_oid, dsm_handle *segment,
					genie_error *err)
{
	GenieRequest *req = genie_service_begin_request(GENIE_REQUEST_SHARE, 0, sizeof(GenieResponse));
	GenieResponse *resp;
	GenieServiceOutcome outcome;

	req->key = *key;
	req->index_oid = index_oid;
	*segment = DSM_HANDLE_INVALID;
	outcome = genie_service_call_for_answer(&resp, NULL, err);
	if (outcome == GENIE_SERVICE_OK)
		*segment = resp->shared_segment;
	return outcome;
}

/*
 * Appends an answer's rows for queries [q0, q0 + nq) to the caller's arrays:
 * after the response header come query_offsets (nq + 1 int64) and then
 * n_columns int32 columns of `slots` each, the first query_offsets[nq] of
 * each in use.  The columns grow (repalloc) past *capacity as needed.
 */
static void
take_rows(const GenieResponse *resp, int q0, int nq, Size slots, int64 *query_offsets,
		  int32 **columns, int n_columns, int64 *capacity)
{
	const char *p = (const char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
	const int64 *offs = (const int64 *) p;
	int64		n_before = query_offsets[q0];
	int64		n = offs[nq];

	if (n_before + n > *capacity)
	{
		int64		cap = Max(*capacity * 2, n_before + n);

		for (int c = 0; c < n_columns; c++)
			columns[c] = repalloc_huge(columns[c], sizeof(int32) * cap);
		*capacity = cap;
	}
	for (int q = 1; q <= nq; q++)
		query_offsets[q0 + q] = n_before + offs[q];
	p += sizeof(int64) * (nq + 1);
	for (int c = 0; c < n_columns; c++)
		memcpy(columns[c] + n_before, p + sizeof(int32) * slots * c, sizeof(int32) * n);
}

/* ---- search ---- */

/* Searches queries [q0, q1) of batch; appends to the palloc'd arrays of out. */
static GenieServiceOutcome
search_part(const GenieServiceKey *key, Oid index_oid, int device,
			const genie_query_batch *batch, int q0, int q1, int32 k,
			genie_results *out, int64 *capacity, genie_engine_kind *engine,
			bool *device_fallback, GenieServiceOverlap *overlap, genie_error *err)
{
	int			nq = q1 - q0;
	int64		item0 = batch->query_offsets[q0];
	int64		item1 = batch->query_offsets[q1];
	int64		n_items = item1 - item0;
	int64		range0 = batch->item_offsets[item0];
	int64		n_ranges = batch->item_offsets[item1] - range0;
	int32		kk = Min(k, Max(key->n_main_objects, 1));
	Size		payload = sizeof(int64) * (nq + 1) + sizeof(int64) * (n_items + 1) +
		(batch->item_weights ? sizeof(int32) * n_items : 0) + 2 * sizeof(int32) * n_ranges;
	Size		response = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * (nq + 1) +
		2 * sizeof(int32) * (Size) nq * kk;
	GenieRequest *req = genie_service_begin_request(GENIE_REQUEST_SEARCH, payload, response);
	GenieResponse *resp;
	GenieServiceOutcome outcome;
	char	   *p = genie_service_request_payload(req);
	int64	   *offs;
	int32	   *columns[2];

	req->key = *key;
	req->index_oid = index_oid;
	req->device = device;
	req->k = kk;
	req->n_queries = nq;
	req->n_items = n_items;
	req->n_ranges = n_ranges;
	req->weighted = batch->item_weights != NULL;

	/* the CSR of the part, rebased to its first item and range */
	offs = (int64 *) p;
	for (int q = 0; q <= nq; q++)
		offs[q] = batch->query_offsets[q0 + q] - item0;
	p += sizeof(int64) * (nq + 1);
	offs = (int64 *) p;
	for (int64 i = 0; i <= n_items; i++)
		offs[i] = batch->item_offsets[item0 + i] - range0;
	p += sizeof(int64) * (n_items + 1);
	if (batch->item_weights)
	{
		memcpy(p, batch->item_weights + item0, sizeof(int32) * n_items);
		p += sizeof(int32) * n_items;
	}
	memcpy(p, batch->ranges_lo + range0, sizeof(int32) * n_ranges);
	p += sizeof(int32) * n_ranges;
	memcpy(p, batch->ranges_hi + range0, sizeof(int32) * n_ranges);

	outcome = genie_service_call_for_answer(&resp, overlap, err);
	if (outcome != GENIE_SERVICE_OK)
		return outcome;
	*engine = resp->engine;
	*device_fallback |= resp->device_fallback;
	/* answers: query_offsets, objects, scores */
	columns[0] = out->objects;
	columns[1] = out->scores;
	take_rows(resp, q0, nq, (Size) nq * kk, out->query_offsets, columns, 2, capacity);
	out->objects = columns[0];
	out->scores = columns[1];
	return GENIE_SERVICE_OK;
}

GenieServiceOutcome
genie_service_search(const GenieServiceKey *key, Oid index_oid, int device,
					 const genie_query_batch *batch, int32 k, genie_results *results,
					 genie_engine_kind *engine, bool *device_fallback,
					 GenieServiceOverlap *overlap, genie_error *err)
{
	int32		kk = Min(k, Max(key->n_main_objects, 1));
	int			per_part = (int) Max((int64) 1, (int64) (GENIE_SERVICE_MAX_ANSWER_BYTES / (2 * sizeof(int32) * kk)));
	int64		capacity = Max(Min((int64) batch->n_queries * kk, (int64) 1 << 20), 1);

	*device_fallback = false;
	*engine = GENIE_ENGINE_CPU;
	results->n_queries = batch->n_queries;
	results->query_offsets = palloc_extended(sizeof(int64) * (batch->n_queries + 1), MCXT_ALLOC_HUGE);
	results->query_offsets[0] = 0;
	results->objects = palloc_extended(sizeof(int32) * capacity, MCXT_ALLOC_HUGE);
	results->scores = palloc_extended(sizeof(int32) * capacity, MCXT_ALLOC_HUGE);
	for (int q0 = 0; q0 < batch->n_queries; q0 += per_part)
	{
		int			q1 = Min(batch->n_queries, q0 + per_part);
		GenieServiceOutcome outcome = search_part(key, index_oid, device, batch, q0, q1, k,
												  results, &capacity, engine,
												  device_fallback, overlap, err);

		if (outcome != GENIE_SERVICE_OK)
			return outcome;
	}
	return GENIE_SERVICE_OK;
}

/* ---- verify ---- */

GenieServiceOutcome
genie_service_verify(int device, const genie_similar_batch *batch,
					 genie_similar_verdict *verdict, bool *device_fallback, genie_error *err)
{
	int			nq = batch->n_queries;
	int64		nc = batch->candidate_offsets[nq];
	int64		query_bytes = batch->query_text_offsets[nq];
	int64		candidate_bytes = batch->candidate_text_offsets[nc];
	Size		payload = sizeof(int64) * (nq + 1) * 2 + sizeof(int64) * (nc + 1) +
		sizeof(int32) * nc + sizeof(int32) * nq + query_bytes + candidate_bytes;
	Size		response = GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int32) * nc + nc +
		nq + sizeof(int32) * nq;
	GenieRequest *req = genie_service_begin_request(GENIE_REQUEST_VERIFY, payload, response);
	GenieResponse *resp;
	GenieServiceOutcome outcome;
	char	   *p = genie_service_request_payload(req);

	req->device = device;
	req->n_queries = nq;
	req->verify_n = batch->n;
	req->verify_k = batch->k;
	req->verify_candidates = nc;
	req->verify_query_bytes = query_bytes;
	req->verify_candidate_bytes = candidate_bytes;

#define PUT(src, bytes) do { memcpy(p, (src), (bytes)); p += (bytes); } while (0)
	PUT(batch->query_text_offsets, sizeof(int64) * (nq + 1));
	PUT(batch->candidate_offsets, sizeof(int64) * (nq + 1));
	PUT(batch->candidate_text_offsets, sizeof(int64) * (nc + 1));
	PUT(batch->candidate_counts, sizeof(int32) * nc);
	PUT(batch->unseen_count_bound, sizeof(int32) * nq);
	PUT(batch->query_text, query_bytes);
	PUT(batch->candidate_text, candidate_bytes);
#undef PUT

	*device_fallback = false;
	outcome = genie_service_call_for_answer(&resp, NULL, err);
	if (outcome != GENIE_SERVICE_OK)
		return outcome;
	*device_fallback = resp->device_fallback;
	p = (char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse));
	memcpy(verdict->distances, p, sizeof(int32) * nc);
	p += sizeof(int32) * nc;
	memcpy(verdict->exact, p, nc);
	p += nc;
	memcpy(verdict->certified, p, nq);
	p += nq;
	memcpy(verdict->open_bound, p, sizeof(int32) * nq);
	verdict->distances_computed = resp->distances_computed;
	verdict->device = resp->engine;
	return GENIE_SERVICE_OK;
}
