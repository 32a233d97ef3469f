/*-------------------------------------------------------------------------
 *
 * genie_search_values.c
 *	  The k nearest stored values of each query (genie_search_values.h):
 *	  strings by edit distance, vectors by Euclidean distance, codes by
 *	  Hamming distance, one path for all (what differs between the kinds is
 *	  in service/genie_values.c).
 *
 * In-process, one scan of every value of the entry's version on the engine
 * genie.device asks for, exact: the same rows and distances as a
 * sequential scan ordered by the distance operator.  With genie preloaded,
 * the genie service holds the main objects' values (handed over by the
 * first backend that needs them, like the postings) and scans them on its
 * GPU, one engine call for the scans of all sessions that arrive together;
 * the backend scans its own pending objects' values on the CPU and merges
 * the two in (distance, length, id) order, the order of the in-process
 * scan, so both paths give the same rows.  Backends of a preloaded genie
 * never start CUDA: while the service is away they scan on the CPU.
 *
 * LSH (vectors, genie.vector_search = lsh, the caller passes the queries'
 * LSH keywords) and EWH (codes, genie.bit_search = ewh, the queries' EWH
 * buckets): the genie.lsh_candidates or genie.ewh_candidates objects of the
 * highest match count (genie_search, through the genie service when it
 * runs) re-ranked by their exact distance in this backend: approximate, as
 * GENIE section IV and the EWH paper.
 *
 * genie_search_values_visible keeps the rows visible to a snapshot,
 * widening k while invisible rows take places.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "genie_utils.h"
#include "search/genie_cache_values.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "search/genie_search_values.h"
#include "search/genie_visibility.h"
#include "service/genie_service_client.h"
#include "service/genie_service_scan.h"
#include "profile/genie_explain.h"
#include "profile/genie_profile.h"

int			genie_vector_search_setting = GENIE_VECTOR_SEARCH_EXACT;
int			genie_lsh_candidates = 1000;
int			genie_bit_search_setting = GENIE_BIT_SEARCH_EXACT;
int			genie_ewh_candidates = 1000;
int			genie_cluster_list_knn = GENIE_LIST_AUTO;

bool
genie_search_approximate(GenieValuesKind kind)
{
	switch (kind)
	{
		case GENIE_VALUES_VECTORS:
			return genie_vector_search_setting == GENIE_VECTOR_SEARCH_LSH;
		case GENIE_VALUES_CODES:
			return genie_bit_search_setting == GENIE_BIT_SEARCH_EWH;
		default:
			return false;
	}
}

bool
genie_search_permutation(GenieValuesKind kind)
{
	switch (kind)
	{
		case GENIE_VALUES_VECTORS:
			return genie_vector_search_setting == GENIE_VECTOR_SEARCH_PERMUTATION;
		case GENIE_VALUES_STRINGS:
			return genie_text_search_setting == GENIE_TEXT_SEARCH_PERMUTATION;
		default:
			return false;
	}
}

/* ---- scans ---- */

/* What a scan of this kind is called in messages. */
static const char *
kind_what(GenieValuesKind kind)
{
	switch (kind)
	{
		case GENIE_VALUES_STRINGS:
			return "edit-distance scan";
		case GENIE_VALUES_CODES:
			return "Hamming search";
		default:
			return "vector search";
	}
}

static const char *
kind_held(GenieValuesKind kind)
{
	switch (kind)
	{
		case GENIE_VALUES_STRINGS:
			return "the stored strings";
		case GENIE_VALUES_CODES:
			return "the stored codes";
		default:
			return "the stored vectors";
	}
}

/*
 * One scan of set on device, on this backend's engine options (cancel and
 * statement_timeout stop it); candidates: the LSH re-rank's, or NULL; list:
 * the entry's List of Clusters (vectors, as genie.cluster_list_knn says),
 * or NULL.
 */
