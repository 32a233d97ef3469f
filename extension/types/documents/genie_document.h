/*-------------------------------------------------------------------------
 *
 * genie_document.h
 *	  Short documents (genie_tsvector_ops, genie_document.c): the setting
 *	  that weights a lexeme by its class.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_DOCUMENT_H
#define GENIE_DOCUMENT_H

#include "postgres.h"

#include "utils/guc.h"
#include "utils/rel.h"

#include "types/genie_query.h"

/* the largest weight of a class: 1,000 x the query's terms stays within int4 */
#define GENIE_DOCUMENT_MAX_WEIGHT	1000

/* genie.document_weights: the weights of classes D, C, B and A, as ts_rank takes them */
extern char *genie_document_weights_setting;
extern bool genie_document_weights_check(char **newval, void **extra, GucSource source);
extern void genie_document_weights_assign(const char *newval, void *extra);

/*
 * A document query (a tsquery, tsvector or genie_document_query Datum of
 * type type) as an engine query of the index; with idf, each term weighed
 * by its inverse document frequency in the index
 * (genie_document_topk(..., idf => true)).
 */
extern GenieQuery *genie_document_engine_query(Relation index, Datum value, Oid type, bool idf);

#endif							/* GENIE_DOCUMENT_H */
