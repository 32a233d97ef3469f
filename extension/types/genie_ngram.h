/*-------------------------------------------------------------------------
 *
 * genie_ngram.h
 *	  Text by n-grams (genie_ngram_ops, genie_ngram.c): what other modules
 *	  need of it beyond its callbacks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_NGRAM_H
#define GENIE_NGRAM_H

#include "postgres.h"

/* The Levenshtein distance of two texts in characters, unit costs (genie_edit_distance). */
extern int32 genie_text_edit_distance(text *a, text *b);

#endif							/* GENIE_NGRAM_H */
