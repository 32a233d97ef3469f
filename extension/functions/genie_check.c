/*-------------------------------------------------------------------------
 *
 * genie_check.c
 *	  genie_index_check(index, heapallindexed): verifies a genie index, as
 *	  amcheck's bt_index_check does a B-tree.
 *
 * Always: the metapage's counts and chain ends; every chain's pages of the
 * right kind, ending at its tail, and no page in two chains; the directory,
 * Position Map, List Array and pending list as genie_read_content decodes
 * them (counts agree); keywords strictly ascending, each keyword's postings
 * strictly ascending main object ids; flags known, the dead count right,
 * NULL rows without keywords; every live object's TID inside the table and
 * on a line pointer in use.  With heapallindexed: every row of the table
 * visible to a snapshot taken first is in the index, once, not marked dead,
 * with exactly the keywords its value has now (read with the type's
 * encode_check, which changes nothing).  It holds AccessShareLock on the
 * table and the index, as bt_index_check, and the content lock in share
 * mode (inserts and VACUUM go on; merges wait), and raises
 * ERRCODE_INDEX_CORRUPTED with the block, object or row at fault.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/guc.h"
#include "storage/bufmgr.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "types/genie_type.h"
#include "storage/genie_content.h"

PG_FUNCTION_INFO_V1(genie_index_check);

#define GENIE_OBJECT_FLAGS_KNOWN (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)

static void
corrupt(Relation index, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("genie index \"%s\" is corrupted", RelationGetRelationName(index)),
			 errdetail_internal("%s", detail),
			 errhint("REINDEX the index.")));
}

/* Marks a chain's pages, checking their kind, that it ends at its tail and shares no page. */
static void
check_chain(Relation index, const char *name, GenieChain chain, uint16 kind,
			const char **owner, BlockNumber npages)
{
	BlockNumber blkno = chain.head;
	int64		pages = 0;

	if ((chain.head == InvalidBlockNumber) != (chain.tail == InvalidBlockNumber))
		corrupt(index, psprintf("the %s chain has a head but no tail, or a tail but no head", name));
	while (blkno != InvalidBlockNumber)
	{
		Buffer		buffer;
		Page		page;
		GeniePageOpaque opaque;
		BlockNumber next;

		CHECK_FOR_INTERRUPTS();
		if (blkno == GENIE_METAPAGE_BLKNO || blkno >= npages)
			corrupt(index, psprintf("the %s chain links to block %u, outside the index's %u blocks",
									name, blkno, npages));
		if (owner[blkno] != NULL)
			corrupt(index, psprintf("block %u is in the %s chain and in the %s chain",
									blkno, owner[blkno], name));
		owner[blkno] = name;
		buffer = ReadBuffer(index, blkno);
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		opaque = GeniePageGetOpaque(page);
		if (PageIsNew(page) || opaque->page_id != GENIE_PAGE_ID || opaque->kind != kind)
		{
			UnlockReleaseBuffer(buffer);
			corrupt(index, psprintf("block %u of the %s chain is not a %s page", blkno, name, name));
		}
		next = opaque->next;
		UnlockReleaseBuffer(buffer);
		pages++;
		if (blkno == chain.tail)
			break;
		if (next == InvalidBlockNumber)
			corrupt(index, psprintf("the %s chain ends at block %u before its tail %u",
									name, blkno, chain.tail));
		blkno = next;
	}
	if (pages != chain.pages)
		corrupt(index, psprintf("the %s chain has %lld pages, the metapage says %lld",
								name, (long long) pages, (long long) chain.pages));
}

