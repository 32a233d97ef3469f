/*-------------------------------------------------------------------------
 *
 * genie_expand_parallel.h
 *	  A pglz stream expanded on several threads (genie_expand_parallel.c),
 *	  a cut of it at a time, beside genie_expand.h's expansion in order.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_EXPAND_PARALLEL_H
#define GENIE_EXPAND_PARALLEL_H

#include "functions/genie_expand.h"

/*
 * Input a thread's part of a cut is given (a cut of threads parts); in a
 * value's first cut, less, so that a stream whose parts cannot be set right
 * costs little before it is expanded in order (bench/expand-bench: 0.87x in
 * order with parts of 1 MB on 16 threads).
 */
#define GENIE_EXPAND_PART_BYTES		((Size) 1024 * 1024)
#define GENIE_EXPAND_FIRST_PART_BYTES	((Size) 256 * 1024)

/*
 * Runs body(i, arg) once for every i in [0, n) on up to threads threads,
 * the caller's included; false when it could not or was cancelled (the
 * bodies may then have run in part or not at all).
 */
typedef bool (*GenieExpandRun) (int n, int threads, void (*body) (int64 i, void *arg), void *arg);

/*
 * Expands about in_bytes more of s's pglz input (or all that is left when
 * little more would be) on up to threads threads, by run, to a control
 * group's start (genie_expand_parallel.c).  False when it could not go all
 * the way: too little input for two parts of 256 kB, parts it could not
 * place, run failing, corrupt data, or a part it could not set right; s is
 * then where the output is right up to (perhaps where it was; dest past
 * s->dp may be written), the rest of the stream is likely no better, and
 * the caller expands it in order with genie_expand_pglz, which also finds
 * what is corrupt.  The output is the same either way.
 */
extern bool genie_expand_pglz_parallel(GenieExpand *s, Size in_bytes, int threads,
									   GenieExpandRun run);

#endif							/* GENIE_EXPAND_PARALLEL_H */
