/*-------------------------------------------------------------------------
 *
 * genie_handler.c
 *	  The genie access method's handler, options, cost estimate and
 *	  operator class validation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/amapi.h"
#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "access/genam.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/vacuum.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/catcache.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "am/genie_am.h"
#include "search/genie_search_values.h"
#include "types/genie_bit.h"
#include "types/rows/genie_row_build.h"

PG_FUNCTION_INFO_V1(genie_handler);

static relopt_kind genie_relopt_kind;

static relopt_enum_elt_def genie_lsh_family_values[] = {
	{"e2lsh", GENIE_LSH_E2LSH},
	{"rbh", GENIE_LSH_RBH},
	{NULL}
};

static relopt_enum_elt_def genie_cluster_centres_values[] = {
	{"sum", GENIE_CLUSTER_CENTRES_SUM},
	{"farthest", GENIE_CLUSTER_CENTRES_FARTHEST},
	{NULL}
};

void
genie_init_reloptions(void)
{
	genie_relopt_kind = add_reloption_kind();
	add_int_reloption(genie_relopt_kind, "split_length",
					  "Postings lists longer than this are processed as sublists of this length",
					  4096, 1, 1 << 30, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "pending_list_limit",
					  "Size of the pending list in kB that triggers a merge (default: genie.pending_list_limit)",
					  -1, -1, MAX_KILOBYTES, ShareUpdateExclusiveLock);
	add_int_reloption(genie_relopt_kind, "n",
					  "Gram length of a genie_ngram_ops index, fixed when the index is built",
					  GENIE_NGRAM_DEFAULT_N, 2, 8, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "buckets",
					  "Buckets per numeric attribute of a genie_row_ops index, fixed when the index is built",
					  GENIE_ROW_DEFAULT_BUCKETS, 1, GENIE_ROW_MAX_BUCKETS, AccessExclusiveLock);
	add_bool_reloption(genie_relopt_kind, "store_strings",
					   "Whether a genie_ngram_ops index keeps each row's string for exact edit-distance searches, fixed when the index is built",
					   true, AccessExclusiveLock);
	add_enum_reloption(genie_relopt_kind, "family",
					   "LSH family of a genie_vector_ops index: e2lsh (Euclidean) or rbh (Laplacian kernel), fixed when the index is built",
					   genie_lsh_family_values, GENIE_LSH_E2LSH,
					   "Valid values are \"e2lsh\" and \"rbh\".", AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "m",
					  "LSH functions of a genie_vector_ops index (0: none, exact search only; -1: Equation 9 for epsilon = delta = 0.06), EWH functions of a genie_bit_ops index (-1 or 0: none), fixed when the index is built",
					  -1, -1, 100000, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "sample_bits",
					  "Bits each EWH function of a genie_bit_ops index reads (h; at most the codes' length), fixed when the index is built",
					  GENIE_EWH_DEFAULT_SAMPLE_BITS, 1, GENIE_EWH_MAX_SAMPLE_BITS, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "errors",
					  "Bit errors up to which genie.bit_search = ewh asks each function's buckets (e)",
					  GENIE_EWH_DEFAULT_ERRORS, 0, GENIE_EWH_MAX_ERRORS, ShareUpdateExclusiveLock);
	add_string_reloption(genie_relopt_kind, "weights",
						 "Weights alpha_0, .., alpha_e of EWH buckets at 0 to e errors, as '3,2,1' (default: e + 1 - r)",
						 NULL, genie_validate_ewh_weights, ShareUpdateExclusiveLock);
	add_real_reloption(genie_relopt_kind, "width",
					   "LSH width of a genie_vector_ops index (E2LSH bucket width, RBH kernel width; 0: estimated from the table), fixed when the index is built",
					   0.0, 0.0, 1e300, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "seed",
					  "Seed that draws the LSH functions of a genie_vector_ops index, the EWH functions of a genie_bit_ops index, or the permutants of either stored-values index, fixed when the index is built",
					  0, 0, INT_MAX, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "permutants",
					  "Permutants of the permutation index of a genie_vector_ops index or a genie_ngram_ops index that stores its strings (0: none), fixed when the index is built",
					  0, 0, GENIE_MAX_PERMUTANTS, AccessExclusiveLock);
	add_bool_reloption(genie_relopt_kind, "cluster_list",
					   "Whether a genie_vector_ops index or a genie_ngram_ops index that stores its strings keeps a List of Clusters for range queries, fixed when the index is built",
					   false, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "cluster_size",
					  "Objects in each cluster of the List of Clusters, fixed when the index is built",
					  GENIE_DEFAULT_CLUSTER_SIZE, 2, 65536, AccessExclusiveLock);
	add_int_reloption(genie_relopt_kind, "supercluster_clusters",
					  "Clusters in each supercluster of the List of Superclusters (0: a plain List of Clusters), fixed when the index is built",
					  GENIE_DEFAULT_SUPERCLUSTER_CLUSTERS, 0, 4096, AccessExclusiveLock);
	add_enum_reloption(genie_relopt_kind, "cluster_centres",
					   "How the List of Clusters picks each next centre: sum (the largest sum of distances to the centres so far, the paper's) or farthest (the largest distance to the nearest of them), fixed when the index is built",
					   genie_cluster_centres_values, GENIE_CLUSTER_CENTRES_SUM,
					   "Valid values are \"sum\" and \"farthest\".", AccessExclusiveLock);
	add_string_reloption(genie_relopt_kind, "attributes",
						 "Columns a genie_row_ops index encodes, each optionally with bounds lo..hi (default: every column of a supported type)",
						 NULL, genie_validate_attribute_list, AccessExclusiveLock);
}

bytea *
genie_options(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"split_length", RELOPT_TYPE_INT, offsetof(GenieOptions, split_length)},
		{"pending_list_limit", RELOPT_TYPE_INT, offsetof(GenieOptions, pending_list_limit)},
		{"n", RELOPT_TYPE_INT, offsetof(GenieOptions, ngram_n)},
		{"buckets", RELOPT_TYPE_INT, offsetof(GenieOptions, buckets)},
		{"attributes", RELOPT_TYPE_STRING, offsetof(GenieOptions, attributes)},
		{"store_strings", RELOPT_TYPE_BOOL, offsetof(GenieOptions, store_strings)},
		{"family", RELOPT_TYPE_ENUM, offsetof(GenieOptions, family)},
		{"m", RELOPT_TYPE_INT, offsetof(GenieOptions, functions)},
		{"width", RELOPT_TYPE_REAL, offsetof(GenieOptions, width)},
		{"seed", RELOPT_TYPE_INT, offsetof(GenieOptions, seed)},
		{"permutants", RELOPT_TYPE_INT, offsetof(GenieOptions, permutants)},
		{"cluster_list", RELOPT_TYPE_BOOL, offsetof(GenieOptions, cluster_list)},
		{"cluster_size", RELOPT_TYPE_INT, offsetof(GenieOptions, cluster_size)},
		{"supercluster_clusters", RELOPT_TYPE_INT, offsetof(GenieOptions, supercluster_clusters)},
		{"cluster_centres", RELOPT_TYPE_ENUM, offsetof(GenieOptions, cluster_centres)},
		{"sample_bits", RELOPT_TYPE_INT, offsetof(GenieOptions, sample_bits)},
		{"errors", RELOPT_TYPE_INT, offsetof(GenieOptions, errors)},
		{"weights", RELOPT_TYPE_STRING, offsetof(GenieOptions, weights)},
	};

	return (bytea *) build_reloptions(reloptions, validate, genie_relopt_kind,
									  sizeof(GenieOptions), tab, lengthof(tab));
}

/* The strategy of an ordering operator in an operator family, or 0. */
static int
ordering_strategy(Oid opno, Oid opfamily)
{
	HeapTuple	tp = SearchSysCache3(AMOPOPID, ObjectIdGetDatum(opno), CharGetDatum(AMOP_ORDER),
									 ObjectIdGetDatum(opfamily));
	int			strategy = 0;

	if (HeapTupleIsValid(tp))
	{
		strategy = ((Form_pg_amop) GETSTRUCT(tp))->amopstrategy;
		ReleaseSysCache(tp);
	}
	return strategy;
}

