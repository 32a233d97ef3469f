/*-------------------------------------------------------------------------
 *
 * genie_service.h
 *	  The genie service: with shared_preload_libraries = 'genie', one
 *	  background worker owns every GPU and the CPU engine's threads for the
 *	  whole cluster, holds one copy of each index version's main postings,
 *	  and answers the searches of all sessions, batching the ones that
 *	  arrive together into one engine call per index.
 *
 * This header is the protocol between the two sides, and the shared
 * control area (genie_service.c: its registration, genie_service_status()
 * and genie_service_stats()).  service/genie_service_client.h is the
 * backends' side; worker/ is the service process itself
 * (worker/genie_worker_internal.h lists its files).

 * The protocol.  Each backend has one slot in the control area and one DSM
 * segment of its own (made at its first request, grown when too small,
 * mapped for the session).  A request is written into the segment, the
 * slot moves FREE -> SUBMITTED and the worker's latch is set.  The worker
 * moves SUBMITTED -> TAKEN, copies the request out while the slot is
 * marked busy, computes, and writes the response into the segment (busy
 * again) before moving the slot to DONE and waking the backend
 * (service/genie_slot_wake.h: a futex in the slot, not the latch).
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

#include "port/atomics.h"
#include "storage/block.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "genie/genie.h"

#include "genie_utils.h"

#include "service/genie_values.h"

/* what identifies one version of an index's main postings */
typedef struct GenieServiceKey
{
	Oid			database;
	GenieRelFile node;
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
	Latch	   *latch;			/* the backend's (elsewhere than Linux, its wake-up) */
	/* the backend waits on these: service/genie_slot_wake.h */
	pg_atomic_uint32 wake_word;	/* bumped by the service at each wake-up */
	pg_atomic_uint32 sleeping;	/* the backend may be asleep on wake_word */
	dsm_handle	segment;		/* the backend's request segment */
	TimestampTz submitted_at;
} GenieServiceSlot;

/* what the service holds of an index version (genie_service_stats().content) */
typedef enum GenieServedContent
{
	GENIE_SERVED_POSTINGS,		/* the main postings, for searches by match count */
	GENIE_SERVED_STRINGS,		/* the main objects' stored strings */
	GENIE_SERVED_VECTORS,		/* the main objects' stored vectors */
	GENIE_SERVED_CODES			/* the main objects' stored codes */
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
	dsm_handle	shared_segment; /* postings in shared memory (GenieSharedPostings), or invalid */
} GenieServiceIndexStats;

#define GENIE_SERVICE_MAX_STATS 128

typedef struct GenieServiceShared
{
	slock_t		mutex;			/* slot states, ready, generation, pid */
	bool		ready;			/* the worker is taking requests */
	uint32		generation;		/* bumped at every start and exit of the worker */
	int			pid;
	Latch	   *latch;			/* the worker's */
	/*
	 * Every runner of the worker is searching: it takes new requests when
	 * one of them is done and wakes it, so a request submitted meanwhile
	 * need not set its latch (a wake-up for nothing, under load one a
	 * request).  Set by the worker before it sleeps, under mutex.
	 */
	bool		skip_wake;
	bool		gpu_usable;		/* what the worker found at its start */
	/*
	 * Bumped when the worker has dropped versions whose postings it shared
	 * (GenieSharedPostings) and published its stats without them: backends
	 * then let go of their mappings of versions it no longer holds.
	 */
	pg_atomic_uint64 shared_dropped;
	char		gpu_reason[128];	/* why not, when not */

	LWLock	   *stats_lock;		/* the stats table below */
	int			n_stats;
	GenieServiceIndexStats stats[GENIE_SERVICE_MAX_STATS];
	int64		device_bytes_used;	/* the device's, measured by the worker */
	int64		device_bytes_total;

	int			n_slots;		/* MaxBackends: indexed by a backend's PGPROC number */
	GenieServiceSlot slots[FLEXIBLE_ARRAY_MEMBER];
} GenieServiceShared;

/* ---- requests (in the backend's segment) ---- */

typedef enum GenieRequestKind
{
	GENIE_REQUEST_SEARCH,
	GENIE_REQUEST_LOAD,
	GENIE_REQUEST_VERIFY,
	GENIE_REQUEST_SCAN_VALUES,
	GENIE_REQUEST_WITHIN,
	GENIE_REQUEST_SHARE
} GenieRequestKind;


