/*-------------------------------------------------------------------------
 *
 * genie_bit.h
 *	  Binary codes (genie_bit_ops): what the batch function genie_knn needs
 *	  of the type beyond its callbacks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_BIT_H
#define GENIE_BIT_H

#include "postgres.h"

#include "utils/relcache.h"
#include "utils/varbit.h"

#include "service/genie_values.h"

/* A code's length in bits: an error unless 1 to GENIE_MAX_CODE_BITS (what names it). */
extern int32 genie_code_bits(VarBit *code, const char *what);

/*
 * Appends a query code to a batch of codes (its rows palloc'd, grown as they
 * come; *capacity their words), checked: the first sets the batch's bits,
 * another length is an error naming query number.
 */
extern void genie_code_batch_add(GenieValueBatch *batch, int64 *capacity, VarBit *code,
								 int64 number);

/*
 * An error unless the index can answer query codes of bits bits: it holds
 * codes of that length, or none yet.
 */
extern void genie_code_check_queries(Relation index, int32 bits);

/* The reloption weights: an error unless 1 to 4 integers in [1, 1000000], as '3,2,1'. */
extern void genie_validate_ewh_weights(const char *value);

#endif							/* GENIE_BIT_H */
