/*-------------------------------------------------------------------------
 *
 * genie_row_build.h
 *	  Building a row index (genie_row_build.c): the attribute list, its
 *	  reloption validator, and each row's keywords while building.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_ROW_BUILD_H
#define GENIE_ROW_BUILD_H

#include "postgres.h"
#include "nodes/execnodes.h"
#include "types/genie_type.h"

/* genie_row_build.c */
typedef struct GenieRowBuild GenieRowBuild;
extern GenieRowBuild *genie_row_build_begin(Relation heap, Relation index,
											IndexInfo *indexInfo, bool scan);
extern int32 *genie_row_build_keywords(GenieRowBuild *build, Datum row, int *n);
extern void genie_row_build_finish(GenieRowBuild *build, GenieRowSchema *schema);
/* the reloption attributes' validator */
extern void genie_validate_attribute_list(const char *value);

/* An entry of the attribute list: 'name' or 'name lo..hi' (name quoted as an identifier). */
typedef struct GenieRowAttributeSpec
{
	char	   *name;
	char	   *lo;				/* given bounds, or NULL */
	char	   *hi;
} GenieRowAttributeSpec;

/* Parses an attribute list: the number of entries, or -1 with *error set. */
extern int	genie_row_parse_attributes(const char *list, GenieRowAttributeSpec *specs, int max,
									   const char **error);

#endif							/* GENIE_ROW_BUILD_H */
