/*-------------------------------------------------------------------------
 *
 * genie_worker_waker.c
 *	  Waking the backends a batch answered, off the worker's thread.
 *
 * A backend waiting for its answer sleeps on its latch, and SetLatch on a
 * sleeping process's latch is a kill(): on the 2-core machine 65% of the
 * worker's thread's time at 32 clients went into those signals (perf,
 * about 5.4 us each; bench/service-waker-2core.txt), and the worker's one
 * thread is what gathers and answers every request.  So while it answers a batch (genie_worker_finish_batch)
 * the worker queues the latches, and hands them to the waker threads at
 * the end, which set them.  A lone answer is woken at once on the worker's
 * thread: a hand-off would only add a thread's wake-up to its latency.
 *
 * A waker thread calls SetLatch only (safe from any thread: a flag, then a
 * signal to the owner); its signals are blocked, as a runner's are.  A
 * latch handed over is set exactly once; where no waker could be started,
 * or its queue is full, the worker's thread sets it.  The slot's state is
 * written under the service's spinlock before its latch is queued, so the
 * woken backend reads its answer; should the process exit with latches
 * queued, their backends see the service's new generation within their
 * 100 ms poll, as for any lost wake-up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include "storage/latch.h"

#include "worker/genie_worker_internal.h"

/* the waker threads (a latch takes 5 to 6 us to set: some 170,000 a second each) */
#define GENIE_SERVICE_WAKERS 2
#define GENIE_WAKE_QUEUE 1024

typedef struct WakerThread
{
	pthread_t	thread;
	pthread_mutex_t mutex;
	pthread_cond_t wake;
	bool		started;
	int			n;
	Latch	   *queue[GENIE_WAKE_QUEUE];
} WakerThread;

static WakerThread wakers[GENIE_SERVICE_WAKERS];

/* the worker's thread's latches queued during a batch's answers */
static bool deferring = false;
static int	n_deferred = 0;
static Latch *deferred[GENIE_WAKE_QUEUE];

static void *
waker_main(void *arg)
{
	WakerThread *w = (WakerThread *) arg;
	Latch	   *mine[GENIE_WAKE_QUEUE];

	for (;;)
	{
		int			n;

		pthread_mutex_lock(&w->mutex);
		while (w->n == 0)
			pthread_cond_wait(&w->wake, &w->mutex);
		n = w->n;
		memcpy(mine, w->queue, sizeof(Latch *) * n);
		w->n = 0;
		pthread_mutex_unlock(&w->mutex);
		for (int i = 0; i < n; i++)
			SetLatch(mine[i]);
	}
	return NULL;
}

void
genie_wakers_init(void)
{
	for (int i = 0; i < GENIE_SERVICE_WAKERS; i++)
	{
		WakerThread *w = &wakers[i];
		sigset_t	all,
					saved;

		w->n = 0;
		/* the thread inherits this mask: no signal ever reaches it */
		if (pthread_mutex_init(&w->mutex, NULL) == 0 && pthread_cond_init(&w->wake, NULL) == 0 &&
			sigfillset(&all) == 0 && pthread_sigmask(SIG_BLOCK, &all, &saved) == 0)
		{
			w->started = pthread_create(&w->thread, NULL, waker_main, w) == 0;
			pthread_sigmask(SIG_SETMASK, &saved, NULL);
		}
		if (!w->started)
			ereport(LOG,
					(errmsg("genie service: no waker thread %d; its backends are woken by the worker's thread",
							i + 1)));
	}
}

/* Hands latches[0..n) to a waker; false when none took them. */
static bool
hand_over(WakerThread *w, Latch **latches, int n)
{
	if (!w->started)
		return false;
	pthread_mutex_lock(&w->mutex);
	if (w->n + n > GENIE_WAKE_QUEUE)
	{
		pthread_mutex_unlock(&w->mutex);
		return false;
	}
	memcpy(w->queue + w->n, latches, sizeof(Latch *) * n);
	w->n += n;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->mutex);
	return true;
}

static void
flush_deferred(void)
{
	int			n = n_deferred;

	n_deferred = 0;
	if (n == 1)
	{
		SetLatch(deferred[0]);
		return;
	}
	/* split over the wakers, each part set where no waker takes it */
	for (int i = 0, from = 0; i < GENIE_SERVICE_WAKERS && from < n; i++)
	{
		int			part = (n - from + (GENIE_SERVICE_WAKERS - i) - 1) / (GENIE_SERVICE_WAKERS - i);

		if (!hand_over(&wakers[i], deferred + from, part))
			for (int j = from; j < from + part; j++)
				SetLatch(deferred[j]);
		from += part;
	}
}

void
genie_worker_wake(Latch *latch)
{
	if (!deferring)
	{
		SetLatch(latch);
		return;
	}
	if (n_deferred == GENIE_WAKE_QUEUE)
		flush_deferred();
	deferred[n_deferred++] = latch;
}

void
genie_worker_defer_wakes(bool defer)
{
	if (!defer && n_deferred > 0)
		flush_deferred();
	deferring = defer;
}
