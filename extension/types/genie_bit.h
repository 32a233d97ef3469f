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

/* A code's length in bits: an error unless 1 to GENIE_MAX_CODE_BITS (what names it). */
extern int32 genie_code_bits(VarBit *code, const char *what);

/*
 * An error unless the index can answer query codes of bits bits: it holds
 * codes of that length, or none yet.
 */
extern void genie_code_check_queries(Relation index, int32 bits);

/* The reloption weights: an error unless 1 to 4 integers in [1, 1000000], as '3,2,1'. */
extern void genie_validate_ewh_weights(const char *value);

#endif							/* GENIE_BIT_H */
