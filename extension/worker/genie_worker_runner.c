/*-------------------------------------------------------------------------
 *
 * genie_worker_runner.c
 *	  The genie service's runner threads: each runs a batch's engine
 *	  searches while the worker's own thread collects the next requests and
 *	  writes the previous batch's answers, so that the engine is busy back
 *	  to back under load instead of waiting for the worker's bookkeeping;
 *	  with several, the CPU engine searches several batches at once (its
 *	  calls run concurrently), and a GPU takes a second batch while one
 *	  runs, the second's host work done meanwhile (can_start in
 *	  genie_worker.c).
 *
 * A thread calls only the C API (genie_engine_search, and for scans and range
 * searches of stored values genie_value_set_scan and genie_value_set_within,
 * which only call it) and
 * SetLatch, which is safe from any thread: it sets a flag and signals the
 * process.  It never
 * touches PostgreSQL memory other than the jobs the worker hands it, which
 * the worker leaves alone until the runner says it is done.  Its signals
 * are blocked from its start, so they all go to the worker's thread.  If it
 * cannot be started, its jobs run on the worker's thread.
 *
 * The engines' cancel callback reads the requests of every call searching
 * an engine (CancelGroup); they change and are read under one mutex, so a
 * runner that finishes never frees what another's callback is reading.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "miscadmin.h"
#include "port/atomics.h"

#include "worker/genie_worker_internal.h"

/* each runner's thread and its hand-off */
typedef struct RunnerThread
{
	pthread_t	thread;
	pthread_mutex_t mutex;
	pthread_cond_t wake;
	bool		started;
	bool		has_work;
} RunnerThread;

static RunnerThread runner_threads[GENIE_SERVICE_RUNNERS + 1];	/* and the range runner */
static pthread_mutex_t cancel_mutex = PTHREAD_MUTEX_INITIALIZER;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

void
genie_cancel_group_set(CancelGroup *g, int searcher, TakenRequest **members, int n)
{
	Assert(searcher >= 0 && searcher < GENIE_SERVICE_SEARCHERS);
	pthread_mutex_lock(&cancel_mutex);
	g->searchers[searcher].members = members;
	g->searchers[searcher].n = n;
	pthread_mutex_unlock(&cancel_mutex);
}

void
genie_cancel_group_one(CancelGroup *g, TakenRequest **members, int n)
{
	memset(g, 0, sizeof(*g));
	genie_cancel_group_set(g, GENIE_WORKER_SEARCHER, members, n);
}

/* Whether every request of members withdrew (none: false). */
static bool
all_withdrawn(TakenRequest *const *members, int n)
{
	volatile GenieServiceSlot *slots = genie_service_shared->slots;

	for (int i = 0; i < n; i++)
	{
		const TakenRequest *t = members[i];

		if (slots[t->slot].seq == t->seq && slots[t->slot].state == GENIE_SLOT_TAKEN)
			return false;
	}
	return n > 0;
}

/* Set when the worker exits: every search stops at its next poll (also on an exit not by a signal). */
static volatile sig_atomic_t all_abandoned = false;

void
genie_runner_abandon_all(void)
{
	all_abandoned = true;
}

/*
 * The engines' cancel callback: stop when every backend of every call
 * searching the engine withdrew (with none, an upload: never).  Searches
 * poll their own job's instead (genie_worker_job_cancelled).
 */
int
genie_cancel_group_cancelled(void *arg)
{
	const CancelGroup *g = (const CancelGroup *) arg;
	bool		any = false;
	bool		live = false;

	if (ProcDiePending || all_abandoned)
		return 1;
	pthread_mutex_lock(&cancel_mutex);
	for (int e = 0; e < GENIE_SERVICE_SEARCHERS && !live; e++)
	{
		const CancelEntry *c = &g->searchers[e];

		if (c->n == 0)
			continue;
		any = true;
		live = !all_withdrawn(c->members, c->n);
	}
	pthread_mutex_unlock(&cancel_mutex);
	return any && !live ? 1 : 0;
}

int
genie_worker_job_cancelled(void *arg)
{
	const SearchJob *job = (const SearchJob *) arg;

	if (ProcDiePending || all_abandoned)
		return 1;
	return all_withdrawn(job->members, job->n_members) ? 1 : 0;
}

/* Set when the worker exits or its GPU failed: the range search stops at its next poll. */
static volatile sig_atomic_t range_abandoned = false;

void
genie_runner_abandon_range(void)
{
	range_abandoned = true;
}

static int
within_cancelled(void *arg)
{
	return range_abandoned ? 1 : genie_worker_job_cancelled(arg);
}

/*
 * A range search of stored values: its engine call, and on the CPU when an
 * auto request's GPU ran out of memory.  It stops when its backend withdrew,
 * or the worker abandons it.
 */
static void
run_within(SearchJob *job)
{
	WithinJob  *w = job->within;
	double		start = now_ms();

	w->options.cancel = within_cancelled;
	w->options.cancel_arg = job;
	w->cpu_options.cancel = within_cancelled;
	w->cpu_options.cancel_arg = job;
	w->found = NULL;
	job->status = genie_value_set_within(&w->values->set, job->kind, &w->options, &w->queries, w->radius,
										 w->excluded, w->values->list, NULL, NULL, &w->found, &job->err);
	if (job->status == GENIE_DEVICE_OUT_OF_MEMORY && w->cpu_fallback)
	{
		job->device_fallback = true;
		genie_range_results_free(w->found);
		w->found = NULL;
		job->status = genie_value_set_within(&w->values->set, GENIE_ENGINE_CPU, &w->cpu_options, &w->queries,
											 w->radius, w->excluded, w->values->list, NULL, NULL, &w->found,
											 &job->err);
	}
	job->engine_ms = now_ms() - start;
}

