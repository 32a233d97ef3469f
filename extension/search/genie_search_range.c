/*-------------------------------------------------------------------------
 *
 * genie_search_range.c
 *	  Range search of an index that stores its values (genie/cluster_list.hpp):
 *	  every object within a radius.  With the genie service, an index has
 *	  its main objects' values searched there (on its engine, through the
 *	  index's List of Clusters when it keeps one: the service holds it with
 *	  the values) and the pending ones in this backend; while the service
 *	  is away, in this backend.
 *
 * Both metrics run on the engine genie.device asks for.  On the GPU, for
 * vectors the CPU walks the index's List of Clusters (its centres, the
 * paper's discarding) and the device reads the members left; for strings
 * the device reads each query's length window whole, not the list.  Without
 * a list every stored value is read; pending rows always are.  genie_within
 * under genie.vector_search / genie.text_search = permutation reads only the
 * permutation index's candidates (chosen on genie.device's engine):
 * approximate, every distance true.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/lsyscache.h"

#include "profile/genie_explain.h"
#include "profile/genie_profile.h"
#include "search/genie_cache_values.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "search/genie_search.h"
#include "search/genie_search_device.h"
#include "search/genie_search_range.h"
#include "search/genie_search_values.h"
#include "service/genie_service_client.h"
#include "service/genie_service_scan.h"

/* The exact search of every query on the CPU engine (through the list when there is one). */
static genie_status
cpu_within(GenieCachedIndex *entry, const GenieValueSet *set, const GenieValueBatch *queries, double radius,
		   const genie_cluster_list *list, genie_range_results **found, genie_error *err)
{
	genie_engine_options options;

	genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
	return genie_value_set_within(set, GENIE_ENGINE_CPU, &options, queries, radius, entry->excluded, list,
								  NULL, NULL, found, err);
}

/*
 * EXPLAIN (ANALYZE) of a search through the permutation index: the exact
 * search of the same queries (its time left out of the phases), every one
 * of whose rows the permutation index's found, or missed.
 */
static void
explain_recall(const GenieValueSet *set, GenieCachedIndex *entry, const GenieValueBatch *queries,
			   double radius, const genie_range_results *found, int64 candidates)
{
	/* loaded first: reading the list may fail, and is a load the profile shows */
	const genie_cluster_list *list = genie_cache_clusters(entry);
	bool		profiling = genie_profile_enabled;
	genie_range_results *exact = NULL;
	genie_error err;
	genie_status status;

	genie_profile_enabled = false;
	PG_TRY();
	{
		status = cpu_within(entry, set, queries, radius, list, &exact, &err);
		if (status != GENIE_OK)
			genie_report_error(&err, "genie: exact range search for EXPLAIN");
	}
	PG_FINALLY();
	{
		genie_profile_enabled = profiling;
	}
	PG_END_TRY();
	genie_clusters_count_bytes(entry, list);
	/* every row found is within the radius: the hits are the rows found */
	genie_explain_permutation(candidates, found->query_offsets[found->n_queries],
							  exact->query_offsets[exact->n_queries]);
	genie_range_results_free(exact);
}

/*
 * The permutation index: each query's genie.permutation_fraction of the
 * objects by footrule, those within the radius by their true distance.
 */
static genie_range_results *
range_permutation(GenieCachedIndex *entry, const GenieValueSet *set, const GenieValueBatch *queries,
				  double radius)
{
	genie_permutation_candidates *chosen =
		genie_permutation_choose(entry, queries, genie_permutation_candidate_count(entry, 1));
	genie_engine_options options;
	genie_range_results *found = NULL;
	genie_error err;
	genie_status status;

	genie_profile_push(GENIE_PHASE_ENGINE);
	genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
	status = genie_value_set_within(set, GENIE_ENGINE_CPU, &options, queries, radius, entry->excluded, NULL,
									chosen->query_offsets, chosen->objects, &found, &err);
	genie_permutation_candidates_free(chosen);
	genie_profile_pop();
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: range search of permutation candidates");
	return found;
}

