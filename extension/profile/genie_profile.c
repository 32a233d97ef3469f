/*-------------------------------------------------------------------------
 *
 * genie_profile.c
 *	  The phases of a backend's genie searches (genie_profile.h), and the
 *	  SQL functions that show and reset them:
 *
 *	    SET genie.profile = on;
 *	    SELECT id FROM docs ORDER BY tags <~> '{3,17}' LIMIT 10;
 *	    SELECT * FROM genie_profile();   -- phase, calls, total_ms
 *	    SELECT genie_profile_reset();
 *
 * Time is charged to the innermost phase open, so the phases add up to the
 * time genie spent, and what a statement took beyond them is the
 * executor's, the planner's and the client's.  Phases nest by a small stack;
 * an error in the middle of one leaves the stack, which the abort of the
 * transaction clears (of a subtransaction, back to where it began).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "profile/genie_profile.h"

PG_FUNCTION_INFO_V1(genie_profile);
PG_FUNCTION_INFO_V1(genie_profile_reset);

#define MAX_DEPTH 16

bool		genie_profile_enabled = false;

static const char *const phase_names[GENIE_N_PHASES] = {
	"query", "cache", "load", "upload", "service", "queue", "engine", "pending", "visibility",
	"results"
};

static double phase_ms[GENIE_N_PHASES];
static int64 phase_calls[GENIE_N_PHASES];
static GeniePhase stack[MAX_DEPTH];
static int	depth = 0;
static int	beyond = 0;			/* pushes past MAX_DEPTH, charged to the phase below */
static instr_time mark;

/*
 * The stack's depth when each open subtransaction began: an abort of one
 * (an EXCEPTION block in a query genie_knn_from runs, say) closes the
 * phases opened inside it and no others.
 */
#define MAX_SUBXACTS 64
static struct
{
	SubTransactionId subid;
	int			depth;
	int			beyond;
}			subxact_depth[MAX_SUBXACTS];
static int	n_subxacts = 0;

/* Charges the time since the last mark to the phase on top, and marks now. */
static void
charge_top(void)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	if (depth > 0)
	{
		instr_time	elapsed = now;

		INSTR_TIME_SUBTRACT(elapsed, mark);
		phase_ms[stack[depth - 1]] += INSTR_TIME_GET_MILLISEC(elapsed);
	}
	mark = now;
}

void
genie_profile_push(GeniePhase phase)
{
	if (!genie_profile_enabled)
		return;
	charge_top();
	phase_calls[phase]++;
	if (depth < MAX_DEPTH)
		stack[depth++] = phase;
	else
		beyond++;
}

void
genie_profile_pop(void)
{
	/* a phase opened before genie.profile was turned off still closes */
	if (depth == 0)
		return;
	charge_top();
	if (beyond > 0)
		beyond--;
	else
		depth--;
}

void
genie_profile_move(GeniePhase to, double ms)
{
	if (depth == 0 || ms <= 0)
		return;
	phase_ms[stack[depth - 1]] -= ms;
	phase_ms[to] += ms;
	phase_calls[to]++;
}

static void
profile_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		depth = 0;
		beyond = 0;
	}
	n_subxacts = 0;
}

static void
profile_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			i;

	if (event == SUBXACT_EVENT_START_SUB)
	{
		if (n_subxacts < MAX_SUBXACTS)
		{
			subxact_depth[n_subxacts].subid = mySubid;
			subxact_depth[n_subxacts].depth = depth;
			subxact_depth[n_subxacts].beyond = beyond;
		}
		n_subxacts++;			/* counted past the table too, to pair the ends */
		return;
	}
	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (n_subxacts == 0)
		return;
	n_subxacts--;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
		return;
	/* abort: back to the depth the subtransaction began at, when known */
	i = n_subxacts;
	if (i < MAX_SUBXACTS && subxact_depth[i].subid == mySubid && subxact_depth[i].depth <= depth)
	{
		depth = subxact_depth[i].depth;
		beyond = subxact_depth[i].beyond;
	}
	else
	{
		depth = 0;
		beyond = 0;
	}
}

void
genie_profile_read(double *ms, int64 *calls)
{
	memcpy(ms, phase_ms, sizeof(phase_ms));
	memcpy(calls, phase_calls, sizeof(phase_calls));
}

void
genie_profile_restore(const double *ms, const int64 *calls)
{
	memcpy(phase_ms, ms, sizeof(phase_ms));
	memcpy(phase_calls, calls, sizeof(phase_calls));
}

void
genie_profile_init(void)
{
	DefineCustomBoolVariable("genie.profile",
							 "Charges the time of this session's genie searches to phases.",
							 "genie_profile() shows where the time went; genie_profile_reset() starts over.",
							 &genie_profile_enabled,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	RegisterXactCallback(profile_xact_callback, NULL);
	RegisterSubXactCallback(profile_subxact_callback, NULL);
}

/* genie_profile() -> setof (phase text, calls int8, total_ms float8) */
Datum
genie_profile(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int p = 0; p < GENIE_N_PHASES; p++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(phase_names[p]);
		values[1] = Int64GetDatum(phase_calls[p]);
		values[2] = Float8GetDatum(phase_ms[p]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* genie_profile_reset() -> void */
Datum
genie_profile_reset(PG_FUNCTION_ARGS)
{
	memset(phase_ms, 0, sizeof(phase_ms));
	memset(phase_calls, 0, sizeof(phase_calls));
	depth = 0;
	beyond = 0;
	PG_RETURN_VOID();
}
