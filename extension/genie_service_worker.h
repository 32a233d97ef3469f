/*-------------------------------------------------------------------------
 *
 * genie_service_worker.h
 *	  The genie service worker's own state, shared by its loop
 *	  (genie_service_worker.c) and its engines (genie_service_engines.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SERVICE_WORKER_H
#define GENIE_SERVICE_WORKER_H

#include "genie_service.h"

/* a request taken in this cycle, copied out of its segment */
typedef struct TakenRequest
{
	int			slot;
	uint64		seq;
	dsm_handle	segment;
	TimestampTz submitted_at;
	double		queue_wait_ms;
	bool		broken;			/* its segment could not be read: it gets FAILED */
	bool		replied;
	GenieRequest req;
	char	   *payload;
	Size		payload_size;
} TakenRequest;

/* the requests one engine call serves, for the engines' cancel callback */
typedef struct CancelGroup
{
	TakenRequest **members;
	int			n;
} CancelGroup;

/* one index version the worker holds */
typedef struct ServedIndex
{
	GenieServiceKey key;
	Oid			index_oid;
	genie_index *index;			/* main postings, host copy */
	int64		host_bytes;
	genie_engine *engines[2];	/* by genie_engine_kind: CPU, GPU */
	uint64		last_used;
	GenieServiceIndexStats stats[2];
} ServedIndex;

/* a version being handed over in pieces */
typedef struct PendingLoad
{
	GenieServiceKey key;
	Oid			index_oid;
	int			slot;
	int			pid;
	int32		split_length;
	char	   *buffer;
	Size		total;
	Size		received;
	TimestampTz last_piece;
} PendingLoad;

#define GENIE_SERVICE_MAX_SERVED 64
#define GENIE_SERVICE_MAX_LOADS 8

typedef struct ServiceState
{
	MemoryContext top_cxt;
	MemoryContext cycle_cxt;	/* reset at every cycle */
	dsm_segment **mapped;		/* by slot */
	dsm_handle *mapped_handle;
	TakenRequest *taken;		/* this cycle's, at most one per slot */
	int			n_taken;
	bool		gpu_usable;
	int64		device_bytes_total;
	bool		device_failed;	/* a GPU error: exit after this cycle */
	uint64		clock;
	ServedIndex *served[GENIE_SERVICE_MAX_SERVED];
	int			n_served;
	PendingLoad loads[GENIE_SERVICE_MAX_LOADS];
	int			n_loads;
} ServiceState;

/* genie_service_engines.c */
extern void genie_worker_run_cycle(ServiceState *st);
extern void genie_worker_publish_stats(ServiceState *st);
/* answers an unusable request, for genie_service_worker.c */
extern void genie_worker_reply_outcome(ServiceState *st, TakenRequest *t,
									   GenieServiceOutcome outcome, const genie_error *err);

#endif							/* GENIE_SERVICE_WORKER_H */
