/*-------------------------------------------------------------------------
 *
 * genie_slot_wake.c
 *	  How the genie service wakes a backend that waits for its answer: a
 *	  futex word in the backend's slot (see genie_slot_wake.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef __linux__
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "utils/wait_event.h"

#include "service/genie_slot_wake.h"

#ifdef __linux__
/*
 * The word a futex call names.  A pg_atomic_uint32 is a struct around one
 * aligned 32-bit value on every platform PostgreSQL builds on; the futex
 * is shared (not FUTEX_PRIVATE_FLAG) because the slot is in the server's
 * shared memory and the two sides are different processes.
 */
StaticAssertDecl(sizeof(((pg_atomic_uint32 *) 0)->value) == sizeof(uint32),
				 "a futex word is 32 bits: pg_atomic_uint32's value must be one");

static uint32 *
futex_word(GenieServiceSlot *slot)
{
	return (uint32 *) &slot->wake_word.value;
}
#endif

uint32
genie_slot_prepare_sleep(GenieServiceSlot *slot)
{
#ifdef __linux__
	uint32		seen = pg_atomic_read_u32(&slot->wake_word);

	pg_atomic_write_u32(&slot->sleeping, 1);
	/* the caller's state check comes after the announcement */
	pg_memory_barrier();
	return seen;
#else
	return 0;
#endif
}

void
genie_slot_cancel_sleep(GenieServiceSlot *slot)
{
#ifdef __linux__
	pg_atomic_write_u32(&slot->sleeping, 0);
#endif
}

void
genie_slot_sleep(GenieServiceSlot *slot, uint32 seen, int timeout_ms)
{
#ifdef __linux__
	struct timespec timeout;
	int			saved_errno = errno;

	timeout.tv_sec = timeout_ms / 1000;
	timeout.tv_nsec = (long) (timeout_ms % 1000) * 1000000L;
	/*
	 * Returns on a wake, at once when the word moved on since seen, at the
	 * timeout, and with EINTR when a signal's handler ran (a timed futex
	 * wait is not restarted after a handler, SA_RESTART or not), so a
	 * cancel is seen at once.
	 */
	pgstat_report_wait_start(PG_WAIT_EXTENSION);
	(void) syscall(SYS_futex, futex_word(slot), FUTEX_WAIT, seen, &timeout, NULL, 0);
	pgstat_report_wait_end();
	errno = saved_errno;
	pg_atomic_write_u32(&slot->sleeping, 0);
	if (!PostmasterIsAlive())
		proc_exit(1);
#else
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 timeout_ms, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
#endif
}

void
genie_slot_wake(GenieServiceSlot *slot)
{
#ifdef __linux__
	/* a full barrier: the state written before it, the flag read after it */
	pg_atomic_fetch_add_u32(&slot->wake_word, 1);
	if (pg_atomic_read_u32(&slot->sleeping) != 0)
		(void) syscall(SYS_futex, futex_word(slot), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
	/*
	 * Read without the mutex: a backend that left since has its PGPROC's
	 * latch still in shared memory, and a wake for nothing is harmless.
	 */
	Latch	   *latch = slot->latch;

	if (latch != NULL)
		SetLatch(latch);
#endif
}
