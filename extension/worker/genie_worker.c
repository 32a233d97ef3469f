/*-------------------------------------------------------------------------
 *
 * genie_worker.c
 *	  The genie service's worker: the one process of the cluster that runs
 *	  genie's engines when genie is preloaded (see genie_service.h).
 *
 * A cycle takes every submitted request, waits genie.batch_window for
 * more when the previous cycle saw several (so an idle service answers at
 * once), then handles loads, groups the searches by index version, engine
 * and k, runs one engine search per group over the concatenated queries,
 * and hands each backend the slice of the answers that is its own.  While
 * a cycle runs, new requests queue up: under load every cycle is a batch.
 * The searches run on runner threads (genie_worker_runner.c), up to
 * n_runners batches at once (see can_start), or, for a lone
 * request on an idle service, on the worker's own thread.
 *
 * The worker keeps each index version's main postings once (host memory,
 * LRU within genie.cache_size) and its engines (a GPU copy, LRU within
 * genie.device_memory_limit when set).  It never raises an error for a
 * request: engine failures go back to the backend in the answer.  A GPU
 * error (not out-of-memory) leaves the CUDA context in doubt, so the
 * worker answers and then exits, and the postmaster starts a fresh one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "search/genie_search_device.h"
#include "service/genie_service.h"
#include "service/genie_slot_wake.h"
#include "worker/genie_worker_internal.h"

PGDLLEXPORT void genie_service_main(Datum arg);

static ServiceState state;

/* ---- the slots ---- */

/* At exit: no backend waits for an answer that will not come. */
static void
service_exit(int code, Datum arg)
{
	GenieServiceShared *sh = genie_service_shared;

	/*
	 * A runner thread may be inside an engine: exit's teardown must not
	 * pull the CUDA runtime from under it.  Its engine polls ProcDiePending
	 * (the range runner's also the abandon flag); other exits wait for the
	 * batches, at most a few seconds in all.  Without a GPU, for as long as
	 * they take: their CPU engines poll often, and the postings they read
	 * may be shared segments, which the teardown unmaps.  Every search stops
	 * at its next poll, also on an exit that is not a signal's.
	 */
	genie_runner_abandon_range();
	genie_runner_abandon_all();
	for (int r = 0, i = 0; r <= GENIE_SERVICE_RUNNERS && (i < 50000 || !state.gpu_usable); i++)
	{
		if (genie_runner_done(r < GENIE_SERVICE_RUNNERS ? &state.runners[r] : &state.range_runner))
			r++;
		else
			pg_usleep(100);
	}
	LWLockReleaseAll();
	SpinLockAcquire(&sh->mutex);
	sh->ready = false;
	sh->generation++;
	sh->pid = 0;
	sh->latch = NULL;
	sh->skip_wake = false;
	for (int i = 0; i < sh->n_slots; i++)
	{
		GenieServiceSlot *slot = &sh->slots[i];

		if (slot->state == GENIE_SLOT_SUBMITTED || slot->state == GENIE_SLOT_TAKEN)
			slot->state = GENIE_SLOT_FAILED;
		else if (slot->state == GENIE_SLOT_WITHDRAWN)
			slot->state = GENIE_SLOT_FREE;
		slot->busy = false;
	}
	SpinLockRelease(&sh->mutex);
	/* every slot: a wake where no backend sleeps is one atomic add */
	for (int i = 0; i < sh->n_slots; i++)
		genie_slot_wake(&sh->slots[i]);

	LWLockAcquire(sh->stats_lock, LW_EXCLUSIVE);
	sh->n_stats = 0;
	LWLockRelease(sh->stats_lock);
}

/* The segment a slot's request is in, mapped by this process. */
static char *
map_segment(int slot, dsm_handle handle, Size *size)
{
	if (state.mapped[slot] != NULL && state.mapped_handle[slot] != handle)
	{
		dsm_detach(state.mapped[slot]);
		state.mapped[slot] = NULL;
	}
	if (state.mapped[slot] == NULL)
	{
		state.mapped[slot] = dsm_attach(handle);
		if (state.mapped[slot] == NULL)
			return NULL;
		dsm_pin_mapping(state.mapped[slot]);
		state.mapped_handle[slot] = handle;
	}
	*size = dsm_segment_map_length(state.mapped[slot]);
	return dsm_segment_address(state.mapped[slot]);
}

