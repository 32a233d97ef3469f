/*-------------------------------------------------------------------------
 *
 * genie_search_strings.c
 *	  The k nearest stored strings of each query by edit distance, for
 *	  genie_similar and ORDER BY text <%> query on an index that stores its
 *	  strings.
 *
 * In-process, one scan of every string of the entry's version on the
 * engine genie.device asks for.  With genie preloaded, the genie service
 * holds the main objects' strings (handed over by the first backend that
 * needs them, like the postings) and scans them on its GPU; the backend
 * scans its own pending objects' strings on the CPU and merges the two in
 * (distance, length, id) order, which is the order of the in-process scan,
 * so both paths give the same rows.  Backends of a preloaded genie never
 * start CUDA: while the service is away they scan on the CPU.
 *
 * genie_search_strings_visible keeps the rows visible to a snapshot,
 * widening k while invisible rows take places.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "search/genie_search.h"
#include "service/genie_service.h"
#include "genie_utils.h"

/* One scan on the given device; the status, *out set when it is GENIE_OK. */
static genie_status
scan_strings(genie_strings *strings, genie_engine_kind device, const genie_string_scan *scan,
			 genie_string_results **out, genie_error *err)
{
	genie_engine_options options;

	genie_search_engine_options(device == GENIE_ENGINE_CPU ? GENIE_ENGINE_CPU : GENIE_ENGINE_GPU,
								genie_cancel_requested, NULL, &options);
	return genie_strings_scan(strings, device, &options, scan, out, err);
}

/* Every string of the entry, in this backend. */
static void
scan_in_process(GenieCachedIndex *entry, const char *query_text, const int64 *query_offsets,
				int nq, int32 k, GenieStringRows *rows)
{
	genie_strings *strings = genie_cache_strings(entry);
	genie_string_scan scan;
	genie_string_results *found = NULL;
	genie_engine_kind device;
	genie_error err;
	genie_status status;
	int64		n;

	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.query_text = query_text;
	scan.query_text_offsets = query_offsets;
	scan.k = k;
	scan.excluded = entry->excluded;

	if (genie_service_configured())
		device = GENIE_ENGINE_CPU;	/* the service is away */
	else
		device = genie_device_setting == GENIE_DEVICE_SETTING_CPU ? GENIE_ENGINE_CPU
			: genie_device_setting == GENIE_DEVICE_SETTING_GPU ? GENIE_ENGINE_GPU : GENIE_ENGINE_AUTO;
	status = scan_strings(strings, device, &scan, &found, &err);
	if (status == GENIE_DEVICE_OUT_OF_MEMORY && genie_device_setting != GENIE_DEVICE_SETTING_GPU)
	{
		ereport(NOTICE,
				(errmsg("genie: the GPU ran out of memory; this edit-distance scan runs on the CPU"),
				 errdetail("%s", err.message)));
		status = scan_strings(strings, GENIE_ENGINE_CPU, &scan, &found, &err);
	}
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: edit-distance scan");

	/* found is malloc'd by the C API: freed also when a palloc fails */
	PG_TRY();
	{
		n = found->query_offsets[nq];
		rows->n_queries = nq;
		rows->offsets = palloc(sizeof(int64) * (nq + 1));
		rows->objects = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
		rows->distances = palloc_extended(sizeof(int32) * Max(n, 1), MCXT_ALLOC_HUGE);
		memcpy(rows->offsets, found->query_offsets, sizeof(int64) * (nq + 1));
		memcpy(rows->objects, found->objects, sizeof(int32) * n);
		memcpy(rows->distances, found->distances, sizeof(int32) * n);
	}
	PG_FINALLY();
	{
		genie_string_results_free(found);
	}
	PG_END_TRY();
}

/* A scan of the main objects' strings, as genie_search_values_through_service asks it. */
typedef struct StringsAsk
{
	const char *query_text;
	const int64 *query_offsets;
	int			nq;
	int32		k;
	GenieServiceStringRows *rows;
} StringsAsk;

static GenieServiceOutcome
ask_strings(GenieCachedIndex *entry, void *arg, genie_engine_kind *engine, bool *device_fallback,
			genie_error *err)
{
	StringsAsk *a = arg;
	int32		n_excluded;
	const int32 *excluded = genie_cache_excluded_main(entry, &n_excluded);

	return genie_service_scan_strings(&entry->main_key, entry->index_oid, genie_device_setting,
									  a->query_text, a->query_offsets, a->nq, a->k, excluded,
									  n_excluded, a->rows, engine, device_fallback, err);
}

/* The pending objects' rows (ids local to the pending list), on the CPU. */
static genie_string_results *
scan_pending(GenieCachedIndex *entry, genie_strings *pending, const char *query_text,
			 const int64 *query_offsets, int nq, int32 k)
{
	int32		n_pending = entry->n_objects - entry->n_main_objects;
	uint8	   *excluded = palloc(n_pending);
	genie_string_scan scan;
	genie_string_results *found = NULL;
	genie_error err;

	for (int32 i = 0; i < n_pending; i++)
		excluded[i] = (entry->objects[entry->n_main_objects + i].flags &
					   (GENIE_OBJECT_DEAD | GENIE_OBJECT_NULL)) != 0;
	memset(&scan, 0, sizeof(scan));
	scan.n_queries = nq;
	scan.query_text = query_text;
	scan.query_text_offsets = query_offsets;
	scan.k = k;
	scan.excluded = excluded;
	if (scan_strings(pending, GENIE_ENGINE_CPU, &scan, &found, &err) != GENIE_OK)
		genie_report_error(&err, "genie: edit-distance scan of the pending rows");
	pfree(excluded);
	return found;
}

