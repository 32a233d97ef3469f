/*-------------------------------------------------------------------------
 *
 * genie_rows.h
 *	  Row indexes (genie_row_ops): range-tuple scoring over relational rows,
 *	  the paper's Example 2.1 and section V-C.
 *
 * The index is on the table's whole row, CREATE INDEX ... USING genie ((t))
 * WITH (attributes = 'a, b, c', buckets = 1024), and gives each row one
 * keyword per non-NULL attribute:
 *	- a numeric attribute (int2/4/8, float4/8, numeric, date, timestamp[tz])
 *	  whose build saw at most `buckets` distinct values keeps exact values
 *	  (VALUES); otherwise (BUCKETS) its value v falls into the equal-width
 *	  bucket floor((v - lo) / ((hi - lo) / buckets)), clamped to the edge
 *	  buckets, where lo and hi are the smallest and largest finite values the
 *	  build saw or the bounds the attribute list gives ('age 0..100');
 *	  NaN goes to the top bucket;
 *	- a categorical attribute (text, varchar, char, bool, enums) keeps exact
 *	  values (VALUES).
 * VALUES attributes get their codes from the dictionary, which the build
 * writes and inserts of unseen values append to (one WAL record each, under
 * the metapage lock), so no two values ever share a keyword.  Numeric
 * attributes are compared as float8.
 *
 * The files: genie_rows.c (the type's callbacks, range queries on the
 * index), genie_row_values.c (column values), genie_row_dictionary.c (schema,
 * dictionary, the keywords of a row), genie_row_build.c (attribute list,
 * building) and genie_ranges.c (the genie_ranges type and scoring rows
 * without the index).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_ROWS_H
#define GENIE_ROWS_H

#include "postgres.h"

#include "access/htup.h"
#include "nodes/execnodes.h"
#include "utils/hsearch.h"

#include "types/genie_type.h"

/*
 * A genie_ranges value: a range-tuple query bound to one build of one row
 * index.  It carries each attribute's definition, so that row <~> query
 * scores the same without the index, and categorical values as bytes, which
 * a scan looks up in the dictionary of the moment.
 */
typedef struct GenieRangesItem
{
	GenieRowAttribute attribute;	/* as built */
	int32		slot;			/* the attribute's position in the index */
	int32		weight;
	float8		lo;				/* numeric: the closed query range, */
	float8		hi;				/* +-infinity where open */
	int32		bucket_lo;		/* BUCKETS: the buckets the range covers */
	int32		bucket_hi;
	int32		n_values;		/* categorical: value count and where their */
	int32		values_offset;	/* (int32 length, bytes) INTALIGNed start */
} GenieRangesItem;

typedef struct GenieRanges
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	Oid			index;
	Oid			rowtype;		/* the table's row type */
	int32		n_items;
	uint64		schema_id;
	/* GenieRangesItem items[n_items]; then the value area */
} GenieRanges;

#define GENIE_RANGES_ITEMS(r) \
	((GenieRangesItem *) ((char *) (r) + MAXALIGN(sizeof(GenieRanges))))
#define GENIE_RANGES_VALUES(r) \
	((char *) GENIE_RANGES_ITEMS(r) + sizeof(GenieRangesItem) * (r)->n_items)

/* genie_ranges.c */
extern GenieRanges *genie_ranges_from_datum(Datum value);
extern Oid	genie_ranges_type(Oid extension_function);

/* genie_rows.c: the engine query of a genie_ranges value, with the dictionary of the moment */
extern GenieQuery *genie_ranges_query(Relation index, GenieRanges *ranges);

/* genie_row_values.c */
extern bool genie_row_type_supported(Oid type, bool *numeric);
extern float8 genie_row_numeric(Oid type, Datum value);
extern char *genie_row_value_bytes(Oid type, Datum value, int *length);
extern int32 genie_row_bucket(const GenieRowAttribute *attribute, float8 value);

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
} GenieRowCode;

typedef struct GenieRowDictionary
{
	Oid			index;
	Oid			relfilenode;
	uint64		schema_id;
	bool		stale;			/* flagged by a relcache invalidation */
	MemoryContext cxt;
	HTAB	   *codes;
	GenieRowSchema schema;		/* n_values kept up to date */
	int32		n_entries;		/* entries read (or, building, made) */
	BlockNumber block;			/* where reading goes on */
	uint32		offset;
	/* numeric VALUES attributes: their (value, code) pairs, for ranges */
	int32		n_numeric[GENIE_ROW_MAX_ATTRIBUTES];
	int32		numeric_capacity[GENIE_ROW_MAX_ATTRIBUTES];
	float8	   *numeric_values[GENIE_ROW_MAX_ATTRIBUTES];
	int32	   *numeric_codes[GENIE_ROW_MAX_ATTRIBUTES];
	/* building: the entries in the order they are written */
	GenieRowCode **order;
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

/* One keyword per non-NULL attribute. */
extern int32 *genie_row_encode(Relation index, GenieRowDictionary *d, TupleDesc desc,
							   Oid rowtype, Datum row, GenieRowEncodeMode mode, int *n);
/* The keywords of a row of a built index (inserts, checks). */
extern int32 *genie_row_keywords(Relation index, Datum row, GenieRowEncodeMode mode, int *n);

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

#endif							/* GENIE_ROWS_H */