/* the outcome of a request, beyond the engines' genie_status */
typedef enum GenieServiceOutcome
{
	GENIE_SERVICE_OK,
	GENIE_SERVICE_NOT_RESIDENT, /* the worker does not hold this version: load it */
	GENIE_SERVICE_ENGINE_ERROR, /* status and message say what */
	GENIE_SERVICE_UNAVAILABLE,	/* no worker, or it went away: search in-process */
	GENIE_SERVICE_CORRUPT		/* LOAD: what the index handed over is corrupt (message: what) */
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
	 * objects' stored values of values_kind, load_total bytes in all:
	 * strings as byte_offsets (n_main_objects + 1 int64) | UTF-8 text,
	 * vectors as n_main_objects * value_dim float4, codes as n_main_objects
	 * codes of value_dim bits in genie_code_words(value_dim) uint64 each,
	 * then (strings, vectors) load_list_bytes of the version's List of
	 * Clusters in its stored form (genie_cluster_list_store; 0: none)
	 */
	int32		split_length;
	int64		load_offset;
	int64		load_bytes;
	bool		load_values;
	int64		load_total;
	int64		load_list_bytes;
	GenieValuesKind values_kind;
	int32		value_dim;

	/*
	 * SCAN_VALUES: k, n_queries, values_kind and (vectors, codes) value_dim
	 * above; the queries (scan_query_bytes: strings as query_offsets
	 * (n_queries + 1 int64) | UTF-8 text, vectors and codes as in LOAD), then
	 * from the next 8-byte boundary the ids of the main objects to skip
	 * (scan_excluded int32), follow the header
	 */
	int64		scan_query_bytes;
	int32		scan_excluded;
	int32		scan_list_use;	/* vectors: genie.cluster_list_knn (genie_list_use) */
	bool		scan_alone;		/* an engine call of its own: its list counts are its own (EXPLAIN) */

	/*
	 * WITHIN: a range search of the stored values, laid out as SCAN_VALUES
	 * (k unused): every main object within within_radius of each query;
	 * within_answer: 0, or the answer_token of this backend's first ask of
	 * the same search, whose answer the worker kept (it did not fit)
	 */
	float8		within_radius;
	uint64		within_answer;

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
	double		queue_ms;		/* the request's wait to be batched */
	double		engine_ms;		/* the engine call that answered it (its whole batch's) */
	/* SEARCH: query_offsets[n_queries + 1] (int64), objects, scores follow */
	int64		n_hits;
	/* VERIFY: distances, exact, certified, open_bound follow */
	int64		distances_computed;
	/*
	 * SCAN_VALUES: query_offsets[n_queries + 1] (int64), then n_queries * k
	 * slots each of distances (float8), objects and lengths (int32)
	 */
	/*
	 * WITHIN: n_hits rows; query_offsets[n_queries + 1] (int64), distances
	 * (float8), objects (int32) follow when answer_bytes (their size,
	 * GENIE_WITHIN_ANSWER_BYTES) fits the response's room, else nothing
	 * follows and the backend asks again with that much room, naming
	 * answer_token (nonzero when the worker kept the answer for that ask:
	 * it is not searched twice); superclusters and clusters the List of
	 * Clusters discarded
	 */
	int64		answer_bytes;
	uint64		answer_token;
	int64		superclusters_discarded;
	int64		clusters_discarded;
	/* SCAN_VALUES with scan_alone: its queries read through the List of Clusters, and their distances */
	int64		list_queries;
	int64		list_distances;
	/*
	 * SHARE: the segment of the version's main postings in shared memory
	 * (GenieSharedPostings), or DSM_HANDLE_INVALID when the worker holds
	 * them in its own memory (it has a GPU, or no segment could be had)
	 */
	dsm_handle	shared_segment;
} GenieResponse;

/*
 * The main postings of a version as a genie service without a GPU holds
 * them: in a segment of shared memory, which each backend maps and
 * searches itself on its CPU engine (genie.shared_postings), so that the
 * server keeps one copy and no search waits for the service.  This header,
 * then at data_offset the stream of a LOAD: keywords | keyword_offsets |
 * postings, keywords padded to 8 bytes.  Written once by the worker before
 * any backend hears of it, read-only after.
 */
#define GENIE_SHARED_POSTINGS_MAGIC 0x47535050	/* "GSPP" */

typedef struct GenieSharedPostings
{
	uint32		magic;
	GenieServiceKey key;		/* the version: a backend checks it is the one it asked for */
	int32		split_length;
	int32		max_object_keywords;	/* the worker counted it checking the postings */
	Size		data_offset;
	Size		data_bytes;
} GenieSharedPostings;

#define GENIE_SERVICE_ALIGN(x) TYPEALIGN(16, (x))

/*
 * The largest answer a backend makes room for: a search whose answers
 * would need more is split into query groups, and a range answer past it
 * is searched in-process instead.
 */
#define GENIE_SERVICE_MAX_ANSWER_BYTES ((Size) 64 << 20)

/* Bytes of a SCAN_VALUES answer of nq queries of k slots each. */
#define GENIE_SCAN_ANSWER_BYTES(nq, k) \
	(GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) (nq) + 1) + \
	 (sizeof(float8) + 2 * sizeof(int32)) * (Size) (nq) * (Size) (k))

/* Bytes of a WITHIN answer of nq queries and n rows. */
#define GENIE_WITHIN_ANSWER_BYTES(nq, n) \
	(GENIE_SERVICE_ALIGN(sizeof(GenieResponse)) + sizeof(int64) * ((Size) (nq) + 1) + \
	 (sizeof(float8) + sizeof(int32)) * (Size) (n))

/* ---- genie_service.c ---- */

extern double genie_batch_window_ms;
extern bool genie_shared_postings;
extern GenieServiceShared *genie_service_shared;

/* From _PG_init: GUCs, and when preloaded the shared area and the worker. */
extern void genie_service_register(void);

/* Whether genie was preloaded, so that the service is the way to search. */
extern bool genie_service_configured(void);

/* Attaches this backend to the control area (idempotent); false when not preloaded. */
extern bool genie_service_attach(void);

extern bool genie_service_keys_equal(const GenieServiceKey *a, const GenieServiceKey *b);

#endif							/* GENIE_SERVICE_H */
