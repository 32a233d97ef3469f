/*-------------------------------------------------------------------------
 *
 * genie_service_scan.c
 *	  A backend's requests about the main objects' stored values in the
 *	  genie service (genie_service_scan.h): k-nearest scans, whole or in
 *	  pieces, and range searches.
 *
 * A scan in pieces keeps one piece's request out while the backend reads
 * the next piece (a stored array expanded, a query's rows read), so that
 * the service's search hides behind the reading: genie_knn of 10,000
 * Fashion-MNIST queries from a stored array read them for 50-70 ms and
 * then waited as long again for the service (bench/latency.md).  The
 * session has one request segment: a piece's answer is taken out of it
 * before the next request is written, by whoever writes one
 * (genie_service_submit's take).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "service/genie_service_scan.h"

/* a search whose answers would need more is split into query groups */
#define MAX_RESPONSE_BYTES	GENIE_SERVICE_MAX_ANSWER_BYTES

/*
 * A request about the stored values (SCAN_VALUES, WITHIN) of queries [q0,
 * q0 + nq), laid out as genie_service.h says: the queries, then from an
 * 8-byte boundary the ids of the main objects to skip.
 */
static void take_piece(void *arg);

/*
 * (beside: the scan in pieces whose piece may be out, the request then
 * written beside it where it can be, genie_service_begin_beside; or NULL)
 */
static GenieRequest *
begin_values_request(GenieRequestKind kind, const GenieServiceKey *key, Oid index_oid, int device,
					 const GenieValueBatch *queries, int q0, int nq, const int32 *excluded,
					 int32 n_excluded, Size response, GenieServicePieces *beside)
{
	Size		qbytes = genie_value_batch_bytes(queries, q0, nq);
	Size		payload = TYPEALIGN(8, qbytes) + sizeof(int32) * n_excluded;
	GenieRequest *req = beside != NULL ? genie_service_begin_beside(kind, payload, response, take_piece, beside)
		: genie_service_begin_request(kind, payload, response);
	char	   *p = genie_service_request_payload(req);

	req->key = *key;
	req->index_oid = index_oid;
	req->device = device;
	req->n_queries = nq;
	req->values_kind = queries->kind;
	req->value_dim = queries->dim;
	req->scan_query_bytes = qbytes;
	req->scan_excluded = n_excluded;
	genie_value_batch_write(queries, q0, nq, p);
	memcpy(p + TYPEALIGN(8, qbytes), excluded, sizeof(int32) * n_excluded);
	return req;
}

/*
 * A scan's request of queries [q0, q0 + nq) in the segment, k nearest each
 * (not yet submitted; beside as for begin_values_request).
 */
static void
begin_scan_request(const GenieServiceKey *key, Oid index_oid, int device, const GenieValueBatch *queries,
				   int q0, int nq, int32 k, int list_use, bool list_counted, const int32 *excluded,
				   int32 n_excluded, GenieServicePieces *beside)
{
	GenieRequest *req = begin_values_request(GENIE_REQUEST_SCAN_VALUES, key, index_oid, device, queries,
											 q0, nq, excluded, n_excluded, GENIE_SCAN_ANSWER_BYTES(nq, k),
											 beside);

	req->k = k;
	req->scan_list_use = list_use;
	req->scan_alone = list_counted;
}

/*
 * Appends a scan's answer for queries [q0, q0 + nq) to *rows (its columns'
 * capacity in *capacity, its offsets' room the caller's).
 */
