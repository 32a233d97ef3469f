/*-------------------------------------------------------------------------
 *
 * genie_service.h
 *	  The genie service: with shared_preload_libraries = 'genie', one
 *	  background worker owns every GPU and the CPU engine's threads for the
 *	  whole cluster, holds one copy of each index version's main postings,
 *	  and answers the searches of all sessions, batching the ones that
 *	  arrive together into one engine call per index.
 *
 * These files share this header:
 *	- genie_service.c: the shared control area, the worker's registration,
 *	  genie_service_stats();
 *	- genie_service_client.c: a backend's side (genie_search.c calls it);
 *	- genie_service_worker.c: the worker's loop;
 *	- genie_service_values.c: the worker's stored values, strings or
 *	  vectors, and the grouping of the scans of them;
 *	- genie_service_strings.c: the worker's stored strings (edit-distance
 *	  scans);
 *	- genie_service_vectors.c: the worker's stored vectors (exact nearest
 *	  neighbour scans).
 *
 * The protocol.  Each backend has one slot in the control area and one DSM
 * segment of its own (made at its first request, grown when too small,
 * mapped for the session).  A request is written into the segment, the
 * slot moves FREE -> SUBMITTED and the worker's latch is set.  The worker
 * moves SUBMITTED -> TAKEN, copies the request out while the slot is
 * marked busy, computes, and writes the response into the segment (busy
 * again) before moving the slot to DONE and setting the backend's latch.
 * A backend that is cancelled while it waits withdraws: SUBMITTED goes
 * back to FREE, TAKEN becomes WITHDRAWN, which the worker turns into FREE
 * without writing; the backend never returns while the worker is copying
 * from or to its segment.  When the worker exits, every SUBMITTED or TAKEN
 * slot becomes FAILED, so that no backend waits for an answer that will
 * not come.
 *
 * What the worker holds is keyed by GenieServiceKey: the index's
 * relfilenode and the version of its main postings (they change only when
 * a build or a merge writes a new List Array chain: a build makes a new
 * relfilenode, a merge bumps the metapage's main_version).  Inserts and
 * deletes touch only the pending list and the directory, which backends
 * keep: visibility, dead objects, the pending list and widening k stay in
 * the backend, so answers are what the in-process path gives.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SERVICE_H
#define GENIE_SERVICE_H

#include "postgres.h"

#include "storage/block.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/relfilenode.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "genie/genie.h"

/* what identifies one version of an index's main postings */
typedef struct GenieServiceKey
{
	Oid			database;
	RelFileNode node;
	int32		backend;		/* temporary indexes: the owning backend's id */
	BlockNumber postings_head;
	uint32		main_version;	/* bumped by every merge: see GenieMetaPageData */
	int32		n_main_objects;
	int32		n_keywords;
	int64		n_postings;
} GenieServiceKey;

typedef enum GenieSlotState
{
	GENIE_SLOT_FREE = 0,
	GENIE_SLOT_SUBMITTED,
	GENIE_SLOT_TAKEN,
	GENIE_SLOT_WITHDRAWN,
	GENIE_SLOT_DONE,
	GENIE_SLOT_FAILED
} GenieSlotState;

typedef struct GenieServiceSlot
{
	GenieSlotState state;
	uint64		seq;			/* bumped at every submission and withdrawal */
	bool		busy;			/* the worker is copying from or to the segment */
	int			pid;			/* the backend's, 0 when unused */
	Latch	   *latch;			/* the backend's */
	dsm_handle	segment;		/* the backend's request segment */
	TimestampTz submitted_at;
} GenieServiceSlot;

/* what the service holds of an index version (genie_service_stats().content) */
typedef enum GenieServedContent
{
	GENIE_SERVED_POSTINGS,		/* the main postings, for searches by match count */
	GENIE_SERVED_STRINGS,		/* the main objects' stored strings */
	GENIE_SERVED_VECTORS		/* the main objects' stored vectors */
} GenieServedContent;

/* One resident index version on one engine, as genie_service_stats() shows it. */
typedef struct GenieServiceIndexStats
{
	GenieServiceKey key;
	Oid			index_oid;
	genie_engine_kind engine;	/* CPU or GPU */
	GenieServedContent content;
	bool		resident;		/* the engine holds the index now */
	int64		host_bytes;
	int64		device_bytes;
	int64		loads;
	int64		batches;
	int64		requests;
	int64		queries;
	int64		max_batch_queries;
	double		queue_wait_ms;	/* summed over requests */
	double		engine_ms;		/* summed over batches */
} GenieServiceIndexStats;

#define GENIE_SERVICE_MAX_STATS 128

