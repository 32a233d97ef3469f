/*-------------------------------------------------------------------------
 *
 * genie_worker_internal.h
 *	  The genie service worker's own state and the calls between its files:
 *	  worker/ is the service process (service/genie_service.h is the
 *	  protocol it answers), and only its files include this header.
 *
 * The files, bottom first:
 *	- genie_worker_runner.c: the threads that run a batch's engine searches,
 *	  and the range runner's;
 *	- genie_worker_engines.c: answers, the versions held and their engines,
 *	  host memory and eviction;
 *	- genie_worker_values.c: the stored values (strings, vectors or codes)
 *	  held, with their List of Clusters, and the grouped scans of them;
 *	- genie_worker_within.c: range searches of them on the range runner,
 *	  and the answers kept for a backend's second ask;
 *	- genie_worker_loads.c: versions handed over in pieces;
 *	- genie_worker_batch.c: a cycle's requests: loads, verifications,
 *	  scans, and the searches handed to the runner;
 *	- genie_worker.c: the worker's entry point and loop.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_WORKER_INTERNAL_H
#define GENIE_WORKER_INTERNAL_H

#include "nodes/pg_list.h"

#include "service/genie_service.h"

/* a request taken in this cycle, copied out of its segment */
typedef struct TakenRequest
{
	int			slot;
	uint64		seq;
	dsm_handle	segment;
	TimestampTz submitted_at;
	double		queue_wait_ms;
	bool		broken;			/* its segment could not be read: it gets FAILED */
	bool		fresh;			/* taken, not yet copied out of its segment */
	bool		replied;
	GenieRequest req;
	char	   *payload;
	Size		payload_size;
} TakenRequest;

/*
 * Batches in flight at once, each searched by a runner thread of its own
 * (genie_worker_runner.c): while one runner's engine works, another
 * searches the next batch, and the worker's thread collects and answers.
 * A service uses GENIE_SERVICE_GPU_CALLS a GPU and one more, at least two
 * (ServiceState.n_runners), so that every GPU of a host can have a batch
 * running and one getting ready; this is the bound.
 */
#define GENIE_SERVICE_RUNNERS 16

/*
 * Batches a GPU takes at once: one on the device, and one whose engine
 * call does its host work (its queries compiled and prepared) meanwhile,
 * then waits for the device (gpu/src/host_stage.cpp).
 */
#define GENIE_SERVICE_GPU_CALLS 2

/*
 * A batch waits for a GPU that has one already unless its searches hold
 * at least this many query ranges: the host work it then does beside the
 * other's kernels (about 90 ns a range on the H200) must outweigh the
 * fixed device cost of the extra, smaller call it makes (about 0.07 ms:
 * bench/batch-draws-h200.txt).
 */
#define GENIE_SERVICE_QUEUE_RANGES 1024

/* CPU engine batches side by side: each searches on every core already */
#define GENIE_SERVICE_CPU_BATCHES 2

/*
 * One more thread does the range searches of stored values, one at a time
 * in the order they came (genie_worker_within.c): their time is their
 * answer's, unknown beforehand (a large radius reads every value), so they
 * never hold up a batch's searches or the worker's thread.
 */
#define GENIE_SERVICE_RANGE_RUNNER GENIE_SERVICE_RUNNERS

/*
 * The threads that may search one engine at once: the runners, and the
 * worker's own (a CPU engine fallback, a verification, a lone small search
 * or scan of values).
 */
#define GENIE_SERVICE_SEARCHERS (GENIE_SERVICE_RUNNERS + 1)
#define GENIE_WORKER_SEARCHER GENIE_SERVICE_RUNNERS

/* A lone search request of at most this many queries runs on the worker's thread. */
#define GENIE_SERVICE_INLINE_QUERIES 32

/* the requests one engine call serves */
typedef struct CancelEntry
{
	TakenRequest **members;
	int			n;
} CancelEntry;

/*
 * What an engine's cancel callback reads: the requests of each call
 * searching that engine now, an entry per searcher.  The callback stops an
 * engine's calls when every backend of every one of them withdrew (the
 * calls share the callback); entries change under the runners' cancel lock
 * (genie_cancel_group_set), which the callback holds while it reads them.
 */
typedef struct CancelGroup
{
	CancelEntry searchers[GENIE_SERVICE_SEARCHERS];
} CancelGroup;

