/*-------------------------------------------------------------------------
 *
 * genie_slot_wake.h
 *	  How the genie service wakes a backend that waits for its answer.
 *
 * A backend waits on a futex word in its slot, not on its latch.  Setting
 * a sleeping backend's latch costs the service a signal (kill(), about
 * 5 us on the 2-core machine, 65% of the service's own thread under load:
 * bench/service-waker-2core.txt); a futex wake is one system call without
 * a signal's delivery, and nothing when the backend is not asleep.  The
 * service's thread is the serial part of a GPU host's service, so its
 * cost a statement bounds the service's throughput.
 *
 * The handshake is the latch's: the backend announces that it will sleep,
 * then checks its slot's state, then sleeps only if the word still holds
 * the value it read before the check; the service changes the state, bumps
 * the word, then wakes the backend if it announced sleep.  Either the
 * backend sees the new state or the service sees it asleep (full barriers
 * on both sides), and a bump between the check and the sleep makes the
 * sleep return at once.
 *
 * Elsewhere than Linux the wait is the latch's (WaitLatch and SetLatch).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SLOT_WAKE_H
#define GENIE_SLOT_WAKE_H

#include "service/genie_service.h"

/* the longest a backend sleeps before it looks again (cancel, worker gone) */
#define GENIE_SLOT_SLEEP_MS 20

/* the backend, before it checks its slot's state: the word to sleep on */
extern uint32 genie_slot_prepare_sleep(GenieServiceSlot *slot);

/*
 * The backend: sleeps until the service wakes it, the word moved on from
 * seen, a signal's handler ran, or timeout_ms passed; then checks for the
 * postmaster's death (it exits then, as WL_EXIT_ON_PM_DEATH does).  The
 * caller checks for interrupts.
 */
extern void genie_slot_sleep(GenieServiceSlot *slot, uint32 seen, int timeout_ms);

/* the backend, after its state check found no need to sleep */
extern void genie_slot_cancel_sleep(GenieServiceSlot *slot);

/* the service, after it changed the slot's state (not under the mutex) */
extern void genie_slot_wake(GenieServiceSlot *slot);

#endif							/* GENIE_SLOT_WAKE_H */