static genie_status
scan_set(const GenieValueSet *set, genie_engine_kind device, const GenieValueBatch *queries,
		 int32 k, const uint8 *excluded, const GenieSearchResult *candidates,
		 const genie_cluster_list *list, GenieValueFound *found, genie_error *err)
{
	genie_engine_options options;

	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	return genie_value_set_scan(set, device, &options, queries, k, excluded,
								candidates ? candidates->query_offsets : NULL,
								candidates ? candidates->objects : NULL, list,
								(genie_list_use) genie_cluster_list_knn, found, err);
}

/*
 * Moves C API results (malloc'd: parts[0 .. n_parts), the scans of
 * consecutive pieces of one batch, their queries in order) into palloc'd
 * rows, the lengths from lengths_of (the set scanned, when they are needed
 * to merge) or zero; the allocations may not throw before the results are
 * freed.
 */
void
genie_value_rows_take(GenieValueFound *parts, int n_parts, const GenieValueSet *lengths_of,
					  GenieValueRows *rows)
{
	int			nq = 0;
	int64		n = 0;
	int			flags = MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM;

	for (int p = 0; p < n_parts; p++)
	{
		nq += genie_value_found_queries(&parts[p]);
		n += genie_value_found_offsets(&parts[p])[genie_value_found_queries(&parts[p])];
	}
	rows->n_queries = nq;
	rows->offsets = palloc_extended(sizeof(int64) * (nq + 1), flags);
	rows->objects = palloc_extended(sizeof(int32) * Max(n, 1), flags);
	rows->distances = palloc_extended(sizeof(float8) * Max(n, 1), flags);
	rows->lengths = palloc_extended(sizeof(int32) * Max(n, 1), flags | MCXT_ALLOC_ZERO);
	if (rows->offsets != NULL && rows->objects != NULL && rows->distances != NULL &&
		rows->lengths != NULL)
	{
		int			q0 = 0;
		int64		row0 = 0;

		rows->offsets[0] = 0;
		for (int p = 0; p < n_parts; p++)
		{
			const int64 *offsets = genie_value_found_offsets(&parts[p]);
			int			part_nq = genie_value_found_queries(&parts[p]);

			for (int q = 1; q <= part_nq; q++)
				rows->offsets[q0 + q] = row0 + offsets[q];
			for (int64 i = 0; i < offsets[part_nq]; i++)
			{
				rows->objects[row0 + i] = genie_value_found_object(&parts[p], i);
				rows->distances[row0 + i] = genie_value_found_distance(&parts[p], i);
				if (lengths_of != NULL)
					rows->lengths[row0 + i] = genie_value_set_length(lengths_of, rows->objects[row0 + i]);
			}
			q0 += part_nq;
			row0 += offsets[part_nq];
		}
	}
	for (int p = 0; p < n_parts; p++)
		genie_value_found_free(&parts[p]);
	if (rows->offsets == NULL || rows->objects == NULL || rows->distances == NULL ||
		rows->lengths == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed on a result of %lld rows.", (long long) n)));
}

void
genie_value_rows_free(GenieValueRows *rows)
{
	if (rows->offsets != NULL)
		pfree(rows->offsets);
	if (rows->objects != NULL)
		pfree(rows->objects);
	if (rows->distances != NULL)
		pfree(rows->distances);
	if (rows->lengths != NULL)
		pfree(rows->lengths);
	memset(rows, 0, sizeof(*rows));
}

const genie_cluster_list *
genie_search_values_list(GenieCachedIndex *entry, GenieValuesKind kind, genie_engine_kind device)
{
	if (kind != GENIE_VALUES_VECTORS || genie_cluster_list_knn == GENIE_LIST_NEVER ||
		(genie_cluster_list_knn == GENIE_LIST_AUTO && device == GENIE_ENGINE_GPU))
		return NULL;
	return genie_cache_clusters(entry);
}

/* Every value of the entry, in this backend, on the engine genie.device asks for. */
static void
scan_in_process(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
				GenieValueRows *rows)
{
	const GenieValueSet *set = genie_cache_values(entry);
	genie_engine_kind device = genie_search_device();
	const genie_cluster_list *list = genie_search_values_list(entry, queries->kind, device);
	GenieValueFound found;
	genie_error err;
	genie_status status;

	genie_profile_push(GENIE_PHASE_ENGINE);
	status = scan_set(set, device, queries, k, entry->excluded, NULL, list, &found, &err);
	if (genie_search_cpu_fallback(status, &err, kind_what(queries->kind)))
	{
		list = genie_search_values_list(entry, queries->kind, GENIE_ENGINE_CPU);
		status = scan_set(set, GENIE_ENGINE_CPU, queries, k, entry->excluded, NULL, list, &found, &err);
	}
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, psprintf("genie: %s", kind_what(queries->kind)));
	genie_search_ran_on(genie_value_found_device(&found), false);
	if (list != NULL)
	{
		genie_clusters_count_bytes(entry, list);	/* the rows in the list's order, made by its first search */
		if (found.vectors->listed > 0)
			genie_explain_list(found.vectors->listed, found.vectors->list_distances);
	}
	genie_value_rows_take(&found, 1, NULL, rows);
}

