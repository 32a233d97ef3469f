/*-------------------------------------------------------------------------
 *
 * genie_am.h
 *	  The genie index access method's callbacks (one file per callback
 *	  family, as contrib/bloom and pgvector): the handler with options and
 *	  cost estimate (genie_handler.c), build (genie_build.c), insert
 *	  (genie_insert.c), vacuum and merge (genie_vacuum.c), ordered scans
 *	  (genie_scan.c).  The page layout is in genie_storage.h, the data types
 *	  behind genie_type.h, searching behind genie_search.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_AM_H
#define GENIE_AM_H

#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "nodes/pathnodes.h"

#include "search/genie_search.h"
#include "storage/genie_storage.h"
#include "types/genie_type.h"

/*
 * Strategies of genie_int4_ops: 1 and 2 order by <~> (int4[] and
 * genie_query); 3 to 5 are the set predicates of int4[] (genie_set_scan.c).
 */
#define GENIE_STRATEGY_OVERLAPS		3	/* && */
#define GENIE_STRATEGY_CONTAINS		4	/* @> */
#define GENIE_STRATEGY_CONTAINED_BY	5	/* <@ */
#define GENIE_STRATEGY_WITHIN		6	/* value <@ genie_ball(q, r): range search */

/* genie_set_scan.c */
extern int64 genie_set_scan_matches(GenieCachedIndex *entry, ScanKey keys, int nkeys, int32 **ids);
extern int64 genie_amgetbitmap(IndexScanDesc scan, struct TIDBitmap *tbm);

/* genie_handler.c */
extern bytea *genie_options(Datum reloptions, bool validate);
extern void genie_init_reloptions(void);
extern void genie_amcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
								 Cost *indexStartupCost, Cost *indexTotalCost,
								 Selectivity *indexSelectivity, double *indexCorrelation,
								 double *indexPages);
extern bool genie_amvalidate(Oid opclassoid);

/* genie_sorter.c: writing a whole index's postings from (keyword, object) pairs */
typedef struct GeniePostingsSorter GeniePostingsSorter;

extern GeniePostingsSorter *genie_sorter_begin(int work_mem_kb);
extern void genie_sorter_add(GeniePostingsSorter *sorter, const int32 *keywords, int n,
							 int32 object_id);
/* The main postings as genie_sorter_write wrote them. */
typedef struct GenieWrittenPostings
{
	GenieChain	keywords;
	GenieChain	postings;
	int32		n_keywords;
	int64		n_postings;
	int64		postings_bytes;	/* of the postings chain */
	int			format;			/* on-disk format written (genie.write_format) */
	int			sorted_runs;	/* runs written to tapes (0: sorted in memory) */
} GenieWrittenPostings;

extern void genie_sorter_write(GeniePostingsSorter *sorter, Relation index, bool wal,
							   GenieWrittenPostings *out);
/* genie_build.c: points the metapage at them, in the format they were written in. */
extern void genie_meta_set_postings(GenieMetaPageData *meta, const GenieWrittenPostings *written);

extern IndexBuildResult *genie_ambuild(Relation heap, Relation index, struct IndexInfo *indexInfo);
extern void genie_ambuildempty(Relation index);
extern char *genie_ambuildphasename(int64 phasenum);

/* genie_insert.c */
extern bool genie_aminsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
						   Relation heapRel, IndexUniqueCheck checkUnique,
						   bool indexUnchanged, struct IndexInfo *indexInfo);

/* genie_vacuum.c */
extern IndexBulkDeleteResult *genie_ambulkdelete(IndexVacuumInfo *info,
												 IndexBulkDeleteResult *stats,
												 IndexBulkDeleteCallback callback,
												 void *callback_state);
extern IndexBulkDeleteResult *genie_amvacuumcleanup(IndexVacuumInfo *info,
													IndexBulkDeleteResult *stats);
/*
 * Merges the pending list and drops dead objects.  With wait false it gives
 * up when another backend holds the content lock.
 */
extern void genie_merge_pending(Relation index, bool wait);

/*
 * For an insert whose value's length conflicts with the index's: when the
 * index holds few objects and every one is a row that never was (its
 * insert rolled back) or that pruning already removed, flags and merges
 * them away as VACUUM would, leaving the index empty.  Gives up (false)
 * when a VACUUM or merge is running, or when any row may be seen; deleted
 * rows are left to VACUUM, which tells standbys first.
 */
extern bool genie_remove_dead_objects(Relation index, Relation heap);

/* genie_scan.c */
extern int	genie_scan_batch_size;
/* From the cost estimate: the LIMIT above an ordered path of the index (-1: none). */
extern void genie_scan_note_limit(Oid index, double limit_tuples);
extern IndexScanDesc genie_ambeginscan(Relation index, int nkeys, int norderbys);
extern void genie_amrescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys,
						   int norderbys);
extern bool genie_amgettuple(IndexScanDesc scan, ScanDirection dir);
extern void genie_amendscan(IndexScanDesc scan);

#endif							/* GENIE_AM_H */