/* one index version the worker holds */
/*
 * A version whose postings were shared (ServedIndex.shared) was dropped
 * since the stats were last published: publishing then bumps
 * GenieServiceShared.shared_dropped, so backends let go of their mappings.
 */
extern bool genie_worker_shared_dropped;

typedef struct ServedIndex
{
	GenieServiceKey key;
	Oid			index_oid;
	genie_index *index;			/* main postings, host copy */
	/* without a GPU: where index reads them, which backends map (GenieSharedPostings) */
	dsm_segment *shared;
	int64		host_bytes;
	genie_engine *engines[2];	/* by genie_engine_kind: CPU, GPU */
	/* what each engine's cancel callback reads: set before every search */
	CancelGroup cancel[2];
	int			busy;			/* searches of it handed to the runner */
	uint64		last_used;
	GenieServiceIndexStats stats[2];
	int			dropped[2];		/* GPUs each engine's device group dropped, said */
} ServedIndex;

/*
 * A range search of stored values as the range runner does it: the engine
 * call's inputs, made on the worker's thread (genie_worker_take_within),
 * and its answer.
 */
typedef struct WithinJob
{
	MemoryContext cxt;			/* the job's, its request's copy included */
	struct ServedValues *values;	/* busy while the job holds it */
	GenieValueBatch queries;
	uint8	   *excluded;
	double		radius;
	bool		cpu_fallback;	/* auto: the CPU answers when the GPU runs out of memory */
	genie_engine_options options;	/* the job's engine's; the runner sets the cancel */
	genie_engine_options cpu_options;
	genie_range_results *found;
} WithinJob;

/*
 * A k-nearest scan of stored values as a runner does it: the engine call's
 * inputs, made on the worker's thread in the batch's memory
 * (genie_worker_scan_values), its engine call on a runner (genie_run_job),
 * and its answer, which the worker's thread hands back
 * (genie_worker_finish_scan).
 */
typedef struct ScanJob
{
	struct ServedValues *values;	/* busy while the job holds it */
	GenieValueBatch queries;	/* the members' queries, concatenated */
	uint8	   *excluded;
	const genie_cluster_list *list;
	genie_list_use list_use;
	genie_engine_options options;
	genie_engine_options cpu_options;
	/*
	 * The members that allow the CPU when the GPU runs out of memory (not
	 * genie.device = gpu): the CPU scan then runs for them, and stops when
	 * they withdrew; the others get the GPU's error
	 */
	TakenRequest **cpu_members;
	int			n_cpu_members;
	genie_error gpu_err;
	GenieValueFound found;
} ScanJob;

/*
 * One engine search for a group of requests of one version, engine and k,
 * over their queries concatenated; the runner thread fills in the outcome.
 * Or, with within set (served NULL), one range search of stored values
 * (genie_worker_within.c); with scan set (served NULL), one k-nearest scan
 * of them (genie_worker_values.c).
 */

typedef struct SearchJob
{
	ServedIndex *served;
	WithinJob  *within;
	ScanJob    *scan;
	genie_engine_kind kind;
	int32		k;
	TakenRequest **members;
	int			n_members;
	genie_query_batch *parts;	/* each member's own batch */
	genie_query_batch batch;
	bool		device_fallback;	/* an auto request that ran out of device memory */
	bool		runnable;		/* its engine is there: the runner searches */
	/* outcome */
	genie_status status;
	genie_error err;
	genie_results *results;
	double		engine_ms;
} SearchJob;

/* The requests of one cycle, and the searches made of them. */
typedef struct CycleBatch
{
	MemoryContext cxt;
	TakenRequest *taken;		/* at most one per slot */
	int			n_taken;
	int		   *slot_entry;		/* by slot: its entry in taken, or -1 */
	SearchJob **jobs;
	int			n_jobs;

	/*
	 * The payloads' copies go into room the batch keeps from one cycle to
	 * the next (room_used of room_size bytes): a fresh allocation for each
	 * 3 MB piece of a stored array was mapped and its pages faulted in
	 * again by every copy (3.6x the copy into memory already touched, on
	 * the 2-core machine).  room_wanted is what this cycle's payloads took;
	 * a room that was too small is made that large for the next cycle, up
	 * to GENIE_SERVICE_PAYLOAD_ROOM, while all batches' rooms together stay
	 * within GENIE_SERVICE_PAYLOAD_ROOMS (ServiceState.room_bytes), and one
	 * that has held nothing for GENIE_SERVICE_ROOM_IDLE_MS is let go.
	 */
	char	   *room;
	Size		room_size;
	Size		room_used;
	Size		room_wanted;
	TimestampTz room_used_at;
} CycleBatch;

