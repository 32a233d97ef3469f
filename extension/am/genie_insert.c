/*-------------------------------------------------------------------------
 *
 * genie_insert.c
 *	  Inserting into a genie index: new rows go to the pending list (like
 *	  GIN's fast update), which scans include and which is merged into the
 *	  main postings by VACUUM or when it outgrows pending_list_limit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "am/genie_am.h"
#include "storage/genie_pending.h"

bool
genie_aminsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			   Relation heapRel, IndexUniqueCheck checkUnique, bool indexUnchanged,
			   IndexInfo *indexInfo)
{
	MemoryContext tmpcxt = AllocSetContextCreate(CurrentMemoryContext,
												 "genie insert temporary context",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(tmpcxt);
	int32	   *keywords = NULL;
	int			n = 0;
	const char *stored = NULL;
	size_t		stored_size = 0;
	Buffer		metabuf;
	bool		merge;
	GenieIndexType type;

	/* the encoding is fixed at build time: n may differ from the reloption now */
	genie_index_type(index, &type);
	if (!isnull[0] && type.info->length_conflict != NULL &&
		type.info->length_conflict(index, values[0]))
		(void) genie_remove_dead_objects(index, heapRel);
	if (!isnull[0])
	{
		keywords = type.info->encode_value(index, &type.encoding, values[0], &n);
		if (type.info->value_bytes_of != NULL)
			stored = type.info->value_bytes_of(values[0], &stored_size);
	}

	GENIE_CONTENT_LOCK_SHARE(index);
	metabuf = ReadBuffer(index, GENIE_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	genie_check_metapage(index, BufferGetPage(metabuf));
	if (!isnull[0] && type.info->insert_prepare != NULL)
		type.info->insert_prepare(index, metabuf, values[0]);
	/* whether the index keeps values was decided at its build */
	if (!GeniePageGetMeta(BufferGetPage(metabuf))->values_stored)
		stored = NULL;
	genie_pending_append(index, metabuf, ht_ctid, isnull[0] ? GENIE_OBJECT_NULL : 0, keywords, n,
						 stored, stored_size);
	merge = GeniePageGetMeta(BufferGetPage(metabuf))->pending_bytes >
		(int64) genie_pending_limit_kb(index) * 1024;
	UnlockReleaseBuffer(metabuf);
	GENIE_CONTENT_UNLOCK_SHARE(index);

	MemoryContextSwitchTo(old);
	MemoryContextDelete(tmpcxt);

	/* merge unless another backend is merging or reading the index right now */
	if (merge)
		genie_merge_pending(index, false);
	return false;
}
