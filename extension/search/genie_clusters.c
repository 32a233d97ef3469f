/*-------------------------------------------------------------------------
 *
 * genie_clusters.c
 *	  The List of Clusters and of Superclusters (seed 004; genie/
 *	  cluster_list.hpp) of an index that stores its values: genie_vector_ops
 *	  (Euclidean distance) and genie_ngram_ops with store_strings (edit
 *	  distance), for range queries (genie_within) and the exact vector kNN
 *	  (genie.cluster_list_knn).
 *
 * Built WITH (cluster_list = on) and the sizes of its clusters
 * (cluster_size, default 256, the paper's) and superclusters
 * (supercluster_clusters, default 16; 0 a plain List of Clusters), and the
 * rule for its centres (cluster_centres: sum, the paper's, or farthest), the
 * index keeps the list of its main objects, as the paper builds it, in a
 * chain of its pages: its stored form, written without WAL at build (the
 * build logs every page) and with full-page GenericXLog images at a merge,
 * which builds the list of the live objects again.  Rows inserted since
 * (pending) are not in the list: a search reads each of them.  The
 * build runs on the CPU engine, on genie.cpu_threads: about n^2 / (2 K N)
 * distances for the superclusters and n K N / 2 inside them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "utils/lsyscache.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "genie_utils.h"
#include "profile/genie_profile.h"
#include "search/genie_cache_values.h"
#include "search/genie_clusters.h"
#include "search/genie_permutation.h"
#include "search/genie_search_device.h"

static GenieValuesKind
kind_of(int16 encoding_kind)
{
	return encoding_kind == GENIE_ENCODING_VECTOR ? GENIE_VALUES_VECTORS : GENIE_VALUES_STRINGS;
}

/* Whether the index asks for a list, checked against what can have one. */
static bool
wants_list(Relation index, int16 encoding_kind, bool values_stored)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	if (opts == NULL || !opts->cluster_list)
		return false;
	genie_check_metric_option("cluster_list", "cluster_list = on", encoding_kind, values_stored);
	return true;
}

/*
 * Lists the n objects of batch whose excluded flag is zero and writes the
 * list's chain into meta's fields (none when no object is listed).
 */
static void
list_and_write(Relation index, const GenieValueBatch *batch, const uint8 *excluded,
			   int32 cluster_size, int32 supercluster_clusters, int32 centres, bool wal,
			   GenieMetaPageData *meta)
{
	GenieValueSet set;
	genie_cluster_list *list = NULL;
	genie_engine_options options;
	genie_error err;
	genie_status status;
	Size		bytes;
	char	   *data;
	GenieChainWriter w;

	meta->cluster_size = cluster_size;
	meta->supercluster_clusters = supercluster_clusters;
	meta->cluster_centres = centres;
	meta->cluster_list_bytes = 0;
	meta->cluster_list.head = meta->cluster_list.tail = InvalidBlockNumber;
	meta->cluster_list.pages = 0;
	if (batch->n == 0)
		return;
	GENIE_CHECK(genie_value_set_create(batch, &set, &err), &err, "genie: list of clusters");
	genie_search_engine_options(GENIE_ENGINE_CPU, genie_cancel_requested, NULL, &options);
	status = genie_value_set_cluster_list(&set, excluded, cluster_size, supercluster_clusters,
										  centres, &options, &list, &err);
	genie_value_set_free(&set);
	if (status != GENIE_OK)
		genie_report_error(&err, "genie: building the list of clusters");
	if (genie_cluster_list_clusters(list) == 0)
	{
		genie_cluster_list_free(list);	/* no object has a value */
		return;
	}
	bytes = genie_cluster_list_stored_size(list);
	data = palloc_extended(bytes, MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (data == NULL)
	{
		genie_cluster_list_free(list);
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory"),
				 errdetail("Failed on a list of clusters of %zu bytes.", bytes)));
	}
	genie_cluster_list_store(list, data);
	genie_cluster_list_free(list);
	genie_chain_writer_init(&w, index, GENIE_PAGE_CLUSTERS, 1, wal);
	genie_chain_writer_append(&w, data, (int64) bytes);
	meta->cluster_list = genie_chain_writer_finish(&w);
	meta->cluster_list_bytes = (int64) bytes;
	pfree(data);
}

