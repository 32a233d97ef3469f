/*-------------------------------------------------------------------------
 *
 * genie_vector.h
 *	  Vectors (genie_vector_ops): what the batch function genie_knn needs
 *	  of the type beyond its callbacks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_VECTOR_H
#define GENIE_VECTOR_H

#include "postgres.h"

#include "utils/relcache.h"

#include "types/genie_type.h"

/*
 * An error unless the index can answer query vectors of dim elements: it
 * holds vectors of that dimension, or none yet.
 */
extern void genie_vector_check_queries(Relation index, int dim);

#endif							/* GENIE_VECTOR_H */
