/*-------------------------------------------------------------------------
 *
 * genie_build.c
 *	  Building a genie index: scan the table, sort (keyword, object) pairs
 *	  within maintenance_work_mem (in memory on every core while they fit
 *	  in half of it, else tuplesort, which spills sorted runs to disk and
 *	  merges them), and write the Position Map and List Array as chains.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"

#include "am/genie_am.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "search/genie_search.h"
#include "storage/genie_content.h"

/* build phases, reported through pg_stat_progress_create_index */
#define GENIE_PHASE_SCAN		2
#define GENIE_PHASE_SORT		3
#define GENIE_PHASE_WRITE		4

/*
 * The pairs stay in memory, unsorted, while they take at most half of the
 * work memory, and are then sorted by the core's parallel radix sort (its
 * scratch copy takes the other half): an index of millions of rows sorts
 * its pairs on every core (genie.cpu_threads) in a fraction of tuplesort's
 * time.  Beyond that they move to tuplesort, which spills to disk.
 */
struct GeniePostingsSorter
{
	Tuplesortstate *sort;		/* NULL while the pairs are in memory */
	MemoryContext cxt;			/* of the sorter: the callers add pairs from shorter-lived ones */
	int			work_mem_kb;
	int64	   *held;			/* the pairs in memory */
	int64		n_held;
	int64		held_room;
	int64		next;			/* once sorted: the next held pair to give */
	int64		pairs;
};

/*
 * Pairs are sorted as int8: the keyword (signed) in the high half, the
 * object id (never negative) in the low half, so int8 order is keyword
 * order, then object order.
 */
static inline int64
pair_key(int32 keyword, int32 object_id)
{
	return (int64) (((uint64) (uint32) keyword << 32) | (uint32) object_id);
}

GeniePostingsSorter *
genie_sorter_begin(int work_mem_kb)
{
	GeniePostingsSorter *sorter = palloc0(sizeof(GeniePostingsSorter));

	sorter->work_mem_kb = work_mem_kb;
	sorter->cxt = CurrentMemoryContext;
	return sorter;
}

/* The pairs held in memory go to tuplesort, and the rest will follow them. */
static void
sorter_spill(GeniePostingsSorter *sorter)
{
	MemoryContext old = MemoryContextSwitchTo(sorter->cxt);

	sorter->sort = tuplesort_begin_datum(INT8OID, Int8LessOperator, InvalidOid, false,
										 sorter->work_mem_kb, NULL, TUPLESORT_NONE);
	MemoryContextSwitchTo(old);
	for (int64 i = 0; i < sorter->n_held; i++)
		tuplesort_putdatum(sorter->sort, Int64GetDatum(sorter->held[i]), false);
	if (sorter->held)
		pfree(sorter->held);
	sorter->held = NULL;
	sorter->n_held = sorter->held_room = 0;
}

void
genie_sorter_add(GeniePostingsSorter *sorter, const int32 *keywords, int n, int32 object_id)
{
	if (sorter->sort == NULL && sorter->n_held + n > sorter->held_room)
	{
		/* half the work memory for the pairs, half for the sort's scratch copy */
		int64		limit = (int64) sorter->work_mem_kb * 1024 / 2 / (int64) sizeof(int64);
		int64		room = Max(sorter->held_room * 2, (int64) 65536);

		room = Min(Max(room, sorter->n_held + n), limit);
		if (sorter->n_held + n > room)
			sorter_spill(sorter);
		else
		{
			sorter->held = sorter->held
				? repalloc_huge(sorter->held, sizeof(int64) * room)
				: MemoryContextAllocExtended(sorter->cxt, sizeof(int64) * room, MCXT_ALLOC_HUGE);
			sorter->held_room = room;
		}
	}
	if (sorter->sort == NULL)
	{
		for (int i = 0; i < n; i++)
			sorter->held[sorter->n_held++] = pair_key(keywords[i], object_id);
	}
	else
	{
		for (int i = 0; i < n; i++)
			tuplesort_putdatum(sorter->sort, Int64GetDatum(pair_key(keywords[i], object_id)), false);
	}
	sorter->pairs += n;
}