void
genie_clusters_build_empty(Relation index, int16 encoding_kind, bool values_stored,
						   GenieMetaPageData *meta)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	if (!wants_list(index, encoding_kind, values_stored))
		return;
	meta->format_version = GENIE_FORMAT_CLUSTERS;
	meta->cluster_size = opts->cluster_size;
	meta->supercluster_clusters = opts->supercluster_clusters;
	meta->cluster_centres = opts->cluster_centres;
}

void
genie_clusters_build(Relation index, int16 encoding_kind, bool values_stored)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	GenieIndexContent content;
	GenieValueBatch batch;
	GenieMetaPageData fields;
	Buffer		metabuf;
	GenieMetaPage meta;
	MemoryContext cxt;
	MemoryContext old;

	if (!wants_list(index, encoding_kind, values_stored))
		return;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "genie cluster list build",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	genie_read_content(index, &content, false);
	genie_read_values(index, &content);
	memset(&fields, 0, sizeof(fields));
	memset(&batch, 0, sizeof(batch));
	if (!(encoding_kind == GENIE_ENCODING_VECTOR && content.vectors.dimensions == 0))
		genie_value_batch_from_content(&content, kind_of(encoding_kind), content.vectors.dimensions,
									   0, content.n_main_objects, &batch);
	list_and_write(index, &batch, genie_content_excluded(&content, 0, content.n_main_objects),
				   opts->cluster_size, opts->supercluster_clusters, opts->cluster_centres, false,
				   &fields);
	MemoryContextSwitchTo(old);

	/* the build's metapage, not WAL-logged yet */
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	meta = GeniePageGetMeta(BufferGetPage(metabuf));
	meta->format_version = GENIE_FORMAT_CLUSTERS;
	meta->cluster_size = fields.cluster_size;
	meta->supercluster_clusters = fields.supercluster_clusters;
	meta->cluster_centres = fields.cluster_centres;
	meta->cluster_list_bytes = fields.cluster_list_bytes;
	meta->cluster_list = fields.cluster_list;
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);
	MemoryContextDelete(cxt);
}

void
genie_clusters_merge(Relation index, const GenieMetaPageData *before,
					 const GenieIndexContent *content, const int32 *new_ids, int32 n_live,
					 GenieMetaPageData *meta, GenieChain *old_chain)
{
	GenieValuesKind kind = kind_of(before->encoding.kind);
	int32	   *live;
	uint8	   *excluded;
	uint8	   *live_excluded;
	GenieValueBatch all;
	GenieValueBatch batch;

	meta->cluster_size = before->cluster_size;
	meta->supercluster_clusters = before->supercluster_clusters;
	meta->cluster_centres = before->cluster_centres;
	meta->cluster_list_bytes = before->cluster_list_bytes;
	meta->cluster_list = before->cluster_list;
	old_chain->head = old_chain->tail = InvalidBlockNumber;
	old_chain->pages = 0;
	if (before->cluster_size == 0)
		return;
	/* the list is built again over the live objects, in their new order */
	*old_chain = before->cluster_list;
	live = palloc_extended(sizeof(int32) * Max(n_live, 1), MCXT_ALLOC_HUGE);
	excluded = genie_content_excluded(content, 0, content->n_objects);
	live_excluded = palloc_extended(Max(n_live, 1), MCXT_ALLOC_HUGE);
	for (int32 id = 0; id < content->n_objects; id++)
		if (new_ids[id] >= 0)
		{
			live[new_ids[id]] = id;
			live_excluded[new_ids[id]] = excluded[id];
		}
	memset(&batch, 0, sizeof(batch));
	if (!(kind == GENIE_VALUES_VECTORS && content->vectors.dimensions == 0))
	{
		genie_value_batch_from_content(content, kind, content->vectors.dimensions, 0,
									   content->n_objects, &all);
		genie_value_batch_select(&all, live, n_live, &batch);
	}
	list_and_write(index, &batch, live_excluded, before->cluster_size, before->supercluster_clusters,
				   before->cluster_centres, true, meta);
	pfree(live);
	pfree(excluded);
	pfree(live_excluded);
}

