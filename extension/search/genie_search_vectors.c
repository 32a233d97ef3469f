/*-------------------------------------------------------------------------
 *
 * genie_search_vectors.c
 *	  The k nearest stored vectors of each query by Euclidean distance, for
 *	  genie_knn and ORDER BY v <-> query on a genie_vector_ops index.
 *
 * Exact (genie.vector_search = exact, the default): one scan of every vector of the
 * entry's version on the engine genie.device asks for, exact: the same rows
 * and distances as a sequential scan ordered by real[] <-> real[] (see
 * genie/vectors.hpp).  With genie preloaded, the genie service holds the
 * main objects' vectors (handed over by the first backend that needs them)
 * and scans them on its GPU, one engine call for the scans of all sessions
 * that arrive together; the backend scans its own pending objects' vectors
 * on the CPU and merges the two by (distance, id), the order of the
 * in-process scan, so both paths give the same rows.  Backends of a
 * preloaded genie never start CUDA: while the service is away they scan on
 * the CPU.
 *
 * LSH (genie.vector_search = lsh, the caller passes the queries' LSH
 * keywords): the genie.lsh_candidates objects of the highest
 * LSH match count (genie_search, through the genie service when it runs)
 * re-ranked by their exact distance in this backend: approximate, as GENIE
 * section IV.
 *
 * genie_search_vectors_visible keeps the rows visible to a snapshot,
 * widening k while invisible rows take places.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "search/genie_search.h"
#include "service/genie_service.h"
#include "genie_utils.h"

int			genie_vector_search_setting = GENIE_VECTOR_SEARCH_EXACT;
int			genie_lsh_candidates = 1000;

/*
 * Moves a C API result (malloc'd) into palloc'd rows; the allocations may
 * not throw before the result is freed.
 */
static void
take_results(genie_vector_results *found, int nq, GenieVectorRows *rows)
{
	int64		n = found->query_offsets[nq];
	int			flags = MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM;

	rows->n_queries = nq;
	rows->offsets = palloc_extended(sizeof(int64) * (nq + 1), flags);
	rows->objects = palloc_extended(sizeof(int32) * Max(n, 1), flags);
	rows->distances = palloc_extended(sizeof(float8) * Max(n, 1), flags);
	if (rows->offsets != NULL && rows->objects != NULL && rows->distances != NULL)
	{
		memcpy(rows->offsets, found->query_offsets, sizeof(int64) * (nq + 1));
		memcpy(rows->objects, found->objects, sizeof(int32) * n);
		memcpy(rows->distances, found->distances, sizeof(float8) * n);
	}
	genie_vector_results_free(found);
	if (rows->offsets == NULL || rows->objects == NULL || rows->distances == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed on a vector search result of %lld rows.", (long long) n)));
}

static genie_status
scan_on(genie_vectors *vectors, genie_engine_kind device, const genie_vector_scan *scan,
		genie_vector_results **found, genie_error *err)
{
	genie_engine_options options;

	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	return genie_vectors_scan(vectors, device, &options, scan, found, err);
}

/* Every vector of the entry, exact, on the engine genie.device asks for. */
static void
scan_exact(GenieCachedIndex *entry, const float *queries, int nq, int32 k, GenieVectorRows *rows)
{
	genie_vectors *vectors = genie_cache_vectors(entry);
	genie_vector_scan scan;
	genie_vector_results *found = NULL;
	genie_engine_kind device;
	genie_error err;
	genie_status status;

	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.queries = queries;
	scan.k = k;
	scan.excluded = entry->excluded;
	if (genie_service_configured())
		device = GENIE_ENGINE_CPU;	/* the service is away */
	else
		device = genie_device_setting == GENIE_DEVICE_SETTING_CPU ? GENIE_ENGINE_CPU
			: genie_device_setting == GENIE_DEVICE_SETTING_GPU ? GENIE_ENGINE_GPU : GENIE_ENGINE_AUTO;
	status = scan_on(vectors, device, &scan, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && genie_device_setting != GENIE_DEVICE_SETTING_GPU)
	{
		ereport(NOTICE,
				(errmsg("genie: the GPU ran out of memory; this vector search runs on the CPU"),
				 errdetail("%s", err.message)));
		status = scan_on(vectors, GENIE_ENGINE_CPU, &scan, &found, &err);
	}
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: vector search");
	take_results(found, nq, rows);
}

/*
 * The LSH mode: each query's top genie.lsh_candidates (at least k) objects
 * by match count, re-ranked by distance.
 */
static void
search_lsh(GenieCachedIndex *entry, const float *queries, GenieQuery **lsh, int nq, int32 k,
		   GenieVectorRows *rows)
{
	int32		candidates = (int32) Min(Max((int64) genie_lsh_candidates, (int64) k),
										 (int64) Max(entry->n_objects, 1));
	GenieQueryBatch batch;
	GenieSearchResult counted;
	genie_vectors *vectors;
	genie_vector_scan scan;
	genie_vector_results *found = NULL;
	genie_error err;

	for (int q = 0; q < nq; q++)
		if (lsh[q] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("genie index \"%s\" has no LSH keywords: it was built with m = 0",
							get_rel_name(entry->index_oid)),
					 errhint("SET genie.vector_search = 'exact', or rebuild the index with m > 0.")));
	genie_query_batch_init(&batch, lsh, nq);
	genie_search(entry, &batch, candidates, &counted);
	/* the re-ranking reads every vector here; the flags of the skipped objects come with them */
	vectors = genie_cache_vectors(entry);
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.queries = queries;
	scan.k = k;
	scan.excluded = entry->excluded;
	scan.candidate_offsets = counted.query_offsets;
	scan.candidates = counted.objects;
	if (scan_on(vectors, GENIE_ENGINE_CPU, &scan, &found, &err) != GENIE_OK)
		genie_report_error(&err, "genie: re-ranking LSH candidates");
	genie_search_free(&counted);
	take_results(found, nq, rows);
}