/* Drops the mappings of segments that their backends replaced or left. */
static void
unmap_stale_segments(void)
{
	GenieServiceShared *sh = genie_service_shared;

	for (int i = 0; i < sh->n_slots; i++)
	{
		dsm_handle	current;

		if (state.mapped[i] == NULL)
			continue;
		SpinLockAcquire(&sh->mutex);
		current = sh->slots[i].segment;
		SpinLockRelease(&sh->mutex);
		if (current != state.mapped_handle[i])
		{
			dsm_detach(state.mapped[i]);
			state.mapped[i] = NULL;
		}
	}
}

/*
 * Takes every submitted request and copies it out of its segment into b.
 * Returns how many were added.
 */
/* A copy of size bytes of a request's payload, in b's room where it fits. */
static char *
copy_payload(CycleBatch *b, const char *src, Size size)
{
	Size		need = MAXALIGN(Max(size, 1));
	char	   *dst;

	b->room_wanted += need;
	if (b->room_used + need <= b->room_size)
	{
		dst = b->room + b->room_used;
		b->room_used += need;
	}
	else
		dst = MemoryContextAllocHuge(b->cxt, need);
	memcpy(dst, src, size);
	return dst;
}

static int
collect(CycleBatch *b)
{
	GenieServiceShared *sh = genie_service_shared;
	int			taken = 0;
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&sh->mutex);
	for (int i = 0; i < sh->n_slots; i++)
	{
		GenieServiceSlot *slot = &sh->slots[i];
		TakenRequest *t;

		if (slot->state != GENIE_SLOT_SUBMITTED)
			continue;
		slot->state = GENIE_SLOT_TAKEN;
		slot->busy = true;

		/*
		 * A slot taken again before the batch starts withdrew its earlier
		 * request (a new one bumped seq): that entry is stale, reuse it.
		 */
		if (b->slot_entry[i] >= 0)
			t = &b->taken[b->slot_entry[i]];
		else
		{
			b->slot_entry[i] = b->n_taken;
			t = &b->taken[b->n_taken++];
		}
		memset(t, 0, sizeof(*t));
		t->fresh = true;
		taken++;
		t->slot = i;
		t->seq = slot->seq;
		t->segment = slot->segment;
		t->submitted_at = slot->submitted_at;
	}
	SpinLockRelease(&sh->mutex);

	for (int j = 0; j < b->n_taken; j++)
	{
		TakenRequest *t = &b->taken[j];
		Size		size;
		char	   *base = map_segment(t->slot, t->segment, &size);
		Size		header = GENIE_SERVICE_ALIGN(sizeof(GenieRequest));

		if (!t->fresh)
			continue;			/* copied by an earlier call */
		t->fresh = false;
		t->queue_wait_ms = (double) (now - t->submitted_at) / 1000.0;
		if (base == NULL || size < header)
			t->broken = true;
		else
		{
			memcpy(&t->req, base, sizeof(GenieRequest));
			/* written so that a huge offset or capacity cannot wrap the sum */
			if (t->req.response_offset < header || t->req.response_offset > size ||
				t->req.response_capacity > size - t->req.response_offset)
				t->broken = true;
			else
			{
				t->payload_size = t->req.response_offset - header;
				t->payload = copy_payload(b, base + header, t->payload_size);
			}
		}
		SpinLockAcquire(&sh->mutex);
		sh->slots[t->slot].busy = false;
		SpinLockRelease(&sh->mutex);
	}
	return taken;
}

static void
reset_batch(CycleBatch *b)
{
	if (b->room_used > 0)
		b->room_used_at = GetCurrentTimestamp();
	/* room for as much as this cycle's payloads took (the room as it was, where that fails) */
	if (b->room_wanted > b->room_size && b->room_wanted <= GENIE_SERVICE_PAYLOAD_ROOM &&
		state.room_bytes - b->room_size + b->room_wanted <= GENIE_SERVICE_PAYLOAD_ROOMS)
	{
		char	   *room = MemoryContextAllocExtended(state.top_cxt, b->room_wanted,
													  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);

		if (room != NULL)
		{
			if (b->room != NULL)
				pfree(b->room);
			state.room_bytes += b->room_wanted - b->room_size;
			b->room = room;
			b->room_size = b->room_wanted;
			b->room_used_at = GetCurrentTimestamp();
		}
	}
	b->room_used = 0;
	b->room_wanted = 0;
	MemoryContextReset(b->cxt);
	for (int i = 0; i < b->n_taken; i++)
		b->slot_entry[b->taken[i].slot] = -1;
	b->n_taken = 0;
	b->jobs = NULL;
	b->n_jobs = 0;
}

/* ---- the loop ---- */

