/*-------------------------------------------------------------------------
 *
 * genie_shared_postings.h
 *	  A backend's mappings of the genie service's shared copies of index
 *	  versions' main postings (GenieSharedPostings, made by a service
 *	  without a GPU), read in place as a borrowed genie_index.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SHARED_POSTINGS_H
#define GENIE_SHARED_POSTINGS_H

#include "postgres.h"

#include "storage/dsm.h"

#include "service/genie_service.h"

/* Hands the version's main postings to the service (its outcome; NOT_RESIDENT: another backend is). */
typedef GenieServiceOutcome (*GenieShipPostings) (void *arg, genie_error *err);

typedef enum GenieSharedOutcome
{
	GENIE_SHARED_MAPPED,		/* *index reads the mapping *seg */
	GENIE_SHARED_REFUSED,		/* the service holds this version in its own memory */
	GENIE_SHARED_NOT_NOW		/* the service is away, busy or dropped it: ask again later */
} GenieSharedOutcome;

/*
 * The service's shared copy of version key of index_oid (split_length as
 * its metapage says) as a borrowed index in *index over the mapping *seg,
 * which the caller lets go of with genie_shared_postings_release after
 * freeing the index.  A version the service does not hold is handed over
 * with ship first; while another backend hands it over, this waits for
 * that, up to a second.  Versions this backend maps already are not asked
 * for again: their entries share one mapping (a segment cannot be mapped
 * twice in a process).
 */
extern GenieSharedOutcome genie_shared_postings_map(const GenieServiceKey *key, Oid index_oid,
													int32 split_length, GenieShipPostings ship,
													void *ship_arg, genie_index **index,
													dsm_segment **seg);
extern void genie_shared_postings_release(dsm_segment *seg);

/*
 * The count of the service's drops of shared versions (and of its starts)
 * when it changed since this backend last checked its mappings, while it
 * maps some; else 0.  The caller then lets go of each mapped version that
 * is not current, and says genie_shared_postings_checked(count) once it
 * could check every one (an entry in use waits for the next statement).
 */
extern uint64 genie_shared_postings_stale(void);
extern void genie_shared_postings_checked(uint64 dropped);

/*
 * Whether seg is the copy of version key the service holds now (a
 * restarted service, or one that dropped the version and took it again,
 * holds another or none): when not, no new entry reads it.
 */
extern bool genie_shared_postings_current(dsm_segment *seg, const GenieServiceKey *key);

#endif							/* GENIE_SHARED_POSTINGS_H */
