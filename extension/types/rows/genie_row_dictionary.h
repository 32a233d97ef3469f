/*-------------------------------------------------------------------------
 *
 * genie_row_dictionary.h
 *	  A backend's copy of a row index's dictionary (genie_row_dictionary.c):
 *	  the schema in the metapage, the codes of exact values, and the
 *	  keywords of a row.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_ROW_DICTIONARY_H
#define GENIE_ROW_DICTIONARY_H

#include "postgres.h"
#include "access/htup.h"
#include "utils/hsearch.h"
#include "types/genie_type.h"

/* genie_row_dictionary.c: a backend's copy of a row index's dictionary */
typedef struct GenieRowCodeKey
{
	int32		slot;
	int32		length;
	const char *bytes;
} GenieRowCodeKey;

typedef struct GenieRowCode
{
	GenieRowCodeKey key;
	int32		code;
	uint32		hash;
	char		status;			/* simplehash's */
} GenieRowCode;

struct row_codes_hash;		/* genie_row_dictionary.c's simplehash */

typedef struct GenieRowDictionary
{
	Oid			index;
	Oid			relfilenode;
	uint64		schema_id;
	bool		stale;			/* flagged by a relcache invalidation */
	MemoryContext cxt;
	struct row_codes_hash *codes;	/* (slot, bytes) -> code */
	GenieRowSchema schema;		/* n_values kept up to date */
	int32		n_entries;		/* entries read (or, building, made) */
	BlockNumber block;			/* where reading goes on */
	uint32		offset;
	/* numeric VALUES attributes: their (value, code) pairs, for ranges */
	bool		numeric[GENIE_ROW_MAX_ATTRIBUTES];
	int32		n_numeric[GENIE_ROW_MAX_ATTRIBUTES];
	int32		numeric_capacity[GENIE_ROW_MAX_ATTRIBUTES];
	float8	   *numeric_values[GENIE_ROW_MAX_ATTRIBUTES];
	int32	   *numeric_codes[GENIE_ROW_MAX_ATTRIBUTES];
	/* building: the entries in the order they are written */
	GenieRowCode *order;
	int32		order_capacity;
} GenieRowDictionary;

/* The schema in the metapage; errors unless the index is a row index. */
extern void genie_row_schema(Relation index, GenieRowSchema *schema);
extern GenieRowDictionary *genie_row_dictionary_create(MemoryContext parent, Relation index,
													   const GenieRowSchema *schema);
/* The code of a value, or -1. */
extern int32 genie_row_dictionary_lookup(GenieRowDictionary *d, int slot, const char *bytes,
										 int length);
/* Building: gives a value its attribute's next code and keeps it to be written. */
extern int32 genie_row_dictionary_add_building(Relation index, GenieRowDictionary *d, int slot,
											   const char *bytes, int length);
/* The backend's dictionary of a row index, caught up with schema (the metapage's). */
extern GenieRowDictionary *genie_row_index_dictionary(Relation index, const GenieRowSchema *schema);
/* The row's fields, checked to be of the table's row type. */
extern HeapTupleData genie_row_tuple(Datum row, Oid rowtype);
/* What becomes of a value missing from the dictionary. */
typedef enum GenieRowEncodeMode
{
	GENIE_ROW_ENCODE_BUILD,		/* added in memory, written after the build */
	GENIE_ROW_ENCODE_INSERT,	/* appended on disk (one WAL record) */
	GENIE_ROW_ENCODE_CHECK		/* an error: the index lacks it (genie_index_check) */
} GenieRowEncodeMode;

/* The dictionary's schema of an index that has one (rows, documents). */
extern void genie_dictionary_schema(Relation index, GenieRowSchema *schema);
/* The code of a value; one the dictionary lacks is added in mode's way. */
extern int32 genie_row_dictionary_code(Relation index, GenieRowDictionary *d, int slot,
									   const char *bytes, int length, GenieRowEncodeMode mode);
/* Writes a built dictionary (no WAL: the build logs every page) and fills schema. */
extern void genie_row_dictionary_write(Relation index, GenieRowDictionary *d, GenieRowSchema *schema);
/* The backend's dictionary of an index, caught up with the metapage's committed end. */
extern GenieRowDictionary *genie_dictionary_current(Relation index);
/* A new build's schema_id. */
extern uint64 genie_row_schema_new_id(Relation index);
/* The backend's dictionary of a built index, for encoding a value in mode. */
extern GenieRowDictionary *genie_row_dictionary_of(Relation index, GenieRowEncodeMode mode);

/* One keyword per non-NULL attribute. */
extern int32 *genie_row_encode(Relation index, GenieRowDictionary *d, TupleDesc desc,
							   Oid rowtype, Datum row, GenieRowEncodeMode mode, int *n);
/* The keywords of a row of a built index (inserts, checks). */
extern int32 *genie_row_keywords(Relation index, Datum row, GenieRowEncodeMode mode, int *n);

#endif							/* GENIE_ROW_DICTIONARY_H */