/*
 * False when the settings ask the approximate mode of a distance ordering
 * (genie.vector_search = lsh, genie.bit_search = ewh) of an index built
 * without its keywords (m = 0): the scan would raise an error, and another
 * index of the column, or a sequential scan, can answer.
 */
static bool
approximate_serves(Relation index)
{
	const GenieTypeInfo *info = genie_opclass_type(index);
	GenieMetaPageData meta;

	if (info->approximate_query == NULL)
		return true;
	if (!genie_search_approximate(info->encoding == GENIE_ENCODING_CODE ? GENIE_VALUES_CODES :
								  GENIE_VALUES_VECTORS))
		return true;
	genie_read_meta(index, &meta);
	return meta.vectors.functions > 0;
}

/*
 * False when the index's type says that a scan of it could not serve one of
 * the path's orderings (an n-gram index with n other than 3 asked to order by
 * text <~> text, a row index given a genie_ranges query made for another
 * index, both folded at plan time when they can be), or approximate_serves
 * says so: the scan would raise an error, and a sequential scan can answer.
 */
static bool
index_serves(PlannerInfo *root, IndexPath *path)
{
	ListCell   *lc;
	bool		serves = true;
	Relation	index;
	GenieIndexType type;

	if (path->indexorderbys == NIL)
		return true;
	index = index_open(path->indexinfo->indexoid, NoLock);
	if (!approximate_serves(index))
	{
		index_close(index, NoLock);
		return false;
	}
	/* only a type with a plan check makes planning read the index */
	if (genie_opclass_type(index)->plan_serves != NULL)
	{
		genie_index_type(index, &type);
		foreach(lc, path->indexorderbys)
		{
			Expr	   *clause = (Expr *) lfirst(lc);
			Node	   *query;
			bool		known;

			if (!IsA(clause, OpExpr) || list_length(((OpExpr *) clause)->args) != 2)
				continue;
			query = estimate_expression_value(root, lsecond(((OpExpr *) clause)->args));
			known = IsA(query, Const) && !((Const *) query)->constisnull;
			if (!type.info->plan_serves(index, &type.encoding,
										 ordering_strategy(((OpExpr *) clause)->opno,
														   path->indexinfo->opfamily[0]),
										 known ? ((Const *) query)->constvalue : (Datum) 0,
										 known))
				serves = false;
		}
	}
	index_close(index, NoLock);
	return serves;
}

