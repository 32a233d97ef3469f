/*-------------------------------------------------------------------------
 *
 * genie_row_values.h
 *	  A row index's column values (genie_row_values.c): which types it takes,
 *	  numeric values as float8, exact values as bytes, and buckets.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_ROW_VALUES_H
#define GENIE_ROW_VALUES_H

#include "postgres.h"
#include "types/genie_type.h"

/* genie_row_values.c */
extern bool genie_row_type_supported(Oid type, bool *numeric);
extern float8 genie_row_numeric(Oid type, Datum value);
extern char *genie_row_value_bytes(Oid type, Datum value, int *length);
extern int32 genie_row_bucket(const GenieRowAttribute *attribute, float8 value);

#endif							/* GENIE_ROW_VALUES_H */