/* What read_version reads for genie_cache_clusters: the stored form, palloc'd. */
typedef struct ClustersRead
{
	char	   *data;
	int64		bytes;
} ClustersRead;

static void
read_version(Relation index, const GenieMetaPageData *meta, void *arg)
{
	ClustersRead *r = arg;
	int64		count;

	if (meta->cluster_list_bytes <= 0)
		return;
	r->data = genie_chain_read(index, meta->cluster_list, 1, meta->cluster_list_bytes, &count);
	r->bytes = meta->cluster_list_bytes;
	if (count != meta->cluster_list_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("genie index \"%s\" has a corrupt list of clusters",
						RelationGetRelationName(index)),
				 errdetail("Its chain holds %lld bytes, not %lld.", (long long) count,
						   (long long) meta->cluster_list_bytes),
				 errhint("REINDEX the index.")));
}

/* A corrupt list: the error that says so, with what was wrong. */
static void
corrupt_list(GenieCachedIndex *entry, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("genie index \"%s\" has a corrupt list of clusters", get_rel_name(entry->index_oid)),
			 errdetail("%s", detail),
			 errhint("REINDEX the index.")));
}

const genie_cluster_list *
genie_cache_clusters(GenieCachedIndex *entry)
{
	ClustersRead r = {NULL, 0};
	genie_cluster_list *list = NULL;
	genie_error err;

	if (entry->clusters_ready)
		return entry->cluster_list;
	genie_profile_push(GENIE_PHASE_LOAD);
	genie_cache_read_version(entry, read_version, &r);
	if (r.data != NULL)
	{
		if (genie_cluster_list_load(r.data, (size_t) r.bytes, &list, &err) != GENIE_OK)
		{
			/* out of memory is not corruption */
			if (err.status == GENIE_OUT_OF_MEMORY)
				genie_report_error(&err, "genie: loading the list of clusters");
			corrupt_list(entry, err.message);
		}
		if (genie_cluster_list_objects(list) != entry->n_main_objects)
		{
			char	   *detail = psprintf("It names %d objects, the index has %d.",
										  genie_cluster_list_objects(list), entry->n_main_objects);

			genie_cluster_list_free(list);
			corrupt_list(entry, detail);
		}
		entry->cluster_list = list;
		entry->cluster_list_bytes = genie_cluster_list_memory_bytes(list);
		entry->bytes += entry->cluster_list_bytes;
		pfree(r.data);
	}
	entry->clusters_ready = true;
	genie_profile_pop();
	return entry->cluster_list;
}

GenieServiceOutcome
genie_clusters_ship_values(GenieCachedIndex *entry, genie_error *err)
{
	ClustersRead r = {NULL, 0};
	GenieServiceOutcome outcome;

	if (entry->values_kind != GENIE_VALUES_CODES)
	{
		genie_profile_push(GENIE_PHASE_LOAD);
		genie_cache_read_version(entry, read_version, &r);
		genie_profile_pop();
	}
	outcome = genie_cache_ship_values(entry, r.data, r.bytes, err);
	if (r.data != NULL)
		pfree(r.data);
	return outcome;
}

void
genie_clusters_count_bytes(GenieCachedIndex *entry, const genie_cluster_list *list)
{
	Size		now;

	if (list == NULL)
		return;
	now = genie_cluster_list_memory_bytes(list);
	if (now > entry->cluster_list_bytes)
	{
		entry->bytes += now - entry->cluster_list_bytes;
		entry->cluster_list_bytes = now;
	}
}
