/*-------------------------------------------------------------------------
 *
 * genie_topk.c
 *	  genie_topk(index, queries, k): a whole batch of queries in one engine
 *	  call, returning for each query its k best rows visible to the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "genie_am.h"

PG_FUNCTION_INFO_V1(genie_topk);

#define GENIE_TOPK_MAX_K	(1 << 30)
#define GENIE_TOPK_VISIBILITY_CACHE_BYTES ((Size) 256 * 1024 * 1024)

/* Opens the index and its table after checking that it is a genie index the user may read. */
Relation
genie_open_index(Oid indexoid, Relation *heap)
{
	HeapTuple	classtup;
	Form_pg_class classform;
	Oid			heapoid;
	Relation	index;
	AclResult	aclresult;

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
	ReleaseSysCache(classtup);

	heapoid = IndexGetRelation(indexoid, false);
	aclresult = pg_class_aclcheck(heapoid, GetUserId(), ACL_SELECT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(heapoid)),
					   get_rel_name(heapoid));

	*heap = table_open(heapoid, AccessShareLock);
	index = index_open(indexoid, AccessShareLock);
	/* an index left invalid (a failed CREATE INDEX CONCURRENTLY) may lack rows */
	if (!index->rd_index->indisvalid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("genie index \"%s\" is not valid", RelationGetRelationName(index)),
				 errhint("REINDEX INDEX %s;", quote_identifier(RelationGetRelationName(index)))));
	return index;
}

