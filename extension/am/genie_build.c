/*-------------------------------------------------------------------------
 *
 * genie_build.c
 *	  Building a genie index: scan the table, sort its (keyword, object)
 *	  pairs within maintenance_work_mem (genie_sorter.c), and write the
 *	  Position Map and List Array as chains.
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
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "search/genie_search.h"
#include "storage/genie_content.h"

/* build phases, reported through pg_stat_progress_create_index */
#define GENIE_PHASE_SCAN		2
#define GENIE_PHASE_SORT		3
#define GENIE_PHASE_WRITE		4

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

/*
 * Values wait here for their type's encode_batch, which encodes them on
 * every core: their bytes (value_bytes_of's), one after another, and their
 * objects.  A batch holds at most about 4MB of bytes (a longer value goes
 * alone) and as many values as the type's encode_batch_values allows (at
 * most GENIE_BUILD_BATCH_VALUES), which keeps its keywords to some tens of
 * MB, beside maintenance_work_mem.
 */
#define GENIE_BUILD_BATCH_VALUES	16384
#define GENIE_BUILD_BATCH_BYTES		(4 * 1024 * 1024)

typedef struct GenieBuildBatch
{
	StringInfoData bytes;		/* in the build's context, as the arrays */
	int64	   *offsets;		/* value i's bytes from offsets[i] to offsets[i + 1] */
	int32	   *object_ids;
	int			count;
	int			limit;			/* values a batch holds; 0: the type encodes value by value */
} GenieBuildBatch;

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
	GenieBuildBatch batch;
	MemoryContext buildcxt;		/* the build's own, of the batch's buffers */
	MemoryContext batchcxt;		/* of a batch's keywords */
	MemoryContext tmpcxt;
} GenieBuildState;

/* Encodes the values waiting and adds their pairs. */
static void
build_flush_batch(GenieBuildState *state)
{
	GenieBuildBatch *batch = &state->batch;
	MemoryContext old;
	int32	   *keywords;
	int64	   *starts;

	if (batch->count == 0)
		return;
	old = MemoryContextSwitchTo(state->batchcxt);
	state->type.info->encode_batch(state->type_state, &state->type.encoding, batch->bytes.data,
								   batch->offsets, batch->count, &keywords, &starts);
	for (int i = 0; i < batch->count; i++)
		genie_sorter_add(state->sorter, keywords + starts[i], (int) (starts[i + 1] - starts[i]),
						 batch->object_ids[i]);
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->batchcxt);
	/*
	 * A long value's room goes back: the next batches are of the usual size.
	 * The new buffer is the build's, not the row's context this may run in.
	 */
	if (batch->bytes.maxlen > 2 * GENIE_BUILD_BATCH_BYTES)
	{
		pfree(batch->bytes.data);
		old = MemoryContextSwitchTo(state->buildcxt);
		initStringInfo(&batch->bytes);
		MemoryContextSwitchTo(old);
	}
	resetStringInfo(&batch->bytes);
	batch->count = 0;
}