#define GENIE_SERVICE_PAYLOAD_ROOM ((Size) 64 << 20)
#define GENIE_SERVICE_PAYLOAD_ROOMS ((Size) 128 << 20)
#define GENIE_SERVICE_ROOM_IDLE_MS 10000

/* A thread that runs a batch's engine searches (genie_worker_runner.c). */
typedef struct GenieRunner
{
	int			id;				/* its entry in every CancelGroup */
	Latch	   *latch;			/* set when a batch is done */
	SearchJob **jobs;
	int			n_jobs;
	volatile bool busy;
} GenieRunner;

/*
 * The main objects' stored values of one index version: their strings
 * (genie_ngram_ops with store_strings) or their vectors (genie_vector_ops);
 * the GPU copy is made by the first GPU scan.
 */
typedef struct ServedValues
{
	GenieServiceKey key;
	Oid			index_oid;
	GenieValueSet set;
	/* the index's List of Clusters of them (NULL: none), which range searches prune by */
	genie_cluster_list *list;
	int			busy;			/* scans and range searches of them handed to a runner */
	int64		host_bytes;
	uint64		last_used;
	GenieServiceIndexStats stats[2];	/* by the engine that scanned */
} ServedValues;

/* a version (its postings, or with values its stored values) handed over in pieces */
typedef struct PendingLoad
{
	GenieServiceKey key;
	bool		values;
	GenieValuesKind values_kind;	/* values: their kind, */
	int32		value_dim;		/* and the vectors' dimension or the codes' bits */
	Oid			index_oid;
	int			slot;
	int			pid;
	int32		split_length;
	char	   *buffer;
	/*
	 * Vectors: the set being filled, whose rows are the buffer (the pieces
	 * land where the scans read them); NULL for a malloc'd buffer.
	 */
	genie_vectors *vectors;
	/* values: the stream's last list_bytes, the List of Clusters, land here (malloc'd) */
	char	   *list_buffer;
	Size		list_bytes;
	Size		total;
	Size		received;
	TimestampTz last_piece;
} PendingLoad;

#define GENIE_SERVICE_MAX_SERVED 64
#define GENIE_SERVICE_MAX_LOADS 8

/*
 * A range answer larger than the room its backend left: kept until the
 * backend asks again with room for it (naming token), so that it is not
 * searched twice; dropped when the slot sends anything else, or after a
 * second.
 */
typedef struct KeptAnswer
{
	int			slot;
	int			pid;
	uint64		token;
	GenieServiceKey key;
	int32		n_queries;
	float8		radius;
	genie_range_results *found;
	Size		bytes;			/* its answer's (GENIE_WITHIN_ANSWER_BYTES) */
	bool		device_fallback;
	double		engine_ms;
	TimestampTz kept_at;
} KeptAnswer;

/* At most this many kept answers, of this many bytes in all. */
#define GENIE_SERVICE_MAX_KEPT 8
#define GENIE_SERVICE_MAX_KEPT_BYTES ((Size) 256 << 20)

