/*-------------------------------------------------------------------------
 *
 * genie_ball.h
 *	  Balls for range predicates (genie_ball.c): WHERE v <@ genie_ball(q, r)
 *	  on real[] (genie_vector_ball: a centre vector, a float8 radius) and
 *	  WHERE t <@ genie_ball(q, r) on text (genie_text_ball: a centre string,
 *	  an int4 radius in edit operations); what the index reads of one.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_BALL_H
#define GENIE_BALL_H

#include "postgres.h"

#include "fmgr.h"

/* A ball as the index reads it: the centre (a real[] or a text datum, detoasted) and the radius. */
typedef struct GenieBall
{
	bool		isnull;			/* a NULL centre or radius: no row is in it */
	Datum		center;
	double		radius;			/* >= 0 */
} GenieBall;

/*
 * Reads a genie_vector_ball (vectors) or genie_text_ball: an error for a
 * negative or NaN radius, as the operators give.
 */
extern void genie_ball_read(Datum ball, bool vectors, GenieBall *out);

#endif							/* GENIE_BALL_H */
