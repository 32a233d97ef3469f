/*-------------------------------------------------------------------------
 *
 * genie_permutation.c
 *	  The permutation index (seed 001; genie/permutation.hpp) of an index
 *	  that stores its values: genie_vector_ops (Euclidean distance) and
 *	  genie_ngram_ops with store_strings (edit distance).
 *
 * Built WITH (permutants = m), the index keeps m of its objects' values as
 * permutants, drawn by genie_permutants_choose from the reloption seed
 * (SplitMix64 over the non-NULL objects in the build's order: the same
 * table and seed give the same permutants), and for every main object a row
 * of m bytes, the rank of each permutant by its distance to the object.
 * Both are chains of the index's pages, written without WAL at build (the
 * build logs every page) and with full-page GenericXLog images at a merge,
 * which keeps the live objects' rows and computes the pending ones'.
 * Pending objects' rows are not stored: a backend computes them when it
 * loads the entry (m distances each).  An index built on fewer than m
 * objects draws its permutants at the first merge that has m; until then
 * it is searched exactly.
 *
 * A search (genie.vector_search or genie.text_search = permutation) takes
 * the queries' rows, the genie.permutation_fraction of the objects whose
 * rows are nearest by Spearman's footrule (on the GPU or the CPU engine:
 * genie_permutation_select), and re-ranks those by their true distance
 * (search/genie_search_values.c): approximate, every distance true.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "genie_utils.h"
#include "profile/genie_profile.h"
#include "search/genie_cache_values.h"
#include "search/genie_permutation.h"
#include "search/genie_search.h"
#include "search/genie_search_device.h"

int			genie_text_search_setting = GENIE_TEXT_SEARCH_EXACT;
double		genie_permutation_fraction = 0.05;

static GenieValuesKind
kind_of(int16 encoding_kind)
{
	return encoding_kind == GENIE_ENCODING_VECTOR ? GENIE_VALUES_VECTORS : GENIE_VALUES_STRINGS;
}

/*
 * The rows of every value of batch against permutants, into rows: on the
 * GPU where an in-process search would run there (genie.device) when
 * on_device, else on the CPU (the few rows of queries and pending objects).
 */
static void
rows_of(const GenieValueBatch *batch, const GenieValueSet *permutants, uint8 *rows, bool on_device)
{
	GenieValueSet set;
	genie_engine_kind device = on_device ? genie_search_device() : GENIE_ENGINE_CPU;
	genie_engine_options options;
	genie_error err;
	genie_status status;

	if (batch->n == 0)
		return;
	GENIE_CHECK(genie_value_set_create(batch, &set, &err), &err, "genie: permutation rows");
	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	status = genie_value_set_permutations(&set, permutants, device, &options, rows, &err);
	if (genie_search_cpu_fallback(status, &err, "permutation rows"))
	{
		genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
		status = genie_value_set_permutations(&set, permutants, GENIE_ENGINE_CPU, &options, rows, &err);
	}
	genie_value_set_free(&set);
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: permutation rows");
}

/* The same against the permutants of a batch. */
static void
rows_against(const GenieValueBatch *batch, const GenieValueBatch *chosen, uint8 *rows, bool on_device)
{
	GenieValueSet permutants;
	genie_error err;

	GENIE_CHECK(genie_value_set_create(chosen, &permutants, &err), &err, "genie: permutants");
	PG_TRY();
	{
		rows_of(batch, &permutants, rows, on_device);
	}
	PG_FINALLY();
	{
		genie_value_set_free(&permutants);
	}
	PG_END_TRY();
}

