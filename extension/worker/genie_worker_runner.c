/*-------------------------------------------------------------------------
 *
 * genie_worker_runner.c
 *	  The genie service's runner thread: it runs a batch's engine searches
 *	  while the worker's own thread collects the next requests and writes
 *	  the previous batch's answers, so that the engine is busy back to back
 *	  under load instead of waiting for the worker's bookkeeping.
 *
 * The thread calls only the C API (genie_engine_search) and SetLatch, which
 * is safe from any thread: it sets a flag and signals the process.  It never
 * touches PostgreSQL memory other than the jobs the worker hands it, which
 * the worker leaves alone until the runner says it is done.  Its signals
 * are blocked from its start, so they all go to the worker's thread.  If it
 * cannot be started, the jobs run on the worker's thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "port/atomics.h"

#include "worker/genie_worker_internal.h"

static pthread_t runner_thread;
static pthread_mutex_t runner_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t runner_wake = PTHREAD_COND_INITIALIZER;
static bool runner_started = false;
static bool runner_has_work = false;

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

void
genie_run_job(SearchJob *job)
{
	ServedIndex *s = job->served;
	double		start = now_ms();

	/* the engine's cancel callback reads these: the backends it serves */
	s->cancel[job->kind].members = job->members;
	s->cancel[job->kind].n = job->n_members;
	job->results = NULL;
	job->status = genie_engine_search(s->engines[job->kind], &job->batch, job->k,
									  &job->results, &job->err);
	s->cancel[job->kind].n = 0;
	job->engine_ms = now_ms() - start;
}

static void *
runner_main(void *arg)
{
	GenieRunner *r = (GenieRunner *) arg;

	for (;;)
	{
		SearchJob **jobs;
		int			n_jobs;

		pthread_mutex_lock(&runner_mutex);
		while (!runner_has_work)
			pthread_cond_wait(&runner_wake, &runner_mutex);
		runner_has_work = false;
		jobs = r->jobs;
		n_jobs = r->n_jobs;
		pthread_mutex_unlock(&runner_mutex);

		for (int i = 0; i < n_jobs; i++)
			genie_run_job(jobs[i]);

		/* the worker reads the jobs only after it sees busy cleared */
		pg_memory_barrier();
		r->busy = false;
		SetLatch(r->latch);
	}
	return NULL;
}

void
genie_runner_init(GenieRunner *r, Latch *latch)
{
	sigset_t	all,
				saved;

	memset(r, 0, sizeof(*r));
	r->latch = latch;
	/* the thread inherits this mask: no signal ever reaches it */
	sigfillset(&all);
	if (pthread_sigmask(SIG_BLOCK, &all, &saved) != 0)
		return;
	runner_started = pthread_create(&runner_thread, NULL, runner_main, r) == 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (!runner_started)
		ereport(LOG,
				(errmsg("genie service: no runner thread; engine searches run on the worker's thread")));
}

void
genie_runner_submit(GenieRunner *r, SearchJob **jobs, int n_jobs)
{
	if (!runner_started)
	{
		for (int i = 0; i < n_jobs; i++)
			genie_run_job(jobs[i]);
		return;
	}
	pthread_mutex_lock(&runner_mutex);
	r->jobs = jobs;
	r->n_jobs = n_jobs;
	r->busy = true;
	runner_has_work = true;
	pthread_cond_signal(&runner_wake);
	pthread_mutex_unlock(&runner_mutex);
}

bool
genie_runner_done(GenieRunner *r)
{
	if (r->busy)
		return false;
	pg_memory_barrier();
	return true;
}
