/*-------------------------------------------------------------------------
 *
 * genie_vector.h
 *	  Vectors (genie_vector_ops): what the batch functions genie_knn and
 *	  genie_within need of the type beyond its callbacks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_VECTOR_H
#define GENIE_VECTOR_H

#include "postgres.h"

#include "utils/array.h"
#include "utils/relcache.h"

#include "types/genie_type.h"

/*
 * An error unless the index can answer query vectors of dim elements: it
 * holds vectors of that dimension, or none yet.
 */
extern void genie_vector_check_queries(Relation index, int dim);

/*
 * An error unless every one of count query elements is finite (dim
 * elements a query, the first query's number first + 1, for the message).
 */
extern void genie_vector_check_finite(const float *values, int64 count, int dim, int64 first);

/*
 * The query vectors of a real[][] (one per row) or of a real[] (one
 * query), in place: finite, without NULLs; *nq and *dim receive the shape.
 */
extern float *genie_vector_queries(ArrayType *array, int *nq, int *dim);

#endif							/* GENIE_VECTOR_H */