/*
 * The approximate modes: each query's top candidates (at least k) objects
 * by match count (LSH keywords of vectors, EWH buckets of codes, weighted),
 * re-ranked by distance on the CPU.
 */
static void
search_approximate(GenieCachedIndex *entry, const GenieValueBatch *queries,
				   GenieQuery **approximate, int32 k, GenieValueRows *rows)
{
	bool		codes = queries->kind == GENIE_VALUES_CODES;
	int32		setting = codes ? genie_ewh_candidates : genie_lsh_candidates;
	int32		candidates = (int32) Min(Max((int64) setting, (int64) k),
										 (int64) Max(entry->n_objects, 1));
	GenieQueryBatch batch;
	GenieSearchResult counted;
	const GenieValueSet *set;
	GenieValueFound found;
	genie_error err;
	genie_status status;

	for (int q = 0; q < queries->n; q++)
		if (approximate[q] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("genie index \"%s\" has no %s keywords: it was built with m = 0",
							get_rel_name(entry->index_oid), codes ? "EWH" : "LSH"),
					 codes ?
					 errhint("SET genie.bit_search = 'exact', or rebuild the index WITH (m = 16) for EWH keywords.") :
					 errhint("SET genie.vector_search = 'exact', or rebuild the index with m > 0.")));
	genie_query_batch_init(&batch, approximate, queries->n);
	genie_search(entry, &batch, candidates, &counted);
	/* the re-ranking reads every value here; the flags of the skipped objects come with them */
	set = genie_cache_values(entry);
	genie_profile_push(GENIE_PHASE_ENGINE);
	status = scan_set(set, GENIE_ENGINE_CPU, queries, k, entry->excluded, &counted, NULL, &found, &err);
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, codes ? "genie: re-ranking EWH candidates" :
						   "genie: re-ranking LSH candidates");
	genie_search_free(&counted);
	genie_value_rows_take(&found, 1, NULL, rows);
}

/*
 * Under EXPLAIN (ANALYZE): the exact search of the same queries (its time
 * left out of the phases), and how many of the permutation index's rows are
 * no farther than each query's exact k-th row.
 */
static void
exact_unprofiled(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
				 GenieValueRows *exact)
{
	bool		profiling = genie_profile_enabled;
	/* nor are its queries through a List of Clusters the statement's */
	int64		list_queries = genie_explain_counts.list_queries;
	int64		list_distances = genie_explain_counts.list_distances;

	genie_profile_enabled = false;
	PG_TRY();
	{
		scan_in_process(entry, queries, k, exact);
	}
	PG_FINALLY();
	{
		genie_profile_enabled = profiling;
		genie_explain_counts.list_queries = list_queries;
		genie_explain_counts.list_distances = list_distances;
	}
	PG_END_TRY();
}