/* Sorts the pairs; then sorter_next gives them in order. */
static void
sorter_sort(GeniePostingsSorter *sorter)
{
	genie_error err;

	if (sorter->sort != NULL)
	{
		tuplesort_performsort(sorter->sort);
		return;
	}
	switch (genie_sort_int64(sorter->held, (size_t) sorter->n_held, genie_cpu_threads,
							 genie_cancel_requested, NULL, &err))
	{
		case GENIE_OK:
			sorter->next = 0;
			break;
		case GENIE_OUT_OF_MEMORY:
			/* no room for the scratch copy (it failed before touching the pairs): tuplesort */
			sorter_spill(sorter);
			tuplesort_performsort(sorter->sort);
			break;
		default:
			genie_report_error(&err, "genie: sorting the index's postings");
	}
}

static bool
sorter_next(GeniePostingsSorter *sorter, int64 *key)
{
	Datum		value;
	bool		isnull;

	if (sorter->sort == NULL)
	{
		if (sorter->next >= sorter->n_held)
			return false;
		*key = sorter->held[sorter->next++];
		return true;
	}
	if (!genie_tuplesort_getdatum(sorter->sort, &value, &isnull))
		return false;
	*key = DatumGetInt64(value);
	return true;
}

/* Packs one keyword's postings (ids[0..n)) onto the postings chain. */
static void
write_packed_list(GenieChainWriter *w, const int32 *ids, int64 n, uint8 **buffer,
				  Size *buffer_size, int64 *bytes)
{
	size_t		bound = genie_postings_pack_bound(n);
	size_t		written;
	genie_error err;

	if (w->entry_size == sizeof(int32))
	{
		/* format 4 (genie.write_format): the ids as they are */
		genie_chain_writer_append(w, ids, n);
		*bytes += (int64) sizeof(int32) * n;
		return;
	}
	if (bound > *buffer_size)
	{
		*buffer = *buffer ? repalloc_huge(*buffer, bound) : palloc_extended(bound, MCXT_ALLOC_HUGE);
		*buffer_size = bound;
	}
	GENIE_CHECK(genie_postings_pack(ids, n, *buffer, &written, &err), &err,
				"genie: packing postings");
	genie_chain_writer_append(w, *buffer, (int64) written);
	*bytes += (int64) written;
}

/*
 * Writes the sorted pairs as the keyword chain (Position Map) and the
 * postings chain (List Array, packed: genie/postings_codec.hpp), one
 * keyword's list at a time.  A keyword repeated within one object gives
 * equal pairs, stored once.
 */
