/*-------------------------------------------------------------------------
 *
 * genie_utils.c
 *	  Helpers shared by every layer of the PostgreSQL glue (see
 *	  genie_utils.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "commands/defrem.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "genie_utils.h"

int			genie_cpu_threads = 0;

int
genie_cancel_requested(void *arg)
{
	return QueryCancelPending || ProcDiePending;
}

int
genie_int32_cmp(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;

	return (x > y) - (x < y);
}

int
genie_parse_int_list(const char *value, long min, long max, int32 *out, int max_count)
{
	const char *p = value;
	int			n = 0;

	for (;;)
	{
		char	   *end;
		long		v;

		while (*p == ' ')
			p++;
		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno != 0 || v < min || v > max || n >= max_count)
			return -1;
		out[n++] = (int32) v;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return n;
		if (*p++ != ',')
			return -1;
	}
}

int
genie_tid_cmp(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

void
genie_report_error(const genie_error *err, const char *context)
{
	const char *message = err->message[0] != '\0' ? err->message : genie_status_name(err->status);

	switch (err->status)
	{
		case GENIE_INVALID_ARGUMENT:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s: %s", context, message)));
			break;
		case GENIE_OUT_OF_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("%s: %s", context, message)));
			break;
		case GENIE_DEVICE_OUT_OF_MEMORY:
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("%s: %s", context, message),
					 errhint("Lower genie.device_memory_limit or set genie.device = 'cpu'.")));
			break;
		case GENIE_DEVICE_UNAVAILABLE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s: %s", context, message),
					 errhint("Set genie.device = 'auto' or 'cpu' to use the CPU engine; "
							 "SELECT * FROM genie_devices() shows what genie can use.")));
			break;
		case GENIE_DEVICE_ERROR:
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("%s: GPU error: %s", context, message),
					 errhint("Set genie.device = 'cpu' to use the CPU engine.")));
			break;
		case GENIE_CANCELLED:

			/*
			 * The engine saw a pending interrupt: raise it the usual way.  No
			 * caller searches with interrupts held off; if one did, the
			 * error below would leave the cancel pending for the next check.
			 */
			CHECK_FOR_INTERRUPTS();
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling statement due to user request")));
			break;
		case GENIE_OK:
		case GENIE_INTERNAL_ERROR:
		default:
			elog(ERROR, "%s: genie internal error (%s): %s",
				 context, genie_status_name(err->status), message);
	}
	pg_unreachable();
}

int32 *
genie_int4_array_values(ArrayType *array, const char *argname, int *count)
{
	int			n;

	if (ARR_ELEMTYPE(array) != INT4OID)
		elog(ERROR, "genie: %s is not an int4[]", argname);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL elements", argname),
				 errhint("Remove the NULLs, e.g. with array_remove(%s, NULL).", argname)));

	n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	*count = n;
	return (int32 *) ARR_DATA_PTR(array);
}

/*
 * A vector is a one-dimensional real[] without NULLs and with finite
 * elements: NaN and infinity have no place in a Euclidean distance.
 */
