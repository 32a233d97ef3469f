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

#include "lib/stringinfo.h"
#include "storage/ipc.h"

#include "genie_utils.h"
#include "search/genie_search_device.h"
#include "service/genie_service.h"

int			genie_device_setting = GENIE_DEVICE_SETTING_AUTO;
int			genie_device_memory_limit_mb = 0;
char	   *genie_devices_setting = NULL;
uint64		genie_device_mask = ~UINT64CONST(0);
int			genie_placement_setting = GENIE_PLACEMENT_AUTO;

/*
 * genie.devices: 'all', 'none', or CUDA ordinals (0 to 63) separated by
 * commas.  The mask goes to assign through *extra.
 */
bool
genie_devices_check(char **newval, void **extra, GucSource source)
{
	uint64		mask = 0;
	const char *p = *newval;
	char	   *trimmed;
	uint64	   *out;

	while (*p == ' ')
		p++;
	trimmed = pstrdup(p);
	for (int i = (int) strlen(trimmed) - 1; i >= 0 && trimmed[i] == ' '; i--)
		trimmed[i] = '\0';
	if (pg_strcasecmp(trimmed, "all") == 0)
		mask = ~UINT64CONST(0);
	else if (pg_strcasecmp(trimmed, "none") == 0)
		mask = 0;
	else
	{
		int32		ordinals[64];
		int			n = genie_parse_int_list(trimmed, 0, 63, ordinals, lengthof(ordinals));

		if (n < 0)
		{
			GUC_check_errdetail("\"%s\" is not 'all', 'none' or a list of CUDA device numbers from 0 to 63.",
								*newval);
			pfree(trimmed);
			return false;
		}
		for (int i = 0; i < n; i++)
			mask |= UINT64CONST(1) << ordinals[i];
	}
	pfree(trimmed);
	/* what the GUC machinery frees: malloc before 16, guc_malloc since */
	out = (uint64 *) genie_guc_malloc(sizeof(uint64));
	if (out == NULL)
	{
		GUC_check_errdetail("out of memory");
		return false;
	}
	*out = mask;
	*extra = out;
	return true;
}

void
genie_devices_assign(const char *newval, void *extra)
{
	genie_device_mask = *(uint64 *) extra;
}

int
genie_first_device(void)
{
	for (int i = 0; i < 64; i++)
		if (genie_device_mask & (UINT64CONST(1) << i))
			return i;
	return -1;
}

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
	/*
	 * Several GPUs where genie.devices names them; a single GPU's paths run
	 * on the first one it names.
	 */
	options->device_mask = genie_device_mask;
	options->device_ordinal = Max(genie_first_device(), 0);
	options->placement = genie_placement_setting;
}

genie_engine_kind
genie_search_device(void)
{
	/* preloaded, a backend searches in-process only while the service is away */
	if (genie_service_configured())
		return GENIE_ENGINE_CPU;
	if (genie_device_mask == 0)
	{
		if (genie_device_setting == GENIE_DEVICE_SETTING_GPU)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genie.device is gpu but genie.devices is none"),
					 errhint("Set genie.devices to 'all' or to the GPUs genie may use, or genie.device to 'auto' or 'cpu'.")));
		return GENIE_ENGINE_CPU;
	}
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
	/* no device (genie.devices = none): the search itself says so, if it must */
	if (started || genie_device_mask == 0 || genie_search_device() == GENIE_ENGINE_CPU)
		return;
	started = true;
	on_proc_exit(wait_for_device_preparation, (Datum) 0);
	genie_gpu_prepare(Max(genie_first_device(), 0));
}

void
genie_search_note_dropped_devices(const genie_engine *engine, int *seen)
{
	genie_engine_device devices[64];
	size_t		count = 0;
	genie_error err;
	int			dropped = 0;
	const char *why = "";
	StringInfoData which;

	/* after every search: nothing allocated unless a GPU was dropped */
	if (engine == NULL || genie_engine_devices(engine, devices, lengthof(devices), &count, &err) != GENIE_OK)
		return;
	for (size_t i = 0; i < count && i < lengthof(devices); i++)
		dropped += devices[i].dropped ? 1 : 0;
	if (dropped <= *seen)
	{
		*seen = dropped;
		return;
	}
	initStringInfo(&which);
	for (size_t i = 0; i < count && i < lengthof(devices); i++)
	{
		if (!devices[i].dropped)
			continue;
		appendStringInfo(&which, "%s%d", which.len > 0 ? ", " : "", devices[i].ordinal);
		why = devices[i].failure;
	}
	ereport(WARNING,
			(errcode(ERRCODE_SYSTEM_ERROR),
			 errmsg("genie: GPU %s failed and no longer serves this index; its work runs on the other GPUs or the CPU",
					which.data),
			 errdetail("%s", why),
			 errhint("Answers stay exact.  Check the GPU (nvidia-smi); genie.devices can leave it out.")));
	*seen = dropped;
	pfree(which.data);
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
