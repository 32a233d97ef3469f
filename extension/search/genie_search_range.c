/*-------------------------------------------------------------------------
 *
 * genie_search_range.c
 *	  Range search of an index that stores its values (genie/cluster_list.hpp):
 *	  every object within a radius, in this backend (beside the service too,
 *	  which holds no range search).
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

genie_range_results *
genie_search_range(GenieCachedIndex *entry, const GenieValueBatch *queries, double radius,
				   bool permutation_ok)
{
	const GenieValueSet *set;
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
	 * every object's values, pending ones included (excluded is made with
	 * them); the list of clusters, when the index keeps one, names the main
	 * objects, and the pending ones are read one by one
	 */
	set = genie_cache_values(entry);
	by_permutation = permutation_ok && genie_search_permutation(queries->kind) && genie_cache_permutations(entry);
	found = by_permutation ? range_permutation(entry, set, queries, radius) : range_exact(entry, set, queries, radius);
	genie_explain_search(found->n_queries, 0, found->query_offsets[found->n_queries], found->device, false);
	genie_explain_range(found->distances_computed, found->superclusters_discarded,
						found->clusters_discarded);
	if (by_permutation && genie_explain_analyzing)
	{
		/* found is the C API's memory: freed if the exact search fails (a cancel, a version gone) */
		PG_TRY();
		{
			explain_recall(set, entry, queries, radius, found,
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