void
genie_sorter_write(GeniePostingsSorter *sorter, Relation index, bool wal,
				   GenieWrittenPostings *out)
{
	GenieChainWriter keyword_writer;
	GenieChainWriter postings_writer;
	GenieKeywordEntry current = {0, 0};
	bool		have_current = false;
	int64		previous = 0;
	bool		have_previous = false;
	int32	   *ids = NULL;		/* the current keyword's postings */
	Size		ids_room = 0;
	uint8	   *packed = NULL;
	Size		packed_room = 0;
	int64		key;

	sorter_sort(sorter);

	genie_chain_writer_init(&keyword_writer, index, GENIE_PAGE_KEYWORDS,
							sizeof(GenieKeywordEntry), wal);
	memset(out, 0, sizeof(*out));
	out->format = genie_write_format;
	genie_chain_writer_init(&postings_writer, index, GENIE_PAGE_POSTINGS,
							out->format >= 5 ? 1 : sizeof(int32), wal);

	while (sorter_next(sorter, &key))
	{
		int32		keyword = (int32) ((uint64) key >> 32);
		int32		object_id = (int32) (key & 0xFFFFFFFF);

		if (have_previous && key == previous)
			continue;
		previous = key;
		have_previous = true;

		if (!have_current || keyword != current.keyword)
		{
			if (have_current)
			{
				write_packed_list(&postings_writer, ids, current.count, &packed, &packed_room,
								  &out->postings_bytes);
				genie_chain_writer_append(&keyword_writer, &current, 1);
				out->n_keywords++;
			}
			current.keyword = keyword;
			current.count = 0;
			have_current = true;
		}
		if ((Size) current.count >= ids_room)
		{
			ids_room = Max(ids_room * 2, 1024);
			ids = ids ? repalloc_huge(ids, sizeof(int32) * ids_room)
				: palloc_extended(sizeof(int32) * ids_room, MCXT_ALLOC_HUGE);
		}
		ids[current.count++] = object_id;
		out->n_postings++;
		if ((out->n_postings & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	if (have_current)
	{
		write_packed_list(&postings_writer, ids, current.count, &packed, &packed_room,
						  &out->postings_bytes);
		genie_chain_writer_append(&keyword_writer, &current, 1);
		out->n_keywords++;
	}

	out->keywords = genie_chain_writer_finish(&keyword_writer);
	out->postings = genie_chain_writer_finish(&postings_writer);
	if (sorter->sort != NULL)
		tuplesort_end(sorter->sort);
	sorter->sort = NULL;
	if (sorter->held)
		pfree(sorter->held);
	sorter->held = NULL;
	if (ids)
		pfree(ids);
	if (packed)
		pfree(packed);
}

void
genie_meta_set_postings(GenieMetaPageData *meta, const GenieWrittenPostings *written)
{
	meta->format_version = written->format;
	meta->keywords = written->keywords;
	meta->postings = written->postings;
	meta->n_keywords = written->n_keywords;
	meta->n_postings = written->n_postings;
	meta->postings_codec = written->format >= 5 ? GENIE_POSTINGS_PACKED : GENIE_POSTINGS_INT32;
	meta->postings_bytes = written->format >= 5 ? written->postings_bytes : 0;
}

/* ---- ambuild ---- */

typedef struct GenieBuildState
{
	GeniePostingsSorter *sorter;
	GenieChainWriter directory;
	GenieChainWriter values;	/* when the index stores values */
	bool		store_values;
	GenieIndexType type;
	void	   *type_state;		/* the type's build state, or NULL */
	int64		n_objects;
	int64		value_bytes;
	MemoryContext tmpcxt;
} GenieBuildState;

static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state_)
{
	GenieBuildState *state = (GenieBuildState *) state_;
	GenieObjectEntry entry;
	MemoryContext old = MemoryContextSwitchTo(state->tmpcxt);

	if (state->n_objects >= PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie index can hold at most %d rows", PG_INT32_MAX)));

	memset(&entry, 0, sizeof(entry));
	entry.tid = *tid;
	entry.flags = isnull[0] ? GENIE_OBJECT_NULL : 0;
	if (!isnull[0])
	{
		int			n;
		int32	   *keywords = state->type.info->build_value != NULL ?
			state->type.info->build_value(state->type_state, values[0], &n) :
			state->type.info->encode_value(index, &state->type.encoding, values[0], &n);

		genie_sorter_add(state->sorter, keywords, n, (int32) state->n_objects);
	}
	if (state->store_values)
	{
		size_t		size = 0;
		const char *bytes = isnull[0] ? NULL : state->type.info->value_bytes_of(values[0], &size);

		genie_values_append(&state->values, bytes, size);
		state->value_bytes += sizeof(int32) + size;
	}
	genie_chain_writer_append(&state->directory, &entry, 1);
	state->n_objects++;

	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tmpcxt);
}

static int
genie_split_length(Relation index)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	return opts != NULL ? opts->split_length : 4096;
}

IndexBuildResult *
genie_ambuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	GenieBuildState state;
	Buffer		metabuf;
	Page		metapage;
	GenieMetaPage meta;
	double		reltuples;
	GenieWrittenPostings postings;

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data", RelationGetRelationName(index));

	/*
	 * Block 0 is the metapage.  It starts as an empty index and is filled in
	 * last; no buffer stays locked during the table scan, so the build can be
	 * cancelled.
	 */
	memset(&state, 0, sizeof(state));
	genie_type_for_build(index, &state.type);
	metabuf = genie_new_buffer(index);
	Assert(BufferGetBlockNumber(metabuf) == GENIE_METAPAGE_BLKNO);
	genie_init_metapage(BufferGetPage(metabuf), genie_split_length(index), &state.type.encoding);
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);

	/* a row index, for one, first measures its attributes: one more table scan */
	if (state.type.info->build_begin != NULL)
		state.type_state = state.type.info->build_begin(heap, index, indexInfo, true);

	state.store_values = genie_index_stores_values(index, state.type.info);
	if (state.store_values)
		genie_chain_writer_init(&state.values, index, GENIE_PAGE_VALUES, 1, false);
	state.sorter = genie_sorter_begin(maintenance_work_mem);
	genie_chain_writer_init(&state.directory, index, GENIE_PAGE_DIRECTORY,
							sizeof(GenieObjectEntry), false);
	state.tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie build temporary context",
										 ALLOCSET_DEFAULT_SIZES);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_SCAN);
	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   build_callback, &state, NULL);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_SORT);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, state.n_objects);
	/* the sort happens inside genie_sorter_write; report writing once it begins */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_WRITE);
	genie_sorter_write(state.sorter, index, false, &postings);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state.n_objects);

	/*
	 * The metapage is put together in local memory first: the type's part
	 * (a row index writes its dictionary pages) runs without the buffer
	 * lock, so it can be cancelled and takes no other lock under it.
	 */
	metapage = (Page) palloc(BLCKSZ);
	genie_init_metapage(metapage, genie_split_length(index), &state.type.encoding);
	meta = GeniePageGetMeta(metapage);
	meta->n_objects = (int32) state.n_objects;
	meta->n_main_objects = (int32) state.n_objects;
	meta->directory = genie_chain_writer_finish(&state.directory);
	genie_meta_set_postings(meta, &postings);
	if (state.store_values)
	{
		meta->values_stored = 1;
		meta->values = genie_chain_writer_finish(&state.values);
		meta->value_bytes = state.value_bytes;
	}
	/* the type's part of the metapage (a row index's schema and dictionary) */
	if (state.type.info->build_begin != NULL)
		state.type.info->build_finish(state.type_state, meta);

	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	memcpy(BufferGetPage(metabuf), metapage, BLCKSZ);
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);
	pfree(metapage);

	/* the permutation index reads the values just written */
	genie_permutation_build(index, state.type.encoding.kind, state.store_values);
	genie_clusters_build(index, state.type.encoding.kind, state.store_values);

	/* the pages were written without WAL: log them all at once */
	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0, RelationGetNumberOfBlocks(index), true);

	MemoryContextDelete(state.tmpcxt);

	result = palloc(sizeof(IndexBuildResult));
	result->heap_tuples = reltuples;
	result->index_tuples = (double) state.n_objects;
	return result;
}