/* Every object within the radius: through the list of clusters when the index keeps one. */
static genie_range_results *
range_exact(GenieCachedIndex *entry, const GenieValueSet *set, const GenieValueBatch *queries, double radius)
{
	genie_engine_kind device = genie_search_device();
	const genie_cluster_list *list = genie_cache_clusters(entry);
	genie_engine_options options;
	genie_range_results *found = NULL;
	genie_error err;
	genie_status status;

	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	genie_profile_push(GENIE_PHASE_ENGINE);
	status = genie_value_set_within(set, device, &options, queries, radius, entry->excluded, list, NULL,
									NULL, &found, &err);
	if (genie_search_cpu_fallback(status, &err, "range search"))
		status = cpu_within(entry, set, queries, radius, list, &found, &err);
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: range search");
	genie_profile_pop();
	genie_clusters_count_bytes(entry, list);
	genie_search_ran_on(found->device, false);
	return found;
}

/* A range search of the main objects' values, as genie_search_through_service asks it. */
typedef struct WithinAsk
{
	const GenieValueBatch *queries;
	double		radius;
	GenieValueRows *rows;
	GenieWithinCounts counts;
	bool		too_large;		/* past what the service hands back */
	genie_engine_kind engine;
} WithinAsk;

static GenieServiceOutcome
ask_within(GenieCachedIndex *entry, void *arg, genie_engine_kind *engine, bool *device_fallback,
		   genie_error *err)
{
	WithinAsk  *a = arg;
	int32		n_excluded;
	const int32 *excluded = genie_cache_excluded_main(entry, &n_excluded);
	GenieServiceOutcome outcome;

	outcome = genie_service_within(&entry->main_key, entry->index_oid, genie_device_setting, a->queries,
								   a->radius, excluded, n_excluded, a->rows, &a->counts, &a->too_large,
								   engine, device_fallback, err);
	if (outcome == GENIE_SERVICE_OK && !a->too_large)
		a->engine = *engine;
	else
		genie_value_rows_free(a->rows); /* a part may have come back before the rest failed */
	return outcome;
}

/* The pending objects within the radius (ids local to the pending list), on this backend's CPU. */
static genie_range_results *
within_pending(GenieCachedIndex *entry, const GenieValueBatch *queries, double radius)
{
	uint8	   *excluded = genie_cache_excluded_pending(entry);
	genie_engine_options options;
	genie_range_results *found = NULL;
	genie_error err;
	genie_status status;

	genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
	genie_profile_push(GENIE_PHASE_PENDING);
	status = genie_value_set_within(genie_cache_pending_values(entry), GENIE_ENGINE_CPU, &options, queries,
									radius, excluded, NULL, NULL, NULL, &found, &err);
	genie_profile_pop();
	pfree(excluded);
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: range search of pending rows");
	return found;
}

/*
 * Through the genie service: the main objects there (the service's engine,
 * through the list when the index keeps one) and the pending ones here on
 * the CPU, merged by (distance, object) per query, as the in-process search
 * orders them (every pending id follows every main one).  The result is
 * malloc'd as the C API's (genie_range_results_free); NULL when the
 * service is away or the answer is past what it hands back (64 MB: 5.6M
 * rows).
 */