float *
genie_float4_array_values(ArrayType *array, const char *argname, int *count)
{
	int			n;
	float	   *values;

	if (ARR_ELEMTYPE(array) != FLOAT4OID)
		elog(ERROR, "genie: %s is not a real[]", argname);
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain NULL elements", argname)));
	n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
	values = (float *) ARR_DATA_PTR(array);
	for (int i = 0; i < n; i++)
		if (isnan(values[i]) || isinf(values[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("%s must not contain %s", argname, isnan(values[i]) ? "NaN" : "infinity"),
					 errdetail("Element %d is %s.", i + 1, isnan(values[i]) ? "NaN" : (values[i] > 0 ? "Infinity" : "-Infinity"))));
	*count = n;
	return values;
}

/*
 * Characters are what the database's encoding says they are, as for
 * PostgreSQL's own length() and fuzzystrmatch's levenshtein(): in a
 * SQL_ASCII database every byte is a character, so bytes 0x80 to 0xFF are
 * taken as the Latin-1 characters U+0080 to U+00FF (plain ASCII needs no
 * change); in any other encoding the text is converted to UTF-8.
 */
const char *
genie_text_utf8(text *value, size_t *size)
{
	const char *data = VARDATA_ANY(value);
	int			len = VARSIZE_ANY_EXHDR(value);
	int			encoding = GetDatabaseEncoding();

	if (encoding == PG_SQL_ASCII)
	{
		int			high = 0;

		for (int i = 0; i < len; i++)
			high += (unsigned char) data[i] >= 0x80;
		if (high > 0)
		{
			char	   *out = palloc((Size) len + high + 1);
			char	   *p = out;

			for (int i = 0; i < len; i++)
			{
				unsigned char c = (unsigned char) data[i];

				if (c < 0x80)
					*p++ = (char) c;
				else
				{
					*p++ = (char) (0xC0 | (c >> 6));
					*p++ = (char) (0x80 | (c & 0x3F));
				}
			}
			*p = '\0';
			data = out;
			len += high;
		}
	}
	else if (encoding != PG_UTF8)
	{
		char	   *converted = pg_server_to_any(data, len, PG_UTF8);

		if (converted != data)
			len = strlen(converted);
		data = converted;
	}
	*size = (size_t) len;
	return data;
}

/*
 * The index a REINDEX CONCURRENTLY of "index" is putting in its place, when
 * "index" is the old one it renamed <name>_ccold[N]: a valid index of the
 * same table in the same schema named <name>.  InvalidOid otherwise.
 */
static Oid
reindex_successor(Relation index)
{
	const char *name = RelationGetRelationName(index);
	const char *cut = NULL;
	char	   *base;
	Oid			successor;
	HeapTuple	tup;
	bool		valid = false;

	/* the last "_ccold": a REINDEX of an index named x_ccold gives x_ccold_ccold */
	for (const char *p = strstr(name, "_ccold"); p != NULL; p = strstr(p + 1, "_ccold"))
		cut = p;
	if (cut == NULL || strspn(cut + 6, "0123456789") != strlen(cut + 6))
		return InvalidOid;
	base = pnstrdup(name, cut - name);
	successor = get_relname_relid(base, RelationGetNamespace(index));
	pfree(base);
	if (!OidIsValid(successor))
		return InvalidOid;
	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(successor));
	if (HeapTupleIsValid(tup))
	{
		Form_pg_index form = (Form_pg_index) GETSTRUCT(tup);

		valid = form->indisvalid && form->indrelid == index->rd_index->indrelid;
		ReleaseSysCache(tup);
	}
	return valid ? successor : InvalidOid;
}

/*
 * An invalid index may lack rows: an error that says why it is invalid and
 * what to do.  A statement that named an index while REINDEX CONCURRENTLY
 * replaced it holds the old one (the name now belongs to the new one), and
 * an index being built or dropped concurrently is not ready: running the
 * statement again is the answer to both; only an index a failed CREATE
 * INDEX CONCURRENTLY left behind needs a REINDEX.
 */
static void
report_invalid(Relation index)
{
	const char *name = RelationGetRelationName(index);
	Oid			successor = reindex_successor(index);

	if (OidIsValid(successor))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("genie index \"%s\" is being replaced by REINDEX CONCURRENTLY", name),
				 errdetail("Index \"%s\" takes its place.", get_rel_name(successor)),
				 errhint("Run the statement again. If no REINDEX CONCURRENTLY is running, one was interrupted after its swap: DROP INDEX %s;",
						 quote_identifier(name))));
	if (!index->rd_index->indisready || !index->rd_index->indislive)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("genie index \"%s\" is being built or dropped concurrently", name),
				 errhint("Run the statement again once the CREATE INDEX, REINDEX or DROP INDEX CONCURRENTLY is done.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("genie index \"%s\" is not valid", name),
			 errdetail("A CREATE INDEX CONCURRENTLY or REINDEX CONCURRENTLY that failed left it invalid."),
			 errhint("REINDEX INDEX %s;", quote_identifier(name))));
}

/*
 * The index was there when the statement named it and is gone now that it
 * is locked: a DROP INDEX or the end of a REINDEX CONCURRENTLY ran between.
 */
static void
report_dropped(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("genie index \"%s\" was dropped while the statement opened it", name),
			 errhint("A DROP INDEX or REINDEX CONCURRENTLY ran beside the statement. Run the statement again.")));
}

