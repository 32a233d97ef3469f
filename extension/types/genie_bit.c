/*-------------------------------------------------------------------------
 *
 * genie_bit.c
 *	  Binary codes (genie_bit_ops on bit(n) and bit varying): the type's
 *	  callbacks and the distance operator bit <-> bit (genie_hamming_knn,
 *	  the batch function, is in functions/genie_knn.c).
 *
 * A code index stores every row's code, its bit string's bytes as bit(n)
 * keeps them (the values chain and the pending records), which the exact
 * Hamming search reads (search/genie_search_values.c: the CPU engine's
 * popcount scan, or the GPU's).  The codes' length in bits is fixed by the
 * first code (at build, or at the first insert into an index built on an
 * empty table) and kept in the metapage as the schema's dimensions, as a
 * vector index keeps its dimension.
 *
 * Built WITH (m = ...), the index also keeps each code's Error Weighted
 * Hashing keywords (genie/ewh.hpp: one per function, i * 2^h + the h bits
 * function i reads), in the postings like any keyword, and
 * genie.bit_search = ewh answers from them: each function's buckets within
 * e errors weighted alpha_r (approximate_query), the highest scores
 * re-ranked by Hamming distance.  m, h (sample_bits) and the seed are the
 * schema's, fixed at build; e (errors) and the weights are read from the
 * index's options at each query, so ALTER INDEX ... SET changes them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "fmgr.h"
#include "port/pg_bitutils.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/varbit.h"

#include "genie/genie.h"

#include "types/genie_bit.h"
#include "types/genie_type.h"

PG_FUNCTION_INFO_V1(genie_bit_support);
PG_FUNCTION_INFO_V1(genie_hamming_distance_bit);

int32
genie_code_bits(VarBit *code, const char *what)
{
	int32		bits = VARBITLEN(code);

	if (bits < 1 || bits > GENIE_MAX_CODE_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s has %d bits; genie indexes codes of 1 to %d bits", what, bits,
						GENIE_MAX_CODE_BITS),
				 errhint("Store NULL for a row without a code.")));
	return bits;
}

void
genie_code_batch_add(GenieValueBatch *batch, int64 *capacity, VarBit *code, int64 number)
{
	int32		bits = genie_code_bits(code, "a query code");
	Size		words = (Size) genie_code_words(bits);
	uint64	   *rows = unconstify(uint64 *, batch->codes);

	if (batch->n == 0)
		batch->dim = bits;
	else if (bits != batch->dim)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_LENGTH_MISMATCH),
				 errmsg("the query codes have %d and %d bits", batch->dim, bits),
				 errdetail("Query %lld differs from the first.", (long long) number)));
	if ((int64) (batch->n + 1) * (int64) words > *capacity)
	{
		*capacity = Max(*capacity * 2, (int64) (batch->n + 1) * (int64) words);
		rows = rows == NULL ? palloc_extended(sizeof(uint64) * *capacity, MCXT_ALLOC_HUGE)
			: repalloc_huge(rows, sizeof(uint64) * *capacity);
	}
	memset(rows + (Size) batch->n * words, 0, sizeof(uint64) * words);
	memcpy(rows + (Size) batch->n * words, VARBITS(code), VARBITBYTES(code));
	batch->codes = rows;
	batch->n++;
}

static void
check_length(Relation index, int32 expected, int32 got, const char *what)
{
	if (got != expected)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_LENGTH_MISMATCH),
				 errmsg("%s has %d bits, but genie index \"%s\" holds codes of %d bits",
						what, got, RelationGetRelationName(index), expected)));
}

/*
 * An insert's code against the index's length.  The first code fixed it;
 * once the index holds no object at all (its rows deleted or rolled back,
 * and VACUUM has removed them), the next code may fix another: returns true
 * when this one may.
 */
static bool
check_insert_length(Relation index, int32 fixed, int32 n_objects, int32 bits)
{
	if (fixed == 0 || (bits != fixed && n_objects == 0))
		return true;
	if (bits != fixed)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_LENGTH_MISMATCH),
				 errmsg("the code has %d bits, but genie index \"%s\" holds codes of %d bits",
						bits, RelationGetRelationName(index), fixed),
				 errhint("An index takes the length of its first code: use bit(%d), or an index per length (a partial index on length(code) works). Rows of that length whose insert rolled back are cleared by the next insert of another; deleted ones by VACUUM, after which an index left with no row takes the next code's length.",
						 fixed)));
	return false;
}

