/*-------------------------------------------------------------------------
 *
 * genie_document_query.h
 *	  The genie_document_query type: a document query whose terms carry
 *	  their own weights, such as each term's inverse document frequency in
 *	  an index (genie_document_query(index, query)), so that
 *	  ORDER BY doc <~> q ranks as genie_document_topk(..., idf => true).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_DOCUMENT_QUERY_H
#define GENIE_DOCUMENT_QUERY_H

#include "postgres.h"

#include "fmgr.h"

/* a lexeme's longest form, as tsvector's 11-bit WordEntry.len allows */
#define GENIE_DOCUMENT_MAX_LEXEME	2047
/* the classes of all four weights, D = bit 0 ... A = bit 3, as tsquery writes them */
#define GENIE_DOCUMENT_ALL_CLASSES	0x0F

typedef struct GenieDocumentTerm
{
	int32		weight;			/* times the class's genie.document_weights weight */
	uint32		offset;			/* of the lexeme, from GENIE_DOCUMENT_QUERY_LEXEMES */
	uint16		length;
	uint8		classes;		/* bit 1 << class for each class it counts in */
	uint8		unused;
} GenieDocumentTerm;

/* Terms in tsCompareString order, each lexeme once. */
typedef struct GenieDocumentQuery
{
	int32		vl_len_;		/* varlena header (do not touch directly) */
	int32		n_terms;
	GenieDocumentTerm terms[FLEXIBLE_ARRAY_MEMBER];
} GenieDocumentQuery;

#define GENIE_DOCUMENT_QUERY_LEXEMES(q) ((char *) &(q)->terms[(q)->n_terms])

#define DatumGetGenieDocumentQueryP(d)	((GenieDocumentQuery *) PG_DETOAST_DATUM(d))

/* One term of a query being made (the lexeme is not copied). */
typedef struct GenieDocumentTermInput
{
	const char *lexeme;
	int			length;
	uint8		classes;
	int32		weight;
} GenieDocumentTermInput;

/*
 * The query of n terms, sorted and checked: a lexeme given twice, an empty
 * or overlong lexeme, or a weight out of range is an error.
 */
extern GenieDocumentQuery *genie_document_query_make(GenieDocumentTermInput *terms, int n);

/* The type's oid in the schema ns (the extension's), InvalidOid if none. */
extern Oid	genie_document_query_type(Oid ns);

#endif							/* GENIE_DOCUMENT_QUERY_H */