/* The init fork of an unlogged index: an empty metapage. */
void
genie_ambuildempty(Relation index)
{
	Page		metapage = (Page) palloc(BLCKSZ);
	GenieIndexType type;

	genie_type_for_build(index, &type);
	genie_init_metapage(metapage, genie_split_length(index), &type.encoding);
	GeniePageGetMeta(metapage)->values_stored = genie_index_stores_values(index, type.info) ? 1 : 0;
	/* the permutation index's options: its first merge with m objects draws the permutants */
	genie_permutation_build_empty(index, type.encoding.kind, GeniePageGetMeta(metapage)->values_stored != 0,
								  GeniePageGetMeta(metapage));
	genie_clusters_build_empty(index, type.encoding.kind, GeniePageGetMeta(metapage)->values_stored != 0,
							   GeniePageGetMeta(metapage));
	if (type.info->build_begin != NULL)
	{
		/* what the options give without reading the table (a row index's attributes) */
		Relation	heap = table_open(index->rd_index->indrelid, NoLock);
		void	   *state = type.info->build_begin(heap, index, BuildIndexInfo(index), false);

		type.info->build_finish(state, GeniePageGetMeta(metapage));
		table_close(heap, NoLock);
	}
	PageSetChecksumInplace(metapage, GENIE_METAPAGE_BLKNO);
	smgrwrite(RelationGetSmgr(index), INIT_FORKNUM, GENIE_METAPAGE_BLKNO, (char *) metapage, true);
	log_newpage(GENIE_SMGR_FILE(RelationGetSmgr(index)), INIT_FORKNUM,
				GENIE_METAPAGE_BLKNO, metapage, true);
	smgrimmedsync(RelationGetSmgr(index), INIT_FORKNUM);
	pfree(metapage);
}

char *
genie_ambuildphasename(int64 phasenum)
{
	switch (phasenum)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case GENIE_PHASE_SCAN:
			return "scanning table";
		case GENIE_PHASE_SORT:
			return "sorting postings";
		case GENIE_PHASE_WRITE:
			return "writing postings";
		default:
			return NULL;
	}
}
