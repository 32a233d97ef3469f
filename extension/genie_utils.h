/*-------------------------------------------------------------------------
 *
 * genie_utils.h
 *	  Helpers every layer of genie's PostgreSQL glue shares: turning a C API
 *	  failure into ereport, array and text arguments as the core reads them,
 *	  opening a genie index by OID, and the cancel check the engines poll.
 *
 * This is the bottom of extension/: genie_utils.c calls no other file of
 * extension/, only PostgreSQL and the C API.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_UTILS_H
#define GENIE_UTILS_H

#include "postgres.h"

#include "fmgr.h"
#include "utils/array.h"
#include "utils/relcache.h"

#include "genie/genie.h"

/*
 * PostgreSQL 15 and 17 from one source.  What 16 renamed: a relation's
 * storage is a RelFileLocator (a RelFileNode before), the owner check is
 * object_ownercheck, a qualified name is parsed with an error context, a
 * counted text is sent without its flag, and a sorted datum is fetched
 * with a copy flag.  What 17 renamed: a backend's number is its
 * ProcNumber (MyProcNumber, which also numbers its PGPROC: pgprocno
 * before), and the autovacuum worker test.
 */
#if PG_VERSION_NUM >= 160000
#include "storage/relfilelocator.h"
typedef RelFileLocator GenieRelFile;
#define GENIE_REL_FILE(rel)				((rel)->rd_locator)
#define GENIE_REL_FILE_NUMBER(rel)		((rel)->rd_locator.relNumber)
#define GENIE_SMGR_FILE(smgr)			(&(smgr)->smgr_rlocator.locator)
#define GenieRelFileEquals(a, b)		RelFileLocatorEquals(a, b)
#define genie_class_ownercheck(relid, role) object_ownercheck(RelationRelationId, (relid), (role))
#define genie_qualified_name_list(name)	stringToQualifiedNameList((name), NULL)
#define genie_sendcountedtext(buf, str, len) pq_sendcountedtext((buf), (str), (len))
#else
#include "storage/relfilenode.h"
typedef RelFileNode GenieRelFile;
#define GENIE_REL_FILE(rel)				((rel)->rd_node)
#define GENIE_REL_FILE_NUMBER(rel)		((rel)->rd_node.relNode)
#define GENIE_SMGR_FILE(smgr)			(&(smgr)->smgr_rnode.node)
#define GenieRelFileEquals(a, b)		RelFileNodeEquals(a, b)
#define genie_class_ownercheck(relid, role) pg_class_ownercheck((relid), (role))
#define genie_qualified_name_list(name)	stringToQualifiedNameList(name)
#define genie_sendcountedtext(buf, str, len) pq_sendcountedtext((buf), (str), (len), false)
#endif
/* A check hook's extra: what the GUC machinery frees (guc_malloc since 16) */
#if PG_VERSION_NUM >= 160000
#define genie_guc_malloc(size)			guc_malloc(LOG, (size))
#else
#define genie_guc_malloc(size)			malloc(size)
#endif
#if PG_VERSION_NUM >= 170000
#define GENIE_MY_PROC_NUMBER			MyProcNumber
#define GENIE_LOCAL_BACKEND(local)		((local) ? MyProcNumber : INVALID_PROC_NUMBER)
#define genie_am_autovacuum_worker()	AmAutoVacuumWorkerProcess()
#else
#define GENIE_MY_PROC_NUMBER			(MyProc->pgprocno)
#define GENIE_LOCAL_BACKEND(local)		((local) ? MyBackendId : InvalidBackendId)
#define genie_am_autovacuum_worker()	IsAutoVacuumWorkerProcess()
#endif

/*
 * Turns a failed C API call into ereport(ERROR).  Status values a user can
 * cause get their own SQLSTATE and a hint; a cancelled call raises the
 * pending cancel (or query_canceled); a broken invariant is elog(ERROR).
 */
extern void genie_report_error(const genie_error *err, const char *context) pg_attribute_noreturn();

#define GENIE_CHECK(call, err, context) \
	do { \
		if ((call) != GENIE_OK) \
			genie_report_error((err), (context)); \
	} while (0)

/*
 * The cancel check handed to the engines (genie_engine_options.cancel):
 * nonzero once PostgreSQL has a query cancel (statement_timeout included) or
 * a termination pending.  It only reads flags that signal handlers set, so
 * engine worker threads may call it.
 */
extern int	genie_cancel_requested(void *arg);

/*
 * genie.cpu_threads: the host threads a backend's C API calls may use (the
 * CPU engine, the build's sort, the LSH draws); 0 is every core.
 */
extern int	genie_cpu_threads;

/* qsort/bsearch order of int32 values, ascending */
extern int	genie_int32_cmp(const void *a, const void *b);

/* qsort/bsearch order of ItemPointerData (TIDs), as ItemPointerCompare */
extern int	genie_tid_cmp(const void *a, const void *b);

/*
 * Integers separated by commas (spaces allowed around them), each in [min,
 * max], at most max_count of them, into out: how many, or -1 when value is
 * not such a list.
 */
extern int	genie_parse_int_list(const char *value, long min, long max, int32 *out, int max_count);

/*
 * Returns the elements of a one-dimensional int4[] without NULL elements
 * (a pointer into the detoasted array); raises a clear error otherwise.
 * argname names the argument in messages.
 */