typedef struct ServiceState
{
	MemoryContext top_cxt;
	dsm_segment **mapped;		/* by slot */
	dsm_handle *mapped_handle;

	/*
	 * Requests are collected into batches[cur] while the runners search
	 * the batches in flight (in_flight[r] on runners[r], or NULL): a
	 * batch's engine work overlaps the next one's collection and the
	 * previous one's answers, and on the CPU engine other batches' search.
	 */
	CycleBatch	batches[GENIE_SERVICE_RUNNERS + 1];
	int			cur;
	CycleBatch *in_flight[GENIE_SERVICE_RUNNERS];
	bool		in_flight_gpu[GENIE_SERVICE_RUNNERS];	/* it has GPU searches */
	bool		in_flight_gpu_alone[GENIE_SERVICE_RUNNERS];	/* the only GPU batch (genie_worker_batch_wants_gpu) */
	GenieRunner runners[GENIE_SERVICE_RUNNERS];
	int			n_runners;		/* those in use: runners[0 .. n_runners) */
	bool		gpu_usable;
	int			n_gpus;			/* usable GPUs among genie.devices */
	int64		device_bytes_total;
	Size		room_bytes;		/* the batches' payload rooms, together */
	bool		device_failed;	/* a GPU error: exit after this cycle */
	uint64		clock;
	ServedIndex *served[GENIE_SERVICE_MAX_SERVED];
	int			n_served;
	ServedValues *values[GENIE_SERVICE_MAX_SERVED];
	int			n_values;
	PendingLoad loads[GENIE_SERVICE_MAX_LOADS];
	int			n_loads;
	KeptAnswer	kept[GENIE_SERVICE_MAX_KEPT];
	int			n_kept;
	uint64		last_token;
	/* range searches: the one the range runner does (or NULL), those waiting */
	GenieRunner range_runner;
	SearchJob  *range_running;
	List	   *range_waiting;
} ServiceState;

/* genie_worker_engines.c: answers */
extern GenieResponse *genie_worker_begin_response(ServiceState *st, TakenRequest *t,
												  GenieServiceOutcome outcome,
												  const genie_error *err);
extern void genie_worker_end_reply(TakenRequest *t, GenieSlotState final);
extern void genie_worker_fail_request(TakenRequest *t);
extern void genie_worker_reply_outcome(ServiceState *st, TakenRequest *t,
									   GenieServiceOutcome outcome, const genie_error *err);
extern void genie_worker_reply_error(ServiceState *st, TakenRequest *t, genie_status status,
									 const char *message);
/* One engine call answered n requests' n_queries queries: genie_service_stats()'s counts. */
extern void genie_worker_count_batch(GenieServiceIndexStats *stats, TakenRequest *const *members,
									 int n, int32 n_queries, double engine_ms);
/* genie_worker_engines.c: versions, engines, loads */
extern void genie_worker_engine_options(genie_engine_kind kind, CancelGroup *group,
										genie_engine_options *options);

extern ServedIndex *genie_worker_find_served(ServiceState *st, const GenieServiceKey *key);
extern genie_status genie_worker_ensure_engine(ServiceState *st, ServedIndex *s,
											   genie_engine_kind kind, genie_error *err);
/* A version's main postings handed over: the version served from now on. */
extern void genie_worker_finish_load(ServiceState *st, PendingLoad *load, TakenRequest *t);
extern genie_status genie_worker_resolve_kind(ServiceState *st, int device, genie_engine_kind *kind,
											  genie_error *err);

/* genie_worker_loads.c: versions handed over in pieces */
extern void genie_worker_handle_load(ServiceState *st, TakenRequest *t);
/* Drops the hand-over a slot left unfinished (it went on to other requests). */
extern void genie_worker_forget_loads(ServiceState *st, int slot);

/* Host bytes of every version held, postings and strings. */
extern int64 genie_worker_host_bytes(ServiceState *st);

/*
 * Evicts the least recently used versions held, postings or stored strings
 * alike, while they pass genie.cache_size or a table that must take one
 * more (room_index, room_values) is full; never keep_index or keep_values,
 * nor postings a search in flight uses.
 */
extern void genie_worker_evict_host(ServiceState *st, ServedIndex *keep_index,
									ServedValues *keep_values, bool room_index, bool room_values);
extern void genie_worker_free_values(ServedValues *s);

/*
 * Releases the versions nobody can use any more (their relation dropped,
 * truncated or rebuilt) and, beyond genie.cache_size, the least recently
 * used ones: run when the service is idle.  True when it released any.
 */
extern bool genie_worker_release_unused(ServiceState *st);	/* true: released some */

/* genie_worker_values.c: the stored values (strings or vectors) of versions */
/* The values the worker holds of a version, or NULL. */
extern ServedValues *genie_worker_find_values(ServiceState *st, const GenieServiceKey *key);
/* Takes s into the table of values held (evicting as needed) and answers the load t. */
extern void genie_worker_add_values(ServiceState *st, ServedValues *s, TakenRequest *t);
/* A version's main values handed over: served from now on. */
extern void genie_worker_finish_values_load(ServiceState *st, PendingLoad *load, TakenRequest *t);
/*
 * The cycle's scans as jobs, one engine call per group that can share one,
 * appended to jobs[*n_jobs] (room for one a scan); a runner runs each
 * (genie_run_job, on its thread: engine calls only) and the worker's
 * thread answers it (genie_worker_finish_scan).
 */
