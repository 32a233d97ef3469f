/*-------------------------------------------------------------------------
 *
 * genie_ngram.c
 *	  Text as ordered n-grams (genie_ngram_ops): the type's callbacks, and
 *	  the text functions: n-gram counts, the edit distance and the
 *	  operators <~> and <%> on text.
 *
 * Text reaches the core as UTF-8, and the core counts code points, so
 * lengths and distances are in characters.  A database in another encoding
 * has its text converted first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "types/genie_ngram.h"
#include "types/genie_type.h"

PG_FUNCTION_INFO_V1(genie_ngram_support);
PG_FUNCTION_INFO_V1(genie_ngram_count_text);
PG_FUNCTION_INFO_V1(genie_negated_ngram_count);
PG_FUNCTION_INFO_V1(genie_ngrams);
PG_FUNCTION_INFO_V1(genie_edit_distance_text);
PG_FUNCTION_INFO_V1(genie_edit_distance_float8);

/*
 * Edit distances are exact; the core polls cancel about every millisecond of
 * work, but one call is still bounded: pairs whose dynamic program would run
 * for more than some seconds are refused.
 */
#define GENIE_EDIT_DISTANCE_MAX_CELLS	((int64) 4000000000)

/* ---- the type's callbacks ---- */

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

static void
ngram_build_encoding(Relation index, GenieEncoding *encoding)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;

	encoding->ngram_n = opts != NULL ? opts->ngram_n : GENIE_NGRAM_DEFAULT_N;
}

static const char *
ngram_value_bytes(Datum value, size_t *size)
{
	return genie_text_utf8(DatumGetTextPP(value), size);
}

static int32 *
ngram_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	int32		length;
	int32		lost;

	return ngram_keywords(DatumGetTextPP(value), encoding->ngram_n, n, &length, &lost);
}

static void
ngram_encode_batch(void *state, const GenieEncoding *encoding, const char *bytes,
				   const int64 *offsets, int count, int32 **keywords, int64 **starts)
{
	int64		bound = genie_ngram_keywords_bound(offsets, count, encoding->ngram_n);
	genie_error err;

	*keywords = palloc_extended(sizeof(int32) * Max(bound, 1), MCXT_ALLOC_HUGE);
	*starts = palloc(sizeof(int64) * (count + 1));
	GENIE_CHECK(genie_ngram_keywords_batch(bytes, offsets, count, encoding->ngram_n, genie_cpu_threads,
										   genie_cancel_requested, NULL, *keywords, *starts, &err),
				&err, "genie n-grams");
}

static void
ngram_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				   Datum value, Oid type, GenieOrderBy *out)
{
	int			n;
	int32	   *keywords;

	memset(out, 0, sizeof(*out));
	if (strategy == GENIE_MATCH_STRATEGY && encoding->ngram_n != GENIE_NGRAM_DEFAULT_N)
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
}

/* text <~> text counts 3-grams: an index of other grams cannot order by it */
static bool
ngram_plan_serves(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				  Datum query, bool query_known)
{
	return strategy != GENIE_MATCH_STRATEGY || encoding->ngram_n == GENIE_NGRAM_DEFAULT_N;
}

static const GenieTypeInfo ngram_type = {
	.encoding = GENIE_ENCODING_NGRAM,
	.name = "ordered n-grams",
	.opclass = "genie_ngram_ops",
	.batch_function = "genie_similar",
	.build_encoding = ngram_build_encoding,
	.value_bytes_of = ngram_value_bytes,
	.encode_value = ngram_encode_value,
	.encode_batch = ngram_encode_batch,
	.encode_query = ngram_encode_query,
	.plan_serves = ngram_plan_serves,
};

/* support function 1 of genie_ngram_ops */
Datum
genie_ngram_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&ngram_type);
}

/* ---- SQL functions ---- */