static void
check_meta_and_chains(Relation index, const GenieMetaPageData *meta)
{
	BlockNumber npages = RelationGetNumberOfBlocks(index);
	const char **owner = palloc0(sizeof(char *) * Max(npages, 1));

	if (meta->n_main_objects < 0 || meta->n_objects < meta->n_main_objects ||
		meta->n_pending != meta->n_objects - meta->n_main_objects ||
		meta->n_dead < 0 || meta->n_dead > meta->n_objects ||
		meta->n_keywords < 0 || meta->n_postings < 0 || meta->pending_bytes < 0)
		corrupt(index, psprintf("the metapage's counts disagree: %d objects, %d main, %d pending, %d dead, %d keywords, %lld postings",
								meta->n_objects, meta->n_main_objects, meta->n_pending,
								meta->n_dead, meta->n_keywords, (long long) meta->n_postings));
	check_chain(index, "directory", meta->directory, GENIE_PAGE_DIRECTORY, owner, npages);
	check_chain(index, "keyword", meta->keywords, GENIE_PAGE_KEYWORDS, owner, npages);
	check_chain(index, "postings", meta->postings, GENIE_PAGE_POSTINGS, owner, npages);
	check_chain(index, "pending", meta->pending, GENIE_PAGE_PENDING, owner, npages);
	if (GENIE_ENCODING_HAS_DICTIONARY(meta->encoding.kind))
		check_chain(index, "dictionary", meta->rows.dictionary, GENIE_PAGE_DICTIONARY, owner, npages);
	if (meta->values_stored)
		check_chain(index, "values", meta->values, GENIE_PAGE_VALUES, owner, npages);
	if (meta->permutants_chosen > 0)
	{
		check_chain(index, "permutants", meta->permutant_values, GENIE_PAGE_VALUES, owner, npages);
		check_chain(index, "permutations", meta->permutations, GENIE_PAGE_PERMUTATIONS, owner, npages);
	}
	if (meta->cluster_list_bytes > 0)
		check_chain(index, "cluster list", meta->cluster_list, GENIE_PAGE_CLUSTERS, owner, npages);
	/* the next merge builds the list again by this rule: caught here, not there */
	if (meta->cluster_centres != GENIE_CLUSTER_CENTRES_SUM &&
		meta->cluster_centres != GENIE_CLUSTER_CENTRES_FARTHEST)
		corrupt(index, psprintf("the metapage names an unknown rule for the list's centres (%d)",
								meta->cluster_centres));
	pfree(owner);
}

/*
 * The content: orders, ranges, flags.  Fills keyword_count[o], the number of
 * keywords of each object (main from the postings, pending from its record).
 */
