/*-------------------------------------------------------------------------
 *
 * genie_pending.h
 *	  The pending list (genie_pending.c): objects inserted since the last
 *	  merge, as GIN's fast update keeps them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GENIE_PENDING_H
#define GENIE_PENDING_H

#include "storage/genie_storage.h"

/* The pending list size in kB that triggers a merge, from the index or genie.pending_list_limit. */
extern int	genie_pending_list_limit_kb;
extern int	genie_pending_limit_kb(Relation index);

/*
 * Appends one object's record to the pending list; the caller holds the
 * content lock in share mode and the metapage buffer exclusively.
 */
extern void genie_pending_append(Relation index, Buffer metabuf, ItemPointer tid, uint16 flags,
								 const int32 *keywords, int n, const char *value,
								 size_t value_size);
/* Reads the committed pending records into content (genie_read_content). */
extern void genie_pending_read(Relation index, const GenieMetaPageData *meta,
							   GenieIndexContent *content);

#endif							/* GENIE_PENDING_H */