extern void genie_worker_scan_values(ServiceState *st, TakenRequest **scans, int n, SearchJob **jobs,
									 int *n_jobs);
extern void genie_worker_finish_scan(ServiceState *st, SearchJob *job);
/* Whether t is a well-formed request (a scan's, a range search's) of s's values. */
typedef bool (*GenieValuesRequestCheck) (const ServedValues *s, TakenRequest *t);
/*
 * The values t asks about, checked by well_formed, and the engine it asks
 * for; NULL when t is answered already (not held: NOT_RESIDENT; malformed:
 * that error; no such engine).
 */
extern ServedValues *genie_worker_values_for(ServiceState *st, TakenRequest *t,
											 GenieValuesRequestCheck well_formed,
											 const char *malformed, genie_engine_kind *kind);
/* A scan's or range search's queries, checked against its payload; false when malformed. */
extern bool genie_worker_read_queries(TakenRequest *t, GenieValueBatch *queries);
/* The main objects t skips, one flag each (palloc'd); NULL when none. */
extern uint8 *genie_worker_excluded_flags(TakenRequest *t, int32 n_main);
/* After a search through s's list: its host bytes count the rows its first CPU search copied. */
extern void genie_worker_count_list_bytes(ServedValues *s);

/*
 * genie_worker_within.c: range searches of stored values.  Takes range
 * search t of this cycle: answers it (its kept answer, or an error), or
 * queues a job of its own (t copied) for the range runner.
 */
extern void genie_worker_take_within(ServiceState *st, TakenRequest *t);
/*
 * Answers the range search the range runner finished and hands it the next
 * one; true when it answered one.
 */
extern bool genie_worker_poll_within(ServiceState *st);
/* Drops the kept range answers of slot (-1: those older than a second). */
extern void genie_worker_forget_kept(ServiceState *st, int slot);

/* genie_worker_batch.c: a batch's requests */
/*
 * Handles loads and verifications, and hands the searches to runner (NULL:
 * runs them on this thread): false when there were none; *uses_gpu whether
 * any runs on the GPU.
 */
extern bool genie_worker_start_batch(ServiceState *st, CycleBatch *b, GenieRunner *runner,
									 bool *uses_gpu);
/* Whether any search request of b goes to the GPU engine (before it starts). */
extern bool genie_worker_batch_wants_gpu(ServiceState *st, CycleBatch *b, bool *alone);
extern int64 genie_worker_batch_ranges(CycleBatch *b);
/* Answers the searches of a batch its runner finished (a GPU error sets st->device_failed). */
extern void genie_worker_finish_batch(ServiceState *st, CycleBatch *b);
extern void genie_worker_publish_stats(ServiceState *st);

/* genie_worker_runner.c */
extern void genie_runner_init(GenieRunner *r, int id, Latch *latch);
/* Runs the jobs on the runner's thread (on this one when it cannot start). */
extern void genie_runner_submit(GenieRunner *r, SearchJob **jobs, int n_jobs);
extern bool genie_runner_done(GenieRunner *r);
/* The range runner's search stops at its next poll (the worker exits, or its GPU failed). */
extern void genie_runner_abandon_range(void);
/* At the worker's exit: every runner's search stops at its next poll. */
extern void genie_runner_abandon_all(void);
/* Runs one job on this thread, as searcher (a runner's id, or GENIE_WORKER_SEARCHER). */
extern void genie_run_job(SearchJob *job, int searcher);
/* Sets searcher's entry of g (n = 0: none) under the cancel lock. */
extern void genie_cancel_group_set(CancelGroup *g, int searcher, TakenRequest **members, int n);
/* A cancel group of one call on the worker's thread, for a call of its own. */
extern void genie_cancel_group_one(CancelGroup *g, TakenRequest **members, int n);
/* The cancel callback of one search job's own engine call (arg: the SearchJob). */
extern int	genie_worker_job_cancelled(void *arg);
/* The engines' cancel callback (arg: the CancelGroup of the engine). */
extern int	genie_cancel_group_cancelled(void *arg);

#endif							/* GENIE_WORKER_INTERNAL_H */
