/*-------------------------------------------------------------------------
 *
 * genie_set_scan.c
 *	  Set predicates through a keyword index: WHERE tags @> q, tags && q and
 *	  tags <@ q on genie_int4_ops, answered from the postings by intersecting
 *	  or uniting the query's keyword lists (genie_index_match_set), as bitmap
 *	  scans (amgetbitmap) and as plain index scans (genie_scan.c).
 *
 * The keywords of an int4[] row are its elements, and an indexed array has
 * no NULL elements (an insert of one is an error), so the answer is exact:
 * rows come without a recheck.  A NULL element of the query matches nothing,
 * as in the operators themselves: @> then holds for no row, && and <@ ignore
 * it.  Several predicates on the column are intersected.  Dead objects and
 * rows whose array is NULL are left out (the operators are strict).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "search/genie_search_range.h"
#include "types/genie_ball.h"

/*
 * The query array's non-NULL elements (any number of dimensions, as the
 * operators read it); *has_null says whether it had NULL elements.
 */
static int32 *
query_elements(Datum value, int *n, bool *has_null)
{
	ArrayType  *array = DatumGetArrayTypeP(value);
	Datum	   *elements;
	bool	   *nulls;
	int			count;
	int32	   *out;
	int			kept = 0;

	if (ARR_ELEMTYPE(array) != INT4OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("a genie index of int4[] cannot compare with an array of %s",
						format_type_be(ARR_ELEMTYPE(array))),
				 errhint("Cast the array to int4[].")));
	deconstruct_array(array, INT4OID, sizeof(int32), true, TYPALIGN_INT, &elements, &nulls, &count);
	out = palloc(sizeof(int32) * Max(count, 1));
	*has_null = false;
	for (int i = 0; i < count; i++)
	{
		if (nulls[i])
			*has_null = true;
		else
			out[kept++] = DatumGetInt32(elements[i]);
	}
	*n = kept;
	return out;
}

static genie_set_predicate
predicate_of(StrategyNumber strategy)
{
	switch (strategy)
	{
		case GENIE_STRATEGY_OVERLAPS:
			return GENIE_SET_OVERLAPS;
		case GENIE_STRATEGY_CONTAINS:
			return GENIE_SET_CONTAINS;
		case GENIE_STRATEGY_CONTAINED_BY:
			return GENIE_SET_CONTAINED_BY;
	}
	elog(ERROR, "genie: unknown search strategy %d", strategy);
	return GENIE_SET_OVERLAPS;	/* keep the compiler quiet */
}

/* One index part's matches (malloc'd by the C API), shifted by base, into out. */
static int64
match_part(const genie_index *part, genie_set_predicate predicate, const int32 *keywords, int n,
		   int32 base, int32 *out)
{
	int32	   *ids = NULL;
	int64		count = 0;
	genie_error err;

	GENIE_CHECK(genie_index_match_set(part, predicate, keywords, n, genie_cancel_requested, NULL,
									  &ids, &count, &err),
				&err, "genie: matching a set");
	for (int64 i = 0; i < count; i++)
		out[i] = ids[i] + base;
	genie_ids_free(ids);
	return count;
}

/* a := a ∩ b, both ascending; the new length */
static int64
intersect_ids(int32 *a, int64 na, const int32 *b, int64 nb)
{
	int64		i = 0,
				j = 0,
				kept = 0;

	while (i < na && j < nb)
	{
		if (((i + j) & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else
		{
			a[kept++] = a[i];
			i++;
			j++;
		}
	}
	return kept;
}

/*
 * The objects in a ball (value <@ genie_ball(q, r)), ascending: a range
 * search of the stored values (search/genie_search_range.c); NULL when none.
 */
static int32 *
match_ball(GenieCachedIndex *entry, ScanKey key, int64 *count)
{
	bool		vectors = entry->values_kind == GENIE_VALUES_VECTORS;
	GenieBall	ball;
	GenieValueBatch batch;
	genie_range_results *found;
	int64		offsets[2];
	int32	   *ids;
	int64		n;

	genie_ball_read(key->sk_argument, vectors, &ball);
	if (ball.isnull)
		return NULL;
	/* (the planner prices such an index out: see genie_amcostestimate) */
	if (!entry->values_stored)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genie index \"%s\" does not store its strings", get_rel_name(entry->index_oid)),
				 errhint("Rebuild it with store_strings = on (the default), or let a sequential scan answer.")));
	memset(&batch, 0, sizeof(batch));
	batch.n = 1;
	if (vectors)
	{
		/* the operator's own checks, so that no plan answers what another refuses */
		batch.kind = GENIE_VALUES_VECTORS;
		batch.vectors = genie_float4_array_values(DatumGetArrayTypeP(ball.center), "the ball's centre",
												  &batch.dim);
	}
	else
	{
		size_t		size;

		batch.kind = GENIE_VALUES_STRINGS;
		/* the stored strings are UTF-8 whatever the database's encoding */
		batch.text = genie_text_utf8(DatumGetTextPP(ball.center), &size);
		offsets[0] = 0;
		offsets[1] = (int64) size;
		batch.text_offsets = offsets;
	}
	found = genie_search_range(entry, &batch, ball.radius, false);
	if (found == NULL)
		return NULL;
	n = found->query_offsets[1];
	ids = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (ids != NULL)
		memcpy(ids, found->objects, sizeof(int32) * n);
	genie_range_results_free(found);
	if (ids == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed on %lld rows in a ball.", (long long) n)));
	/* (distance, id) order to id order, for the intersections */
	qsort(ids, n, sizeof(int32), genie_int32_cmp);
	*count = n;
	return ids;
}

