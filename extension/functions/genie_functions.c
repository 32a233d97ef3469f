/*-------------------------------------------------------------------------
 *
 * genie_functions.c
 *	  genie_devices() and genie_version(): what genie was built with and
 *	  which devices it can use.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "genie_utils.h"
#include "search/genie_search_device.h"

PG_FUNCTION_INFO_V1(genie_devices);
PG_FUNCTION_INFO_V1(genie_version);

/*
 * genie_devices() -> setof (kind, ordinal, name, memory_bytes,
 *		free_memory_bytes, compute_capability, processors, usable, note, in_use)
 */
Datum
genie_devices(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	genie_device_info devices[64];
	size_t		count;
	genie_error err;
	bool		any_gpu = false;
	genie_build_info build;
	static bool said_no_gpu = false;

	InitMaterializedSRF(fcinfo, 0);

	GENIE_CHECK(genie_list_devices(devices, lengthof(devices), &count, &err),
				&err, "genie_devices");

	for (size_t i = 0; i < count; i++)
	{
		const genie_device_info *d = &devices[i];
		Datum		values[10];
		bool		nulls[10] = {false};

		values[0] = CStringGetTextDatum(d->kind == GENIE_DEVICE_GPU ? "gpu" : "cpu");
		values[1] = Int32GetDatum(d->ordinal);
		values[2] = CStringGetTextDatum(d->name);
		values[3] = Int64GetDatum((int64) d->memory_bytes);
		values[4] = Int64GetDatum((int64) d->free_memory_bytes);
		if (d->kind == GENIE_DEVICE_GPU)
			values[5] = CStringGetTextDatum(psprintf("%d.%d", d->compute_major, d->compute_minor));
		else
			nulls[5] = true;
		values[6] = Int32GetDatum(d->processors);
		values[7] = BoolGetDatum(d->usable != 0);
		if (d->note[0] != '\0')
			values[8] = CStringGetTextDatum(d->note);
		else
			nulls[8] = true;
		/* genie.devices leaves a GPU out; the CPU engine is always there */
		values[9] = BoolGetDatum(d->kind != GENIE_DEVICE_GPU ||
								 (d->usable && genie_device_in_use(d->ordinal)));
		if (d->kind == GENIE_DEVICE_GPU && d->usable)
			any_gpu = true;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}

	/* Say once per backend why a CUDA build runs on the CPU. */
	genie_get_build_info(&build);
	if (build.with_cuda && !any_gpu && !said_no_gpu)
	{
		said_no_gpu = true;
		ereport(NOTICE,
				(errmsg("genie found no usable GPU; searches run on the CPU engine"),
				 errdetail("The CUDA runtime reported no device or no NVIDIA driver.")));
	}

	return (Datum) 0;
}

/*
 * genie_version(OUT version text, OUT with_cuda bool, OUT cuda_version text)
 */
Datum
genie_version(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	genie_build_info build;
	Datum		values[3];
	bool		nulls[3] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "genie_version: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	genie_get_build_info(&build);
	values[0] = CStringGetTextDatum(build.version);
	values[1] = BoolGetDatum(build.with_cuda != 0);
	if (build.with_cuda)
		values[2] = CStringGetTextDatum(psprintf("%d.%d", build.cuda_version / 1000,
												 (build.cuda_version % 1000) / 10));
	else
		nulls[2] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
