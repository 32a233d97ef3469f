/*-------------------------------------------------------------------------
 *
 * genie_cache_values.h
 *	  The stored values of a cached index version (genie_cache_values.c):
 *	  every object's for a scan in this backend or, with the genie service,
 *	  the pending objects' alone here and the main objects' handed to the
 *	  service.  Strings and vectors alike: the entry's values_kind says
 *	  which.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_CACHE_VALUES_H
#define GENIE_CACHE_VALUES_H

#include "search/genie_cache.h"

/*
 * The stored values of every object of the entry (values_stored must be
 * true), read from the index the first time, with entry->excluded; the
 * same serialization-failure error as genie_cache_load_main when the index
 * was merged since the entry was read.
 */
extern const GenieValueSet *genie_cache_values(GenieCachedIndex *entry);

/* The pending objects' values alone (by pending position), read the first time. */
extern const GenieValueSet *genie_cache_pending_values(GenieCachedIndex *entry);

/* The ids of the main objects that are dead or NULL (*n of them), ascending. */
extern const int32 *genie_cache_excluded_main(GenieCachedIndex *entry, int32 *n);

/*
 * A flag per pending object (by pending position): 1 when it is dead or
 * NULL.  palloc'd in the current context: the pending list changes between
 * statements, so it is not kept.
 */
extern uint8 *genie_cache_excluded_pending(GenieCachedIndex *entry);

/*
 * Hands the main objects' values to the genie service, and list_bytes of
 * list, the stored form of the index's List of Clusters (NULL: none;
 * genie_clusters_ship_values reads it): its outcome (NOT_RESIDENT while
 * another backend hands over the same version).
 */
extern GenieServiceOutcome genie_cache_ship_values(GenieCachedIndex *entry, const char *list,
												   int64 list_bytes, genie_error *err);

#endif							/* GENIE_CACHE_VALUES_H */