/*
 * False when one of the path's predicates is a range predicate (value <@
 * genie_ball(q, r)) and the index does not store its values (an n-gram
 * index built with store_strings = off): the scan could not answer it, and
 * a sequential scan can.
 */
static bool
predicates_served(IndexPath *path)
{
	ListCell   *lc;
	bool		has_ball = false;
	bool		serves = true;

	foreach(lc, path->indexclauses)
	{
		IndexClause *iclause = lfirst_node(IndexClause, lc);
		ListCell   *lq;

		foreach(lq, iclause->indexquals)
		{
			Expr	   *clause = lfirst_node(RestrictInfo, lq)->clause;

			if (IsA(clause, OpExpr) &&
				get_op_opfamily_strategy(((OpExpr *) clause)->opno,
										 path->indexinfo->opfamily[0]) == GENIE_STRATEGY_WITHIN)
				has_ball = true;
		}
	}
	if (has_ball)
	{
		Relation	index = index_open(path->indexinfo->indexoid, NoLock);

		serves = genie_index_stores_values(index, genie_opclass_type(index));
		index_close(index, NoLock);
	}
	return serves;
}

/*
 * Set predicates (WHERE tags @> q, && q, <@ q) without an ORDER BY: the
 * rows come from the postings in memory, one pass over the query's lists,
 * so the work grows with the rows they hold, about the rows selected.  The
 * first scan in a backend reads and unpacks every page of the index, and
 * later ones find it cached until the index changes: when this backend does
 * not hold the postings yet, a tenth of a sequential read of the index is
 * charged (as for ORDER BY), the share of one scan among those that follow.
 * So a cold backend takes GIN for a selective predicate and genie where
 * GIN has to read long posting lists; once genie's postings are here, they
 * cost nothing to reach.
 */