void
genie_code_check_queries(Relation index, int32 bits)
{
	GenieMetaPageData meta;

	genie_read_meta(index, &meta);
	/* an index without codes yet answers any length with no rows */
	if (meta.vectors.dimensions != 0)
		check_length(index, meta.vectors.dimensions, bits, "the query code");
}

/* ---- Error Weighted Hashing ---- */

#define GENIE_EWH_CACHE 4

/* the functions of the last few schemas this backend used: drawing them costs m x bits steps */
typedef struct EwhCacheEntry
{
	genie_ewh_params params;
	genie_ewh  *ewh;
	uint64		last_used;
} EwhCacheEntry;

static EwhCacheEntry ewh_cache[GENIE_EWH_CACHE];
static uint64 ewh_clock = 0;

/* The EWH functions of a schema for codes of bits bits (h at most bits). */
static genie_ewh *
schema_ewh(const GenieVectorSchema *schema, int32 bits)
{
	EwhCacheEntry *victim = &ewh_cache[0];
	genie_ewh_params params;
	genie_error err;

	memset(&params, 0, sizeof(params));
	params.bits = bits;
	params.functions = schema->functions;
	params.sample_bits = Min(schema->buckets, bits);
	params.seed = schema->seed;
	for (int i = 0; i < GENIE_EWH_CACHE; i++)
	{
		EwhCacheEntry *e = &ewh_cache[i];

		if (e->ewh != NULL && memcmp(&e->params, &params, sizeof(params)) == 0)
		{
			e->last_used = ++ewh_clock;
			return e->ewh;
		}
		if (e->ewh == NULL || (victim->ewh != NULL && e->last_used < victim->last_used))
			victim = e;
	}
	genie_ewh_free(victim->ewh);
	victim->ewh = NULL;
	GENIE_CHECK(genie_ewh_create(&params, &victim->ewh, &err), &err, "genie: EWH functions");
	victim->params = params;
	victim->last_used = ++ewh_clock;
	return victim->ewh;
}

/* A code's bytes as the C API's words (the bytes beyond the code zero), palloc'd. */
static uint64 *
code_words(VarBit *code, int32 bits)
{
	uint64	   *words = palloc0(sizeof(uint64) * genie_code_words(bits));

	memcpy(words, VARBITS(code), VARBITBYTES(code));
	return words;
}

/* The EWH keywords of a code of bits bits: none when the schema has no functions. */
static int32 *
ewh_keywords(const GenieVectorSchema *schema, VarBit *code, int32 bits, int *n)
{
	int32	   *keywords = palloc(sizeof(int32) * Max(schema->functions, 1));
	uint64	   *words;

	*n = 0;
	if (schema->functions == 0)
		return keywords;
	words = code_words(code, bits);
	genie_ewh_keywords(schema_ewh(schema, bits), words, keywords);
	pfree(words);
	*n = schema->functions;
	return keywords;
}

/* The weights of '3,2,1' into out (at most GENIE_EWH_MAX_ERRORS + 1); -1 when malformed. */
static int
parse_weights(const char *value, int32 *out)
{
	return genie_parse_int_list(value, 1, GENIE_QUERY_MAX_WEIGHT, out, GENIE_EWH_MAX_ERRORS + 1);
}

void
genie_validate_ewh_weights(const char *value)
{
	int32		w[GENIE_EWH_MAX_ERRORS + 1];

	if (value != NULL && parse_weights(value, w) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for genie parameter \"weights\": \"%s\"", value),
				 errdetail("Give 1 to %d integers from 1 to %d separated by commas, alpha_0 first, as '3,2,1'.",
						   GENIE_EWH_MAX_ERRORS + 1, GENIE_QUERY_MAX_WEIGHT)));
}

/*
 * The errors and weights a query of an index with h-bit functions asks,
 * from its options: e no more than h (a function has no value beyond h
 * errors); the weights given, which must be one per error count, or e + 1
 * - r.
 */
