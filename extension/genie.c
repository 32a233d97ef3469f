/*-------------------------------------------------------------------------
 *
 * genie.c
 *	  Module entry point: registers the settings (each variable lives with
 *	  the code that reads it) and the reloptions.  Nothing calls into this
 *	  file; it calls down into the others.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include <limits.h>

#include "am/genie_am.h"
#include "profile/genie_explain.h"
#include "profile/genie_profile.h"
#include "search/genie_permutation.h"
#include "search/genie_search_values.h"
#include "service/genie_service.h"
#include "storage/genie_pending.h"
#include "types/documents/genie_document.h"

PG_MODULE_MAGIC;

static const struct config_enum_entry genie_vector_search_options[] = {
	{"exact", GENIE_VECTOR_SEARCH_EXACT, false},
	{"lsh", GENIE_VECTOR_SEARCH_LSH, false},
	{"permutation", GENIE_VECTOR_SEARCH_PERMUTATION, false},
	{NULL, 0, false}
};

static const struct config_enum_entry genie_cluster_list_knn_options[] = {
	{"auto", GENIE_LIST_AUTO, false},
	{"on", GENIE_LIST_ALWAYS, false},
	{"off", GENIE_LIST_NEVER, false},
	{NULL, 0, false}
};

static const struct config_enum_entry genie_text_search_options[] = {
	{"exact", GENIE_TEXT_SEARCH_EXACT, false},
	{"permutation", GENIE_TEXT_SEARCH_PERMUTATION, false},
	{NULL, 0, false}
};

static const struct config_enum_entry genie_bit_search_options[] = {
	{"exact", GENIE_BIT_SEARCH_EXACT, false},
	{"ewh", GENIE_BIT_SEARCH_EWH, false},
	{NULL, 0, false}
};

static const struct config_enum_entry genie_placement_options[] = {
	{"auto", GENIE_PLACEMENT_AUTO, false},
	{"replicate", GENIE_PLACEMENT_REPLICATE, false},
	{"shard", GENIE_PLACEMENT_SHARD, false},
	{NULL, 0, false}
};

static const struct config_enum_entry genie_device_options[] = {
	{"auto", GENIE_DEVICE_SETTING_AUTO, false},
	{"cpu", GENIE_DEVICE_SETTING_CPU, false},
	{"gpu", GENIE_DEVICE_SETTING_GPU, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * Only settings are registered here: CUDA is never touched at load time, so
 * loading genie (even into the postmaster through shared_preload_libraries)
 * never initialises a driver.
 */
