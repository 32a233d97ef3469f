/*-------------------------------------------------------------------------
 *
 * genie_row_values.c
 *	  Column values of a row index as its encoding reads them: which types
 *	  are supported, numeric values as float8, categorical values as bytes,
 *	  and the equal-width bucket of a number.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "types/rows/genie_row_values.h"


bool
genie_row_type_supported(Oid type, bool *numeric)
{
	type = getBaseType(type);
	switch (type)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			*numeric = true;
			return true;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BOOLOID:
			*numeric = false;
			return true;
		default:
			*numeric = false;
			return type_is_enum(type);
	}
}

/* A numeric attribute's value as float8: infinities stay, -0 becomes 0. */
float8
genie_row_numeric(Oid type, Datum value)
{
	float8		v;

	switch (getBaseType(type))
	{
		case INT2OID:
			v = DatumGetInt16(value);
			break;
		case INT4OID:
			v = DatumGetInt32(value);
			break;
		case INT8OID:
			v = (float8) DatumGetInt64(value);
			break;
		case FLOAT4OID:
			v = DatumGetFloat4(value);
			break;
		case FLOAT8OID:
			v = DatumGetFloat8(value);
			break;
		case NUMERICOID:
			/* beyond float8's range: +-infinity or 0, never an error */
			v = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, value));
			break;
		case DATEOID:
			{
				DateADT		d = DatumGetDateADT(value);

				if (DATE_IS_NOBEGIN(d))
					v = -get_float8_infinity();
				else if (DATE_IS_NOEND(d))
					v = get_float8_infinity();
				else
					v = d;
				break;
			}
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			{
				Timestamp	t = DatumGetTimestamp(value);

				if (TIMESTAMP_IS_NOBEGIN(t))
					v = -get_float8_infinity();
				else if (TIMESTAMP_IS_NOEND(t))
					v = get_float8_infinity();
				else
					v = (float8) t;
				break;
			}
		default:
			elog(ERROR, "genie: type %u is not a numeric row attribute", type);
			v = 0;				/* keep compiler quiet */
	}
	if (v == 0)
		v = 0;					/* -0 */
	if (isnan(v))
		v = get_float8_nan();
	return v;
}

/*
 * A categorical attribute's value as the bytes its equality compares: the
 * characters of text and varchar, of char without trailing blanks, the enum
 * value's oid, one byte for bool.  The result may point into value.
 */
char *
genie_row_value_bytes(Oid type, Datum value, int *length)
{
	Oid			base = getBaseType(type);

	if (base == BOOLOID)
	{
		char	   *b = palloc(1);

		b[0] = DatumGetBool(value) ? 1 : 0;
		*length = 1;
		return b;
	}
	if (base == TEXTOID || base == VARCHAROID || base == BPCHAROID)
	{
		text	   *t = DatumGetTextPP(value);
		char	   *s = VARDATA_ANY(t);
		int			len = VARSIZE_ANY_EXHDR(t);

		if (base == BPCHAROID)
			while (len > 0 && s[len - 1] == ' ')
				len--;
		*length = len;
		return s;
	}
	/* an enum */
	{
		Oid		   *o = palloc(sizeof(Oid));

		*o = DatumGetObjectId(value);
		*length = sizeof(Oid);
		return (char *) o;
	}
}

int32
genie_row_bucket(const GenieRowAttribute *attribute, float8 value)
{
	float8		b;

	if (isnan(value))
		return attribute->n_buckets - 1;
	/* the same float8 operations as the documented SQL expression */
	b = floor((value - attribute->lo) / ((attribute->hi - attribute->lo) / attribute->n_buckets));
	if (!(b > 0))
		return 0;
	if (b > attribute->n_buckets - 1)
		return attribute->n_buckets - 1;
	return (int32) b;
}

