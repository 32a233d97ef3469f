/*-------------------------------------------------------------------------
 *
 * genie_search_device.c
 *	  Which engine an in-process search runs on, and its options (see
 *	  genie_search.h and the policy at the top of genie_search.c): genie.device,
 *	  the out-of-memory fallback to the CPU, and the CUDA context a backend
 *	  starts making before it reads the index of its first GPU search.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/ipc.h"

#include "genie_utils.h"
#include "search/genie_search_device.h"
#include "service/genie_service.h"

int			genie_device_setting = GENIE_DEVICE_SETTING_AUTO;
int			genie_device_memory_limit_mb = 0;

void
genie_search_engine_options(genie_engine_kind kind, int (*cancel) (void *), void *cancel_arg,
							genie_engine_options *options)
{
	memset(options, 0, sizeof(*options));
	options->threads = genie_cpu_threads;
	/* genie.device_memory_limit bounds device memory only */
	if (kind == GENIE_ENGINE_GPU)
		options->memory_budget_bytes = (uint64) genie_device_memory_limit_mb * 1024 * 1024;
	options->cancel = cancel;
	options->cancel_arg = cancel_arg;
}

genie_engine_kind
genie_search_device(void)
{
	/* preloaded, a backend searches in-process only while the service is away */
	if (genie_service_configured())
		return GENIE_ENGINE_CPU;
	return genie_device_setting == GENIE_DEVICE_SETTING_CPU ? GENIE_ENGINE_CPU
		: genie_device_setting == GENIE_DEVICE_SETTING_GPU ? GENIE_ENGINE_GPU : GENIE_ENGINE_AUTO;
}

/* At exit: the preparing thread must be out of the CUDA runtime before exit() tears it down. */
static void
wait_for_device_preparation(int code, Datum arg)
{
	(void) genie_gpu_prepare_wait(10000);
}

void
genie_search_prepare_device(void)
{
	static bool started = false;

	/*
	 * A backend's first GPU search paid the CUDA context (about 0.25 s on the
	 * H100 hosts) after reading its index; made meanwhile, the two overlap.
	 */
	if (started || genie_search_device() == GENIE_ENGINE_CPU)
		return;
	started = true;
	on_proc_exit(wait_for_device_preparation, (Datum) 0);
	genie_gpu_prepare(0);
}

bool
genie_search_cpu_fallback(genie_status status, const genie_error *err, const char *what)
{
	if (status != GENIE_DEVICE_OUT_OF_MEMORY || genie_device_setting == GENIE_DEVICE_SETTING_GPU)
		return false;
	ereport(NOTICE,
			(errmsg("genie: the GPU ran out of memory; this %s runs on the CPU", what),
			 errdetail("%s", err->message)));
	return true;
}
