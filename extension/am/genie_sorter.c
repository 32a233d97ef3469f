/*-------------------------------------------------------------------------
 *
 * genie_sorter.c
 *	  The (keyword, object) pairs of a build or a merge, sorted within
 *	  maintenance_work_mem, and written as the Position Map (keyword chain)
 *	  and the List Array (postings chain).
 *
 *	  The pairs collect in memory, unsorted, up to half of the work memory;
 *	  the core's parallel radix sort sorts them on every core
 *	  (genie.cpu_threads), its scratch copy in the other half.  When more
 *	  pairs come, the ones held are sorted and written to a logical tape as
 *	  a sorted run, and the memory is used again; at the end the last pairs
 *	  are sorted in memory and merged with the runs on the tapes.  This is
 *	  tuplesort's external sort, but a run is sorted by radix on every core
 *	  rather than by comparisons on one, and a pair takes 8 bytes of memory
 *	  rather than a 24-byte SortTuple: the 6.6M pairs of 663k words at the
 *	  default 64MB make two runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/logtape.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "search/genie_search.h"
#include "storage/genie_content.h"

/* pairs read from a tape at a time into a run's buffer: at most, and at least */
#define RUN_BUFFER_PAIRS	4096
#define RUN_BUFFER_MIN_PAIRS	128
/* pairs written to a tape between checks for a cancel */
#define WRITE_CHUNK_PAIRS	65536

/* A sorted run: on a tape, or the last pairs, sorted in memory. */
typedef struct SortedRun
{
	LogicalTape *tape;			/* NULL for the pairs in memory */
	int64	   *pairs;			/* the pairs read and not all given yet */
	int64		n;				/* pairs in pairs[] */
	int64		next;			/* the next of them to give */
	int64		left;			/* pairs on the tape not read yet */
} SortedRun;

struct GeniePostingsSorter
{
	MemoryContext cxt;			/* of the sorter: the callers add pairs from shorter-lived ones */
	int64		work_mem_bytes;
	int64		limit;			/* pairs held in memory at most: half the work memory */
	int64	   *held;			/* the pairs in memory, unsorted until the end */
	int64		n_held;
	int64		held_room;
	LogicalTapeSet *tapes;		/* NULL until a run is written */
	SortedRun  *runs;
	int			n_runs;
	int			runs_room;
	int		   *heap;			/* runs with pairs left, a min-heap on their next pair */
	int			heap_size;
	int64		run_room;		/* pairs a tape run's buffer holds, once merging */
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

	sorter->cxt = CurrentMemoryContext;
	sorter->work_mem_bytes = (int64) work_mem_kb * 1024;
	sorter->limit = sorter->work_mem_bytes / 2 / (int64) sizeof(int64);
	return sorter;
}

static int
compare_pairs(const void *a, const void *b, void *arg)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/* Sorts pairs[0..n) in place, on every core; without room for the scratch copy, on one. */
static void
sort_pairs(int64 *pairs, int64 n)
{
	genie_error err;

	switch (genie_sort_int64(pairs, (size_t) n, genie_cpu_threads, genie_cancel_requested, NULL, &err))
	{
		case GENIE_OK:
			break;
		case GENIE_OUT_OF_MEMORY:
			/* it failed before touching the pairs */
			qsort_interruptible(pairs, (size_t) n, sizeof(int64), compare_pairs, NULL);
			break;
		default:
			genie_report_error(&err, "genie: sorting the index's postings");
	}
}

static SortedRun *
new_run(GeniePostingsSorter *sorter)
{
	if (sorter->n_runs == sorter->runs_room)
	{
		sorter->runs_room = Max(sorter->runs_room * 2, 8);
		sorter->runs = sorter->runs
			? repalloc(sorter->runs, sizeof(SortedRun) * sorter->runs_room)
			: palloc(sizeof(SortedRun) * sorter->runs_room);
	}
	memset(&sorter->runs[sorter->n_runs], 0, sizeof(SortedRun));
	return &sorter->runs[sorter->n_runs++];
}