/* Appends the first m bytes of each of n rows to a permutations chain. */
static void
append_rows(GenieChainWriter *w, const uint8 *rows, int32 n, int32 m)
{
	int32		stride = genie_permutation_stride(m);

	/* unpadded rows (m a multiple of 16) go many at a time: a page locked once for all it holds */
	if (stride == m)
	{
		for (int32 i = 0; i < n; i += 65536)
		{
			genie_chain_writer_append(w, rows + (Size) i * stride, Min(n - i, 65536));
			CHECK_FOR_INTERRUPTS();
		}
		return;
	}
	for (int32 i = 0; i < n; i++)
	{
		genie_chain_writer_append(w, rows + (Size) i * stride, 1);
		if ((i & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Draws the permutants among the n objects of batch whose flags are
 * neither NULL nor DEAD, and writes both chains; false (nothing written)
 * when fewer than m are eligible.
 */
static bool
choose_and_write(Relation index, const GenieValueBatch *batch, const uint8 *excluded, int32 m,
				 uint64 seed, bool wal, GenieMetaPageData *meta)
{
	int32		eligible = 0;
	int32	   *ids;
	GenieValueBatch chosen;
	GenieChainWriter values;
	GenieChainWriter rows_writer;
	uint8	   *rows;
	genie_error err;
	int64		bytes = 0;
	instr_time	start;
	instr_time	computed;
	instr_time	written;

	for (int32 i = 0; i < batch->n; i++)
		eligible += excluded[i] == 0;
	if (eligible < m)
		return false;
	ids = palloc(sizeof(int32) * m);
	GENIE_CHECK(genie_permutants_choose(batch->n, excluded, m, seed, ids, &err), &err,
				"genie: drawing permutants");
	genie_value_batch_select(batch, ids, m, &chosen);
	rows = palloc_extended((Size) batch->n * genie_permutation_stride(m) + 1, MCXT_ALLOC_HUGE);
	INSTR_TIME_SET_CURRENT(start);
	rows_against(batch, &chosen, rows, true);
	INSTR_TIME_SET_CURRENT(computed);

	genie_chain_writer_init(&values, index, GENIE_PAGE_VALUES, 1, wal);
	for (int32 j = 0; j < m; j++)
	{
		Size		size = chosen.kind == GENIE_VALUES_STRINGS ?
			(Size) (chosen.text_offsets[j + 1] - chosen.text_offsets[j]) : sizeof(float) * chosen.dim;
		const char *value = chosen.kind == GENIE_VALUES_STRINGS ?
			chosen.text + chosen.text_offsets[j] : (const char *) (chosen.vectors + (Size) j * chosen.dim);

		genie_values_append(&values, value, size);
		bytes += sizeof(int32) + size;
	}
	genie_chain_writer_init(&rows_writer, index, GENIE_PAGE_PERMUTATIONS, m, wal);
	append_rows(&rows_writer, rows, batch->n, m);
	meta->permutants_chosen = m;
	meta->permutant_bytes = bytes;
	meta->permutant_values = genie_chain_writer_finish(&values);
	meta->permutations = genie_chain_writer_finish(&rows_writer);
	INSTR_TIME_SET_CURRENT(written);
	INSTR_TIME_SUBTRACT(written, computed);
	INSTR_TIME_SUBTRACT(computed, start);
	ereport(DEBUG1,
			(errmsg_internal("genie: the permutations of %d rows against %d permutants computed in %.1f ms on the %s, written in %.1f ms",
							 batch->n, m, INSTR_TIME_GET_MILLISEC(computed),
							 genie_search_device() == GENIE_ENGINE_CPU ? "CPU" : "GPU",
							 INSTR_TIME_GET_MILLISEC(written))));
	pfree(rows);
	pfree(ids);
	return true;
}

/* The index's permutants option (0: none), checked against what can have them. */
static int32
permutants_option(Relation index, int16 encoding_kind, bool values_stored)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	int32		m = opts != NULL ? opts->permutants : 0;

	if (m == 0)
		return 0;
	genie_check_metric_option("permutants", psprintf("permutants = %d", m), encoding_kind,
							  values_stored);
	return m;
}

void
genie_check_metric_option(const char *option, const char *written, int16 encoding_kind,
						  bool values_stored)
{
	if (encoding_kind != GENIE_ENCODING_VECTOR && encoding_kind != GENIE_ENCODING_NGRAM)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s needs an index of genie_vector_ops or genie_ngram_ops", option),
				 errhint("Remove WITH (%s).", written)));
	if (genie_write_format < 5)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s needs genie.write_format 5 or later", option),
				 errhint("RESET genie.write_format.")));
	if (!values_stored)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s needs an index that stores its strings", option),
				 errhint("Build the index with store_strings = on (the default).")));
}

void
genie_permutation_build_empty(Relation index, int16 encoding_kind, bool values_stored,
							  GenieMetaPageData *meta)
{
	int32		m = permutants_option(index, encoding_kind, values_stored);

	if (m == 0)
		return;
	meta->format_version = GENIE_FORMAT_PERMUTATION;
	meta->permutants = m;
	meta->permutation_seed = (uint64) ((GenieOptions *) index->rd_options)->seed;
}

void
genie_permutation_build_begin(Relation index, int16 encoding_kind, bool values_stored)
{
	/* the context costs about a quarter of a second, the scan longer */
	if (permutants_option(index, encoding_kind, values_stored) > 0)
		genie_search_prepare_device();
}