extern int32 *genie_int4_array_values(ArrayType *array, const char *argname, int *count);

/*
 * The elements of a one-dimensional real[] without NULLs, NaN or infinity
 * (a pointer into the detoasted array); raises a clear error otherwise.
 */
extern float *genie_float4_array_values(ArrayType *array, const char *argname, int *count);

/* A text value as UTF-8 for the core (converted when the database is not UTF-8). */
extern const char *genie_text_utf8(text *value, size_t *size);

/* What a function that takes a genie index by OID will do with it. */
typedef enum GenieIndexAccess
{
	GENIE_ACCESS_READ,			/* read rows: SELECT on the table */
	GENIE_ACCESS_STATS			/* report on every row: the table's owner or pg_stat_scan_tables */
} GenieIndexAccess;

/*
 * Opens a genie index and its table for a function that takes the index by
 * OID, after checking that it is a valid genie index and that the user may
 * access it so.  Both are locked AccessShareLock.
 */
extern Relation genie_open_index(Oid indexoid, Relation *heap, GenieIndexAccess access);

/*
 * Before a batch function puts its n_rows rows into the result that
 * InitMaterializedSRF made (still empty): a result that would outgrow
 * work_mem but not 64 MB gets a store of its size, kept in memory rather
 * than written to a temporary file (genie_utils.c).
 */
extern void genie_result_rows_expected(FunctionCallInfo fcinfo, int64 n_rows);

/*
 * The rows of a batch function whose result columns are all fixed-width
 * and never NULL (query_no int4, ctid tid, distance float8 or score
 * int4; genie_similar's five), put into the result InitMaterializedSRF made: each row is one
 * tuple, made once, with its values written in place and then copied into
 * the store (genie_utils.c).  Begin after genie_result_rows_expected.
 */
#define GENIE_RESULT_MAX_COLUMNS 8

typedef struct GenieResultWriter
{
	struct Tuplestorestate *store;
	struct TupleTableSlot *slot;
	struct MinimalTupleData *tuple; /* the row, written again for each */
	int			natts;
	char	   *column[GENIE_RESULT_MAX_COLUMNS];	/* each column's bytes in the tuple */
	int16		attlen[GENIE_RESULT_MAX_COLUMNS];
	bool		attbyval[GENIE_RESULT_MAX_COLUMNS];
} GenieResultWriter;

extern void genie_result_writer_begin(GenieResultWriter *w, FunctionCallInfo fcinfo);

/* One row: a by-value column's Datum, a by-reference one's pointer (a tid's ItemPointer). */
extern void genie_result_put(GenieResultWriter *w, const Datum *values);
extern void genie_result_writer_end(GenieResultWriter *w);

/*
 * bytes of palloc'd memory (huge allowed), zeroed on genie.cpu_threads
 * cores: the first touch of a fresh allocation of 100s of MB (each page
 * faulted in and cleared by the kernel) is most of what zeroing it costs,
 * and one core did it at a fraction of memory speed (bench/cold.md).  A
 * cancel is answered between 8 MB pieces.
 */
extern void *genie_palloc_zeroed(Size bytes);

/*
 * Equality, a total order and hashing for genie's query types (genie_query,
 * genie_ranges), so that DISTINCT, GROUP BY, UNION, IN and hash joins work
 * on them.  Their constructors zero every byte, so two values are equal when
 * their bytes are; the order is the bytes', then the length's: arbitrary but
 * total, which is all that sorting for DISTINCT needs.
 */
extern int	genie_varlena_cmp(Datum a, Datum b);
extern Datum genie_varlena_hash(Datum value, uint64 seed, bool extended);

/* The SQL-callable comparison functions of a type: PREFIX_eq, _ne, _lt, ... */
#define GENIE_COMPARISON_FUNCTIONS(prefix) \
	PG_FUNCTION_INFO_V1(prefix##_cmp); \
	PG_FUNCTION_INFO_V1(prefix##_eq); \
	PG_FUNCTION_INFO_V1(prefix##_ne); \
	PG_FUNCTION_INFO_V1(prefix##_lt); \
	PG_FUNCTION_INFO_V1(prefix##_le); \
	PG_FUNCTION_INFO_V1(prefix##_gt); \
	PG_FUNCTION_INFO_V1(prefix##_ge); \
	PG_FUNCTION_INFO_V1(prefix##_hash); \
	PG_FUNCTION_INFO_V1(prefix##_hash_extended); \
	Datum prefix##_cmp(PG_FUNCTION_ARGS) { PG_RETURN_INT32(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1))); } \
	Datum prefix##_eq(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) == 0); } \
	Datum prefix##_ne(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) != 0); } \
	Datum prefix##_lt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) < 0); } \
	Datum prefix##_le(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) <= 0); } \
	Datum prefix##_gt(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) > 0); } \
	Datum prefix##_ge(PG_FUNCTION_ARGS) { PG_RETURN_BOOL(genie_varlena_cmp(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)) >= 0); } \
	Datum prefix##_hash(PG_FUNCTION_ARGS) { return genie_varlena_hash(PG_GETARG_DATUM(0), 0, false); } \
	Datum prefix##_hash_extended(PG_FUNCTION_ARGS) { return genie_varlena_hash(PG_GETARG_DATUM(0), PG_GETARG_INT64(1), true); } \
	extern int genie_comparison_functions_end

#endif							/* GENIE_UTILS_H */