/* Sorts the pairs held and writes them to a tape of their own; memory holds none after. */
static void
write_run(GeniePostingsSorter *sorter)
{
	MemoryContext old = MemoryContextSwitchTo(sorter->cxt);
	SortedRun  *run;

	sort_pairs(sorter->held, sorter->n_held);
	/* tapes allocate their buffers as they write: in the sorter's context */
	if (sorter->tapes == NULL)
		sorter->tapes = LogicalTapeSetCreate(false, NULL, -1);
	run = new_run(sorter);
	run->tape = LogicalTapeCreate(sorter->tapes);
	run->left = sorter->n_held;
	for (int64 i = 0; i < sorter->n_held; i += WRITE_CHUNK_PAIRS)
	{
		LogicalTapeWrite(run->tape, sorter->held + i,
						 sizeof(int64) * Min((int64) WRITE_CHUNK_PAIRS, sorter->n_held - i));
		CHECK_FOR_INTERRUPTS();
	}
	sorter->n_held = 0;
	MemoryContextSwitchTo(old);
}

/* Room for n more pairs in memory (n <= limit), growing the array or writing a run. */
static void
make_room(GeniePostingsSorter *sorter, int64 n)
{
	int64		room;

	if (sorter->n_held + n <= sorter->held_room)
		return;
	if (sorter->n_held + n > sorter->limit)
	{
		write_run(sorter);
		if (n <= sorter->held_room)
			return;
	}
	room = Min(Max(Max(sorter->held_room * 2, (int64) 65536), sorter->n_held + n), sorter->limit);
	sorter->held = sorter->held
		? repalloc_huge(sorter->held, sizeof(int64) * room)
		: MemoryContextAllocExtended(sorter->cxt, sizeof(int64) * room, MCXT_ALLOC_HUGE);
	sorter->held_room = room;
}

void
genie_sorter_add(GeniePostingsSorter *sorter, const int32 *keywords, int n, int32 object_id)
{
	/* an object with more keywords than a run holds goes into several runs */
	while (n > 0)
	{
		int			part = (int) Min((int64) n, sorter->limit);

		make_room(sorter, part);
		for (int i = 0; i < part; i++)
			sorter->held[sorter->n_held++] = pair_key(keywords[i], object_id);
		keywords += part;
		n -= part;
	}
}

/* The run's next pairs from its tape into its buffer; false when it has none left. */
static bool
refill_run(const GeniePostingsSorter *sorter, SortedRun *run)
{
	size_t		bytes;

	if (run->tape == NULL || run->left == 0)
		return false;
	run->n = Min(run->left, sorter->run_room);
	bytes = sizeof(int64) * (size_t) run->n;
	if (LogicalTapeRead(run->tape, run->pairs, bytes) != bytes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("genie: a sorted run of the index's postings ended early")));
	run->left -= run->n;
	run->next = 0;
	return true;
}

static inline int64
run_head(const GeniePostingsSorter *sorter, int h)
{
	const SortedRun *run = &sorter->runs[sorter->heap[h]];

	return run->pairs[run->next];
}

static void
sift_down(GeniePostingsSorter *sorter, int h)
{
	for (;;)
	{
		int			smallest = h;
		int			left = 2 * h + 1;
		int			swap;

		if (left < sorter->heap_size && run_head(sorter, left) < run_head(sorter, smallest))
			smallest = left;
		if (left + 1 < sorter->heap_size && run_head(sorter, left + 1) < run_head(sorter, smallest))
			smallest = left + 1;
		if (smallest == h)
			return;
		swap = sorter->heap[h];
		sorter->heap[h] = sorter->heap[smallest];
		sorter->heap[smallest] = swap;
		h = smallest;
	}
}

/*
 * Sorts the pairs in memory and readies the merge of every run; then
 * sorter_next gives the pairs in order.  The tapes' read buffers share the
 * half of the work memory the radix sort's scratch copy had.
 */