/*
 * Before the worker sleeps: says whether requests submitted from now on must
 * set its latch (not while every runner searches: the first one done sets
 * it, and then the worker takes them all).  False when one is waiting
 * already: then do not sleep.  Submitting reads the flag under the same
 * spinlock, so a request is either seen here or wakes the worker.
 */
static bool
ready_to_sleep(bool all_runners_busy)
{
	GenieServiceShared *sh = genie_service_shared;
	bool		waiting = false;

	SpinLockAcquire(&sh->mutex);
	/* only while the flag was up can a request have come without a wake-up */
	if (sh->skip_wake && !all_runners_busy)
		for (int i = 0; i < sh->n_slots && !waiting; i++)
			waiting = sh->slots[i].state == GENIE_SLOT_SUBMITTED;
	sh->skip_wake = all_runners_busy;
	SpinLockRelease(&sh->mutex);
	return !waiting;
}

/* The runner with no batch in flight, or -1. */
static int
free_runner(void)
{
	for (int r = 0; r < state.n_runners; r++)
		if (state.in_flight[r] == NULL)
			return r;
	return -1;
}

static int
n_in_flight(void)
{
	int			n = 0;

	for (int r = 0; r < GENIE_SERVICE_RUNNERS; r++)
		n += state.in_flight[r] != NULL;
	return n;
}

/*
 * Whether b may go to a runner now: one is free, and b's GPU searches, if
 * any, find a GPU free, or one with a single batch when b's own host work
 * is worth the wait (GENIE_SERVICE_QUEUE_RANGES): its engine call then
 * compiles b while the other's kernels run, and takes the device when
 * they are done.  A smaller batch waits to grow instead, since each engine
 * call pays its floor (queuing every batch, before the host work was done
 * outside the device's lock, measured 0.82x at 16 clients,
 * bench/service-ab-h200.txt).  Up to GENIE_SERVICE_CPU_BATCHES CPU engine
 * batches run side by side.  With several GPUs, batches of match counts
 * run side by side, each on a GPU of its index's device group
 * (genie/multi_device.hpp).  On any number of GPUs, scans of stored values,
 * a first search (its index's GPU engine made as it starts), and sharded
 * indexes (every GPU in each call) keep to one GPU batch at a time.
 */
static bool
can_start(CycleBatch *b)
{
	int			gpu_batches = 0;
	int			cpu_batches = 0;
	bool		gpu_alone = false;
	bool		alone;

	if (free_runner() < 0)
		return false;
	for (int r = 0; r < state.n_runners; r++)
	{
		if (state.in_flight[r] == NULL)
			continue;
		if (state.in_flight_gpu[r])
		{
			gpu_batches++;
			gpu_alone |= state.in_flight_gpu_alone[r];
		}
		else
			cpu_batches++;
	}
	/*
	 * (a host of more GPUs than CPU batches has runners to spare for them;
	 * a batch with any GPU search counts as a GPU batch, so its CPU
	 * searches, requests of genie.device = cpu among them, may make a
	 * third CPU search at once there: contention, not a wrong answer)
	 */
	if (cpu_batches >= GENIE_SERVICE_CPU_BATCHES && !genie_worker_batch_wants_gpu(&state, b, NULL))
		return false;
	if (gpu_batches == 0)
		return true;
	if (genie_placement_setting == GENIE_PLACEMENT_SHARD || gpu_alone ||
		gpu_batches >= GENIE_SERVICE_GPU_CALLS * state.n_gpus ||
		(gpu_batches >= state.n_gpus && genie_worker_batch_ranges(b) < GENIE_SERVICE_QUEUE_RANGES))
		return !genie_worker_batch_wants_gpu(&state, b, NULL);
	return !genie_worker_batch_wants_gpu(&state, b, &alone) || !alone;
}

/* Hands b's searches to a free runner (b is then in flight), or is done with b. */
static void
start(CycleBatch *b)
{
	int			r = free_runner();
	bool		uses_gpu;
	bool		alone = false;

	Assert(r >= 0 && b == &state.batches[state.cur]);
	/*
	 * (before the start makes the batch's engines): a scan of stored values
	 * or a first search runs alone on the GPUs, as can_start keeps it
	 */
	(void) genie_worker_batch_wants_gpu(&state, b, &alone);
	if (genie_worker_start_batch(&state, b, &state.runners[r], &uses_gpu))
	{
		state.in_flight[r] = b;
		state.in_flight_gpu[r] = uses_gpu;
		state.in_flight_gpu_alone[r] = uses_gpu && alone;
		/* collect into a batch no runner holds: there is one more than runners */
		for (int i = 0; i <= GENIE_SERVICE_RUNNERS; i++)
		{
			bool		held = false;

			for (int j = 0; j < GENIE_SERVICE_RUNNERS; j++)
				held |= state.in_flight[j] == &state.batches[i];
			if (!held)
			{
				state.cur = i;
				break;
			}
		}
	}
	else
		reset_batch(b);
}