/* A scan of the main objects' vectors, as genie_search_values_through_service asks it. */
typedef struct VectorsAsk
{
	const float *queries;
	int			nq;
	int32		k;
	GenieServiceVectorRows *rows;
} VectorsAsk;

static GenieServiceOutcome
ask_vectors(GenieCachedIndex *entry, void *arg, genie_engine_kind *engine, bool *device_fallback,
			genie_error *err)
{
	VectorsAsk *a = arg;
	int32		n_excluded;
	const int32 *excluded = genie_cache_excluded_main(entry, &n_excluded);

	return genie_service_scan_vectors(&entry->main_key, entry->index_oid, genie_device_setting,
									  a->queries, a->nq, entry->vector_dim, a->k, excluded,
									  n_excluded, a->rows, engine, device_fallback, err);
}

/*
 * Through the service: the main rows there and the pending rows (on the
 * CPU) here, merged by (distance, id); false when the service is away.
 */
static bool
scan_through_service(GenieCachedIndex *entry, const float *queries, int nq, int32 k,
					 GenieVectorRows *rows)
{
	int32		n_main = entry->n_main_objects;
	int32		n_pending = entry->n_objects - n_main;
	GenieServiceVectorRows main_rows;
	GenieVectorRows pending_rows;
	int64		total = 0;

	memset(&main_rows, 0, sizeof(main_rows));
	memset(&pending_rows, 0, sizeof(pending_rows));
	if (n_main > 0)
	{
		VectorsAsk	ask = {queries, nq, k, &main_rows};

		if (!genie_search_values_through_service(entry, ask_vectors, genie_cache_ship_vectors, &ask,
												 "vectors", "vector search"))
			return false;
	}
	if (n_pending > 0)
	{
		genie_vectors *pending = genie_cache_pending_vectors(entry);
		uint8	   *excluded = palloc(n_pending);
		genie_vector_scan scan;
		genie_vector_results *found = NULL;
		genie_error err;

		for (int32 i = 0; i < n_pending; i++)
			excluded[i] = (entry->objects[n_main + i].flags &
						   (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) != 0;
		memset(&scan, 0, sizeof(scan));
		scan.n_queries = nq;
		scan.queries = queries;
		scan.k = Min(k, n_pending);
		scan.excluded = excluded;
		if (scan_on(pending, GENIE_ENGINE_CPU, &scan, &found, &err) != GENIE_OK)
			genie_report_error(&err, "genie: vector search of the pending rows");
		take_results(found, nq, &pending_rows);
		pfree(excluded);
	}
	for (int q = 0; q < nq; q++)
		total += Min((int64) k, (n_main > 0 ? main_rows.offsets[q + 1] - main_rows.offsets[q] : 0) +
					 (n_pending > 0 ? pending_rows.offsets[q + 1] - pending_rows.offsets[q] : 0));
	rows->n_queries = nq;
	rows->offsets = palloc_extended(sizeof(int64) * (nq + 1), MCXT_ALLOC_HUGE);
	rows->objects = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->distances = palloc_extended(sizeof(float8) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		i = n_main > 0 ? main_rows.offsets[q] : 0;
		int64		i_end = n_main > 0 ? main_rows.offsets[q + 1] : 0;
		int64		j = n_pending > 0 ? pending_rows.offsets[q] : 0;
		int64		j_end = n_pending > 0 ? pending_rows.offsets[q + 1] : 0;
		int64		out = rows->offsets[q];

		while (out - rows->offsets[q] < k && (i < i_end || j < j_end))
		{
			/* pending ids follow every main id: a tie in distance goes to main */
			if (j == j_end || (i < i_end && main_rows.distances[i] <= pending_rows.distances[j]))
			{
				rows->objects[out] = main_rows.objects[i];
				rows->distances[out++] = main_rows.distances[i++];
			}
			else
			{
				rows->objects[out] = n_main + pending_rows.objects[j];
				rows->distances[out++] = pending_rows.distances[j++];
			}
		}
		rows->offsets[q + 1] = out;
	}
	/* a widening round asks again: free this round's rows */
	if (n_main > 0)
	{
		pfree(main_rows.offsets);
		pfree(main_rows.objects);
		pfree(main_rows.distances);
	}
	if (n_pending > 0)
	{
		pfree(pending_rows.offsets);
		pfree(pending_rows.objects);
		pfree(pending_rows.distances);
	}
	return true;
}

void
genie_search_vectors(GenieCachedIndex *entry, const float *queries, GenieQuery **lsh, int nq,
					 int32 k, GenieVectorRows *rows)
{
	if (entry->vector_dim == 0 || entry->n_objects == 0 || nq == 0)
	{
		/* an index without vectors: no rows */
		rows->n_queries = nq;
		rows->offsets = palloc0(sizeof(int64) * (nq + 1));
		rows->objects = palloc(sizeof(int32));
		rows->distances = palloc(sizeof(float8));
		return;
	}
	if (lsh != NULL)
		search_lsh(entry, queries, lsh, nq, k, rows);
	else if (!genie_service_configured() || !scan_through_service(entry, queries, nq, k, rows))
		scan_exact(entry, queries, nq, k, rows);
}

void
genie_search_vectors_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
							 const float *queries, GenieQuery **lsh, int nq, int32 k,
							 GenieVectorRows *rows, ItemPointerData **tids)
{
	int			dim = entry->vector_dim;
	int		   *short_of_k = palloc(sizeof(int) * Max(nq, 1));
	int			n_short = nq;
	int32		kprime = (int32) Min((int64) k, (int64) Max(entry->n_objects, 1));
	float	   *sub_queries = NULL;	/* made when a widening round needs it */
	GenieQuery **sub_lsh = palloc0(sizeof(GenieQuery *) * Max(nq, 1));
	GenieRowCollector collected;
	GenieVisibility vs;

	genie_visibility_begin(&vs, entry, heap, snapshot, nq);
	genie_rows_begin(&collected, nq, k, sizeof(float8), tids);
	for (int i = 0; i < nq; i++)
		short_of_k[i] = i;
	while (n_short > 0)
	{
		GenieVectorRows found;
		int			still = 0;

		/* the queries still short of k visible rows, as one batch (at first all of them) */
		if (n_short < nq)
		{
			if (sub_queries == NULL)
				sub_queries = palloc_extended(sizeof(float) * (Size) nq * Max(dim, 1), MCXT_ALLOC_HUGE);
			for (int i = 0; i < n_short; i++)
			{
				memcpy(sub_queries + (Size) i * dim, queries + (Size) short_of_k[i] * dim,
					   sizeof(float) * dim);
				if (lsh != NULL)
					sub_lsh[i] = lsh[short_of_k[i]];
			}
		}
		genie_search_vectors(entry, n_short < nq ? sub_queries : queries,
							 lsh == NULL ? NULL : n_short < nq ? sub_lsh : lsh, n_short, kprime, &found);
		for (int i = 0; i < n_short; i++)
		{
			int			q = short_of_k[i];

			collected.counts[q] = 0;
			for (int64 h = found.offsets[i]; h < found.offsets[i + 1] && collected.counts[q] < k; h++)
			{
				ItemPointerData tid;

				if (genie_object_visible(&vs, entry, found.objects[h], &tid))
					genie_rows_add(&collected, q, &tid, found.objects[h], &found.distances[h]);
			}
			/* short while the search returned all it was asked for: invisible rows took places */
			if (collected.counts[q] < k && found.offsets[i + 1] - found.offsets[i] == kprime &&
				kprime < entry->n_objects)
				short_of_k[still++] = q;
			CHECK_FOR_INTERRUPTS();
		}
		n_short = still;
		kprime = genie_search_wider_k(kprime, entry->n_objects);
	}
	genie_visibility_end(&vs);

	rows->n_queries = nq;
	genie_rows_finish(&collected, nq, &rows->offsets, &rows->objects, (void **) &rows->distances);
}