/* Opens the index and its table after checking that it is a genie index the user may read. */
Relation
genie_open_index(Oid indexoid, Relation *heap, GenieIndexAccess access)
{
	HeapTuple	classtup;
	Form_pg_class classform;
	Oid			heapoid;
	Relation	index;
	AclResult	aclresult;
	char	   *name;

	classtup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(classtup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation with OID %u does not exist", indexoid)));
	classform = (Form_pg_class) GETSTRUCT(classtup);
	if (classform->relkind != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an index", NameStr(classform->relname)),
				 errhint("Pass the name of a genie index, e.g. genie_topk('docs_tags_idx', ...).")));
	if (classform->relam != get_index_am_oid("genie", false))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a genie index", NameStr(classform->relname)),
				 errhint("Create one with CREATE INDEX ... USING genie.")));
	name = pstrdup(NameStr(classform->relname));
	ReleaseSysCache(classtup);

	/*
	 * The OID came from a name looked up with no lock (a regclass argument):
	 * a REINDEX CONCURRENTLY or DROP INDEX may drop the index before it is
	 * locked here.  The table first, then the index, as every index opener
	 * locks them; then the catalog is read again, under the lock.
	 */
	heapoid = IndexGetRelation(indexoid, true);
	if (!OidIsValid(heapoid))
		report_dropped(name);
	if (access == GENIE_ACCESS_STATS)
	{
		/*
		 * Counts and bounds describe every row, also those that row-level
		 * security or column privileges hide: as pgstattuple, only the
		 * owner and pg_stat_scan_tables may read them.
		 */
		if (!genie_class_ownercheck(heapoid, GetUserId()) &&
			!has_privs_of_role(GetUserId(), ROLE_PG_STAT_SCAN_TABLES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to read the statistics of genie index \"%s\"",
							get_rel_name(indexoid)),
					 errdetail("Only the owner of table \"%s\" and roles with the privileges of pg_stat_scan_tables may.",
							   get_rel_name(heapoid)),
					 errhint("GRANT pg_stat_scan_tables TO the role.")));
	}
	else
	{
		aclresult = pg_class_aclcheck(heapoid, GetUserId(), ACL_SELECT);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(heapoid)),
						   get_rel_name(heapoid));
	}

	*heap = try_table_open(heapoid, AccessShareLock);
	if (*heap == NULL)
		report_dropped(name);
	LockRelationOid(indexoid, AccessShareLock);
	/* the lock took in the catalog's changes: the index's row is current */
	if (IndexGetRelation(indexoid, true) != heapoid)
	{
		UnlockRelationOid(indexoid, AccessShareLock);
		table_close(*heap, AccessShareLock);
		report_dropped(name);
	}
	index = index_open(indexoid, NoLock);
	pfree(name);
	if (!index->rd_index->indisvalid)
		report_invalid(index);
	return index;
}


int
genie_varlena_cmp(Datum a, Datum b)
{
	struct varlena *x = PG_DETOAST_DATUM(a);
	struct varlena *y = PG_DETOAST_DATUM(b);
	Size		nx = VARSIZE_ANY_EXHDR(x);
	Size		ny = VARSIZE_ANY_EXHDR(y);
	int			c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(nx, ny));

	if (c == 0 && nx != ny)
		c = nx < ny ? -1 : 1;
	if ((Pointer) x != DatumGetPointer(a))
		pfree(x);
	if ((Pointer) y != DatumGetPointer(b))
		pfree(y);
	return c;
}

Datum
genie_varlena_hash(Datum value, uint64 seed, bool extended)
{
	struct varlena *x = PG_DETOAST_DATUM(value);
	Datum		h = extended ?
		hash_any_extended((unsigned char *) VARDATA_ANY(x), VARSIZE_ANY_EXHDR(x), seed) :
		hash_any((unsigned char *) VARDATA_ANY(x), VARSIZE_ANY_EXHDR(x));

	if ((Pointer) x != DatumGetPointer(value))
		pfree(x);
	return h;
}

void *
genie_palloc_zeroed(Size bytes)
{
	void	   *p = palloc_extended(Max(bytes, 1), MCXT_ALLOC_HUGE);
	genie_error err;

	if (genie_parallel_zero(p, bytes, genie_cpu_threads, genie_cancel_requested, NULL, &err) != GENIE_OK)
	{
		/* a cancel (polled before each 8 MB piece) raises its error here; otherwise this thread zeroes it */
		CHECK_FOR_INTERRUPTS();
		memset(p, 0, bytes);
	}
	return p;
}

/*
 * A batch function holds all its rows in memory when it starts to return
 * them; a result store of work_mem (4 MB by default, 45,000 to 65,000 rows
 * of three columns) that outgrew it wrote its rows to a temporary file,
 * and the executor read them back: 10,000 queries at k = 10 spent about 4
 * of a 68 ms statement on that on 2 cores (bench/latency.md).  A result of
 * up to this much stays in memory (or work_mem, if larger): a second copy
 * of rows the function holds anyway, for each such call of a statement.
 * A larger one keeps the work_mem store and goes to a temporary file, as
 * before.
 */
