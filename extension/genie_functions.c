/*-------------------------------------------------------------------------
 *
 * genie_functions.c
 *	  SQL-callable functions that need no index: match counts, devices,
 *	  version.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "genie.h"
#include "genie_query.h"

PG_FUNCTION_INFO_V1(genie_match_count_int4_array);
PG_FUNCTION_INFO_V1(genie_devices);
PG_FUNCTION_INFO_V1(genie_negated_match_count_int4_array);
PG_FUNCTION_INFO_V1(genie_negated_match_count_query);
PG_FUNCTION_INFO_V1(genie_version);

/*
 * genie_match_count(object int4[], query int4[]) -> int4
 *
 * The number of distinct query keywords that occur in the object.  STRICT in
 * SQL, so NULL arrays give NULL without reaching here.
 */
Datum
genie_match_count_int4_array(PG_FUNCTION_ARGS)
{
	ArrayType  *object = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *query = PG_GETARG_ARRAYTYPE_P(1);
	int			object_len;
	int			query_len;
	int32	   *object_values = genie_int4_array_values(object, "object", &object_len);
	int32	   *query_values = genie_int4_array_values(query, "query", &query_len);
	int32		count;
	genie_error err;

	GENIE_CHECK(genie_match_count_int4(object_values, object_len,
									   query_values, query_len, &count, &err),
				&err, "genie_match_count");

	PG_FREE_IF_COPY(object, 0);
	PG_FREE_IF_COPY(query, 1);
	PG_RETURN_INT32(count);
}

/*
 * The ordering operator <~> returns the negated count, because index scans
 * order ascending only.  A count of 0 gives 0, not -0.
 */
static Datum
negated(int32 count)
{
	return Float8GetDatum(count == 0 ? 0.0 : -(float8) count);
}

/* int4[] <~> int4[] */
Datum
genie_negated_match_count_int4_array(PG_FUNCTION_ARGS)
{
	Datum		count = DirectFunctionCall2(genie_match_count_int4_array,
											PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));

	return negated(DatumGetInt32(count));
}

/* int4[] <~> genie_query */
Datum
genie_negated_match_count_query(PG_FUNCTION_ARGS)
{
	Datum		count = DirectFunctionCall2(genie_match_count_query,
											PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));

	return negated(DatumGetInt32(count));
}

/*
 * genie_devices() -> setof (kind, ordinal, name, memory_bytes,
 *		free_memory_bytes, compute_capability, processors, usable, note)
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
		Datum		values[9];
		bool		nulls[9] = {false};

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