static void
explain_recall(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
			   const GenieValueRows *rows, int64 candidates)
{
	GenieValueRows exact;
	int64		hits = 0;
	int64		wanted = 0;

	exact_unprofiled(entry, queries, k, &exact);
	for (int q = 0; q < queries->n; q++)
	{
		int64		n = exact.offsets[q + 1] - exact.offsets[q];
		float8		kth;

		if (n == 0)
			continue;
		kth = exact.distances[exact.offsets[q + 1] - 1];
		wanted += n;
		for (int64 r = rows->offsets[q]; r < rows->offsets[q + 1] && r - rows->offsets[q] < n; r++)
			hits += rows->distances[r] <= kth;
	}
	genie_value_rows_free(&exact);
	genie_explain_permutation(candidates, hits, wanted);
}

/*
 * The permutation index: each query's genie.permutation_fraction of the
 * objects by footrule (on genie.device's engine in-process; the CPU in a
 * preloaded backend), re-ranked by distance on the CPU.  False when the
 * index has no permutants chosen.
 */
static bool
search_permutation(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
				   GenieValueRows *rows)
{
	const GenieValueSet *set;
	int32		candidates;
	genie_permutation_candidates *chosen;
	genie_engine_options options;
	GenieValueFound found;
	genie_error err;
	genie_status status;

	if (!genie_cache_permutations(entry))
		return false;
	/* the re-ranking reads every value here, and the flags come with them */
	set = genie_cache_values(entry);
	candidates = genie_permutation_candidate_count(entry, k);
	chosen = genie_permutation_choose(entry, queries, candidates);
	genie_profile_push(GENIE_PHASE_ENGINE);
	genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
	status = genie_value_set_scan(set, GENIE_ENGINE_CPU, &options, queries, k, entry->excluded,
								  chosen->query_offsets, chosen->objects, NULL, GENIE_LIST_NEVER,
								  &found, &err);
	genie_permutation_candidates_free(chosen);
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: re-ranking permutation candidates");
	genie_value_rows_take(&found, 1, NULL, rows);
	genie_search_count(queries->n, k, rows->offsets[queries->n]);
	if (genie_explain_analyzing)
		explain_recall(entry, queries, k, rows, (int64) candidates * queries->n);
	return true;
}

/* A scan of the main objects' values, as genie_search_through_service asks it. */
typedef struct ValuesAsk
{
	const GenieValueBatch *queries;
	int32		k;
	GenieValueRows *rows;
} ValuesAsk;

static GenieServiceOutcome
ask_values(GenieCachedIndex *entry, void *arg, genie_engine_kind *engine, bool *device_fallback,
		   genie_error *err)
{
	ValuesAsk  *a = arg;
	int32		n_excluded;
	const int32 *excluded = genie_cache_excluded_main(entry, &n_excluded);
	GenieServiceOutcome outcome;
	int64		list_counts[2] = {0, 0};	/* EXPLAIN (ANALYZE)'s: list queries, distances */

	outcome = genie_service_scan_values(&entry->main_key, entry->index_oid, genie_device_setting,
										a->queries, a->k, genie_cluster_list_knn,
										genie_explain_analyzing && a->queries->kind == GENIE_VALUES_VECTORS
										? list_counts : NULL, excluded, n_excluded,
										a->rows, engine, device_fallback, err);
	if (outcome == GENIE_SERVICE_OK && list_counts[0] > 0)
		genie_explain_list(list_counts[0], list_counts[1]);
	if (outcome != GENIE_SERVICE_OK)
		genie_value_rows_free(a->rows); /* a part may have come back before the rest failed */
	return outcome;
}