void
genie_permutation_build(Relation index, int16 encoding_kind, bool values_stored)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	int32		m = permutants_option(index, encoding_kind, values_stored);
	GenieIndexContent content;
	GenieValueBatch batch;
	GenieMetaPageData fields;
	Buffer		metabuf;
	GenieMetaPage meta;
	MemoryContext cxt;
	MemoryContext old;

	if (m == 0)
		return;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "genie permutation build",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	genie_read_content(index, &content, false);
	genie_read_values(index, &content);
	memset(&fields, 0, sizeof(fields));
	if (!(encoding_kind == GENIE_ENCODING_VECTOR && content.vectors.dimensions == 0))
	{
		genie_value_batch_from_content(&content, kind_of(encoding_kind), content.vectors.dimensions, 0,
					  content.n_main_objects, &batch);
		(void) choose_and_write(index, &batch, genie_content_excluded(&content, 0, content.n_main_objects), m,
								(uint64) opts->seed, false, &fields);
	}
	MemoryContextSwitchTo(old);

	/* the build's metapage, not WAL-logged yet */
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	meta = GeniePageGetMeta(BufferGetPage(metabuf));
	meta->format_version = GENIE_FORMAT_PERMUTATION;
	meta->permutants = m;
	meta->permutation_seed = (uint64) opts->seed;
	meta->permutants_chosen = fields.permutants_chosen;
	meta->permutant_bytes = fields.permutant_bytes;
	meta->permutant_values = fields.permutant_values;
	meta->permutations = fields.permutations;
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);
	MemoryContextDelete(cxt);
}

/* Reads a chain of permutant value records into a set. */
typedef struct PermutantReader
{
	GenieValuesKind kind;
	int32		dim;
	int32		m;
	StringInfoData text;
	int64	   *offsets;
	float	   *vectors;
} PermutantReader;

static void
put_permutant(void *arg, int32 id, const char *value, int32 length)
{
	PermutantReader *r = arg;

	if (r->kind == GENIE_VALUES_STRINGS)
	{
		appendBinaryStringInfo(&r->text, value, length);
		r->offsets[id + 1] = r->text.len;
	}
	else if (length == (int32) sizeof(float) * r->dim)
		memcpy(r->vectors + (Size) id * r->dim, value, length);
	else
		elog(ERROR, "genie: a permutant of %d bytes where %d dimensions need %d", length, r->dim,
			 (int) sizeof(float) * r->dim);
}

static void
read_permutants(Relation index, const GenieMetaPageData *meta, GenieValuesKind kind,
				GenieValueSet *set)
{
	PermutantReader r;
	GenieValueBatch batch;
	genie_error err;

	memset(&r, 0, sizeof(r));
	r.kind = kind;
	r.dim = meta->vectors.dimensions;
	r.m = meta->permutants_chosen;
	initStringInfo(&r.text);
	r.offsets = palloc0(sizeof(int64) * (r.m + 1));
	if (kind == GENIE_VALUES_VECTORS)
		r.vectors = palloc0(sizeof(float) * (Size) r.m * Max(r.dim, 1));
	genie_read_value_chain(index, meta->permutant_values, meta->permutant_bytes, r.m, put_permutant,
						   &r);
	memset(&batch, 0, sizeof(batch));
	batch.kind = kind;
	batch.n = r.m;
	batch.text = r.text.data;
	batch.text_offsets = r.offsets;
	batch.vectors = r.vectors;
	batch.dim = r.dim;
	GENIE_CHECK(genie_value_set_create(&batch, set, &err), &err, "genie: permutants");
}

/* Copies a permutations chain's rows into rows of stride bytes. */
typedef struct RowCopy
{
	Relation	index;
	uint8	   *rows;
	int32		m;
	int32		stride;
	int64		next;
	int64		capacity;
} RowCopy;

static void
copy_rows(void *arg, const char *data, Size bytes)
{
	RowCopy    *c = arg;

	for (Size at = 0; at + c->m <= bytes; at += c->m)
	{
		uint64		seen[2] = {0, 0};

		if (c->next >= c->capacity)
			elog(ERROR, "genie: a permutations chain longer than its objects");
		/* a permutation of 0 .. m - 1, or the footrule's histogram would overflow */
		for (int32 j = 0; j < c->m; j++)
		{
			uint8		r = (uint8) data[at + j];

			if (r >= c->m || (seen[r >> 6] & (UINT64CONST(1) << (r & 63))))
				ereport(ERROR,
						(errcode(ERRCODE_INDEX_CORRUPTED),
						 errmsg("genie index \"%s\" has a corrupt permutation at object %lld",
								RelationGetRelationName(c->index), (long long) c->next),
						 errhint("REINDEX the index.")));
			seen[r >> 6] |= UINT64CONST(1) << (r & 63);
		}
		memcpy(c->rows + c->next * c->stride, data + at, c->m);
		c->next++;
	}
}

