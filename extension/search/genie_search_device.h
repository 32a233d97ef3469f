/*-------------------------------------------------------------------------
 *
 * genie_search_device.h
 *	  Which engine an in-process search runs on (genie.device, genie.devices,
 *	  genie.placement), its options,
 *	  the out-of-memory fallback, and the CUDA context a backend makes while
 *	  it reads the index of its first GPU search.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_SEARCH_DEVICE_H
#define GENIE_SEARCH_DEVICE_H

#include "postgres.h"

#include "genie/genie.h"
#include "utils/guc.h"

/* genie.device: which engine runs searches */
typedef enum GenieDeviceSetting
{
	GENIE_DEVICE_SETTING_AUTO,
	GENIE_DEVICE_SETTING_CPU,
	GENIE_DEVICE_SETTING_GPU
} GenieDeviceSetting;

extern int	genie_device_setting;
extern int	genie_device_memory_limit_mb;

/*
 * genie.devices: the GPUs genie may use, as a bit per CUDA ordinal ('all':
 * every bit; 'none': 0), and genie.placement: how an index is spread over
 * several (a genie_placement).
 */
extern char *genie_devices_setting;
extern uint64 genie_device_mask;
extern int	genie_placement_setting;

extern bool genie_devices_check(char **newval, void **extra, GucSource source);
extern void genie_devices_assign(const char *newval, void *extra);
/* The lowest CUDA ordinal genie.devices names (0 for 'all'), -1 for 'none'. */
extern int	genie_first_device(void);
/* Whether genie.devices names GPU ordinal. */
static inline bool
genie_device_in_use(int ordinal)
{
	return ordinal >= 0 && ordinal < 64 && (genie_device_mask & (UINT64CONST(1) << ordinal)) != 0;
}

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
 * A WARNING when engine (a device group) dropped more GPUs than *seen says
 * it had; *seen becomes how many it has dropped.
 */
extern void genie_search_note_dropped_devices(const genie_engine *engine, int *seen);

/*
 * A GPU ran out of memory (status): true, after a NOTICE, when the work
 * (what) should run again on the CPU; false when it should not (another
 * status, or genie.device = gpu, which makes it an error).
 */
extern bool genie_search_cpu_fallback(genie_status status, const genie_error *err,
									  const char *what);

#endif							/* GENIE_SEARCH_DEVICE_H */