/* The pending objects' rows (ids local to the pending list), on the CPU. */
static void
scan_pending(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
			 GenieValueRows *rows)
{
	const GenieValueSet *pending = genie_cache_pending_values(entry);
	int32		n_main = entry->n_main_objects;
	int32		n_pending = entry->n_objects - n_main;
	uint8	   *excluded = genie_cache_excluded_pending(entry);
	GenieValueFound found;
	genie_error err;

	if (scan_set(pending, GENIE_ENGINE_CPU, queries, Min(k, n_pending), excluded, NULL, NULL, &found,
				 &err) != GENIE_OK)
		genie_report_error(&err, psprintf("genie: %s of the pending rows", kind_what(queries->kind)));
	pfree(excluded);
	/* the lengths of pending strings decide ties with main ones */
	genie_value_rows_take(&found, 1, pending, rows);
}

/* The first k of main's and pending's rows of each query, by (distance, length, id). */
static void
merge_rows(const GenieValueRows *main, const GenieValueRows *pending, int32 n_main, int nq,
		   int32 k, GenieValueRows *rows)
{
	int64		total = 0;

	for (int q = 0; q < nq; q++)
		total += Min((int64) k, main->offsets[q + 1] - main->offsets[q] +
					 pending->offsets[q + 1] - pending->offsets[q]);
	rows->n_queries = nq;
	rows->offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	rows->objects = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->distances = palloc_extended(sizeof(float8) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->lengths = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		i = main->offsets[q];
		int64		j = pending->offsets[q];
		int64		out = rows->offsets[q];

		while (out - rows->offsets[q] < k && (i < main->offsets[q + 1] || j < pending->offsets[q + 1]))
		{
			bool		take_main = j == pending->offsets[q + 1];

			/* pending ids follow every main id: a tie in distance and length goes to main */
			if (i < main->offsets[q + 1] && j < pending->offsets[q + 1])
				take_main = main->distances[i] < pending->distances[j] ||
					(main->distances[i] == pending->distances[j] &&
					 main->lengths[i] <= pending->lengths[j]);
			if (take_main)
			{
				rows->objects[out] = main->objects[i];
				rows->distances[out] = main->distances[i];
				rows->lengths[out++] = main->lengths[i++];
			}
			else
			{
				rows->objects[out] = n_main + pending->objects[j];
				rows->distances[out] = pending->distances[j];
				rows->lengths[out++] = pending->lengths[j++];
			}
		}
		rows->offsets[q + 1] = out;
	}
}

/* No rows for any query (palloc'd as merged rows are). */
static void
no_rows(int nq, GenieValueRows *rows)
{
	rows->n_queries = nq;
	rows->offsets = palloc0(sizeof(int64) * (nq + 1));
	rows->objects = palloc(sizeof(int32));
	rows->distances = palloc(sizeof(float8));
	rows->lengths = palloc(sizeof(int32));
}

/*
 * The rows of queries from the main objects' rows (main_rows, the
 * service's) and the pending objects' (scanned here, on the CPU), merged;
 * main_rows is freed.
 */
static void
with_pending(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k, GenieValueRows *main_rows,
			 GenieValueRows *rows)
{
	GenieValueRows pending_rows;

	memset(&pending_rows, 0, sizeof(pending_rows));
	genie_profile_push(GENIE_PHASE_PENDING);
	if (entry->n_objects > entry->n_main_objects)
		scan_pending(entry, queries, k, &pending_rows);
	else
		no_rows(queries->n, &pending_rows);
	merge_rows(main_rows, &pending_rows, entry->n_main_objects, queries->n, k, rows);
	genie_profile_pop();
	/* a widening round asks again: free this round's rows */
	genie_value_rows_free(main_rows);
	genie_value_rows_free(&pending_rows);
}

/*
 * Through the service: the main rows there and the pending rows (on the
 * CPU) here, merged; false when the service is away.
 */
static bool
scan_through_service(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
					 GenieValueRows *rows)
{
	GenieValueRows main_rows;

	memset(&main_rows, 0, sizeof(main_rows));
	if (entry->n_main_objects > 0)
	{
		ValuesAsk	ask = {queries, k, &main_rows};

		if (!genie_search_through_service(entry, ask_values, genie_clusters_ship_values, &ask,
										  kind_held(queries->kind), kind_what(queries->kind)))
			return false;
	}
	else
		no_rows(queries->n, &main_rows);
	with_pending(entry, queries, k, &main_rows, rows);
	return true;
}

