/*-------------------------------------------------------------------------
 *
 * genie.h
 *	  Shared declarations of genie's PostgreSQL glue.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_EXTENSION_H
#define GENIE_EXTENSION_H

#include "postgres.h"

#include "utils/array.h"

#include "genie/genie.h"

/* genie.device: which engine runs searches */
typedef enum GenieDeviceSetting
{
	GENIE_DEVICE_SETTING_AUTO,
	GENIE_DEVICE_SETTING_CPU,
	GENIE_DEVICE_SETTING_GPU
} GenieDeviceSetting;

extern int	genie_device_setting;

/*
 * Turns a failed core call into ereport(ERROR).  Status values a user can
 * cause get their own SQLSTATE and a hint; a broken invariant is elog(ERROR).
 */
extern void genie_report_error(const genie_error *err, const char *context) pg_attribute_noreturn();

#define GENIE_CHECK(call, err, context) \
	do { \
		if ((call) != GENIE_OK) \
			genie_report_error((err), (context)); \
	} while (0)

/*
 * Returns the elements of a one-dimensional int4[] without NULL elements
 * (a pointer into the detoasted array); raises a clear error otherwise.
 * argname names the argument in messages.
 */
extern int32 *genie_int4_array_values(ArrayType *array, const char *argname, int *count);

#endif							/* GENIE_EXTENSION_H */