static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state_)
{
	GenieBuildState *state = (GenieBuildState *) state_;
	GenieObjectEntry entry;
	const char *bytes = NULL;
	size_t		size = 0;
	MemoryContext old = MemoryContextSwitchTo(state->tmpcxt);

	if (state->n_objects >= PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a genie index can hold at most %d rows", PG_INT32_MAX)));

	memset(&entry, 0, sizeof(entry));
	entry.tid = *tid;
	entry.flags = isnull[0] ? GENIE_OBJECT_NULL : 0;
	if (!isnull[0] && (state->store_values || state->batch.limit > 0))
		bytes = state->type.info->value_bytes_of(values[0], &size);
	if (!isnull[0] && state->batch.limit > 0)
	{
		GenieBuildBatch *batch = &state->batch;

		/* a value of a gigabyte goes alone: a StringInfo holds at most one */
		if (batch->count > 0 && (Size) batch->bytes.len + size >= GENIE_BUILD_BATCH_BYTES)
			build_flush_batch(state);
		appendBinaryStringInfo(&batch->bytes, bytes, (int) size);
		batch->object_ids[batch->count] = (int32) state->n_objects;
		batch->offsets[++batch->count] = batch->bytes.len;
	}
	else if (!isnull[0])
	{
		int			n;
		int32	   *keywords = state->type.info->build_value != NULL ?
			state->type.info->build_value(state->type_state, values[0], &n) :
			state->type.info->encode_value(index, &state->type.encoding, values[0], &n);

		genie_sorter_add(state->sorter, keywords, n, (int32) state->n_objects);
	}
	if (state->store_values)
	{
		genie_values_append(&state->values, bytes, size);
		state->value_bytes += sizeof(int32) + size;
	}
	genie_chain_writer_append(&state->directory, &entry, 1);
	state->n_objects++;

	MemoryContextSwitchTo(old);
	MemoryContextReset(state->tmpcxt);
	if (state->batch.limit > 0 && state->batch.count == state->batch.limit)
		build_flush_batch(state);
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
	instr_time	start;
	instr_time	scanned;
	instr_time	sorted;
	instr_time	derived;
	instr_time	logged;

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

	/*
	 * The permutants option checked before any table scan, and the device
	 * made ready during the scans
	 */
	state.store_values = genie_index_stores_values(index, state.type.info);
	genie_permutation_build_begin(index, state.type.encoding.kind, state.store_values);

	/* a row index, for one, first measures its attributes: one more table scan */
	if (state.type.info->build_begin != NULL)
		state.type_state = state.type.info->build_begin(heap, index, indexInfo, true);

	if (state.store_values)
		genie_chain_writer_init(&state.values, index, GENIE_PAGE_VALUES, 1, false);
	state.sorter = genie_sorter_begin(maintenance_work_mem);
	genie_chain_writer_init(&state.directory, index, GENIE_PAGE_DIRECTORY,
							sizeof(GenieObjectEntry), false);
	state.tmpcxt = AllocSetContextCreate(CurrentMemoryContext, "genie build temporary context",
										 ALLOCSET_DEFAULT_SIZES);
	if (state.type.info->encode_batch != NULL)
		state.batch.limit = state.type.info->encode_batch_values == NULL ? GENIE_BUILD_BATCH_VALUES
			: Min(state.type.info->encode_batch_values(state.type_state), GENIE_BUILD_BATCH_VALUES);
	if (state.batch.limit > 0)
	{
		state.buildcxt = CurrentMemoryContext;
		state.batchcxt = AllocSetContextCreate(CurrentMemoryContext, "genie build batch context",
											   ALLOCSET_DEFAULT_SIZES);
		initStringInfo(&state.batch.bytes);
		state.batch.offsets = palloc(sizeof(int64) * (state.batch.limit + 1));
		state.batch.offsets[0] = 0;
		state.batch.object_ids = palloc(sizeof(int32) * state.batch.limit);
	}

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_SCAN);
	INSTR_TIME_SET_CURRENT(start);
	reltuples = table_index_build_scan(heap, index, indexInfo, true, true,
									   build_callback, &state, NULL);
	if (state.batch.limit > 0)
		build_flush_batch(&state);
	INSTR_TIME_SET_CURRENT(scanned);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_SORT);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_TOTAL, state.n_objects);
	/* the sort happens inside genie_sorter_write; report writing once it begins */
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, GENIE_PHASE_WRITE);
	genie_sorter_write(state.sorter, index, false, &postings);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, state.n_objects);
	INSTR_TIME_SET_CURRENT(sorted);

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
	INSTR_TIME_SET_CURRENT(derived);

	/* the pages were written without WAL: log them all at once */
	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0, RelationGetNumberOfBlocks(index), true);
	INSTR_TIME_SET_CURRENT(logged);

	/* where a build's time went, for tuning maintenance_work_mem (as trace_sort) */
	INSTR_TIME_SUBTRACT(logged, derived);
	INSTR_TIME_SUBTRACT(derived, sorted);
	INSTR_TIME_SUBTRACT(sorted, scanned);
	INSTR_TIME_SUBTRACT(scanned, start);
	ereport(DEBUG1,
			(errmsg_internal("genie: built index \"%s\" of %lld rows and %lld postings: table scan %.1f ms, "
							 "sort and write %.1f ms (%d sorted runs on tapes), permutations and clusters %.1f ms, "
							 "WAL %.1f ms",
							 RelationGetRelationName(index), (long long) state.n_objects,
							 (long long) postings.n_postings, INSTR_TIME_GET_MILLISEC(scanned),
							 INSTR_TIME_GET_MILLISEC(sorted), postings.sorted_runs,
							 INSTR_TIME_GET_MILLISEC(derived), INSTR_TIME_GET_MILLISEC(logged))));

	MemoryContextDelete(state.tmpcxt);
	if (state.batch.limit > 0)
		MemoryContextDelete(state.batchcxt);

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
