/*-------------------------------------------------------------------------
 *
 * genie_ranges.h
 *	  The genie_ranges type (genie_ranges.c): a range-tuple query bound to
 *	  one build of one row index, and its engine query.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_RANGES_H
#define GENIE_RANGES_H

#include "postgres.h"
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

#endif							/* GENIE_RANGES_H */