static void
take_scan_answer(const GenieResponse *resp, int q0, int nq, int32 k, int64 *list_counts,
				 GenieValueRows *rows, int64 *capacity, genie_engine_kind *engine, bool *device_fallback)
{
	Size		slots = (Size) nq * k;
	const int64 *offs;
	const char *columns;
	int64		n_before = rows->offsets[q0];
	int64		n;

	if (list_counts != NULL)
	{
		list_counts[0] += resp->list_queries;
		list_counts[1] += resp->list_distances;
	}
	*engine = resp->engine;
	*device_fallback |= resp->device_fallback;
	/* answers: query_offsets, then slots distances, objects and lengths */
	offs = (const int64 *) ((const char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
	columns = (const char *) (offs + nq + 1);
	n = offs[nq];
	if (n_before + n > *capacity)
	{
		/* (the capacity is the new one once every column has it) */
		int64		cap = Max(*capacity * 2, n_before + n);

		rows->distances = repalloc_huge(rows->distances, sizeof(float8) * cap);
		rows->objects = repalloc_huge(rows->objects, sizeof(int32) * cap);
		rows->lengths = repalloc_huge(rows->lengths, sizeof(int32) * cap);
		*capacity = cap;
	}
	for (int q = 1; q <= nq; q++)
		rows->offsets[q0 + q] = n_before + offs[q];
	memcpy(rows->distances + n_before, columns, sizeof(float8) * n);
	columns += sizeof(float8) * slots;
	memcpy(rows->objects + n_before, columns, sizeof(int32) * n);
	columns += sizeof(int32) * slots;
	memcpy(rows->lengths + n_before, columns, sizeof(int32) * n);
}

/* Scans queries [q0, q1); appends their rows to *rows (capacity in *capacity). */
static GenieServiceOutcome
scan_values_part(const GenieServiceKey *key, Oid index_oid, int device,
				 const GenieValueBatch *queries, int q0, int q1, int32 k, int list_use,
				 int64 *list_counts, const int32 *excluded,
				 int32 n_excluded, GenieValueRows *rows, int64 *capacity,
				 genie_engine_kind *engine, bool *device_fallback, genie_error *err)
{
	GenieResponse *resp;
	GenieServiceOutcome outcome;

	begin_scan_request(key, index_oid, device, queries, q0, q1 - q0, k, list_use, list_counts != NULL,
					   excluded, n_excluded, NULL);
	outcome = genie_service_call_for_answer(&resp, NULL, err);
	if (outcome == GENIE_SERVICE_OK)
		take_scan_answer(resp, q0, q1 - q0, k, list_counts, rows, capacity, engine, device_fallback);
	return outcome;
}

/* The columns of rows for capacity rows, and the first offset. */
static void
alloc_rows(GenieValueRows *rows, int offsets_room, int64 capacity)
{
	rows->offsets = palloc_extended(sizeof(int64) * (offsets_room + 1), MCXT_ALLOC_HUGE);
	rows->offsets[0] = 0;
	rows->distances = palloc_extended(sizeof(float8) * capacity, MCXT_ALLOC_HUGE);
	rows->objects = palloc_extended(sizeof(int32) * capacity, MCXT_ALLOC_HUGE);
	rows->lengths = palloc_extended(sizeof(int32) * capacity, MCXT_ALLOC_HUGE);
}

GenieServiceOutcome
genie_service_scan_values(const GenieServiceKey *key, Oid index_oid, int device,
						  const GenieValueBatch *queries, int32 k, int list_use,
						  int64 *list_counts, const int32 *excluded, int32 n_excluded, GenieValueRows *rows,
						  genie_engine_kind *engine, bool *device_fallback, genie_error *err)
{
	int			nq = queries->n;
	int32		kk = Min(k, Max(key->n_main_objects, 1));
	/* parts whose queries and answers both stay within MAX_RESPONSE_BYTES */
	Size		per_query = Max(genie_value_batch_bytes(queries, 0, nq) / Max(nq, 1) + sizeof(int64),
								GENIE_SCAN_ANSWER_BYTES(1, kk));
	int			per_part = (int) Max((Size) 1, MAX_RESPONSE_BYTES / per_query);
	int64		capacity = Max(Min((int64) nq * kk, (int64) 1 << 20), 1);

	*device_fallback = false;
	*engine = GENIE_ENGINE_CPU;
	rows->n_queries = nq;
	alloc_rows(rows, nq, capacity);
	for (int q0 = 0; q0 < nq; q0 += per_part)
	{
		int			q1 = Min(nq, q0 + per_part);
		GenieServiceOutcome outcome = scan_values_part(key, index_oid, device, queries, q0, q1,
													   kk, list_use, list_counts, excluded, n_excluded, rows,
													   &capacity, engine, device_fallback, err);

		if (outcome != GENIE_SERVICE_OK)
			return outcome;
	}
	return GENIE_SERVICE_OK;
}

/* ---- range searches of stored values ---- */

/*
 * The largest range answer the service hands back: a larger one (5.6M rows
 * and more) is searched in-process instead, so that no backend's request
 * segment grows past what the k-nearest scans take.
 */
#define MAX_WITHIN_ANSWER_BYTES MAX_RESPONSE_BYTES
/* A first ask's room: rows a query, and at most 16 MB of rows in all. */
#define WITHIN_FIRST_ROWS 256
#define WITHIN_FIRST_MAX_ROWS (((Size) 16 << 20) / (sizeof(float8) + sizeof(int32)))

/*
 * Range-searches queries [q0, q1); appends their rows to *rows (capacity in
 * *capacity).  A range answer's size is unknown until the worker has it:
 * the first ask leaves room for WITHIN_FIRST_ROWS rows a query (at least
 * 4,096 rows, at most 16 MB), and one that needs more asks again with room
 * for all, naming the first ask's answer_token: the worker kept that
 * answer and hands it over without searching again (if it no longer has
 * it, it searches again: its answer for a version and its skipped objects
 * does not change); one past MAX_WITHIN_ANSWER_BYTES sets *too_large and
 * returns at once.
 */
static GenieServiceOutcome
within_part(const GenieServiceKey *key, Oid index_oid, int device, const GenieValueBatch *queries,
			int q0, int q1, double radius, const int32 *excluded, int32 n_excluded,
			GenieValueRows *rows, int64 *capacity, GenieWithinCounts *counts, bool *too_large,
			genie_engine_kind *engine, bool *device_fallback, genie_error *err)
{
	int			nq = q1 - q0;
	Size		room = GENIE_WITHIN_ANSWER_BYTES(nq, Max((Size) 4096, Min((Size) nq * WITHIN_FIRST_ROWS,
																		  WITHIN_FIRST_MAX_ROWS)));
	int64		n_before = rows->offsets[q0];
	uint64		kept = 0;

	for (int attempt = 0; attempt < 2; attempt++)
	{
		GenieRequest *req = begin_values_request(GENIE_REQUEST_WITHIN, key, index_oid, device, queries, q0, nq,
												 excluded, n_excluded, room, NULL);
		GenieResponse *resp;
		GenieServiceOutcome outcome;
		const int64 *offs;
		const float8 *distances;
		int64		n;

		req->within_radius = radius;
		req->within_answer = kept;

		outcome = genie_service_call_for_answer(&resp, NULL, err);
		if (outcome != GENIE_SERVICE_OK)
			return outcome;
		n = resp->n_hits;
		if (n < 0 || resp->answer_bytes < 0 || (Size) resp->answer_bytes != GENIE_WITHIN_ANSWER_BYTES(nq, n))
			elog(ERROR, "a malformed range answer from the genie service");
		if ((Size) resp->answer_bytes > room)
		{
			if ((Size) resp->answer_bytes > MAX_WITHIN_ANSWER_BYTES)
			{
				*too_large = true;
				return GENIE_SERVICE_OK;
			}
			room = (Size) resp->answer_bytes;
			kept = resp->answer_token;
			continue;
		}
		*engine = resp->engine;
		*device_fallback |= resp->device_fallback;
		counts->distances_computed += resp->distances_computed;
		counts->superclusters_discarded += resp->superclusters_discarded;
		counts->clusters_discarded += resp->clusters_discarded;
		offs = (const int64 *) ((const char *) resp + GENIE_SERVICE_ALIGN(sizeof(GenieResponse)));
		distances = (const float8 *) (offs + nq + 1);
		if (n_before + n > *capacity)
		{
			*capacity = Max(*capacity * 2, n_before + n);
			rows->distances = repalloc_huge(rows->distances, sizeof(float8) * *capacity);
			rows->objects = repalloc_huge(rows->objects, sizeof(int32) * *capacity);
		}
		for (int q = 1; q <= nq; q++)
		{
			if (offs[q] < offs[q - 1] || offs[q] > n)
				elog(ERROR, "a malformed range answer from the genie service");
			rows->offsets[q0 + q] = n_before + offs[q];
		}
		if (offs[0] != 0 || offs[nq] != n)
			elog(ERROR, "a malformed range answer from the genie service");
		memcpy(rows->distances + n_before, distances, sizeof(float8) * n);
		memcpy(rows->objects + n_before, distances + n, sizeof(int32) * n);
		for (int64 i = n_before; i < n_before + n; i++)
			if (rows->objects[i] < 0 || rows->objects[i] >= key->n_main_objects)
				elog(ERROR, "a malformed range answer from the genie service");
		return GENIE_SERVICE_OK;
	}
	elog(ERROR, "the genie service's range answer grew between two asks");
	return GENIE_SERVICE_UNAVAILABLE;	/* not reached */
}

GenieServiceOutcome
genie_service_within(const GenieServiceKey *key, Oid index_oid, int device, const GenieValueBatch *queries,
					 double radius, const int32 *excluded, int32 n_excluded, GenieValueRows *rows,
					 GenieWithinCounts *counts, bool *too_large, genie_engine_kind *engine,
					 bool *device_fallback, genie_error *err)
{
	int			nq = queries->n;
	/* parts whose queries stay within MAX_RESPONSE_BYTES */
	Size		per_query = genie_value_batch_bytes(queries, 0, nq) / Max(nq, 1) + sizeof(int64);
	int			per_part = (int) Max((Size) 1, MAX_RESPONSE_BYTES / per_query);
	int64		capacity = Max(Min((int64) nq * WITHIN_FIRST_ROWS, (int64) 1 << 20), 1);

	*device_fallback = false;
	*engine = GENIE_ENGINE_CPU;
	memset(counts, 0, sizeof(*counts));
	*too_large = false;
	rows->n_queries = nq;
	rows->offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	rows->offsets[0] = 0;
	rows->distances = palloc_extended(sizeof(float8) * capacity, MCXT_ALLOC_HUGE);
	rows->objects = palloc_extended(sizeof(int32) * capacity, MCXT_ALLOC_HUGE);
	rows->lengths = NULL;
	for (int q0 = 0; q0 < nq; q0 += per_part)
	{
		int			q1 = Min(nq, q0 + per_part);
		GenieServiceOutcome outcome = within_part(key, index_oid, device, queries, q0, q1, radius,
												  excluded, n_excluded, rows, &capacity,
												  counts, too_large, engine,
												  device_fallback, err);

		if (outcome != GENIE_SERVICE_OK || *too_large)
			return outcome;
	}
	return GENIE_SERVICE_OK;
}

/* ---- a scan in pieces ---- */

void
genie_service_pieces_begin(GenieServicePieces *pieces, const GenieServiceKey *key, Oid index_oid,
						   int device, int32 k, int list_use, bool list_counted, const int32 *excluded,
						   int32 n_excluded)
{
	memset(pieces, 0, sizeof(*pieces));
	pieces->key = *key;
	pieces->index_oid = index_oid;
	pieces->device = device;
	pieces->k = Min(k, Max(key->n_main_objects, 1));
	pieces->list_use = list_use;
	pieces->list_counted = list_counted;
	pieces->excluded = excluded;
	pieces->n_excluded = n_excluded;
	pieces->cxt = CurrentMemoryContext;
	pieces->engine = GENIE_ENGINE_CPU;
	pieces->offsets_room = 1024;
	/* (as genie_service_scan_values starts: the columns grow with the answers) */
	pieces->capacity = Min((int64) pieces->offsets_room * pieces->k, (int64) 1 << 20);
	alloc_rows(&pieces->rows, pieces->offsets_room, pieces->capacity);
}

/*
 * Waits for the piece out and appends its rows (genie_service_submit's
 * take: also called when another request is begun while it is out).
 */
static void
take_piece(void *arg)
{
	GenieServicePieces *pieces = arg;
	int			n = pieces->n_out;
	GenieResponse *resp;
	genie_error err;
	MemoryContext old;

	Assert(n > 0);
	/*
	 * Failed until the rows are in: an error in here (the wait withdraws
	 * the request itself) that a caller catches, in a search the query's
	 * own SQL sent, leaves no piece to be appended after it.
	 */
	pieces->n_out = 0;
	pieces->failed = true;
	if (genie_service_await(&resp, &err) != GENIE_SERVICE_OK)
		return;					/* (the usual search reports an engine's error, or handles the rest) */
	old = MemoryContextSwitchTo(pieces->cxt);
	if (pieces->n_answered + n > pieces->offsets_room)
	{
		int			room = Max(pieces->offsets_room * 2, pieces->n_answered + n);

		pieces->rows.offsets = repalloc_huge(pieces->rows.offsets, sizeof(int64) * (room + 1));
		pieces->offsets_room = room;
	}
	take_scan_answer(resp, pieces->n_answered, n, pieces->k,
					 pieces->list_counted ? pieces->list_counts : NULL, &pieces->rows,
					 &pieces->capacity, &pieces->engine, &pieces->device_fallback);
	MemoryContextSwitchTo(old);
	pieces->n_answered += n;
	pieces->failed = false;
}

bool
genie_service_pieces_add(GenieServicePieces *pieces, const GenieValueBatch *piece)
{
	if (pieces->failed || piece->n <= 0)
	{
		if (pieces->n_out > 0)
			take_piece(pieces);
		return !pieces->failed;
	}
	/* an answer past what the service hands back: the usual search splits the batch */
	if (genie_value_batch_bytes(piece, 0, piece->n) + GENIE_SCAN_ANSWER_BYTES(piece->n, pieces->k) >
		MAX_RESPONSE_BYTES)
	{
		if (pieces->n_out > 0)
			take_piece(pieces);
		pieces->failed = true;
		return false;
	}
	/*
	 * Written while the piece before is searched, where the segment allows
	 * (else that piece's answer is taken first, by take_piece): the service
	 * bounds a stored array's statement, and its turn on a piece waited for
	 * this copy of 3 MB after every answer.
	 */
	begin_scan_request(&pieces->key, pieces->index_oid, pieces->device, piece, 0, piece->n, pieces->k,
					   pieces->list_use, pieces->list_counted, pieces->excluded, pieces->n_excluded, pieces);
	if (pieces->n_out > 0)
		take_piece(pieces);
	if (pieces->failed)
		return false;
	if (!genie_service_submit(take_piece, pieces))
	{
		pieces->failed = true;
		return false;
	}
	pieces->n_out = piece->n;
	return true;
}

bool
genie_service_pieces_finish(GenieServicePieces *pieces)
{
	if (pieces->n_out > 0)
		take_piece(pieces);
	pieces->rows.n_queries = pieces->n_answered;
	return !pieces->failed;
}

void
genie_service_pieces_end(GenieServicePieces *pieces)
{
	if (pieces->n_out > 0)
		genie_service_withdraw();
	pieces->n_out = 0;
	/* (rows taken by the caller have no offsets) */
	if (pieces->rows.offsets != NULL)
	{
		pfree(pieces->rows.offsets);
		pfree(pieces->rows.distances);
		pfree(pieces->rows.objects);
		pfree(pieces->rows.lengths);
		memset(&pieces->rows, 0, sizeof(pieces->rows));
	}
}
