/*-------------------------------------------------------------------------
 *
 * genie_info.c
 *	  genie_index_info(index): what a genie index holds, from its metapage;
 *	  genie_vector_info(index): a vector index's dimension and LSH functions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "catalog/index.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "types/genie_type.h"

PG_FUNCTION_INFO_V1(genie_index_info);

Datum
genie_index_info(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	TupleDesc	tupdesc;
	Relation	index;
	Relation	heap;
	Buffer		metabuf;
	GenieMetaPage meta;
	GenieIndexType type;
	Datum		values[12];
	bool		nulls[12] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "genie_index_info: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_STATS);
	/* before the metapage lock: on first use it reads the metapage itself */
	genie_index_type(index, &type);
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	meta = GeniePageGetMeta(BufferGetPage(metabuf));
	values[0] = Int32GetDatum(meta->n_objects - meta->n_dead);
	values[1] = Int32GetDatum(meta->n_dead);
	values[2] = Int32GetDatum(meta->n_pending);
	values[3] = Int64GetDatum(meta->pending_bytes);
	values[4] = Int32GetDatum(meta->n_keywords);
	values[5] = Int64GetDatum(meta->n_postings);
	values[6] = Int32GetDatum(meta->split_length);
	values[7] = Int64GetDatum(RelationGetNumberOfBlocks(index));
	values[8] = Int64GetDatum((int64) meta->stamp);
	values[9] = Int32GetDatum(meta->format_version);
	values[10] = CStringGetTextDatum(type.info->name);
	values[11] = Int32GetDatum(meta->encoding.ngram_n);
	nulls[11] = meta->encoding.kind != GENIE_ENCODING_NGRAM;
	UnlockReleaseBuffer(metabuf);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

PG_FUNCTION_INFO_V1(genie_vector_info);

/* genie_vector_info(index): a vector index's dimension and LSH functions */
Datum
genie_vector_info(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	TupleDesc	tupdesc;
	Relation	index;
	Relation	heap;
	GenieIndexType type;
	GenieMetaPageData meta;
	Datum		values[6];
	bool		nulls[6] = {false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "genie_vector_info: return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_READ);
	genie_index_type(index, &type);
	if (type.encoding.kind != GENIE_ENCODING_VECTOR)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("genie index \"%s\" is of operator class %s, not genie_vector_ops",
						RelationGetRelationName(index), type.info->opclass)));
	genie_read_meta(index, &meta);
	values[0] = Int32GetDatum(meta.vectors.dimensions);
	nulls[0] = meta.vectors.dimensions == 0;
	values[1] = CStringGetTextDatum(meta.vectors.family == GENIE_LSH_RBH ? "rbh" : "e2lsh");
	values[2] = Int32GetDatum(meta.vectors.functions);
	values[3] = Int32GetDatum(meta.vectors.buckets);
	values[4] = Float8GetDatum(meta.vectors.width);
	values[5] = Int64GetDatum((int64) meta.vectors.seed);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