static void
set_scan_cost(PlannerInfo *root, IndexPath *path, double loop_count, Cost *indexStartupCost,
			  Cost *indexTotalCost, Selectivity *indexSelectivity, double *indexPages)
{
	IndexOptInfo *info = path->indexinfo;
	double		tuples = Max(info->tuples, 1.0);
	double		pages = Max(info->pages, 1.0);
	List	   *quals = get_quals_from_indexclauses(path->indexclauses);
	Selectivity selectivity = clauselist_selectivity(root, quals, info->rel->relid,
													 JOIN_INNER, NULL);
	double		rows = Max(selectivity * tuples, 1.0);

	*indexStartupCost = rows * cpu_operator_cost * 0.25 + list_length(quals) * cpu_operator_cost;
	if (!genie_cache_holds_main(info->indexoid))
		*indexStartupCost += pages * seq_page_cost * 0.1 / Max(loop_count, 1.0);
	*indexTotalCost = *indexStartupCost + rows * cpu_index_tuple_cost;
	*indexSelectivity = selectivity;
	*indexPages = 0;
}

/*
 * The index serves ORDER BY col <~> query, and on genie_int4_ops the set
 * predicates (set_scan_cost).  An ordered scan's work happens before the
 * first row: one pass over the postings of the query's keywords, which we
 * estimate from the index size.  Without either the index is useless, so
 * such paths are priced out.
 */
void
genie_amcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
					 Cost *indexStartupCost, Cost *indexTotalCost,
					 Selectivity *indexSelectivity, double *indexCorrelation,
					 double *indexPages)
{
	GenericCosts costs;
	double		tuples = Max(path->indexinfo->tuples, 1.0);
	double		pages = Max(path->indexinfo->pages, 1.0);

	*indexCorrelation = 0.0;
	if (!predicates_served(path))
	{
		*indexStartupCost = disable_cost * 1000.0;
		*indexTotalCost = disable_cost * 1000.0;
		*indexSelectivity = 1.0;
		*indexPages = pages;
		return;
	}
	if (path->indexorderbys == NIL && path->indexclauses != NIL)
	{
		set_scan_cost(root, path, loop_count, indexStartupCost, indexTotalCost,
					  indexSelectivity, indexPages);
		return;
	}
	if (path->indexorderbys == NIL)
	{
		*indexStartupCost = disable_cost;
		*indexTotalCost = disable_cost;
		*indexSelectivity = 1.0;
		*indexPages = pages;
		return;
	}

	/*
	 * An index that cannot serve the ORDER BY (see index_serves) is priced
	 * above any plan that enable_seqscan = off and enable_sort = off can
	 * penalise.
	 */
	if (!index_serves(root, path))
	{
		*indexStartupCost = disable_cost * 1000.0;
		*indexTotalCost = disable_cost * 1000.0;
		*indexSelectivity = 1.0;
		*indexPages = pages;
		return;
	}

	/* the first search of the scan asks for no more rows than the LIMIT */
	genie_scan_note_limit(path->indexinfo->indexoid, root->limit_tuples);

	MemSet(&costs, 0, sizeof(costs));
	costs.numIndexTuples = tuples;
	genericcostestimate(root, path, loop_count, &costs);

	/*
	 * Counting touches a fraction of the postings (the query's keywords) on a
	 * cached, decoded index: much cheaper than evaluating the operator on every
	 * heap row, which is what a sequential scan plus sort pays.  Charge a
	 * per-tuple CPU cost well below cpu_operator_cost and one pass over the
	 * index pages at the sequential rate.
	 */
	*indexStartupCost = tuples * cpu_operator_cost * 0.05 + pages * seq_page_cost * 0.1;
	*indexTotalCost = *indexStartupCost + costs.indexTotalCost - costs.indexStartupCost;
	*indexSelectivity = 1.0;
	*indexCorrelation = 0.0;
	*indexPages = pages;
}