static void
check_content(Relation index, const GenieIndexContent *c, int32 *keyword_count, bool compare_dead)
{
	int32		dead = 0;

	for (int32 k = 0; k < c->n_keywords; k++)
	{
		if (k > 0 && c->keywords[k] <= c->keywords[k - 1])
			corrupt(index, psprintf("keywords %d and %d of the Position Map are out of order",
									k - 1, k));
		for (int64 p = c->keyword_offsets[k]; p < c->keyword_offsets[k + 1]; p++)
		{
			int32		o = c->postings[p];

			if (o < 0 || o >= c->n_main_objects)
				corrupt(index, psprintf("keyword %d lists object %d, beyond the %d main objects",
										c->keywords[k], o, c->n_main_objects));
			if (p > c->keyword_offsets[k] && o <= c->postings[p - 1])
				corrupt(index, psprintf("the postings of keyword %d are out of order at object %d",
										c->keywords[k], o));
			keyword_count[o]++;
		}
		if ((k & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	for (int32 o = c->n_main_objects; o < c->n_objects; o++)
	{
		int32		local = o - c->n_main_objects;

		keyword_count[o] = (int32) (c->pending_offsets[local + 1] - c->pending_offsets[local]);
	}
	for (int32 o = 0; o < c->n_objects; o++)
	{
		uint16		flags = c->objects[o].flags;

		if (flags & ~GENIE_OBJECT_FLAGS_KNOWN)
			corrupt(index, psprintf("object %d has unknown flags 0x%04x", o, flags));
		if (flags & GENIE_OBJECT_DEAD)
			dead++;
		if ((flags & GENIE_OBJECT_NULL) && keyword_count[o] > 0)
			corrupt(index, psprintf("object %d is a NULL value but has %d keywords", o, keyword_count[o]));
		if (!ItemPointerIsValid(&c->objects[o].tid) && !(flags & GENIE_OBJECT_DEAD))
			corrupt(index, psprintf("object %d has an invalid heap TID", o));
	}
	if (compare_dead && dead != c->n_dead)
		corrupt(index, psprintf("%d objects are marked dead, the metapage says %d", dead, c->n_dead));
}

/*
 * Every live object's row exists: its block is in the table and its line
 * pointer in use.  A concurrent VACUUM (the check holds only
 * AccessShareLock, as amcheck's bt_index_check) may flag an object dead
 * after c was read and then free its line pointer: that order (the heap's
 * line pointers are freed only after every index's bulk delete) means a
 * freed line pointer's object is flagged dead in the pages by then, so a
 * suspect object is looked up again in a fresh read before it is called
 * corrupt.  The content lock held keeps merges (renumbering) out.
 */
static void
check_tids(Relation index, Relation heap, const GenieIndexContent *c)
{
	BlockNumber nblocks = RelationGetNumberOfBlocks(heap);
	GenieIndexContent fresh;
	bool		have_fresh = false;

	for (int32 o = 0; o < c->n_objects; o++)
	{
		ItemPointerData tid = c->objects[o].tid;
		BlockNumber blkno = ItemPointerGetBlockNumber(&tid);
		OffsetNumber off = ItemPointerGetOffsetNumber(&tid);
		Buffer		buffer;
		Page		page;
		bool		ok;

		if (c->objects[o].flags & GENIE_OBJECT_DEAD)
			continue;
		if (blkno >= nblocks)
			corrupt(index, psprintf("object %d points at block %u of a table of %u blocks",
									o, blkno, nblocks));
		buffer = ReadBufferExtended(heap, MAIN_FORKNUM, blkno, RBM_NORMAL, NULL);
		LockBuffer(buffer, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buffer);
		ok = off >= FirstOffsetNumber && off <= PageGetMaxOffsetNumber(page) &&
			ItemIdIsUsed(PageGetItemId(page, off));
		UnlockReleaseBuffer(buffer);
		/* a fresh read for each suspect the last one does not show dead (a later VACUUM pass) */
		if (!ok && (!have_fresh || o >= fresh.n_objects || !(fresh.objects[o].flags & GENIE_OBJECT_DEAD)))
		{
			genie_read_content(index, &fresh, false);
			have_fresh = true;
		}
		if (!ok && (o >= fresh.n_objects || !(fresh.objects[o].flags & GENIE_OBJECT_DEAD)))
			corrupt(index, psprintf("object %d points at (%u,%u), which holds no row", o, blkno, off));
		if ((o & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

/* ---- heapallindexed ---- */

typedef struct TidObject
{
	ItemPointerData tid;		/* hash key */
	int32		object;
	bool		seen;
} TidObject;

typedef struct HeapCheck
{
	Relation	index;
	GenieIndexType type;
	const GenieIndexContent *content;
	HTAB	   *by_tid;
	/* each object's distinct keywords, ascending: from offsets[o], ends[o] - offsets[o] of them */
	int64	   *offsets;
	int64	   *ends;
	int32	   *keywords;
	int64		rows;
	MemoryContext tmpcxt;
} HeapCheck;

static void
heap_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull, bool alive, void *arg)
{
	HeapCheck  *hc = (HeapCheck *) arg;
	TidObject  *entry = hash_search(hc->by_tid, tid, HASH_FIND, NULL);
	MemoryContext old;
	int32	   *keywords = NULL;
	int			n = 0;
	int			distinct = 0;
	int32		o;

	hc->rows++;
	if (entry == NULL)
		corrupt(index, psprintf("row (%u,%u) of the table is not in the index",
								ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid)));
	if (entry->seen)
		corrupt(index, psprintf("row (%u,%u) was reported twice", ItemPointerGetBlockNumber(tid),
								ItemPointerGetOffsetNumber(tid)));
	entry->seen = true;
	o = entry->object;
	if (isnull[0] != ((hc->content->objects[o].flags & GENIE_OBJECT_NULL) != 0))
		corrupt(index, psprintf("row (%u,%u) is %sNULL but object %d says otherwise",
								ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
								isnull[0] ? "" : "not ", o));
	if (isnull[0])
		return;

	old = MemoryContextSwitchTo(hc->tmpcxt);
	keywords = hc->type.info->encode_check != NULL ?
		hc->type.info->encode_check(index, &hc->type.encoding, values[0], &n) :
		hc->type.info->encode_value(index, &hc->type.encoding, values[0], &n);
	qsort(keywords, n, sizeof(int32), genie_int32_cmp);
	for (int i = 0; i < n; i++)
		if (distinct == 0 || keywords[i] != keywords[distinct - 1])
			keywords[distinct++] = keywords[i];
	if (distinct != hc->ends[o] - hc->offsets[o] ||
		(distinct > 0 && memcmp(keywords, hc->keywords + hc->offsets[o], sizeof(int32) * distinct) != 0))
		corrupt(index, psprintf("the keywords of row (%u,%u) (%d) differ from those of its object %d (%lld)",
								ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
								distinct, o, (long long) (hc->ends[o] - hc->offsets[o])));
	MemoryContextSwitchTo(old);
	MemoryContextReset(hc->tmpcxt);
}

static void
check_heap(Relation index, Relation heap, const GenieIndexType *type,
		   const GenieIndexContent *c, const int32 *keyword_count, Snapshot snapshot)
{
	HeapCheck	hc;
	HASHCTL		ctl;
	int64	   *fill;
	IndexInfo  *indexInfo = BuildIndexInfo(index);
	TableScanDesc scan;

	memset(&hc, 0, sizeof(hc));
	hc.index = index;
	hc.type = *type;
	hc.content = c;
	hc.tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie_index_check row",
									  ALLOCSET_DEFAULT_SIZES);

	/* each object's keywords: main ones from the List Array, pending from its record */
	hc.offsets = palloc_extended(sizeof(int64) * (c->n_objects + 1), MCXT_ALLOC_HUGE);
	hc.offsets[0] = 0;
	for (int32 o = 0; o < c->n_objects; o++)
		hc.offsets[o + 1] = hc.offsets[o] + keyword_count[o];
	hc.keywords = palloc_extended(sizeof(int32) * Max(hc.offsets[c->n_objects], 1), MCXT_ALLOC_HUGE);
	fill = palloc_extended(sizeof(int64) * Max(c->n_objects, 1), MCXT_ALLOC_HUGE);
	memcpy(fill, hc.offsets, sizeof(int64) * c->n_objects);
	for (int32 k = 0; k < c->n_keywords; k++)
		for (int64 p = c->keyword_offsets[k]; p < c->keyword_offsets[k + 1]; p++)
			hc.keywords[fill[c->postings[p]]++] = c->keywords[k];
	hc.ends = palloc_extended(sizeof(int64) * Max(c->n_objects, 1), MCXT_ALLOC_HUGE);
	for (int32 o = 0; o < c->n_main_objects; o++)
		hc.ends[o] = hc.offsets[o + 1];
	for (int32 o = c->n_main_objects; o < c->n_objects; o++)
	{
		int32		local = o - c->n_main_objects;
		int64		first = c->pending_offsets[local];
		int			n = (int) (c->pending_offsets[local + 1] - first);
		int32	   *kw = hc.keywords + hc.offsets[o];
		int			distinct = 0;

		/* a pending record keeps the value's keywords as encoded, repeats included */
		memcpy(kw, c->pending_keywords + first, sizeof(int32) * n);
		qsort(kw, n, sizeof(int32), genie_int32_cmp);
		for (int i = 0; i < n; i++)
			if (distinct == 0 || kw[i] != kw[distinct - 1])
				kw[distinct++] = kw[i];
		hc.ends[o] = hc.offsets[o] + distinct;
	}

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(ItemPointerData);
	ctl.entrysize = sizeof(TidObject);
	ctl.hcxt = CurrentMemoryContext;
	hc.by_tid = hash_create("genie_index_check TIDs", Max(c->n_objects, 16), &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (int32 o = 0; o < c->n_objects; o++)
	{
		bool		found;
		TidObject  *e;

		if (c->objects[o].flags & GENIE_OBJECT_DEAD)
			continue;
		e = hash_search(hc.by_tid, &c->objects[o].tid, HASH_ENTER, &found);
		if (found)
			corrupt(index, psprintf("objects %d and %d are the same row (%u,%u)", e->object, o,
									ItemPointerGetBlockNumber(&c->objects[o].tid),
									ItemPointerGetOffsetNumber(&c->objects[o].tid)));
		e->object = o;
		e->seen = false;
	}

	/* the rows this snapshot sees, as amcheck's heapallindexed reads them */
	indexInfo->ii_Concurrent = true;
	scan = table_beginscan_strat(heap, snapshot, 0, NULL, true, false);
	table_index_build_scan(heap, index, indexInfo, true, false, heap_callback, &hc, scan);
	MemoryContextDelete(hc.tmpcxt);
}

/* objects flagged dead in c (the metapage's n_dead, when no VACUUM runs) */
static int32
count_dead(const GenieIndexContent *c)
{
	int32		dead = 0;

	for (int32 o = 0; o < c->n_objects; o++)
		dead += (c->objects[o].flags & GENIE_OBJECT_DEAD) != 0;
	return dead;
}

Datum
genie_index_check(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	bool		heapallindexed = PG_GETARG_BOOL(1);
	Relation	heap;
	Relation	index;
	GenieIndexType type;
	volatile Snapshot snapshot = InvalidSnapshot;
	volatile bool content_locked = false;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "genie_index_check",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	/*
	 * AccessShareLock on both, as amcheck's bt_index_check: VACUUM, REINDEX
	 * CONCURRENTLY and other checks go on beside it (check_tids allows for a
	 * concurrent VACUUM).  A stronger lock taken after this one could
	 * deadlock with them.
	 */
	index = genie_open_index(indexoid, &heap, GENIE_ACCESS_STATS);
	/*
	 * heapallindexed evaluates index expressions: run them as the table's
	 * owner in a restricted context, as amcheck does, never as the caller.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(heap->rd_rel->relowner, save_sec_context | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	genie_index_type(index, &type);
	/* first the snapshot: every row it sees was in the index before the content is read */
	if (heapallindexed)
	{
		snapshot = RegisterSnapshot(GetTransactionSnapshot());
		/* an index built over broken HOT chains is not for snapshots older than it */
		if (IsolationUsesXactSnapshot() && index->rd_index->indcheckxmin &&
			!TransactionIdPrecedes(HeapTupleHeaderGetXmin(index->rd_indextuple->t_data),
								   snapshot->xmin))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("genie index \"%s\" cannot be checked with this snapshot: it is newer",
							RelationGetRelationName(index)),
					 errhint("Run genie_index_check in a new transaction.")));
	}

	GENIE_CONTENT_LOCK_SHARE(index);
	content_locked = true;
	PG_TRY();
	{
		GenieMetaPageData meta;
		GenieIndexContent content;
		int32	   *keyword_count;
		bool		vacuum_kept_out = false;
		bool		compare_dead = true;

		genie_read_meta(index, &meta);
		check_meta_and_chains(index, &meta);
		genie_read_content(index, &content, true);

		/*
		 * A VACUUM flags objects dead page by page and counts them in the
		 * metapage at its end: while the two disagree, wait until no VACUUM
		 * runs (a table lock taken without waiting, so no deadlock with
		 * one), then read again.
		 */
		while (!vacuum_kept_out && compare_dead && count_dead(&content) != content.n_dead)
		{
			int			tries = 0;

			GENIE_CONTENT_UNLOCK_SHARE(index);
			content_locked = false;
			/*
			 * At most 5 s: a REINDEX CONCURRENTLY holding the lock may be
			 * waiting for this very transaction's snapshot.  Then the dead
			 * count is left unchecked rather than waited for.
			 */
			while (!(vacuum_kept_out = ConditionalLockRelationOid(RelationGetRelid(heap),
																  ShareUpdateExclusiveLock)) &&
				   ++tries < 500)
			{
				CHECK_FOR_INTERRUPTS();
				pg_usleep(10000L);
			}
			if (!vacuum_kept_out)
			{
				compare_dead = false;
				ereport(NOTICE,
						(errmsg("genie index \"%s\": its dead count was not compared, a VACUUM or REINDEX CONCURRENTLY of its table is running",
								RelationGetRelationName(index))));
			}
			GENIE_CONTENT_LOCK_SHARE(index);
			content_locked = true;
			genie_read_meta(index, &meta);
			check_meta_and_chains(index, &meta);
			genie_read_content(index, &content, true);
		}
		keyword_count = palloc_extended(sizeof(int32) * Max(content.n_objects, 1),
										MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		check_content(index, &content, keyword_count, compare_dead);
		check_tids(index, heap, &content);
		if (heapallindexed)
			check_heap(index, heap, &type, &content, keyword_count, snapshot);
	}
	PG_FINALLY();
	{
		if (content_locked)
			GENIE_CONTENT_UNLOCK_SHARE(index);
	}
	PG_END_TRY();

	if (snapshot != InvalidSnapshot)
		UnregisterSnapshot(snapshot);
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	PG_RETURN_VOID();
}
