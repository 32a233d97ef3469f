/*-------------------------------------------------------------------------
 *
 * genie_type.c
 *	  Finding an index's type callbacks (see genie_type.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amvalidate.h"
#include "access/genam.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "types/genie_type.h"

/* The type of the index's operator class, from its support function 1. */
const GenieTypeInfo *
genie_opclass_type(Relation index)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GENIE_TYPE_PROC);
	const GenieTypeInfo *info = (const GenieTypeInfo *)
		DatumGetPointer(FunctionCall1(proc, PointerGetDatum(NULL)));

	if (info == NULL)
		elog(ERROR, "genie: support function 1 of index \"%s\" returned no type",
			 RelationGetRelationName(index));
	return info;
}

bool
genie_index_stores_values(Relation index, const GenieTypeInfo *info)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	return info->value_bytes_of != NULL &&
		(info->values_required || opts == NULL || opts->store_strings);
}

void
genie_type_for_build(Relation index, GenieIndexType *type)
{
	memset(type, 0, sizeof(*type));
	type->info = genie_opclass_type(index);
	type->encoding.kind = type->info->encoding;
	type->info->build_encoding(index, &type->encoding);
}

/*
 * The encoding never changes for a relfilenode, and REINDEX or TRUNCATE,
 * which give a new one, invalidate the relcache entry (and rd_amcache with
 * it).
 */
void
genie_index_type(Relation index, GenieIndexType *type)
{
	if (index->rd_amcache == NULL)
	{
		GenieMetaPageData meta;
		GenieIndexType *cached;
		const GenieTypeInfo *info = genie_opclass_type(index);

		genie_read_meta(index, &meta);
		if (meta.encoding.kind != info->encoding)
			ereport(ERROR,
					(errcode(ERRCODE_INDEX_CORRUPTED),
					 errmsg("genie index \"%s\" was built with encoding %d, but its operator class %s reads encoding %d",
							RelationGetRelationName(index), meta.encoding.kind, info->opclass,
							info->encoding),
					 errhint("REINDEX the index.")));
		cached = MemoryContextAlloc(index->rd_indexcxt, sizeof(GenieIndexType));
		cached->encoding = meta.encoding;
		cached->info = info;
		index->rd_amcache = cached;
	}
	*type = *(const GenieIndexType *) index->rd_amcache;
}

bool
genie_type_proc_valid(Oid proc)
{
	return check_amproc_signature(proc, INTERNALOID, true, 1, 1, INTERNALOID);
}