void
genie_search_values_from_service(GenieCachedIndex *entry, const GenieValueBatch *queries, int32 k,
								 genie_engine_kind engine, bool device_fallback, GenieValueRows *main_rows,
								 GenieValueRows *rows)
{
	genie_search_ran_on(engine, true);
	genie_search_note_engine(engine, device_fallback, kind_what(queries->kind));
	with_pending(entry, queries, k, main_rows, rows);
}

void
genie_search_values(GenieCachedIndex *entry, const GenieValueBatch *queries, GenieQuery **approximate,
					int32 k, GenieValueRows *rows)
{
	Assert(queries->kind == entry->values_kind);
	if (entry->n_objects == 0 || queries->n == 0 ||
		(queries->kind != GENIE_VALUES_STRINGS && entry->value_dim == 0))
	{
		no_rows(queries->n, rows);	/* an index without values: no rows */
		return;
	}

	/*
	 * The callers checked the queries' shape against the metapage, but an
	 * index left empty takes the next insert's shape: the version searched
	 * may hold another one than the metapage they read.  The engines read
	 * rows of the set's width, so a query of another is refused here.
	 */
	if (queries->kind != GENIE_VALUES_STRINGS && queries->dim != entry->value_dim)
		ereport(ERROR,
				(errcode(queries->kind == GENIE_VALUES_CODES ? ERRCODE_STRING_DATA_LENGTH_MISMATCH
						 : ERRCODE_DATA_EXCEPTION),
				 errmsg("the query has %d %s, but genie index \"%s\" now holds %s of %d",
						queries->dim, queries->kind == GENIE_VALUES_CODES ? "bits" : "dimensions",
						get_rel_name(entry->index_oid),
						queries->kind == GENIE_VALUES_CODES ? "codes" : "vectors", entry->value_dim),
				 errhint("The index was emptied and took a new length from a concurrent insert.")));
	if (approximate != NULL)
		search_approximate(entry, queries, approximate, k, rows);
	else if (genie_search_permutation(queries->kind) &&
			 search_permutation(entry, queries, k, rows))
		return;
	else
	{
		/* (the service holds the index's List of Clusters, and reads it as genie.cluster_list_knn says) */
		if (!genie_service_configured() || !scan_through_service(entry, queries, k, rows))
			scan_in_process(entry, queries, k, rows);
		/* (the approximate modes' search of LSH or EWH keywords is counted by genie_search) */
		genie_search_count(queries->n, k, rows->offsets[queries->n]);
	}
}

/* ---- the visible rows ---- */

/* The visible rows of each query, in the order found (what the widening rounds collect). */
typedef struct RowCollector
{
	ItemPointerData **tids;		/* the caller's: returned as they are */
	int32	  **objects;
	float8	  **distances;
	int64	   *counts;
	int64	   *capacity;
} RowCollector;

static void
collector_begin(RowCollector *c, int nq, int32 k, ItemPointerData **tids)
{
	c->tids = tids;
	c->objects = palloc(sizeof(int32 *) * Max(nq, 1));
	c->distances = palloc(sizeof(float8 *) * Max(nq, 1));
	c->counts = palloc0(sizeof(int64) * Max(nq, 1));
	c->capacity = palloc(sizeof(int64) * Max(nq, 1));
	for (int q = 0; q < nq; q++)
	{
		c->capacity[q] = Max(Min(k, 1024), 1);
		tids[q] = palloc(sizeof(ItemPointerData) * c->capacity[q]);
		c->objects[q] = palloc(sizeof(int32) * c->capacity[q]);
		c->distances[q] = palloc(sizeof(float8) * c->capacity[q]);
	}
}