static void
sorter_sort(GeniePostingsSorter *sorter)
{
	MemoryContext old = MemoryContextSwitchTo(sorter->cxt);
	int			tape_runs = sorter->n_runs;

	if (sorter->n_held > 0)
	{
		SortedRun  *run;

		sort_pairs(sorter->held, sorter->n_held);
		run = new_run(sorter);
		run->pairs = sorter->held;
		run->n = sorter->n_held;
	}
	if (tape_runs > 0)
	{
		/*
		 * A run's share of the memory the sort's scratch copy had: a quarter
		 * for its buffer of pairs, the rest for the tape's read buffer (at
		 * least a block each, so very many runs take more)
		 */
		int64		per_run = sorter->work_mem_bytes / 2 / tape_runs;
		size_t		buffer;

		sorter->run_room = Min(Max(per_run / 4 / (int64) sizeof(int64), (int64) RUN_BUFFER_MIN_PAIRS),
							   (int64) RUN_BUFFER_PAIRS);
		buffer = (size_t) Max(per_run - sorter->run_room * (int64) sizeof(int64), (int64) BLCKSZ);

		/* nothing is written any more: blocks read need not be kept for reuse */
		LogicalTapeSetForgetFreeSpace(sorter->tapes);

		for (int r = 0; r < tape_runs; r++)
		{
			SortedRun  *run = &sorter->runs[r];

			LogicalTapeRewindForRead(run->tape, buffer);
			run->pairs = palloc(sizeof(int64) * sorter->run_room);
			(void) refill_run(sorter, run);
			CHECK_FOR_INTERRUPTS();
		}
	}
	sorter->heap = palloc(sizeof(int) * Max(sorter->n_runs, 1));
	for (int r = 0; r < sorter->n_runs; r++)
		if (sorter->runs[r].n > 0)
			sorter->heap[sorter->heap_size++] = r;
	for (int h = sorter->heap_size / 2 - 1; h >= 0; h--)
		sift_down(sorter, h);
	MemoryContextSwitchTo(old);
}

static inline bool
sorter_next(GeniePostingsSorter *sorter, int64 *key)
{
	SortedRun  *run;

	if (sorter->heap_size == 0)
		return false;
	run = &sorter->runs[sorter->heap[0]];
	*key = run->pairs[run->next++];
	if (run->next == run->n && !refill_run(sorter, run))
		sorter->heap[0] = sorter->heap[--sorter->heap_size];
	if (sorter->heap_size > 1)
		sift_down(sorter, 0);
	return true;
}

static void
sorter_end(GeniePostingsSorter *sorter)
{
	/* a tape's read buffer goes with the tape, not with the set */
	for (int r = 0; r < sorter->n_runs; r++)
		if (sorter->runs[r].tape != NULL)
		{
			LogicalTapeClose(sorter->runs[r].tape);
			pfree(sorter->runs[r].pairs);
		}
	if (sorter->tapes != NULL)
		LogicalTapeSetClose(sorter->tapes);
	sorter->tapes = NULL;
	if (sorter->runs)
		pfree(sorter->runs);
	if (sorter->heap)
		pfree(sorter->heap);
	if (sorter->held)
		pfree(sorter->held);
	sorter->runs = NULL;
	sorter->heap = NULL;
	sorter->held = NULL;
	sorter->n_runs = sorter->runs_room = sorter->heap_size = 0;
	sorter->n_held = sorter->held_room = 0;
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
	int64		read = 0;

	sorter_sort(sorter);
	memset(out, 0, sizeof(*out));
	for (int r = 0; r < sorter->n_runs; r++)
		out->sorted_runs += sorter->runs[r].tape != NULL;

	genie_chain_writer_init(&keyword_writer, index, GENIE_PAGE_KEYWORDS,
							sizeof(GenieKeywordEntry), wal);
	out->format = genie_write_format;
	genie_chain_writer_init(&postings_writer, index, GENIE_PAGE_POSTINGS,
							out->format >= 5 ? 1 : sizeof(int32), wal);

	while (sorter_next(sorter, &key))
	{
		int32		keyword = (int32) ((uint64) key >> 32);
		int32		object_id = (int32) (key & 0xFFFFFFFF);

		if ((++read & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
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
	sorter_end(sorter);
	if (ids)
		pfree(ids);
	if (packed)
		pfree(packed);
}