static void
read_rows(Relation index, const GenieMetaPageData *meta, int32 n, uint8 *rows)
{
	RowCopy		c = {index, rows, meta->permutants_chosen,
	genie_permutation_stride(meta->permutants_chosen), 0, n};

	if (genie_chain_walk(index, meta->permutations, meta->permutants_chosen, n, copy_rows, &c) != n ||
		c.next != n)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has a corrupt permutations chain",
						RelationGetRelationName(index)),
				 errhint("REINDEX the index.")));
}

void
genie_permutation_merge(Relation index, const GenieMetaPageData *before,
						const GenieIndexContent *content, const int32 *new_ids, int32 n_live,
						GenieMetaPageData *meta, GenieChain *old_chains)
{
	GenieValuesKind kind = kind_of(before->encoding.kind);
	int32		m = before->permutants;
	int32		dim = before->vectors.dimensions;
	int32		stride;
	int32		n_pending = content->n_objects - content->n_main_objects;
	GenieValueSet permutants;
	GenieValueBatch batch;
	GenieChainWriter w;
	uint8	   *main_rows;
	uint8	   *pending_rows;

	meta->permutants = before->permutants;
	meta->permutation_seed = before->permutation_seed;
	meta->permutants_chosen = before->permutants_chosen;
	meta->permutant_bytes = before->permutant_bytes;
	meta->permutant_values = before->permutant_values;
	meta->permutations = before->permutations;
	for (int i = 0; i < 2; i++)
	{
		old_chains[i].head = old_chains[i].tail = InvalidBlockNumber;
		old_chains[i].pages = 0;
	}
	if (m == 0 || (kind == GENIE_VALUES_VECTORS && dim == 0))
		return;
	if (before->permutants_chosen > 0 && n_live == 0)
	{
		/*
		 * An emptied index: an insert may give it vectors of another
		 * dimension, which the permutants' could not be compared with.  The
		 * next merge with m objects draws new ones.
		 */
		meta->permutants_chosen = 0;
		meta->permutant_bytes = 0;
		meta->permutant_values.head = meta->permutant_values.tail = InvalidBlockNumber;
		meta->permutant_values.pages = 0;
		meta->permutations = meta->permutant_values;
		old_chains[0] = before->permutations;
		old_chains[1] = before->permutant_values;
		return;
	}
	if (before->permutants_chosen == 0)
	{
		/* the first merge with m objects draws them among the live ones */
		int32	   *live = palloc_extended(sizeof(int32) * Max(n_live, 1), MCXT_ALLOC_HUGE);
		GenieValueBatch all;
		uint8	   *excluded = genie_content_excluded(content, 0, content->n_objects);
		uint8	   *live_excluded = palloc_extended(Max(n_live, 1), MCXT_ALLOC_HUGE);

		for (int32 id = 0; id < content->n_objects; id++)
			if (new_ids[id] >= 0)
			{
				live[new_ids[id]] = id;
				live_excluded[new_ids[id]] = excluded[id];
			}
		genie_value_batch_from_content(content, kind, dim, 0, content->n_objects, &all);
		genie_value_batch_select(&all, live, n_live, &batch);
		(void) choose_and_write(index, &batch, live_excluded, m, before->permutation_seed, true, meta);
		return;
	}

	/* the main objects keep their rows; the pending ones' are computed */
	stride = genie_permutation_stride(m);
	main_rows = palloc_extended((Size) Max(content->n_main_objects, 1) * stride, MCXT_ALLOC_HUGE);
	read_rows(index, before, content->n_main_objects, main_rows);
	pending_rows = palloc_extended((Size) Max(n_pending, 1) * stride, MCXT_ALLOC_HUGE);
	read_permutants(index, before, kind, &permutants);
	PG_TRY();
	{
		genie_value_batch_from_content(content, kind, dim, content->n_main_objects, n_pending, &batch);
		rows_of(&batch, &permutants, pending_rows, true);
	}
	PG_FINALLY();
	{
		genie_value_set_free(&permutants);
	}
	PG_END_TRY();
	genie_chain_writer_init(&w, index, GENIE_PAGE_PERMUTATIONS, m, true);
	for (int32 id = 0; id < content->n_objects; id++)
	{
		if (new_ids[id] < 0)
			continue;
		genie_chain_writer_append(&w, id < content->n_main_objects ?
								  main_rows + (Size) id * stride :
								  pending_rows + (Size) (id - content->n_main_objects) * stride, 1);
		if ((id & 0xFFFF) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	meta->permutations = genie_chain_writer_finish(&w);
	old_chains[0] = before->permutations;
}

/* What read_version reads for genie_cache_permutations. */
typedef struct PermutationRead
{
	GenieCachedIndex *entry;
	int32		chosen;			/* out: the permutants chosen, 0 none */
	uint8	   *data;			/* out: the rows (the entry's) */
} PermutationRead;

static void
read_version(Relation index, const GenieMetaPageData *meta, void *arg)
{
	PermutationRead *r = arg;
	genie_permutation_rows *rows = NULL;
	genie_error err;

	r->chosen = meta->permutants_chosen;
	if (meta->permutants_chosen == 0)
		return;
	GENIE_CHECK(genie_permutation_rows_create(meta->permutants_chosen, r->entry->n_objects,
											  &rows, &r->data, &err),
				&err, "genie: permutation rows");
	r->entry->permutation_rows = rows;
	read_rows(index, meta, r->entry->n_main_objects, r->data);
	read_permutants(index, meta, r->entry->values_kind, &r->entry->permutant_values);
}

bool
genie_cache_permutations(GenieCachedIndex *entry)
{
	PermutationRead r = {entry, 0, NULL};
	genie_error err;

	if (entry->permutation_ready)
		return entry->permutants > 0;
	/* what a load that failed half-way left */
	genie_permutation_rows_free(entry->permutation_rows);
	entry->permutation_rows = NULL;
	genie_value_set_free(&entry->permutant_values);
	genie_profile_push(GENIE_PHASE_LOAD);
	genie_cache_read_version(entry, read_version, &r);
	if (r.chosen > 0 && entry->n_objects > entry->n_main_objects)
	{
		/* the pending objects' rows, which the pages do not hold */
		const GenieValueSet *pending = genie_cache_pending_values(entry);
		genie_engine_options options;
		int32		stride = genie_permutation_stride(r.chosen);

		genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
		GENIE_CHECK(genie_value_set_permutations(pending, &entry->permutant_values, GENIE_ENGINE_CPU,
												 &options, r.data + (Size) entry->n_main_objects * stride,
												 &err),
					&err, "genie: permutation rows of pending objects");
	}
	entry->permutants = r.chosen;
	entry->bytes += (Size) entry->n_objects * genie_permutation_stride(Max(entry->permutants, 1));
	entry->permutation_ready = true;
	genie_profile_pop();
	return entry->permutants > 0;
}

uint8 *
genie_permutation_query_rows(GenieCachedIndex *entry, const GenieValueBatch *queries)
{
	uint8	   *rows = palloc_extended((Size) Max(queries->n, 1) *
									   genie_permutation_stride(entry->permutants),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	rows_of(queries, &entry->permutant_values, rows, false);
	return rows;
}

int32
genie_permutation_candidate_count(GenieCachedIndex *entry, int32 k)
{
	double		wanted = ceil(genie_permutation_fraction * entry->n_objects);

	return (int32) Max(1, Min((double) entry->n_objects, Max(wanted, (double) k)));
}

genie_permutation_candidates *
genie_permutation_choose(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 candidates)
{
	uint8	   *query_rows;
	genie_permutation_candidates *found = NULL;
	genie_engine_options options;
	genie_engine_kind device = genie_search_device();
	genie_error err;
	genie_status status;

	genie_profile_push(GENIE_PHASE_QUERY);
	query_rows = genie_permutation_query_rows(entry, queries);
	genie_profile_pop();
	genie_profile_push(GENIE_PHASE_ENGINE);
	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	status = genie_permutation_select(entry->permutation_rows, device, &options, entry->excluded,
									  query_rows, queries->n, candidates, &found, &err);
	if (genie_search_cpu_fallback(status, &err, "permutation index"))
	{
		genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
		status = genie_permutation_select(entry->permutation_rows, GENIE_ENGINE_CPU, &options,
										  entry->excluded, query_rows, queries->n, candidates, &found,
										  &err);
	}
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: permutation index");
	pfree(query_rows);
	genie_search_ran_on(found->device, false);
	return found;
}