static void
collector_add(RowCollector *c, int q, ItemPointer tid, int32 object, float8 distance)
{
	int64		n = c->counts[q];

	if (n == c->capacity[q])
	{
		c->capacity[q] *= 2;
		c->tids[q] = repalloc_huge(c->tids[q], sizeof(ItemPointerData) * c->capacity[q]);
		c->objects[q] = repalloc_huge(c->objects[q], sizeof(int32) * c->capacity[q]);
		c->distances[q] = repalloc_huge(c->distances[q], sizeof(float8) * c->capacity[q]);
	}
	c->tids[q][n] = *tid;
	c->objects[q][n] = object;
	c->distances[q][n] = distance;
	c->counts[q] = n + 1;
}

/* The collected rows as CSR arrays (no lengths: the order is settled). */
static void
collector_finish(RowCollector *c, int nq, GenieValueRows *rows)
{
	int64		total = 0;

	for (int q = 0; q < nq; q++)
		total += c->counts[q];
	rows->n_queries = nq;
	rows->offsets = palloc(sizeof(int64) * (nq + 1));
	rows->objects = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->distances = palloc_extended(sizeof(float8) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->lengths = NULL;
	rows->offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		memcpy(rows->objects + rows->offsets[q], c->objects[q], sizeof(int32) * c->counts[q]);
		memcpy(rows->distances + rows->offsets[q], c->distances[q], sizeof(float8) * c->counts[q]);
		rows->offsets[q + 1] = rows->offsets[q] + c->counts[q];
	}
}

/* The object ids of query q's first n collected rows, sorted (for bsearch). */
static int32 *
collected_sorted(const RowCollector *c, int q, int64 n)
{
	int32	   *ids = palloc(sizeof(int32) * Max(n, 1));

	memcpy(ids, c->objects[q], sizeof(int32) * n);
	qsort(ids, n, sizeof(int32), genie_int32_cmp);
	return ids;
}

/*
 * Rounds of searches until every query of queries_in (n_short of them) has
 * k visible rows or its search ran out.  Each query keeps its first base[q]
 * collected rows (NULL: none) and adds the found rows not among them
 * (skip[q], sorted, base[q] of them).  With approximate queries, a query
 * whose candidates ran out short of k (rows of match count 0 are never
 * candidates) goes into
 * ran_out (*n_ran_out of them), for the exact rest.  first (NULL: none) is
 * the first round's rows, searched already (taken).
 */