static int32
check_n(int32 n)
{
	if (n < 2 || n > 8)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n-gram length %d is outside [2, 8]", n)));
	return n;
}

/* Two text arguments as UTF-8, for the functions that compare them. */
typedef struct TextPair
{
	const char *a;
	size_t		a_size;
	const char *b;
	size_t		b_size;
} TextPair;

static TextPair
text_pair_utf8(text *a, text *b)
{
	TextPair	pair;

	pair.a = genie_text_utf8(a, &pair.a_size);
	pair.b = genie_text_utf8(b, &pair.b_size);
	return pair;
}

static int32
ngram_count(text *a, text *b, int32 n)
{
	TextPair	pair = text_pair_utf8(a, b);
	int32		count;
	genie_error err;

	GENIE_CHECK(genie_ngram_count(pair.a, pair.a_size, pair.b, pair.b_size, check_n(n), &count,
								  &err),
				&err, "genie_ngram_count");
	return count;
}

/* genie_ngram_count(a, b, n): |K(a) ∩ K(b)|, what an index of n-grams counts */
Datum
genie_ngram_count_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(ngram_count(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1), PG_GETARG_INT32(2)));
}

/* text <~> text: the negated 3-gram count, so that ascending order is best first */
Datum
genie_negated_ngram_count(PG_FUNCTION_ARGS)
{
	int32		count = ngram_count(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1),
									GENIE_NGRAM_DEFAULT_N);

	PG_RETURN_FLOAT8(count == 0 ? 0.0 : -(float8) count);
}

/* genie_ngrams(t, n): the keywords an index of n-grams stores for t, ascending */
Datum
genie_ngrams(PG_FUNCTION_ARGS)
{
	text	   *value = PG_GETARG_TEXT_PP(0);
	GenieEncoding encoding;
	int			n;
	int32	   *keywords;
	Datum	   *elems;

	encoding.kind = GENIE_ENCODING_NGRAM;
	encoding.ngram_n = (int16) check_n(PG_GETARG_INT32(1));
	keywords = ngram_encode_value(NULL, &encoding, PointerGetDatum(value), &n);
	/* construct_array takes Datums, not the int32 keywords themselves */
	elems = palloc_extended(sizeof(Datum) * Max(n, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < n; i++)
		elems[i] = Int32GetDatum(keywords[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, n, INT4OID, sizeof(int32), true,
										  TYPALIGN_INT));
}

int32
genie_text_edit_distance(text *a, text *b)
{
	TextPair	pair = text_pair_utf8(a, b);
	int32		distance;
	genie_error err;
	genie_engine_options options;

	/* bytes bound characters from above, so this is conservative */
	if ((int64) pair.a_size * (int64) pair.b_size > GENIE_EDIT_DISTANCE_MAX_CELLS &&
		(int64) pg_mbstrlen_with_len(VARDATA_ANY(a), VARSIZE_ANY_EXHDR(a)) *
		(int64) pg_mbstrlen_with_len(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b)) > GENIE_EDIT_DISTANCE_MAX_CELLS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("strings too long for an edit distance"),
				 errdetail("The product of their lengths exceeds %lld characters squared.",
						   (long long) GENIE_EDIT_DISTANCE_MAX_CELLS)));
	memset(&options, 0, sizeof(options));
	options.cancel = genie_cancel_requested;
	GENIE_CHECK(genie_edit_distance(pair.a, pair.a_size, pair.b, pair.b_size, &options, &distance,
									&err),
				&err, "genie_edit_distance");
	return distance;
}

/* genie_edit_distance(a, b): Levenshtein distance in characters, unit costs */
Datum
genie_edit_distance_text(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(genie_text_edit_distance(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}

/* text <%> text: the same distance as float8, the type ordering operators return */
Datum
genie_edit_distance_float8(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8((float8) genie_text_edit_distance(PG_GETARG_TEXT_PP(0), PG_GETARG_TEXT_PP(1)));
}