/* Merges main_rows and pending's rows (found) by (distance, length, id), k per query. */
static void
merge_rows(GenieCachedIndex *entry, const GenieServiceStringRows *main_rows, genie_strings *pending,
		   const genie_string_results *found, int nq, int32 k, GenieStringRows *rows)
{
	int32		n_main = entry->n_main_objects;
	int64		total = 0;

	for (int q = 0; q < nq; q++)
		total += Min((int64) k, (n_main > 0 ? main_rows->offsets[q + 1] - main_rows->offsets[q] : 0) +
					 (found ? found->query_offsets[q + 1] - found->query_offsets[q] : 0));
	rows->n_queries = nq;
	rows->offsets = palloc(sizeof(int64) * (nq + 1));
	rows->objects = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->distances = palloc_extended(sizeof(int32) * Max(total, 1), MCXT_ALLOC_HUGE);
	rows->offsets[0] = 0;
	for (int q = 0; q < nq; q++)
	{
		int64		i = n_main > 0 ? main_rows->offsets[q] : 0;
		int64		i_end = n_main > 0 ? main_rows->offsets[q + 1] : 0;
		int64		j = found ? found->query_offsets[q] : 0;
		int64		j_end = found ? found->query_offsets[q + 1] : 0;
		int64		out = rows->offsets[q];

		while (out - rows->offsets[q] < k && (i < i_end || j < j_end))
		{
			bool		take_main = j == j_end;

			/* pending ids follow every main id: a tie in distance and length goes to main */
			if (i < i_end && j < j_end)
			{
				int32		dj = found->distances[j];
				int32		lj = genie_strings_length(pending, found->objects[j]);

				take_main = main_rows->distances[i] < dj ||
					(main_rows->distances[i] == dj && main_rows->lengths[i] <= lj);
			}
			if (take_main)
			{
				rows->objects[out] = main_rows->objects[i];
				rows->distances[out++] = main_rows->distances[i++];
			}
			else
			{
				rows->objects[out] = n_main + found->objects[j];
				rows->distances[out++] = found->distances[j++];
			}
		}
		rows->offsets[q + 1] = out;
	}
}

/*
 * Through the service: the main rows there and the pending rows here,
 * merged by (distance, length, id); false when the service is away.
 */
static bool
scan_through_service(GenieCachedIndex *entry, const char *query_text, const int64 *query_offsets,
					 int nq, int32 k, GenieStringRows *rows)
{
	int32		n_main = entry->n_main_objects;
	int32		n_pending = entry->n_objects - n_main;
	GenieServiceStringRows main_rows;
	genie_strings *volatile pending = NULL;
	genie_string_results *volatile found = NULL;

	memset(&main_rows, 0, sizeof(main_rows));
	if (n_main > 0)
	{
		StringsAsk	ask = {query_text, query_offsets, nq, k, &main_rows};

		if (!genie_search_values_through_service(entry, ask_strings, genie_cache_ship_strings, &ask,
												 "strings", "edit-distance scan"))
			return false;
	}
	if (n_pending > 0)
	{
		pending = genie_cache_pending_strings(entry);
		found = scan_pending(entry, pending, query_text, query_offsets, nq, k);
	}
	/* found is malloc'd by the C API: freed also when a palloc fails */
	PG_TRY();
	{
		merge_rows(entry, &main_rows, pending, found, nq, k, rows);
	}
	PG_FINALLY();
	{
		genie_string_results_free(found);
	}
	PG_END_TRY();
	return true;
}

void
genie_search_strings(GenieCachedIndex *entry, const char *query_text, const int64 *query_offsets,
					 int nq, int32 k, GenieStringRows *rows)
{
	if (genie_service_configured() &&
		scan_through_service(entry, query_text, query_offsets, nq, k, rows))
		return;
	scan_in_process(entry, query_text, query_offsets, nq, k, rows);
}

void
genie_search_strings_visible(GenieCachedIndex *entry, Relation heap, Snapshot snapshot,
							 const char *query_text, const int64 *query_offsets, int nq, int32 k,
							 GenieStringRows *rows, ItemPointerData **tids)
{
	int		   *short_of_k = palloc(sizeof(int) * Max(nq, 1));
	int			n_short = nq;
	int32		kprime = (int32) Min((int64) k, (int64) Max(entry->n_objects, 1));
	int64	   *sub_offsets = palloc(sizeof(int64) * (nq + 1));
	GenieRowCollector collected;
	StringInfoData sub_text;
	GenieVisibility vs;

	genie_visibility_begin(&vs, entry, heap, snapshot, nq);
	genie_rows_begin(&collected, nq, k, sizeof(int32), tids);
	for (int i = 0; i < nq; i++)
		short_of_k[i] = i;
	initStringInfo(&sub_text);
	while (n_short > 0)
	{
		GenieStringRows found;
		int			still = 0;

		/* the queries still short of k visible rows, as one batch */
		resetStringInfo(&sub_text);
		sub_offsets[0] = 0;
		for (int i = 0; i < n_short; i++)
		{
			int			q = short_of_k[i];

			appendBinaryStringInfo(&sub_text, query_text + query_offsets[q],
								   (int) (query_offsets[q + 1] - query_offsets[q]));
			sub_offsets[i + 1] = sub_text.len;
		}
		genie_search_strings(entry, sub_text.data, sub_offsets, n_short, kprime, &found);
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
			/* short while the scan returned all it was asked for: invisible rows took places */
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