Datum
genie_topk(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(1);
	int32		k = PG_GETARG_INT32(2);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index;
	GenieCachedIndex *volatile entry = NULL;
	Datum	   *elems;
	bool	   *nulls;
	int			nq;
	int16		elem_len;
	bool		elem_byval;
	char		elem_align;
	bool		row_queries;

	if (k < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be at least 1")));
	if (k > GENIE_TOPK_MAX_K)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("k must be at most %d", GENIE_TOPK_MAX_K)));
	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a one-dimensional array")));

	InitMaterializedSRF(fcinfo, 0);
	/* genie_query[], or genie_ranges[] for a row index */
	row_queries = ARR_ELEMTYPE(array) == genie_ranges_type(fcinfo->flinfo->fn_oid);
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &elem_len, &elem_byval, &elem_align);
	deconstruct_array(array, ARR_ELEMTYPE(array), elem_len, elem_byval, elem_align,
					  &elems, &nulls, &nq);
	for (int i = 0; i < nq; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("queries must not contain NULL elements")));
	if (nq == 0)
		return (Datum) 0;

	index = genie_open_index(indexoid, &heap);
	/* genie_topk reads rows by TID, past any row-level security policy */
	if (check_enable_rls(RelationGetRelid(heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("genie_topk cannot be used on table \"%s\", which has row-level security enabled",
						RelationGetRelationName(heap)),
				 errhint("Use ORDER BY ... <~> ... LIMIT k, which applies the policies.")));
	PG_TRY();
	{
		GenieQuery **queries = palloc(sizeof(GenieQuery *) * nq);
		int		   *pending = palloc(sizeof(int) * nq);	/* queries still short of k rows */
		int			n_pending = nq;
		int32		kprime;
		Snapshot	snapshot = GetActiveSnapshot();
		IndexFetchTableData *fetch = table_index_fetch_begin(heap);
		TupleTableSlot *slot = table_slot_create(heap, NULL);
		ItemPointerData *found_tids = palloc(sizeof(ItemPointerData) * (int64) Min(k, 1 << 20));
		int32	   *found_scores = palloc(sizeof(int32) * (int64) Min(k, 1 << 20));
		int64		found_capacity = Min(k, 1 << 20);
		uint8	   *visibility = NULL;
		ItemPointerData *visible_tids = NULL;
		/* each query's rows, kept until the end so that output is in query order */
		ItemPointerData **query_tids = palloc0(sizeof(ItemPointerData *) * nq);
		int32	  **query_scores = palloc0(sizeof(int32 *) * nq);
		int64	   *query_found = palloc0(sizeof(int64) * nq);

		entry = genie_cache_get(index);
		genie_cache_pin(entry);

		/*
		 * Popular rows appear in the results of many queries of a batch: check
		 * each one's visibility once per call (0 unknown, 1 visible, 2 not),
		 * remembering the TID of the visible version.  For one query, or
		 * beyond the cap, the memory is not worth it and every hit is checked.
		 */
		if (nq > 1 &&
			(Size) entry->n_objects * (1 + sizeof(ItemPointerData)) <= GENIE_TOPK_VISIBILITY_CACHE_BYTES)
		{
			visibility = palloc_extended(Max(entry->n_objects, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
			visible_tids = palloc_extended(sizeof(ItemPointerData) * Max(entry->n_objects, 1),
										   MCXT_ALLOC_HUGE);
		}
		for (int i = 0; i < nq; i++)
		{
			queries[i] = row_queries ?
				genie_ranges_query(index, genie_ranges_from_datum(elems[i])) :
				DatumGetGenieQueryP(elems[i]);
			pending[i] = i;
		}

		kprime = (int32) Min((int64) k, (int64) Max(entry->n_objects, 1));
		while (n_pending > 0)
		{
			GenieQuery **batch_queries = palloc(sizeof(GenieQuery *) * n_pending);
			GenieQueryBatch batch;
			GenieSearchResult result;
			int			still = 0;

			for (int i = 0; i < n_pending; i++)
				batch_queries[i] = queries[pending[i]];
			genie_query_batch_init(&batch, batch_queries, n_pending);
			genie_cache_search(entry, &batch, kprime, &result);

			for (int i = 0; i < n_pending; i++)
			{
				int64		end = result.query_offsets[i + 1];
				int64		n_found = 0;
				bool		exhausted = (end - result.query_offsets[i] < kprime) ||
					kprime >= entry->n_objects;

				for (int64 h = result.query_offsets[i]; h < end && n_found < k; h++)
				{
					int32		id = result.objects[h];
					ItemPointerData tid = entry->objects[id].tid;
					bool		call_again = false;
					bool		all_dead = false;

					if (entry->objects[id].flags & GENIE_OBJECT_DEAD)
						continue;
					if (visibility != NULL && visibility[id] != 0)
					{
						if (visibility[id] != 1)
							continue;
						tid = visible_tids[id];
					}
					else
					{
						bool		visible = table_index_fetch_tuple(fetch, &tid, snapshot, slot,
																	  &call_again, &all_dead);

						if (visibility != NULL)
						{
							visibility[id] = visible ? 1 : 2;
							visible_tids[id] = tid;
						}
						if (!visible)
							continue;
					}
					if (n_found == found_capacity)
					{
						found_capacity *= 2;
						found_tids = repalloc_huge(found_tids, sizeof(ItemPointerData) * found_capacity);
						found_scores = repalloc_huge(found_scores, sizeof(int32) * found_capacity);
					}
					found_tids[n_found] = tid;
					found_scores[n_found] = result.scores[h];
					n_found++;
				}

				if (n_found < k && !exhausted)
				{
					/* invisible or dead rows took places: ask again for more */
					pending[still++] = pending[i];
					continue;
				}
				query_found[pending[i]] = n_found;
				if (n_found > 0)
				{
					query_tids[pending[i]] = palloc_extended(sizeof(ItemPointerData) * n_found,
															 MCXT_ALLOC_HUGE);
					query_scores[pending[i]] = palloc_extended(sizeof(int32) * n_found,
															   MCXT_ALLOC_HUGE);
					memcpy(query_tids[pending[i]], found_tids, sizeof(ItemPointerData) * n_found);
					memcpy(query_scores[pending[i]], found_scores, sizeof(int32) * n_found);
				}
				CHECK_FOR_INTERRUPTS();
			}
			n_pending = still;
			kprime = (int32) Min((int64) kprime * 4, (int64) entry->n_objects);
			pfree(batch_queries);
		}

		ExecDropSingleTupleTableSlot(slot);
		table_index_fetch_end(fetch);

		for (int q = 0; q < nq; q++)
		{
			for (int64 j = 0; j < query_found[q]; j++)
			{
				Datum		values[3];
				bool		out_nulls[3] = {false, false, false};

				values[0] = Int32GetDatum(q + 1);
				values[1] = PointerGetDatum(&query_tids[q][j]);
				values[2] = Int32GetDatum(query_scores[q][j]);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, out_nulls);
			}
		}
	}
	PG_FINALLY();
	{
		if (entry != NULL)
			genie_cache_unpin(entry);
	}
	PG_END_TRY();

	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return (Datum) 0;
}