static void
probe_devices(void)
{
	GenieServiceShared *sh = genie_service_shared;
	genie_device_info devices[16];
	size_t		n = 0;
	genie_error err;
	genie_build_info build;
	bool		usable = false;
	char		reason[128] = "";

	genie_get_build_info(&build);
	if (!build.with_cuda)
		strlcpy(reason, "genie was built without CUDA", sizeof(reason));
	else if (genie_list_devices(devices, lengthof(devices), &n, &err) != GENIE_OK)
		strlcpy(reason, err.message, sizeof(reason));
	else
	{
		strlcpy(reason, genie_device_mask == 0 ? "genie.devices is none" :
				"no usable GPU was found among genie.devices", sizeof(reason));
		state.device_bytes_total = 0;
		state.n_gpus = 0;
		for (size_t i = 0; i < n; i++)
		{
			if (devices[i].kind == GENIE_DEVICE_GPU && devices[i].usable &&
				genie_device_in_use(devices[i].ordinal))
			{
				usable = true;
				state.n_gpus++;
				state.device_bytes_total += (int64) devices[i].memory_bytes;
			}
		}
	}
	state.gpu_usable = usable;
	SpinLockAcquire(&sh->mutex);
	sh->gpu_usable = usable;
	strlcpy(sh->gpu_reason, usable ? "" : reason, sizeof(sh->gpu_reason));
	SpinLockRelease(&sh->mutex);
}

