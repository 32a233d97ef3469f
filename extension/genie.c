/*-------------------------------------------------------------------------
 *
 * genie.c
 *	  Module entry point, settings and the error translation from core/.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include <limits.h>

#include "genie.h"
#include "genie_am.h"

PG_MODULE_MAGIC;

int			genie_device_setting = GENIE_DEVICE_SETTING_AUTO;
int			genie_scan_batch_size = 100;
int			genie_device_memory_limit_mb = 0;
int			genie_cache_size_mb = 1024;
int			genie_pending_list_limit_kb = 4096;
int			genie_cpu_threads = 0;

static const struct config_enum_entry genie_device_options[] = {
	{"auto", GENIE_DEVICE_SETTING_AUTO, false},
	{"cpu", GENIE_DEVICE_SETTING_CPU, false},
	{"gpu", GENIE_DEVICE_SETTING_GPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * Only settings are registered here: CUDA is never touched at load time, so
 * loading genie (even into the postmaster through shared_preload_libraries)
 * never initialises a driver.
 */
void
_PG_init(void)
{
	DefineCustomEnumVariable("genie.device",
							 "Selects the engine that runs genie searches.",
							 "auto uses the GPU when one is usable and the CPU otherwise; "
							 "gpu requires a usable GPU; cpu never uses one.",
							 &genie_device_setting,
							 GENIE_DEVICE_SETTING_AUTO,
							 genie_device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("genie.device_memory_limit",
							"Device memory genie may use for an index and a batch's search state.",
							"0 lets the engine use most of the free device memory; beyond the "
							"limit the objects are searched in parts (multiple loading).",
							&genie_device_memory_limit_mb,
							0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.scan_batch_size",
							"Number of results an index scan asks the engine for first.",
							"Scans that need more search again with four times as many.",
							&genie_scan_batch_size,
							100, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.cache_size",
							"Host memory for the per-backend cache of decoded genie indexes.",
							NULL,
							&genie_cache_size_mb,
							1024, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.pending_list_limit",
							"Size of a genie index's pending list that triggers merging it into the main postings.",
							"The index's pending_list_limit storage parameter overrides it.",
							&genie_pending_list_limit_kb,
							4096, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.cpu_threads",
							"Threads of the CPU engine; 0 uses every core.",
							NULL,
							&genie_cpu_threads,
							0, 0, 1024,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	genie_init_reloptions();

	MarkGUCPrefixReserved("genie");
}

void
genie_report_error(const genie_error *err, const char *context)
{
	const char *message = err->message[0] != '\0' ? err->message : genie_status_name(err->status);

	switch (err->status)
	{
		case GENIE_INVALID_ARGUMENT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: %s", context, message)));
			break;
		case GENIE_OUT_OF_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("%s: %s", context, message)));
			break;
		case GENIE_DEVICE_OUT_OF_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("%s: %s", context, message),
					 errhint("Lower genie.device_memory_limit or set genie.device = 'cpu'.")));
			break;
		case GENIE_DEVICE_UNAVAILABLE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s: %s", context, message),
					 errhint("Set genie.device = 'auto' or 'cpu' to use the CPU engine; "
							 "SELECT * FROM genie_devices() shows what genie can use.")));
			break;
		case GENIE_DEVICE_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("%s: GPU error: %s", context, message),
					 errhint("Set genie.device = 'cpu' to use the CPU engine.")));
			break;
		case GENIE_OK:
		case GENIE_INTERNAL_ERROR:
		default:
			elog(ERROR, "%s: genie internal error (%s): %s",
				 context, genie_status_name(err->status), message);
	}
	pg_unreachable();
}

int32 *
genie_int4_array_values(ArrayType *array, const char *argname, int *count)
{
	int			n;

	if (ARR_ELEMTYPE(array) != INT4OID)
		elog(ERROR, "genie: %s is not an int4[]", argname);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL elements", argname),
				 errhint("Remove the NULLs, e.g. with array_remove(%s, NULL).", argname)));

	n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	*count = n;
	return (int32 *) ARR_DATA_PTR(array);
}