static int
ewh_query_settings(Relation index, int32 h, int32 *weights)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	int			errors = opts != NULL ? opts->errors : GENIE_EWH_DEFAULT_ERRORS;
	const char *given = opts != NULL && opts->weights != 0 ? (const char *) opts + opts->weights : NULL;

	errors = Min(errors, h);
	if (given != NULL)
	{
		int			n = parse_weights(given, weights);

		if (n < errors + 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genie index \"%s\" has %d EWH weights for %d errors",
							RelationGetRelationName(index), Max(n, 0), errors),
					 errhint("Give one weight per error count 0 to %d: ALTER INDEX %s SET (weights = '...'), or RESET (weights) for e + 1 - r.",
							 errors, RelationGetRelationName(index))));
		return errors;
	}
	for (int r = 0; r <= errors; r++)
		weights[r] = errors + 1 - r;
	return errors;
}

static int32
binomial(int32 n, int32 r)
{
	int64		c = 1;

	for (int32 i = 1; i <= r; i++)
		c = c * (n - r + i) / i;
	return (int32) c;
}

/*
 * The EWH query of code q of queries: for each function, one item per
 * error count r <= e holding the C(h, r) buckets at r errors from the
 * query's own, of weight alpha_r; NULL when the index has no EWH keywords.
 */
static GenieQuery *
code_approximate_query(Relation index, const GenieValueBatch *queries, int q)
{
	GenieMetaPageData meta;
	GenieVectorSchema *schema = &meta.vectors;
	int32		bits = queries->dim;
	int32		weights[GENIE_EWH_MAX_ERRORS + 1];
	int32		h;
	int			errors;
	genie_ewh  *ewh;
	int32	   *keywords;
	int64		at = 0;
	GenieQueryBuilder b;
	GenieQuery *query;

	genie_read_meta(index, &meta);
	if (schema->functions == 0 || schema->dimensions == 0)
		return NULL;
	check_length(index, schema->dimensions, bits, "the query code");
	h = Min(schema->buckets, bits);
	errors = ewh_query_settings(index, h, weights);
	ewh = schema_ewh(schema, bits);
	keywords = palloc(sizeof(int32) * genie_ewh_query_buckets(ewh, errors));
	genie_ewh_query_keywords(ewh, queries->codes + (Size) q * genie_code_words(bits), errors,
							 keywords);
	genie_query_builder_init(&b);
	/* thousands of buckets a query: the limits of a typed genie_query are not this query's */
	b.limited = false;
	for (int32 i = 0; i < schema->functions; i++)
		for (int r = 0; r <= errors; r++)
		{
			int32		count = binomial(h, r);

			genie_query_builder_begin_item(&b, weights[r]);
			for (int32 j = 0; j < count; j++, at++)
				genie_query_builder_add_range(&b, keywords[at], keywords[at]);
		}
	query = genie_query_builder_finish(&b);
	/* a batch builds thousands of these in one context */
	pfree(b.items);
	pfree(b.ranges);
	pfree(keywords);
	return query;
}

/* ---- building ---- */

typedef struct CodeBuild
{
	Relation	index;
	int32		bits;			/* the first code's */
	GenieVectorSchema schema;	/* the EWH parameters */
} CodeBuild;

static void
code_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* nothing beyond the kind: the length comes with the first code */
}

static void *
code_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	CodeBuild  *b = palloc0(sizeof(CodeBuild));
	GenieVectorSchema *s = &b->schema;

	b->index = index;
	s->functions = opts != NULL ? Max(opts->functions, 0) : 0;
	s->buckets = opts != NULL ? opts->sample_bits : GENIE_EWH_DEFAULT_SAMPLE_BITS;
	s->seed = opts != NULL ? (uint64) opts->seed : 0;
	/* keywords i * 2^h + value stay within int32 */
	if (((int64) s->functions << s->buckets) - 1 > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genie_bit_ops: m * 2^sample_bits must be at most 2^31"),
				 errdetail("m is %d and sample_bits %d.", s->functions, s->buckets),
				 errhint("Use at most %d functions of %d bits.",
						 (int) ((INT64CONST(1) << 31) >> s->buckets), s->buckets)));
	return b;
}

static int32 *
code_build_value(void *state, Datum value, int *n)
{
	CodeBuild  *b = (CodeBuild *) state;
	int32		bits = genie_code_bits(DatumGetVarBitP(value), "a code of the table");

	if (b->bits == 0)
		b->bits = bits;
	check_length(b->index, b->bits, bits, "a code of the table");
	return ewh_keywords(&b->schema, DatumGetVarBitP(value), bits, n);
}

static void
code_build_finish(void *state, GenieMetaPageData *meta)
{
	CodeBuild  *b = (CodeBuild *) state;

	meta->vectors = b->schema;
	meta->vectors.dimensions = b->bits;
}