void
_PG_init(void)
{
	genie_profile_init();
	genie_explain_init();
	DefineCustomEnumVariable("genie.device",
							 "Selects the engine that runs genie searches.",
							 "auto uses the GPU when one is usable and the CPU otherwise; "
							 "gpu requires a usable GPU; cpu never uses one.",
							 &genie_device_setting,
							 GENIE_DEVICE_SETTING_AUTO,
							 genie_device_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("genie.devices",
							   "The GPUs genie may use: all, none, or CUDA device numbers separated by commas.",
							   "With several, an index is replicated on each or sharded over them "
							   "(genie.placement); the genie service reads it when it starts.",
							   &genie_devices_setting,
							   "all",
							   PGC_SUSET,
							   GUC_LIST_INPUT,
							   genie_devices_check, genie_devices_assign, NULL);

	DefineCustomEnumVariable("genie.placement",
							 "How an index is spread over several GPUs.",
							 "auto replicates an index that fits every GPU's memory budget and shards "
							 "a larger one; replicate puts a whole copy on each GPU (batches split "
							 "among them); shard gives each GPU a contiguous range of the rows, whose "
							 "top-k are merged exactly.",
							 &genie_placement_setting,
							 GENIE_PLACEMENT_AUTO,
							 genie_placement_options,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("genie.device_memory_limit",
							"Device memory genie may use for an index and a batch's search state.",
							"0 lets the engine use most of the free device memory; beyond the "
							"limit the objects are searched in parts (multiple loading).",
							&genie_device_memory_limit_mb,
							0, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);

	/*
	 * For tests of upgrades: the on-disk format builds and merges write.
	 * Format 4 (int32 postings, the metapage of genie 0.3.0) lets a test
	 * make the indexes an older genie left behind and check that this one
	 * reads them and packs them at their next merge.
	 */
	DefineCustomIntVariable("genie.write_format",
							"On-disk format that index builds and merges write (for tests of upgrades).",
							"5 packs the postings; 4 writes them as int32 as genie 0.3.0 did.",
							&genie_write_format,
							GENIE_FORMAT_WRITTEN, GENIE_FORMAT_VERSION_MIN, GENIE_FORMAT_WRITTEN,
							PGC_SUSET, GUC_NOT_IN_SAMPLE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.gpu_set_min_postings",
							"Postings from which a set predicate's lists are matched on the GPU.",
							"With the index on this backend's GPU (genie.device = gpu, or auto once "
							"a search made a GPU engine), @>, && and <@ scans whose keyword lists hold "
							"at least this many postings run on the device; shorter ones on the CPU.",
							&genie_gpu_set_min_postings,
							16384, 0, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.scan_batch_size",
							"Number of results an index scan asks the engine for first.",
							"Fewer when the statement's LIMIT asks for fewer; scans that need more "
							"search again with four times as many.",
							&genie_scan_batch_size,
							100, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.cache_size",
							"Host memory for decoded genie indexes: per backend, or for the whole cluster in the genie service.",
							NULL,
							&genie_cache_size_mb,
							1024, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.pending_list_limit",
							"Size of a genie index's pending list that triggers merging it into the main postings.",
							"The index's pending_list_limit storage parameter overrides it.",
							&genie_pending_list_limit_kb,
							4096, 64, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("genie.cpu_threads",
							"Threads of the CPU engine; 0 uses every core.",
							NULL,
							&genie_cpu_threads,
							0, 0, 1024,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("genie.vector_search",
							 "How genie_vector_ops indexes answer ORDER BY v <-> q and genie_knn.",
							 "exact scans every stored vector and gives exactly what a sequential "
							 "scan gives; lsh re-ranks the genie.lsh_candidates rows of the highest "
							 "LSH match count, permutation the genie.permutation_fraction of the rows "
							 "nearest by the permutation index: both approximate.",
							 &genie_vector_search_setting,
							 GENIE_VECTOR_SEARCH_EXACT,
							 genie_vector_search_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("genie.cluster_list_knn",
							 "Whether exact ORDER BY v <-> q and genie_knn read a vector index's List of Clusters.",
							 "An index built WITH (cluster_list = on): auto reads it on the CPU engine "
							 "when a query took less time through it than by the exact scan lately, "
							 "on reads it on the CPU engine whatever genie.device (the genie service's "
							 "CPU engine with the service preloaded: it holds the list with the "
							 "vectors), off reads every stored vector.  The rows are the same.",
							 &genie_cluster_list_knn,
							 GENIE_LIST_AUTO,
							 genie_cluster_list_knn_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("genie.lsh_candidates",
							"Rows of the highest LSH match count that genie.vector_search = lsh re-ranks by distance.",
							"More candidates give a higher recall and cost more time.",
							&genie_lsh_candidates,
							1000, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomEnumVariable("genie.text_search",
							 "How genie_ngram_ops indexes that store their strings answer edit distances (ORDER BY w <%> q, genie_similar).",
							 "exact computes the distance to every stored string; permutation re-ranks "
							 "the genie.permutation_fraction of the strings nearest by the permutation "
							 "index (WITH (permutants = m)): approximate.",
							 &genie_text_search_setting,
							 GENIE_TEXT_SEARCH_EXACT,
							 genie_text_search_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomRealVariable("genie.permutation_fraction",
							 "Fraction of an index's rows that the permutation index re-ranks by distance.",
							 "A larger fraction gives a higher recall and costs more time; at least k "
							 "rows are re-ranked.",
							 &genie_permutation_fraction,
							 0.05, 0.0, 1.0,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	DefineCustomEnumVariable("genie.bit_search",
							 "How genie_bit_ops indexes answer ORDER BY code <-> q and genie_hamming_knn.",
							 "exact counts the distance to every stored code and gives exactly what a "
							 "sequential scan gives; ewh re-ranks the genie.ewh_candidates rows of the "
							 "highest Error Weighted Hashing score: approximate, on indexes built "
							 "WITH (m = ...).",
							 &genie_bit_search_setting,
							 GENIE_BIT_SEARCH_EXACT,
							 genie_bit_search_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("genie.ewh_candidates",
							"Rows of the highest EWH score that genie.bit_search = ewh re-ranks by Hamming distance.",
							"More candidates give a higher recall and cost more time.",
							&genie_ewh_candidates,
							1000, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("genie.document_weights",
							   "The weights of the weight classes D, C, B and A in a genie_tsvector_ops score.",
							   "Four integers from 0 to 1000 in ts_rank's order, e.g. '{1, 2, 4, 10}'; "
							   "a lexeme counts with the weight of its highest class in the document. "
							   "The default counts every shared word once.",
							   &genie_document_weights_setting,
							   "{1, 1, 1, 1}",
							   PGC_USERSET, 0,
							   genie_document_weights_check, genie_document_weights_assign, NULL);

	genie_init_reloptions();
	genie_service_register();

	MarkGUCPrefixReserved("genie");
}