/* Ordering operators return float8; search operators are the set predicates. */
bool
genie_amvalidate(Oid opclassoid)
{
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	CatCList   *oprlist;
	CatCList   *proclist;
	bool		has_encoding = false;
	char	   *opclassname;
	bool		result = true;

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opclassname = NameStr(classform->opcname);

	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));
	for (int i = 0; i < oprlist->n_members; i++)
	{
		HeapTuple	oprtup = &oprlist->members[i]->tuple;
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(oprtup);

		if (oprform->amoppurpose == AMOP_SEARCH)
		{
			/* the set predicates of int4[] and the range predicates (genie_set_scan.c) */
			if (oprform->amopstrategy < GENIE_STRATEGY_OVERLAPS ||
				oprform->amopstrategy > GENIE_STRATEGY_WITHIN ||
				get_op_rettype(oprform->amopopr) != BOOLOID)
			{
				ereport(INFO,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("genie operator class \"%s\" has search operator %s with strategy %d: only && (3), @> (4), <@ (5) and <@ of a ball (6) returning boolean are served",
								opclassname, format_operator(oprform->amopopr),
								oprform->amopstrategy)));
				result = false;
			}
		}
		else if (get_op_rettype(oprform->amopopr) != FLOAT8OID)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("genie operator class \"%s\" has operator %s that is not an ordering operator returning float8",
							opclassname, format_operator(oprform->amopopr))));
			result = false;
		}
	}
	ReleaseCatCacheList(oprlist);

	/* support function 1 gives the type's callbacks */
	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));
	for (int i = 0; i < proclist->n_members; i++)
	{
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(&proclist->members[i]->tuple);

		if (procform->amprocnum == GENIE_TYPE_PROC &&
			procform->amproclefttype == classform->opcintype)
		{
			has_encoding = genie_type_proc_valid(procform->amproc);
			if (!has_encoding)
				ereport(INFO,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("genie operator class \"%s\" has a support function 1 that is not (internal) RETURNS internal",
								opclassname)));
		}
	}
	ReleaseCatCacheList(proclist);
	if (!has_encoding)
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("genie operator class \"%s\" lacks a valid type support function 1",
						opclassname)));
		result = false;
	}
	ReleaseSysCache(classtup);
	return result;
}

Datum
genie_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = 0;
	amroutine->amsupport = 1;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = false;
	amroutine->amcanorderbyop = true;
	amroutine->amcanbackward = false;
	amroutine->amcanunique = false;
	amroutine->amcanmulticol = false;
	amroutine->amoptionalkey = true;
	amroutine->amsearcharray = false;
	amroutine->amsearchnulls = false;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = true;
	amroutine->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
	amroutine->amkeytype = InvalidOid;

	amroutine->ambuild = genie_ambuild;
	amroutine->ambuildempty = genie_ambuildempty;
	amroutine->aminsert = genie_aminsert;
	amroutine->ambulkdelete = genie_ambulkdelete;
	amroutine->amvacuumcleanup = genie_amvacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = genie_amcostestimate;
	amroutine->amoptions = genie_options;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = genie_ambuildphasename;
	amroutine->amvalidate = genie_amvalidate;
	amroutine->amadjustmembers = NULL;
	amroutine->ambeginscan = genie_ambeginscan;
	amroutine->amrescan = genie_amrescan;
	amroutine->amgettuple = genie_amgettuple;
	amroutine->amgetbitmap = genie_amgetbitmap;
	amroutine->amendscan = genie_amendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}