#define GENIE_RESULT_MEMORY_KB (64 * 1024)

void
genie_result_rows_expected(FunctionCallInfo fcinfo, int64 n_rows)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc = rsinfo->setDesc;
	Size		width = 0;
	uint64		row;
	int64		need_kb;
	int64		budget_kb;
	MemoryContext old;

	Assert(tuplestore_tuple_count(rsinfo->setResult) == 0);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		width = att_align_nominal(width, att->attalign);
		width += att->attlen > 0 ? att->attlen : 32;
	}
	/* a minimal tuple in its own chunk (a power of two, with its header) and the store's pointer to it */
	row = pg_nextpower2_64(MAXALIGN(SizeofMinimalTupleHeader) + MAXALIGN(width)) + 32;
	need_kb = (int64) ((row * (uint64) Max(n_rows, 0)) / 1024) + 1;
	budget_kb = Max((int64) work_mem, GENIE_RESULT_MEMORY_KB);
	if (need_kb <= work_mem || need_kb > budget_kb)
		return;
	old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	tuplestore_end(rsinfo->setResult);
	rsinfo->setResult = NULL;	/* not the ended store, should the next call fail */
	rsinfo->setResult = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0,
											  false, (int) need_kb);
	MemoryContextSwitchTo(old);
}

/*
 * tuplestore_putvalues forms each row from its Datums (heap_form_minimal_
 * tuple: a pass over the columns for the size, a palloc0, a pass to fill
 * them), 100,000 times for 10,000 queries at k = 10.  A batch function's
 * columns are fixed-width and never NULL, so every row has the same size
 * and layout: the first row's tuple is made once, each row's values are
 * written where its columns lie, and the store copies it (one palloc and
 * one memcpy), as it copies any slot's.
 */
void
genie_result_writer_begin(GenieResultWriter *w, FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc = rsinfo->setDesc;
	Datum		values[GENIE_RESULT_MAX_COLUMNS];
	bool		nulls[GENIE_RESULT_MAX_COLUMNS];
	ItemPointerData zero_tid;
	char	   *data;
	Size		off = 0;

	memset(w, 0, sizeof(*w));
	w->store = rsinfo->setResult;
	w->natts = desc->natts;
	if (w->natts > GENIE_RESULT_MAX_COLUMNS)
		elog(ERROR, "a genie batch function returns at most %d columns", GENIE_RESULT_MAX_COLUMNS);
	ItemPointerSetInvalid(&zero_tid);
	for (int i = 0; i < w->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attlen <= 0 || (!att->attbyval && att->atttypid != TIDOID))
			elog(ERROR, "column %d of a genie batch function's result is not of a fixed width", i + 1);
		w->attlen[i] = att->attlen;
		w->attbyval[i] = att->attbyval;
		values[i] = att->attbyval ? (Datum) 0 : PointerGetDatum(&zero_tid);
		nulls[i] = false;
	}
	w->tuple = heap_form_minimal_tuple(desc, values, nulls);
	/*
	 * The columns where heap_fill_tuple put them: aligned from the data's
	 * MAXALIGNed start, t_hoff from the header's start, which a minimal
	 * tuple lacks the first MINIMAL_TUPLE_OFFSET bytes of.
	 */
	data = (char *) w->tuple + w->tuple->t_hoff - MINIMAL_TUPLE_OFFSET;
	for (int i = 0; i < w->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		off = att_align_nominal(off, att->attalign);
		w->column[i] = data + off;
		off += att->attlen;
	}
	if (data + off != (char *) w->tuple + w->tuple->t_len)
		elog(ERROR, "a genie batch function's result row is not laid out as expected");
	w->slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
}

void
genie_result_put(GenieResultWriter *w, const Datum *values)
{
	for (int i = 0; i < w->natts; i++)
	{
		if (w->attbyval[i])
			store_att_byval(w->column[i], values[i], w->attlen[i]);
		else
			memcpy(w->column[i], DatumGetPointer(values[i]), w->attlen[i]);
	}
	ExecStoreMinimalTuple(w->tuple, w->slot, false);
	tuplestore_puttupleslot(w->store, w->slot);
}

void
genie_result_writer_end(GenieResultWriter *w)
{
	ExecDropSingleTupleTableSlot(w->slot);
	pfree(w->tuple);
	w->slot = NULL;
	w->tuple = NULL;
}