static pg_noinline genie_range_results *
range_through_service(GenieCachedIndex *entry, const GenieValueBatch *queries, double radius)
{
	int			nq = queries->n;
	int32		n_main = entry->n_main_objects;
	GenieValueRows main_rows;
	WithinAsk	ask = {queries, radius, &main_rows, {0, 0, 0}, false, GENIE_ENGINE_CPU};
	genie_range_results *pending = NULL;
	genie_range_results *res;
	int64		total;
	int64		out = 0;

	memset(&main_rows, 0, sizeof(main_rows));
	if (n_main > 0 &&
		(!genie_search_through_service(entry, ask_within, genie_clusters_ship_values, &ask,
									   "the stored values", "range search") || ask.too_large))
		return NULL;			/* away, or an answer past 64 MB: in-process */
	if (entry->n_objects > n_main)
		pending = within_pending(entry, queries, radius);
	total = (n_main > 0 ? main_rows.offsets[nq] : 0) + (pending != NULL ? pending->query_offsets[nq] : 0);
	res = calloc(1, sizeof(genie_range_results));
	if (res != NULL)
	{
		res->query_offsets = malloc(sizeof(int64) * (nq + 1));
		res->objects = malloc(sizeof(int32) * (total + 1));
		res->distances = malloc(sizeof(double) * (total + 1));
	}
	if (res == NULL || res->query_offsets == NULL || res->objects == NULL || res->distances == NULL)
	{
		genie_range_results_free(res);
		genie_range_results_free(pending);
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory for a range search's rows")));
	}
	res->n_queries = nq;
	res->device = ask.engine;
	res->distances_computed = ask.counts.distances_computed +
		(pending != NULL ? pending->distances_computed : 0);
	res->superclusters_discarded = ask.counts.superclusters_discarded;
	res->clusters_discarded = ask.counts.clusters_discarded;
	res->query_offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		i = n_main > 0 ? main_rows.offsets[q] : 0;
		int64		i_end = n_main > 0 ? main_rows.offsets[q + 1] : 0;
		int64		j = pending != NULL ? pending->query_offsets[q] : 0;
		int64		j_end = pending != NULL ? pending->query_offsets[q + 1] : 0;

		while (i < i_end || j < j_end)
		{
			/* a tie in distance goes to the main object, whose id is the lower */
			if (j == j_end || (i < i_end && main_rows.distances[i] <= pending->distances[j]))
			{
				res->objects[out] = main_rows.objects[i];
				res->distances[out++] = main_rows.distances[i++];
			}
			else
			{
				res->objects[out] = n_main + pending->objects[j];
				res->distances[out++] = pending->distances[j++];
			}
		}
		res->query_offsets[q + 1] = out;
	}
	genie_range_results_free(pending);
	genie_value_rows_free(&main_rows);
	return res;
}

genie_range_results *
genie_search_range(GenieCachedIndex *entry, const GenieValueBatch *queries, double radius,
				   bool permutation_ok)
{
	bool		by_permutation;
	genie_range_results *found;

	if (entry->n_objects == 0 || queries->n == 0 ||
		(queries->kind == GENIE_VALUES_VECTORS && entry->value_dim == 0))
		return NULL;
	if (queries->kind == GENIE_VALUES_VECTORS && queries->dim != entry->value_dim)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the query has %d dimensions, but genie index \"%s\" now holds vectors of %d",
						queries->dim, get_rel_name(entry->index_oid), entry->value_dim),
				 errhint("The index was emptied and took a new length from a concurrent insert.")));
	/*
	 * In-process: every object's values, pending ones included (excluded is
	 * made with them); the list of clusters, when the index keeps one, names
	 * the main objects, and the pending ones are read one by one.
	 */
	by_permutation = permutation_ok && genie_search_permutation(queries->kind) && genie_cache_permutations(entry);
	/*
	 * Through the service, which holds the main objects' values and list:
	 * this backend reads only the pending objects' values.
	 */
	found = !by_permutation && genie_service_configured()
		? range_through_service(entry, queries, radius) : NULL;
	if (found == NULL)
		found = by_permutation ? range_permutation(entry, genie_cache_values(entry), queries, radius)
			: range_exact(entry, genie_cache_values(entry), queries, radius);
	genie_explain_search(found->n_queries, 0, found->query_offsets[found->n_queries], found->device, false,
						 false);
	genie_explain_range(found->distances_computed, found->superclusters_discarded,
						found->clusters_discarded);
	if (by_permutation && genie_explain_analyzing)
	{
		/* found is the C API's memory: freed if the exact search fails (a cancel, a version gone) */
		PG_TRY();
		{
			explain_recall(genie_cache_values(entry), entry, queries, radius, found,
						   (int64) genie_permutation_candidate_count(entry, 1) * queries->n);
		}
		PG_CATCH();
		{
			genie_range_results_free(found);
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	return found;
}