/* The CPU scan after the GPU ran out of memory: for the members that allow it alone. */
static int
cpu_scan_cancelled(void *arg)
{
	const ScanJob *scan = (const ScanJob *) arg;

	if (ProcDiePending || all_abandoned)
		return 1;
	return all_withdrawn(scan->cpu_members, scan->n_cpu_members) ? 1 : 0;
}

/*
 * A k-nearest scan of stored values (made by genie_worker_scan_values): its
 * engine call, and on the CPU when its GPU ran out of memory and a member
 * allows it.  It stops when its backends withdrew.
 */
static void
run_scan(SearchJob *job)
{
	ScanJob    *scan = job->scan;
	double		start = now_ms();

	scan->options.cancel = genie_worker_job_cancelled;
	scan->options.cancel_arg = job;
	scan->cpu_options.cancel = cpu_scan_cancelled;
	scan->cpu_options.cancel_arg = scan;
	job->status = genie_value_set_scan(&scan->values->set, job->kind, &scan->options, &scan->queries,
									   job->k, scan->excluded, NULL, NULL, scan->list, scan->list_use,
									   &scan->found, &job->err);
	if (job->status == GENIE_DEVICE_OUT_OF_MEMORY && scan->n_cpu_members > 0)
	{
		/* those of the group that allow it run on the CPU; genie.device = gpu gets the error */
		job->device_fallback = true;
		scan->gpu_err = job->err;
		genie_value_found_free(&scan->found);
		job->status = genie_value_set_scan(&scan->values->set, GENIE_ENGINE_CPU, &scan->cpu_options,
										   &scan->queries, job->k, scan->excluded, NULL, NULL,
										   scan->list, scan->list_use, &scan->found, &job->err);
	}
	job->engine_ms = now_ms() - start;
}

void
genie_run_job(SearchJob *job, int searcher)
{
	ServedIndex *s = job->served;
	CancelGroup *group;
	double		start = now_ms();

	if (job->within != NULL)
	{
		run_within(job);
		return;
	}
	if (job->scan != NULL)
	{
		run_scan(job);
		return;
	}
	group = &s->cancel[job->kind];

	/* the engine's cancel callback reads these: the backends it serves */
	genie_cancel_group_set(group, searcher, job->members, job->n_members);
	job->results = NULL;
	/* and the search its own job's: it stops when its backends withdrew */
	job->status = genie_engine_search_with_cancel(s->engines[job->kind], &job->batch, job->k,
												  genie_worker_job_cancelled, job,
												  &job->results, &job->err);
	genie_cancel_group_set(group, searcher, NULL, 0);
	job->engine_ms = now_ms() - start;
}

static void *
runner_main(void *arg)
{
	GenieRunner *r = (GenieRunner *) arg;
	RunnerThread *rt = &runner_threads[r->id];

	for (;;)
	{
		SearchJob **jobs;
		int			n_jobs;

		pthread_mutex_lock(&rt->mutex);
		while (!rt->has_work)
			pthread_cond_wait(&rt->wake, &rt->mutex);
		rt->has_work = false;
		jobs = r->jobs;
		n_jobs = r->n_jobs;
		pthread_mutex_unlock(&rt->mutex);

		for (int i = 0; i < n_jobs; i++)
			genie_run_job(jobs[i], r->id);

		/* the worker reads the jobs only after it sees busy cleared */
		pg_memory_barrier();
		r->busy = false;
		SetLatch(r->latch);
	}
	return NULL;
}

void
genie_runner_init(GenieRunner *r, int id, Latch *latch)
{
	RunnerThread *rt = &runner_threads[id];
	sigset_t	all,
				saved;

	memset(r, 0, sizeof(*r));
	r->id = id;
	r->latch = latch;
	/* the thread inherits this mask: no signal ever reaches it */
	if (pthread_mutex_init(&rt->mutex, NULL) == 0 && pthread_cond_init(&rt->wake, NULL) == 0 &&
		sigfillset(&all) == 0 && pthread_sigmask(SIG_BLOCK, &all, &saved) == 0)
	{
		rt->started = pthread_create(&rt->thread, NULL, runner_main, r) == 0;
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	}
	if (!rt->started)
		ereport(LOG,
				(errmsg("genie service: no runner thread %d; its engine searches run on the worker's thread",
						id + 1)));
}

void
genie_runner_submit(GenieRunner *r, SearchJob **jobs, int n_jobs)
{
	RunnerThread *rt = &runner_threads[r->id];

	if (!rt->started)
	{
		for (int i = 0; i < n_jobs; i++)
			genie_run_job(jobs[i], r->id);
		return;
	}
	pthread_mutex_lock(&rt->mutex);
	r->jobs = jobs;
	r->n_jobs = n_jobs;
	r->busy = true;
	rt->has_work = true;
	pthread_cond_signal(&rt->wake);
	pthread_mutex_unlock(&rt->mutex);
}

bool
genie_runner_done(GenieRunner *r)
{
	if (r->busy)
		return false;
	pg_memory_barrier();
	return true;
}
