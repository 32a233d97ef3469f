/*-------------------------------------------------------------------------
 *
 * genie_search_device.h
 *	  Which engine an in-process search runs on (genie.device), its options,
 *	  the out-of-memory fallback, and the CUDA context a backend makes while
 *	  it reads the index of its first GPU search.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_DEVICE_H
#define GENIE_SEARCH_DEVICE_H

#include "postgres.h"

#include "genie/genie.h"

/* genie.device: which engine runs searches */
typedef enum GenieDeviceSetting
{
	GENIE_DEVICE_SETTING_AUTO,
	GENIE_DEVICE_SETTING_CPU,
	GENIE_DEVICE_SETTING_GPU
} GenieDeviceSetting;

extern int	genie_device_setting;
extern int	genie_device_memory_limit_mb;

/* Engine options from genie.cpu_threads and genie.device_memory_limit. */
extern void genie_search_engine_options(genie_engine_kind kind, int (*cancel) (void *),
										void *cancel_arg, genie_engine_options *options);

/*
 * The engine an in-process scan of stored values runs on: CPU, GPU or
 * AUTO, as genie.device says (the CPU in a preloaded backend, whose
 * service is away).
 */
extern genie_engine_kind genie_search_device(void);

/*
 * Called before a search reads its index: when the search will run on this
 * backend's GPU, starts making the CUDA context (once per backend) on a
 * thread of its own, so that it overlaps the index's load.
 */
extern void genie_search_prepare_device(void);

/*
 * A GPU ran out of memory (status): true, after a NOTICE, when the work
 * (what) should run again on the CPU; false when it should not (another
 * status, or genie.device = gpu, which makes it an error).
 */
extern bool genie_search_cpu_fallback(genie_status status, const genie_error *err,
									  const char *what);

#endif							/* GENIE_SEARCH_DEVICE_H */