typedef struct GenieServiceShared
{
	slock_t		mutex;			/* slot states, ready, generation, pid */
	bool		ready;			/* the worker is taking requests */
	uint32		generation;		/* bumped at every start and exit of the worker */
	int			pid;
	Latch	   *latch;			/* the worker's */
	bool		gpu_usable;		/* what the worker found at its start */
	char		gpu_reason[128];	/* why not, when not */

	LWLock	   *stats_lock;		/* the stats table below */
	int			n_stats;
	GenieServiceIndexStats stats[GENIE_SERVICE_MAX_STATS];
	int64		device_bytes_used;	/* the device's, measured by the worker */
	int64		device_bytes_total;

	int			n_slots;		/* MaxBackends: indexed by pgprocno */
	GenieServiceSlot slots[FLEXIBLE_ARRAY_MEMBER];
} GenieServiceShared;

/* ---- requests (in the backend's segment) ---- */

typedef enum GenieRequestKind
{
	GENIE_REQUEST_SEARCH,
	GENIE_REQUEST_LOAD,
	GENIE_REQUEST_VERIFY,
	GENIE_REQUEST_SCAN_STRINGS,
	GENIE_REQUEST_SCAN_VECTORS
} GenieRequestKind;

/* the outcome of a request, beyond the engines' genie_status */
typedef enum GenieServiceOutcome
{
	GENIE_SERVICE_OK,
	GENIE_SERVICE_NOT_RESIDENT, /* the worker does not hold this version: load it */
	GENIE_SERVICE_ENGINE_ERROR, /* status and message say what */
	GENIE_SERVICE_UNAVAILABLE	/* no worker, or it went away: search in-process */
} GenieServiceOutcome;

typedef struct GenieRequest
{
	GenieRequestKind kind;
	GenieServiceKey key;
	Oid			index_oid;
	int32		device;			/* the backend's genie.device */
	Size		response_offset;	/* where the worker writes GenieResponse */
	Size		response_capacity;

	/* SEARCH: a query batch in CSR form follows the header */
	int32		k;
	int32		n_queries;
	int64		n_items;
	int64		n_ranges;
	bool		weighted;

	/*
	 * LOAD: bytes [load_offset, load_offset + load_bytes) of the stream
	 * keywords | keyword_offsets | postings of the key's main postings,
	 * split_length as stored in the metapage; with load_values, of the main
	 * objects' stored values, load_total bytes in all: with vector_dim = 0
	 * the strings, byte_offsets (n_main_objects + 1 int64) | UTF-8 text;
	 * with vector_dim > 0 the vectors, n_main_objects * vector_dim float4
	 */
	int32		split_length;
	int64		load_offset;
	int64		load_bytes;
	bool		load_values;
	int64		load_total;
	int32		vector_dim;

	/*
	 * SCAN_STRINGS: k and n_queries above; query_offsets (n_queries + 1
	 * int64) | the ids of the main objects to skip (scan_excluded int32) |
	 * the queries' UTF-8 text (scan_text_bytes) follow the header
	 */
	int64		scan_text_bytes;
	int32		scan_excluded;

	/*
	 * SCAN_VECTORS: k, n_queries and vector_dim above; the queries
	 * (n_queries * vector_dim float4) | the ids of the main objects to skip
	 * (scan_excluded int32) follow the header
	 */

	/* VERIFY: a genie_similar_batch follows (see genie_service_client.c) */
	int32		verify_n;
	int32		verify_k;
	int64		verify_candidates;
	int64		verify_query_bytes;
	int64		verify_candidate_bytes;
} GenieRequest;

typedef struct GenieResponse
{
	GenieServiceOutcome outcome;
	genie_status status;
	char		message[256];
	genie_engine_kind engine;	/* the engine that answered */
	bool		device_fallback;	/* auto: the GPU ran out of memory, the CPU answered */
	bool		resident;		/* LOAD: the worker holds the version now */
	/* SEARCH: query_offsets[n_queries + 1] (int64), objects, scores follow */
	int64		n_hits;
	/* VERIFY: distances, exact, certified, open_bound follow */
	int64		distances_computed;
	/*
	 * SCAN_STRINGS: query_offsets[n_queries + 1] (int64), then n_queries * k
	 * slots each of objects, distances and lengths (int32) follow;
	 * SCAN_VECTORS: query_offsets[n_queries + 1] (int64), then n_queries * k
	 * distances (float8) and n_queries * k objects (int32)
	 */
} GenieResponse;

#define GENIE_SERVICE_ALIGN(x) TYPEALIGN(16, (x))

/* ---- genie_service.c ---- */

extern double genie_batch_window_ms;
extern GenieServiceShared *genie_service_shared;

