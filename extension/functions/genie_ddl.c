/*-------------------------------------------------------------------------
 *
 * genie_ddl.c
 *	  Keeps the attribute list of row indexes in step with ALTER TABLE.
 *
 * A row index (genie_row_ops) keeps its attributes by number in the
 * metapage, so queries go on working when a column is renamed or dropped;
 * but its `attributes` storage parameter names them, and REINDEX, VACUUM
 * FULL and pg_dump read that.  An event trigger at the end of every ALTER
 * TABLE (genie_alter_table_end, installed with the extension) rewrites the
 * parameter of each row index of the altered tables from the attribute
 * numbers it was built with: a renamed column under its new name, a dropped
 * one left out (its keywords stay in the index, unreachable by new queries,
 * until REINDEX).  Dropping the last attribute of an index is refused.  An
 * index whose parameter was changed since its build (a REINDEX pending) is
 * left alone: its list no longer describes what it holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_attribute.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "types/rows/genie_row_build.h"
#include "types/rows/genie_row_dictionary.h"

PG_FUNCTION_INFO_V1(genie_alter_table_end);

/*
 * The attribute list the index should have now, or NULL when it needs no
 * change or describes something else than the build.
 */
static char *
current_attribute_list(Relation heap, Relation index, const char *list)
{
	GenieRowAttributeSpec specs[GENIE_ROW_MAX_ATTRIBUTES];
	AttrNumber	resolved[GENIE_ROW_MAX_ATTRIBUTES];
	int			live[GENIE_ROW_MAX_ATTRIBUTES];
	const char *error = NULL;
	int			n = genie_row_parse_attributes(list, specs, GENIE_ROW_MAX_ATTRIBUTES, &error);
	GenieRowSchema schema;
	TupleDesc	desc = RelationGetDescr(heap);
	StringInfoData out;
	bool		changed = false;
	int			n_live = 0;
	int			n_unresolved = 0;
	int			kept = 0;

	if (n <= 0)
		return NULL;
	genie_row_schema(index, &schema);
	/* the built slots whose column exists now, in order */
	for (int slot = 0; slot < schema.n_attributes; slot++)
	{
		AttrNumber attnum = schema.attributes[slot].attnum;

		if (attnum >= 1 && attnum <= desc->natts && !TupleDescAttr(desc, attnum - 1)->attisdropped)
			live[n_live++] = slot;
	}
	for (int i = 0; i < n; i++)
	{
		resolved[i] = get_attnum(RelationGetRelid(heap), specs[i].name);
		if (resolved[i] == InvalidAttrNumber)
			n_unresolved++;
	}

	/*
	 * The list names the built slots in order, less those whose column an
	 * earlier DROP COLUMN removed.  RENAME COLUMN comes alone in its command:
	 * then the list pairs with the live slots one to one, and a name that
	 * no longer resolves is the renamed column.  A command that drops
	 * columns renames none: the names that no longer resolve are the
	 * dropped ones.  Anything else means the list was changed since the
	 * build, and it is left alone.
	 */
	initStringInfo(&out);
	if (n == n_live)
	{
		for (int i = 0; i < n; i++)
		{
			AttrNumber attnum = schema.attributes[live[i]].attnum;
			const char *name = NameStr(TupleDescAttr(desc, attnum - 1)->attname);

			if (resolved[i] != InvalidAttrNumber && resolved[i] != attnum)
				return NULL;
			if (strcmp(name, specs[i].name) != 0)
				changed = true;
			appendStringInfo(&out, "%s%s", kept++ > 0 ? ", " : "", quote_identifier(name));
			if (specs[i].lo != NULL)
				appendStringInfo(&out, " %s..%s", specs[i].lo, specs[i].hi);
		}
	}
	else if (n - n_unresolved == n_live)
	{
		int			j = 0;

		for (int i = 0; i < n; i++)
		{
			if (resolved[i] == InvalidAttrNumber)
			{
				changed = true; /* dropped by this command */
				continue;
			}
			if (resolved[i] != schema.attributes[live[j]].attnum)
				return NULL;
			appendStringInfo(&out, "%s%s", kept++ > 0 ? ", " : "", quote_identifier(specs[i].name));
			if (specs[i].lo != NULL)
				appendStringInfo(&out, " %s..%s", specs[i].lo, specs[i].hi);
			j++;
		}
	}
	else
		return NULL;
	if (!changed)
		return NULL;
	if (kept == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop every attribute of genie index \"%s\"",
						RelationGetRelationName(index)),
				 errhint("DROP INDEX %s first.",
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(index)),
													RelationGetRelationName(index)))));
	return out.data;
}

/* The row indexes of one table with an attribute list: rewrite it where it changed. */
static void
update_table(Oid relid, Oid genie_am)
{
	Relation	heap = table_open(relid, NoLock);	/* ALTER TABLE holds its lock */
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		GenieOptions *opts = (GenieOptions *) index->rd_options;
		char	   *list = NULL;

		if (index->rd_rel->relam == genie_am && opts != NULL && opts->attributes != 0 &&
			genie_opclass_type(index)->encoding == GENIE_ENCODING_ROW)
			list = current_attribute_list(heap, index, (char *) opts + opts->attributes);
		if (list != NULL)
		{
			char	   *sql = psprintf("ALTER INDEX %s SET (attributes = %s)",
									   quote_qualified_identifier(get_namespace_name(RelationGetNamespace(index)),
																  RelationGetRelationName(index)),
									   quote_literal_cstr(list));

			index_close(index, AccessShareLock);
			if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "genie: could not update the attributes of a row index: %s", sql);
			continue;
		}
		index_close(index, AccessShareLock);
	}
	table_close(heap, NoLock);
}

Datum
genie_alter_table_end(PG_FUNCTION_ARGS)
{
	Oid			genie_am = get_index_am_oid("genie", true);
	Oid		   *tables;
	int			n_tables;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("genie_alter_table_end must be called as an event trigger")));
	if (!OidIsValid(genie_am))
		PG_RETURN_VOID();

	SPI_connect();
	/* qualified: the caller's search_path must not choose what runs here */
	if (SPI_execute("SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands() "
					"WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
					"AND object_type OPERATOR(pg_catalog.=) ANY ('{table,\"table column\"}'::pg_catalog.text[])",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "genie: could not read the commands of ALTER TABLE");
	n_tables = (int) SPI_processed;
	tables = palloc(sizeof(Oid) * Max(n_tables, 1));
	for (int i = 0; i < n_tables; i++)
	{
		bool		isnull;

		tables[i] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	for (int i = 0; i < n_tables; i++)
	{
		ListCell   *lc;

		if (!OidIsValid(tables[i]) || get_rel_relkind(tables[i]) == '\0')
			continue;
		/* ALTER TABLE recursed into the children, which it does not report: they are locked */
		foreach(lc, find_all_inheritors(tables[i], NoLock, NULL))
			update_table(lfirst_oid(lc), genie_am);
	}
	SPI_finish();
	PG_RETURN_VOID();
}