void
genie_service_main(Datum arg)
{
	GenieServiceShared *sh = genie_service_shared;
	int			last_batch = 0;
	TimestampTz last_release = 0;
	TimestampTz now;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* no database: a connection only to appear in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("genie service");

	memset(&state, 0, sizeof(state));
	state.top_cxt = AllocSetContextCreate(TopMemoryContext, "genie service",
										  ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i <= GENIE_SERVICE_RUNNERS; i++)
	{
		state.batches[i].cxt = AllocSetContextCreate(state.top_cxt, "genie service batch",
													 ALLOCSET_DEFAULT_SIZES);
		state.batches[i].taken = MemoryContextAllocZero(state.top_cxt,
														sizeof(TakenRequest) * sh->n_slots);
		state.batches[i].slot_entry = MemoryContextAlloc(state.top_cxt, sizeof(int) * sh->n_slots);
		for (int j = 0; j < sh->n_slots; j++)
			state.batches[i].slot_entry[j] = -1;
	}
	state.mapped = MemoryContextAllocZero(state.top_cxt, sizeof(dsm_segment *) * sh->n_slots);
	state.mapped_handle = MemoryContextAllocZero(state.top_cxt, sizeof(dsm_handle) * sh->n_slots);
	probe_devices();
	/*
	 * GENIE_SERVICE_GPU_CALLS runners a GPU and one for CPU batches, at
	 * least two: with two runners a host of four GPUs had at most two
	 * batches in flight, so two of its GPUs sat idle under load (each batch
	 * below MultiDeviceEngine::kSplitQueries runs whole on one GPU while
	 * another is searched).
	 */
	state.n_runners = Max(2, Min(GENIE_SERVICE_GPU_CALLS * state.n_gpus + 1, GENIE_SERVICE_RUNNERS));
	/* it holds nothing: backends let go of the segments a previous service shared */
	pg_atomic_fetch_add_u64(&sh->shared_dropped, 1);

	before_shmem_exit(service_exit, (Datum) 0);
	SpinLockAcquire(&sh->mutex);
	sh->generation++;
	sh->pid = MyProcPid;
	sh->latch = MyLatch;
	sh->skip_wake = false;
	sh->ready = true;
	SpinLockRelease(&sh->mutex);
	ereport(LOG, (errmsg("genie service started: %s",
						 state.gpu_usable ? "searches run on the GPU or the CPU engine"
						 : "no usable GPU; searches run on the CPU engine")));

	for (int r = 0; r < state.n_runners; r++)
		genie_runner_init(&state.runners[r], r, MyLatch);
	genie_runner_init(&state.range_runner, GENIE_SERVICE_RANGE_RUNNER, MyLatch);

	for (;;)
	{
		CycleBatch *b = &state.batches[state.cur];
		CycleBatch *done[GENIE_SERVICE_RUNNERS];
		int			n_done = 0;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		/*
		 * A GPU error (a search's, a verification's, a scan's), once no
		 * batch is in flight: exit for a fresh device context.  Every batch
		 * searched was answered; none starts after the error.  A range
		 * search still running is told to stop (its backend then searches
		 * in-process, as those waiting for it and new requests do).
		 */
		if (state.device_failed && n_in_flight() == 0)
		{
			if (state.range_running == NULL)
			{
				genie_worker_publish_stats(&state);
				ereport(LOG,
						(errmsg("genie service: a GPU error; the service restarts with a fresh device context")));
				proc_exit(1);
			}
			genie_runner_abandon_range();
			(void) collect(b);
			for (int i = 0; i < b->n_taken; i++)
				genie_worker_fail_request(&b->taken[i]);
			reset_batch(b);
			(void) genie_worker_poll_within(&state);
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}
		(void) collect(b);
		/* a range search done: its answer, and the next one to the range runner */
		if (genie_worker_poll_within(&state))
			genie_worker_publish_stats(&state);
		/* once a second, busy or not: the versions nobody can use go */
		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(last_release, now, 1000))
		{
			last_release = now;
			if (genie_worker_release_unused(&state))
				genie_worker_publish_stats(&state);
			/* range answers kept for a second ask that did not come */
			genie_worker_forget_kept(&state, -1);
			/* payload room of batches idle (none taken) that held nothing for a while */
			for (int i = 0; i <= GENIE_SERVICE_RUNNERS; i++)
			{
				CycleBatch *idle = &state.batches[i];

				if (idle->room != NULL && idle->n_taken == 0 &&
					TimestampDifferenceExceeds(idle->room_used_at, now, GENIE_SERVICE_ROOM_IDLE_MS))
				{
					pfree(idle->room);
					state.room_bytes -= idle->room_size;
					idle->room = NULL;
					idle->room_size = 0;
				}
			}
		}

		for (int r = 0; r < GENIE_SERVICE_RUNNERS; r++)
		{
			if (state.in_flight[r] != NULL && genie_runner_done(&state.runners[r]))
			{
				done[n_done++] = state.in_flight[r];
				state.in_flight[r] = NULL;
			}
		}
		if (n_done > 0 || n_in_flight() > 0)
		{
			/* the next batch goes to a runner before the finished ones are answered */
			if (b->n_taken > 0 && !state.device_failed && can_start(b))
			{
				last_batch = b->n_taken;
				start(b);
			}
			for (int i = 0; i < n_done; i++)
			{
				genie_worker_finish_batch(&state, done[i]);
				reset_batch(done[i]);
			}
			if (n_done > 0)
			{
				genie_worker_publish_stats(&state);
				continue;
			}
			/* a runner sets the latch when done; new requests set it too */
			if (ready_to_sleep(free_runner() < 0))
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 1L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		if (b->n_taken == 0)
		{
			last_batch = 0;
			unmap_stale_segments();
			if (ready_to_sleep(false))
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 1000L, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}
		/*
		 * A lone small request on a service that saw no more last time:
		 * searched on this thread, without the hand-off to a runner and back
		 * (two thread wake-ups).  A large batch (one genie_knn of thousands
		 * of queries, postings or stored values) still goes to a runner, so
		 * that the worker keeps taking, and on the CPU engine searching,
		 * other sessions' requests.
		 */
		if (b->n_taken == 1 && last_batch <= 1 &&
			((b->taken[0].req.kind != GENIE_REQUEST_SEARCH &&
			  b->taken[0].req.kind != GENIE_REQUEST_SCAN_VALUES) ||
			 b->taken[0].req.n_queries <= GENIE_SERVICE_INLINE_QUERIES))
		{
			bool		uses_gpu;

			last_batch = 1;
			if (genie_worker_start_batch(&state, b, NULL, &uses_gpu))
				genie_worker_finish_batch(&state, b);
			reset_batch(b);
			genie_worker_publish_stats(&state);
			continue;
		}
		/* queries keep arriving: give the others a moment to join the batch */
		if (last_batch > 1 && genie_batch_window_ms > 0)
		{
			pg_usleep((long) (genie_batch_window_ms * 1000.0));
			(void) collect(b);
		}
		last_batch = b->n_taken;
		start(b);
		genie_worker_publish_stats(&state);
	}
}