/* From _PG_init: GUCs, and when preloaded the shared area and the worker. */
extern void genie_service_register(void);

/* Whether genie was preloaded, so that the service is the way to search. */
extern bool genie_service_configured(void);

/* Attaches this backend to the control area (idempotent); false when not preloaded. */
extern bool genie_service_attach(void);

extern bool genie_service_keys_equal(const GenieServiceKey *a, const GenieServiceKey *b);

/* ---- genie_service_client.c ---- */

/* Whether the worker is running and taking requests. */
extern bool genie_service_ready(void);

/* Whether the worker holds this version of the main postings (not only its stored strings). */
extern bool genie_service_resident(const GenieServiceKey *key);

/*
 * Hands the worker a version of the main postings (as genie_read_content
 * reads them), in pieces that fit the backend's segment.  When another
 * backend is already handing over the same version, waits for it instead.
 */
extern GenieServiceOutcome genie_service_load(const GenieServiceKey *key, Oid index_oid,
											  int32 split_length, const int32 *keywords,
											  const int64 *keyword_offsets,
											  const int32 *postings, genie_error *err);

/*
 * The top k of each query of the batch over the key's main postings, on
 * the engine the device setting (genie.device) asks for.  The arrays of
 * *results are palloc'd (not for genie_results_free).  *engine: the engine
 * that answered; *device_fallback: auto ran out of device memory and the
 * CPU answered.
 */
extern GenieServiceOutcome genie_service_search(const GenieServiceKey *key, Oid index_oid,
												int device, const genie_query_batch *batch,
												int32 k, genie_results *results,
												genie_engine_kind *engine,
												bool *device_fallback, genie_error *err);

/*
 * Hands the worker the main objects' stored strings of a version
 * (key->n_main_objects of them, UTF-8 in CSR form).  NOT_RESIDENT when
 * another backend is handing over the same version: scan again later.
 */
extern GenieServiceOutcome genie_service_load_strings(const GenieServiceKey *key, Oid index_oid,
													  const char *text, const int64 *offsets,
													  genie_error *err);

/* What genie_service_scan_strings answers, palloc'd. */
typedef struct GenieServiceStringRows
{
	int64	   *offsets;		/* n_queries + 1 */
	int32	   *objects;		/* main object ids */
	int32	   *distances;
	int32	   *lengths;		/* in code points: the second sort key */
} GenieServiceStringRows;

/*
 * The k nearest main strings of each query by edit distance, in (distance,
 * length, id) order, over the strings of the key's version without the
 * main objects in excluded (genie_strings_scan in the worker, on the engine
 * genie.device asks for).  NOT_RESIDENT: the worker does not hold them.
 */
extern GenieServiceOutcome genie_service_scan_strings(const GenieServiceKey *key, Oid index_oid,
													  int device, const char *query_text,
													  const int64 *query_offsets, int nq, int32 k,
													  const int32 *excluded, int32 n_excluded,
													  GenieServiceStringRows *rows,
													  genie_engine_kind *engine,
													  bool *device_fallback, genie_error *err);

/*
 * Hands the worker the main objects' stored vectors of a version
 * (key->n_main_objects rows of dim float4).  NOT_RESIDENT when another
 * backend is handing over the same version: scan again later.
 */
extern GenieServiceOutcome genie_service_load_vectors(const GenieServiceKey *key, Oid index_oid,
													  int32 dim, const float *vectors,
													  genie_error *err);

/* What genie_service_scan_vectors answers, palloc'd. */
typedef struct GenieServiceVectorRows
{
	int64	   *offsets;		/* n_queries + 1 */
	int32	   *objects;		/* main object ids */
	double	   *distances;
} GenieServiceVectorRows;

/*
 * The k nearest main vectors of each query (nq rows of dim float4), exact,
 * in (distance, id) order, over the vectors of the key's version without
 * the main objects in excluded (genie_vectors_scan in the worker, on the
 * engine genie.device asks for).  NOT_RESIDENT: the worker does not hold
 * them.
 */
extern GenieServiceOutcome genie_service_scan_vectors(const GenieServiceKey *key, Oid index_oid,
													  int device, const float *queries, int nq,
													  int32 dim, int32 k, const int32 *excluded,
													  int32 n_excluded, GenieServiceVectorRows *rows,
													  genie_engine_kind *engine,
													  bool *device_fallback, genie_error *err);

/* genie_similar_verify in the worker; verdict as the caller allocated it. */
extern GenieServiceOutcome genie_service_verify(int device, const genie_similar_batch *batch,
												genie_similar_verdict *verdict,
												bool *device_fallback, genie_error *err);

#endif							/* GENIE_SERVICE_H */
