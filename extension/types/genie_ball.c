/*-------------------------------------------------------------------------
 *
 * genie_ball.c
 *	  The range predicates' operators: real[] <@ genie_vector_ball (the
 *	  Euclidean distance to the centre, real[] <-> real[], at most the
 *	  radius) and text <@ genie_text_ball (the edit distance, as
 *	  genie_edit_distance, at most the radius), the boundary included.  A
 *	  sequential scan evaluates them; an index of genie_vector_ops or of
 *	  genie_ngram_ops with stored strings answers them in a bitmap or plain
 *	  index scan (am/genie_set_scan.c) with the same rows.  A negative or NaN
 *	  radius is an error in both, so that a plan never changes the answer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "types/genie_ball.h"
#include "types/genie_ngram.h"
#include "types/genie_type.h"

PG_FUNCTION_INFO_V1(genie_ball_make);
PG_FUNCTION_INFO_V1(genie_vector_in_ball);
PG_FUNCTION_INFO_V1(genie_text_in_ball);

void
genie_ball_read(Datum ball, bool vectors, GenieBall *out)
{
	HeapTupleHeader tuple = DatumGetHeapTupleHeader(ball);
	bool		center_null;
	bool		radius_null;
	Datum		radius;

	memset(out, 0, sizeof(*out));
	out->center = GetAttributeByNum(tuple, 1, &center_null);
	radius = GetAttributeByNum(tuple, 2, &radius_null);
	out->isnull = center_null || radius_null;
	if (out->isnull)
		return;
	out->radius = vectors ? DatumGetFloat8(radius) : (double) DatumGetInt32(radius);
	if (isnan(out->radius) || out->radius < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the radius must be at least 0"),
				 errdetail("It is %g.", out->radius)));
	out->center = vectors ? PointerGetDatum(DatumGetArrayTypeP(out->center))
		: PointerGetDatum(DatumGetTextPP(out->center));
}

/*
 * genie_ball(center, radius): the ball of the function's declared result
 * type (genie_vector_ball or genie_text_ball), its fields as given, NULLs
 * included (a ball with a NULL field holds no row).
 */
Datum
genie_ball_make(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2];

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "genie_ball: the result is not a composite type");
	desc = BlessTupleDesc(desc);
	for (int i = 0; i < 2; i++)
	{
		nulls[i] = PG_ARGISNULL(i);
		values[i] = nulls[i] ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/* real[] <@ genie_vector_ball */
Datum
genie_vector_in_ball(PG_FUNCTION_ARGS)
{
	ArrayType  *v = PG_GETARG_ARRAYTYPE_P(0);
	GenieBall	ball;
	int			nv;
	int			nc;
	float	   *fv;
	float	   *fc;

	genie_ball_read(PG_GETARG_DATUM(1), true, &ball);
	if (ball.isnull)
		PG_RETURN_NULL();
	fv = genie_float4_array_values(v, "a vector", &nv);
	fc = genie_float4_array_values(DatumGetArrayTypeP(ball.center), "the ball's centre", &nc);
	if (nv != nc)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors of %d and %d dimensions have no distance", nv, nc)));
	PG_RETURN_BOOL(genie_l2_distance(fv, fc, nv) <= ball.radius);
}

/* text <@ genie_text_ball */
Datum
genie_text_in_ball(PG_FUNCTION_ARGS)
{
	GenieBall	ball;

	genie_ball_read(PG_GETARG_DATUM(1), false, &ball);
	if (ball.isnull)
		PG_RETURN_NULL();
	PG_RETURN_BOOL((double) genie_text_edit_distance(PG_GETARG_TEXT_PP(0),
													 DatumGetTextPP(ball.center)) <= ball.radius);
}