static void
collect_rounds(GenieCachedIndex *entry, GenieVisibility *vs, const GenieValueBatch *queries,
			   GenieQuery **approximate, int32 k, int32 kprime, GenieValueRows *first,
			   RowCollector *collected,
			   const int *queries_in, int n_short, const int64 *base, int32 *const *skip,
			   int *ran_out, int *n_ran_out)
{
	int			nq = queries->n;
	GenieQuery **sub_approximate = palloc0(sizeof(GenieQuery *) * Max(nq, 1));
	/* the rounds narrow their own list; the caller's stays as given */
	int		   *short_of_k = palloc(sizeof(int) * Max(n_short, 1));

	memcpy(short_of_k, queries_in, sizeof(int) * n_short);
	while (n_short > 0)
	{
		GenieValueBatch sub = *queries;
		GenieValueRows found;
		int			still = 0;
		bool		whole = n_short == nq;

		/* the queries still short of k visible rows, as one batch (the whole one when in order) */
		for (int i = 0; whole && i < n_short; i++)
			whole = short_of_k[i] == i;
		if (!whole)
		{
			genie_value_batch_select(queries, short_of_k, n_short, &sub);
			if (approximate != NULL)
				for (int i = 0; i < n_short; i++)
					sub_approximate[i] = approximate[short_of_k[i]];
		}
		if (first != NULL)
		{
			Assert(whole && first->n_queries == n_short);
			found = *first;
			first = NULL;
			genie_search_count(n_short, kprime, found.offsets[n_short]);
		}
		else
			genie_search_values(entry, &sub,
								approximate == NULL ? NULL : whole ? approximate : sub_approximate,
								kprime, &found);
		if (!whole)
			genie_value_batch_free_copy(&sub);
		genie_profile_push(GENIE_PHASE_VISIBILITY);

		/*
		 * each query's first k rows are checked unless they are among the
		 * base[q] kept (which are known already: they were checked)
		 */
		genie_visibility_check_ahead(vs, entry, found.objects, found.offsets, n_short, k);
		for (int i = 0; i < n_short; i++)
		{
			int			q = short_of_k[i];
			int64		n_found = found.offsets[i + 1] - found.offsets[i];

			collected->counts[q] = base != NULL ? base[q] : 0;
			for (int64 h = found.offsets[i]; h < found.offsets[i + 1] && collected->counts[q] < k; h++)
			{
				ItemPointerData tid;
				int32		object = found.objects[h];

				if (skip != NULL && base[q] > 0 &&
					bsearch(&object, skip[q], base[q], sizeof(int32), genie_int32_cmp) != NULL)
					continue;
				if (genie_object_visible(vs, entry, object, &tid))
					collector_add(collected, q, &tid, object, found.distances[h]);
			}
			if (collected->counts[q] >= k)
				continue;
			/* short while the search returned all it was asked for: invisible rows took places */
			if (n_found == kprime)
			{
				if (kprime < entry->n_objects)
					short_of_k[still++] = q;
			}
			else if (approximate != NULL)
				ran_out[(*n_ran_out)++] = q;
			CHECK_FOR_INTERRUPTS();
		}
		genie_profile_pop();
		genie_value_rows_free(&found);
		n_short = still;
		kprime = genie_search_wider_k(kprime, entry->n_objects);
	}
	pfree(sub_approximate);
	pfree(short_of_k);
}

void
genie_search_values_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
							const GenieValueBatch *queries, GenieQuery **approximate, int32 k,
							GenieValueRows *first, GenieValueRows *rows, ItemPointerData **tids)
{
	int			nq = queries->n;
	int		   *short_of_k = palloc(sizeof(int) * Max(nq, 1));
	int		   *ran_out = palloc(sizeof(int) * Max(nq, 1));
	int			n_ran_out = 0;
	int32		kprime = genie_search_first_k(k, entry->n_objects);
	RowCollector collected;
	GenieVisibility vs;

	genie_visibility_begin(&vs, entry, heap, snapshot, nq);
	collector_begin(&collected, nq, k, tids);
	for (int i = 0; i < nq; i++)
		short_of_k[i] = i;
	collect_rounds(entry, &vs, queries, approximate, k, kprime, first, &collected, short_of_k, nq,
				   NULL, NULL, ran_out, &n_ran_out);

	/*
	 * LSH: the candidates of these queries ran out before k visible rows;
	 * the rest follow by exact distance, after the candidates, as in the
	 * index scan (so the batch returns what the scan returns).
	 */
	if (n_ran_out > 0)
	{
		int64	   *base = palloc0(sizeof(int64) * Max(nq, 1));
		int32	  **skip = palloc0(sizeof(int32 *) * Max(nq, 1));
		int64		widest = 0;
		int			unused = 0;

		for (int i = 0; i < n_ran_out; i++)
		{
			int			q = ran_out[i];

			base[q] = collected.counts[q];
			skip[q] = collected_sorted(&collected, q, base[q]);
			widest = Max(widest, base[q]);
		}
		kprime = (int32) Min((int64) k + widest, (int64) Max(entry->n_objects, 1));
		collect_rounds(entry, &vs, queries, NULL, k, kprime, NULL, &collected, ran_out, n_ran_out,
					   base, skip, NULL, &unused);
		for (int i = 0; i < n_ran_out; i++)
			pfree(skip[ran_out[i]]);
		pfree(skip);
		pfree(base);
	}
	genie_visibility_end(&vs);
	collector_finish(&collected, nq, rows);
	pfree(short_of_k);
	pfree(ran_out);
}
