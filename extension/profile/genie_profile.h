/*-------------------------------------------------------------------------
 *
 * genie_profile.h
 *	  Where a backend's genie statements spend their time
 *	  (genie_profile.c): with genie.profile = on, every search charges its
 *	  time to phases, exclusively (a phase inside another is not counted in
 *	  the outer one), and genie_profile() shows the sums since
 *	  genie_profile_reset().  Off (the default) it costs one branch a phase.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_PROFILE_H
#define GENIE_PROFILE_H

#include "postgres.h"

typedef enum GeniePhase
{
	GENIE_PHASE_QUERY,			/* SQL query values into engine queries (encoding, arrays) */
	GENIE_PHASE_CACHE,			/* the cache entry: stamp check, directory and pending list */
	GENIE_PHASE_LOAD,			/* postings or stored values from pages to host, versions
								 * handed to the service */
	GENIE_PHASE_UPLOAD,			/* an index's engine made, its device copy included */
	GENIE_PHASE_SERVICE,		/* a request's round trip to the genie service, less its
								 * queue wait and engine time there (hand-off, copies) */
	GENIE_PHASE_QUEUE,			/* in the service: waiting to be batched */
	GENIE_PHASE_ENGINE,			/* engine calls (in this backend, or the service's batch) */
	GENIE_PHASE_PENDING,		/* the pending list searched and merged with the main part */
	GENIE_PHASE_VISIBILITY,		/* visibility checks and heap fetches of result rows */
	GENIE_PHASE_RESULTS			/* result rows handed to the executor or a function's output */
} GeniePhase;

#define GENIE_N_PHASES (GENIE_PHASE_RESULTS + 1)

extern bool genie_profile_enabled;

/*
 * Starts charging time to phase (until genie_profile_pop); the phase it
 * interrupts resumes after.  Nothing when genie.profile is off.
 */
extern void genie_profile_push(GeniePhase phase);
extern void genie_profile_pop(void);

/*
 * Moves ms from the current phase to another: what the service reports of
 * a request's round trip (its queue wait and engine time).
 */
extern void genie_profile_move(GeniePhase to, double ms);

/*
 * The sums so far, phase by phase (GENIE_N_PHASES each), and setting them
 * back: EXPLAIN (ANALYZE) profiles its statement without counting it in a
 * session's genie_profile() that was off.
 */
extern void genie_profile_read(double *ms, int64 *calls);
extern void genie_profile_restore(const double *ms, const int64 *calls);

/* The GUC genie.profile, and forgetting an unfinished phase stack on abort. */
extern void genie_profile_init(void);

#endif							/* GENIE_PROFILE_H */