/*
 * The objects of one predicate: the main part's, then the pending part's
 * (their ids follow the main ones), ascending; NULL when none.
 */
static int32 *
match_key(GenieCachedIndex *entry, ScanKey key, int64 *count)
{
	genie_set_predicate predicate;
	int			n;
	bool		has_null;
	int32	   *keywords;
	int32	   *ids;

	*count = 0;
	/* a strict operator with a NULL argument holds for no row */
	if (key->sk_flags & SK_ISNULL)
		return NULL;
	if (key->sk_strategy == GENIE_STRATEGY_WITHIN)
		return match_ball(entry, key, count);
	predicate = predicate_of(key->sk_strategy);
	keywords = query_elements(key->sk_argument, &n, &has_null);
	if (predicate == GENIE_SET_CONTAINS && has_null)
		return NULL;
	ids = palloc_extended(sizeof(int32) * Max(entry->n_objects, 1), MCXT_ALLOC_HUGE);
	if (entry->n_main_objects > 0)
	{
		genie_cache_load_main(entry);
		*count = genie_search_match_set(entry, predicate, keywords, n, ids);
		if (*count < 0)
			*count = match_part(entry->main_index, predicate, keywords, n, 0, ids);
	}
	*count += match_part(entry->pending_index, predicate, keywords, n, entry->n_main_objects,
						 ids + *count);
	return ids;
}

int64
genie_set_scan_matches(GenieCachedIndex *entry, ScanKey keys, int nkeys, int32 **ids)
{
	/* the arrays of the keys die here: a rescan per outer row must not pile them up */
	MemoryContext work = AllocSetContextCreate(CurrentMemoryContext, "genie set scan",
											   ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller = MemoryContextSwitchTo(work);
	int32	   *result = NULL;
	int64		n_result = 0;
	int64		kept = 0;

	for (int k = 0; k < nkeys; k++)
	{
		int64		n_part;
		int32	   *part = match_key(entry, &keys[k], &n_part);

		if (k == 0)
		{
			result = part;
			n_result = n_part;
		}
		else
			n_result = intersect_ids(result, n_result, part, n_part);
		if (n_result == 0)
			break;
	}
	for (int64 i = 0; i < n_result; i++)
	{
		int32		id = result[i];

		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
		if (!(entry->objects[id].flags & (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)))
			result[kept++] = id;
	}
	MemoryContextSwitchTo(caller);
	*ids = NULL;
	if (kept > 0)
	{
		*ids = palloc_extended(sizeof(int32) * kept, MCXT_ALLOC_HUGE);
		memcpy(*ids, result, sizeof(int32) * kept);
	}
	MemoryContextDelete(work);
	return kept;
}

/* A bitmap scan's search, as genie_search_batch_retrying runs it. */
typedef struct BitmapSearch
{
	IndexScanDesc scan;
	TIDBitmap  *tbm;
	int64		count;
} BitmapSearch;

static void
bitmap_search(GenieCachedIndex *entry, void *arg)
{
	BitmapSearch *b = arg;
	int32	   *ids = NULL;

	/* a second run, on another version, adds the same rows again: a set */
	b->count = genie_set_scan_matches(entry, b->scan->keyData, b->scan->numberOfKeys, &ids);
	for (int64 i = 0; i < b->count; i++)
	{
		tbm_add_tuples(b->tbm, &entry->objects[ids[i]].tid, 1, false);
		if ((i & 0xFFFF) == 0xFFFF)
			CHECK_FOR_INTERRUPTS();
	}
	if (ids != NULL)
		pfree(ids);
}

int64
genie_amgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	BitmapSearch b = {scan, tbm, 0};

	genie_search_batch_retrying(scan->indexRelation, bitmap_search, &b);
	return b.count;
}