/* ---- the other callbacks ---- */

static const char *
code_value_bytes(Datum value, size_t *size)
{
	VarBit	   *code = DatumGetVarBitP(value);

	(void) genie_code_bits(code, "an indexed code");
	*size = VARBITBYTES(code);
	return (const char *) VARBITS(code);
}

static bool
code_length_conflict(Relation index, Datum value)
{
	GenieMetaPageData meta;
	int32		bits = genie_code_bits(DatumGetVarBitP(value), "an indexed code");

	genie_read_meta(index, &meta);
	return meta.vectors.dimensions != 0 && bits != meta.vectors.dimensions && meta.n_objects > 0;
}

static int32 *
code_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	GenieMetaPageData meta;
	VarBit	   *code = DatumGetVarBitP(value);
	int32		bits = genie_code_bits(code, "an indexed code");

	genie_read_meta(index, &meta);
	/* an index built on an empty table takes the first code's length (insert_prepare) */
	(void) check_insert_length(index, meta.vectors.dimensions, meta.n_objects, bits);
	return ewh_keywords(&meta.vectors, code, bits, n);
}

static void
code_insert_prepare(Relation index, Buffer metabuf, Datum value)
{
	GenieMetaPage meta = GeniePageGetMeta(BufferGetPage(metabuf));
	int32		bits = genie_code_bits(DatumGetVarBitP(value), "an indexed code");

	/* another backend may have set it (or added objects) since encode_value read it */
	if (!check_insert_length(index, meta->vectors.dimensions, meta->n_objects, bits) ||
		meta->vectors.dimensions == bits)
		return;
	{
		GenericXLogState *state = GenericXLogStart(index);
		GenieMetaPage m = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));

		m->vectors.dimensions = bits;
		m->stamp++;
		GenericXLogFinish(state);
	}
}

static void
code_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
				  Datum value, Oid type, GenieOrderBy *out)
{
	VarBit	   *query = DatumGetVarBitP(value);
	int32		bits = genie_code_bits(query, "the query code");

	memset(out, 0, sizeof(*out));
	genie_code_check_queries(index, bits);
	out->code = palloc0(sizeof(uint64) * genie_code_words(bits));
	memcpy(out->code, VARBITS(query), VARBITBYTES(query));
	out->code_bits = bits;
}

static const GenieTypeInfo code_type = {
	.encoding = GENIE_ENCODING_CODE,
	.name = "codes",
	.opclass = "genie_bit_ops",
	.batch_function = "genie_hamming_knn",
	.build_encoding = code_build_encoding,
	.build_begin = code_build_begin,
	.build_value = code_build_value,
	.build_finish = code_build_finish,
	.value_bytes_of = code_value_bytes,
	.values_required = true,
	.encode_value = code_encode_value,
	.insert_prepare = code_insert_prepare,
	.length_conflict = code_length_conflict,
	.encode_query = code_encode_query,
	.approximate_query = code_approximate_query,
};

/* support function 1 of genie_bit_ops */
Datum
genie_bit_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&code_type);
}

/* ---- SQL functions ---- */

/*
 * bit <-> bit: the Hamming distance, bit_count(a # b), as float8 like every
 * genie distance.  Codes of different lengths have none (as a # b has none).
 */
Datum
genie_hamming_distance_bit(PG_FUNCTION_ARGS)
{
	VarBit	   *a = PG_GETARG_VARBIT_P(0);
	VarBit	   *b = PG_GETARG_VARBIT_P(1);
	const uint8 *pa = VARBITS(a);
	const uint8 *pb = VARBITS(b);
	int64		distance = 0;
	Size		bytes = VARBITBYTES(a);
	Size		i = 0;

	if (VARBITLEN(a) != VARBITLEN(b))
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_LENGTH_MISMATCH),
				 errmsg("codes of %d and %d bits have no Hamming distance", VARBITLEN(a),
						VARBITLEN(b))));
	/* a word at a time (the padding bits are zero in both), then the bytes left */
	for (; i + 8 <= bytes; i += 8)
	{
		uint64		x,
					y;

		memcpy(&x, pa + i, 8);
		memcpy(&y, pb + i, 8);
		distance += pg_popcount64(x ^ y);
	}
	for (; i < bytes; i++)
		distance += pg_number_of_ones[pa[i] ^ pb[i]];
	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	PG_RETURN_FLOAT8((float8) distance);
}
