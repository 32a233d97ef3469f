/*-------------------------------------------------------------------------
 *
 * genie_encoding.c
 *	  How indexed values and ORDER BY arguments become keywords.
 *
 * An operator class's support function 1 returns its encoding; the build
 * stores it (and the gram length of n-gram indexes) in the metapage, and
 * every later insert and scan uses the stored one, so an index never mixes
 * two encodings even after ALTER INDEX ... SET (n = ...).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "genie_am.h"

PG_FUNCTION_INFO_V1(genie_int4_set_encoding);
PG_FUNCTION_INFO_V1(genie_ngram_encoding);


/* support function 1 of genie_int4_ops */
Datum
genie_int4_set_encoding(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GENIE_ENCODING_INT4_SET);
}

/* support function 1 of genie_ngram_ops */
Datum
genie_ngram_encoding(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(GENIE_ENCODING_NGRAM);
}

void
genie_encoding_for_build(Relation index, GenieEncoding *encoding)
{
	FmgrInfo   *proc = index_getprocinfo(index, 1, GENIE_ENCODING_PROC);
	int32		kind = DatumGetInt32(FunctionCall1(proc, PointerGetDatum(NULL)));
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	memset(encoding, 0, sizeof(*encoding));
	switch (kind)
	{
		case GENIE_ENCODING_INT4_SET:
			encoding->kind = GENIE_ENCODING_INT4_SET;
			break;
		case GENIE_ENCODING_NGRAM:
			encoding->kind = GENIE_ENCODING_NGRAM;
			encoding->ngram_n = opts != NULL ? opts->ngram_n : GENIE_NGRAM_DEFAULT_N;
			break;
		case GENIE_ENCODING_ROW:
			encoding->kind = GENIE_ENCODING_ROW;
			break;
		default:
			elog(ERROR, "genie: operator class of index \"%s\" has unknown encoding %d",
				 RelationGetRelationName(index), kind);
	}
}

/*
 * The encoding of a built index, read from its metapage once per relcache
 * entry: it never changes for a relfilenode, and REINDEX or TRUNCATE, which
 * give a new one, invalidate the entry (and rd_amcache with it).
 */
const GenieEncoding *
genie_index_encoding(Relation index)
{
	if (index->rd_amcache == NULL)
	{
		GenieMetaPageData meta;
		GenieEncoding *cached;

		genie_read_meta(index, &meta);
		cached = MemoryContextAlloc(index->rd_indexcxt, sizeof(GenieEncoding));
		*cached = meta.encoding;
		index->rd_amcache = cached;
	}
	return (const GenieEncoding *) index->rd_amcache;
}

const char *
genie_encoding_name(const GenieEncoding *encoding)
{
	switch (encoding->kind)
	{
		case GENIE_ENCODING_INT4_SET:
			return "int4 set";
		case GENIE_ENCODING_NGRAM:
			return "ordered n-grams";
		case GENIE_ENCODING_ROW:
			return "rows";
		default:
			return "unknown";
	}
}

/* The ordered n-gram keywords of a text; *length and *lost as genie_ngram_keywords. */
static int32 *
ngram_keywords(text *value, int32 n, int *count, int32 *length, int32 *lost)
{
	size_t		size;
	const char *utf8 = genie_text_utf8(value, &size);
	int32	   *keywords = palloc_extended(sizeof(int32) * (size + n), MCXT_ALLOC_HUGE);
	int32		n_keywords;
	genie_error err;

	GENIE_CHECK(genie_ngram_keywords(utf8, size, n, keywords, size + n, &n_keywords, length,
									 lost, &err),
				&err, "genie n-grams");
	*count = n_keywords;
	return keywords;
}

int32 *
genie_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	int32		length;
	int32		lost;

	switch (encoding->kind)
	{
		case GENIE_ENCODING_INT4_SET:
			return genie_int4_array_values(DatumGetArrayTypeP(value), "indexed array", n);
		case GENIE_ENCODING_NGRAM:
			return ngram_keywords(DatumGetTextPP(value), encoding->ngram_n, n, &length, &lost);
		case GENIE_ENCODING_ROW:
			return genie_row_keywords(index, value, n);
		default:
			elog(ERROR, "genie: unknown encoding %d", encoding->kind);
	}
	return NULL;				/* keep compiler quiet */
}

void
genie_encode_orderby(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
					 Datum value, Oid type, GenieOrderBy *out)
{
	memset(out, 0, sizeof(*out));
	if (encoding->kind == GENIE_ENCODING_INT4_SET)
	{
		if (type == INT4ARRAYOID)
		{
			int			n;
			int32	   *keywords = genie_int4_array_values(DatumGetArrayTypeP(value), "query", &n);

			out->query = genie_query_from_keywords(keywords, n, false);
		}
		else
			out->query = (GenieQuery *) PG_DETOAST_DATUM_COPY(value);
		return;
	}
	if (encoding->kind == GENIE_ENCODING_NGRAM)
	{
		int			n;
		int32	   *keywords;

		if (strategy == GENIE_NGRAM_MATCH_STRATEGY &&
			encoding->ngram_n != GENIE_NGRAM_DEFAULT_N)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("genie index \"%s\" holds %d-grams, but text <~> text counts %d-grams",
							RelationGetRelationName(index), encoding->ngram_n,
							GENIE_NGRAM_DEFAULT_N),
					 errhint("Order by genie_ngram_count(col, query, %d) DESC, or by col <%%> query.",
							 encoding->ngram_n)));
		keywords = ngram_keywords(DatumGetTextPP(value), encoding->ngram_n, &n,
								  &out->query_length, &out->query_lost);
		out->query = genie_query_from_keywords(keywords, n, false);
		out->edit_distance = strategy == GENIE_NGRAM_EDIT_STRATEGY;
		pfree(keywords);
		return;
	}
	if (encoding->kind == GENIE_ENCODING_ROW)
	{
		out->query = genie_ranges_query(index, genie_ranges_from_datum(value));
		return;
	}
	elog(ERROR, "genie: unknown encoding %d", encoding->kind);
}
