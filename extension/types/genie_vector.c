/*-------------------------------------------------------------------------
 *
 * genie_vector.c
 *	  Vectors (genie_vector_ops on real[]): the type's callbacks, the
 *	  distance operator real[] <-> real[] and genie_lsh_functions().
 *
 * A vector index stores every row's vector (its float4 elements, in the
 * values chain and the pending records), which the exact search reads
 * (search/genie_search_values.c), and, unless m = 0, one LSH keyword per hash
 * function, i * buckets + r_i(h_i(v)) (GENIE section IV, genie/lsh.hpp),
 * which the match-count engine counts for genie.vector_search = lsh.  The
 * dimension is fixed by the first vector (at build, or at the first insert
 * into an index built on an empty table) and kept in the metapage with the
 * LSH parameters (GenieVectorSchema): family, m (Equation 9 for epsilon =
 * delta = 0.06 unless given), buckets, width (estimated from a sample of
 * the table unless given) and seed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/generic_xlog.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "genie_utils.h"
#include "types/genie_type.h"
#include "types/genie_vector.h"

PG_FUNCTION_INFO_V1(genie_vector_support);
PG_FUNCTION_INFO_V1(genie_l2_distance_array);
PG_FUNCTION_INFO_V1(genie_lsh_functions);

/* the paper's setting for m: Pr[|c/m - s| <= epsilon] >= 1 - delta */
#define GENIE_LSH_EPSILON	0.06
#define GENIE_LSH_DELTA		0.06
/* vectors the width is estimated from */
#define GENIE_LSH_SAMPLE	1000

/*
 * The most LSH draws (m x dimensions) an index may need.  Each backend that
 * uses an index's LSH keywords (inserts, LSH searches, genie_index_check)
 * draws its functions once, at 60-90 ns and 8 bytes a draw (16 for RBH):
 * at this bound about 1-1.5 s and 128 MB (256 MB), which is why it is not
 * higher.  The default m = 238 reaches it at 70,492 dimensions.
 */
#define GENIE_LSH_MAX_DRAWS	(INT64CONST(1) << 24)

/* ---- LSH functions, cached per backend ---- */

/*
 * Drawing the functions costs milliseconds to a second (m * dim normal
 * draws), so each backend keeps the last few it made, keyed by everything
 * that determines them: an index's schema never changes for a
 * relfilenode, and two indexes with the same schema share theirs.  The
 * entries together hold at most GENIE_LSH_MAX_DRAWS draws, so the cache
 * costs at most what one index at the bound costs.
 */
#define GENIE_LSH_CACHE	8

typedef struct LshCacheEntry
{
	GenieVectorSchema schema;
	genie_lsh  *lsh;
	uint64		last_used;
} LshCacheEntry;

static LshCacheEntry lsh_cache[GENIE_LSH_CACHE];
static uint64 lsh_clock = 0;

static bool
schemas_equal(const GenieVectorSchema *a, const GenieVectorSchema *b)
{
	return a->dimensions == b->dimensions && a->family == b->family &&
		a->functions == b->functions && a->buckets == b->buckets && a->width == b->width &&
		a->seed == b->seed;
}

/* the draws of a schema's functions (RBH draws two numbers a draw) */
static int64
lsh_draws(const GenieVectorSchema *schema)
{
	return (int64) schema->functions * schema->dimensions;
}

/*
 * Refuses the first vector of an index (the one that fixes its dimension)
 * when the index's LSH functions would exceed GENIE_LSH_MAX_DRAWS.
 */
static void
check_lsh_draws(Relation index, int functions, int dim)
{
	if ((int64) functions * dim > GENIE_LSH_MAX_DRAWS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("genie index \"%s\" would need %d LSH functions of %d dimensions, more than the %lld numbers genie draws for an index",
						RelationGetRelationName(index), functions, dim,
						(long long) GENIE_LSH_MAX_DRAWS),
				 errdetail("m x dimensions is at most %lld; the default m is %d.",
						   (long long) GENIE_LSH_MAX_DRAWS,
						   genie_lsh_functions_for(GENIE_LSH_EPSILON, GENIE_LSH_DELTA)),
				 errhint("Create the index WITH (m = %lld) or less, or WITH (m = 0) for exact search only.",
						 (long long) (GENIE_LSH_MAX_DRAWS / dim))));
}

static genie_lsh *
schema_lsh(const GenieVectorSchema *schema)
{
	LshCacheEntry *victim = &lsh_cache[0];
	genie_lsh_params params;
	genie_error err;

	int64		cached_draws = 0;

	for (int i = 0; i < GENIE_LSH_CACHE; i++)
	{
		LshCacheEntry *e = &lsh_cache[i];

		if (e->lsh != NULL && schemas_equal(&e->schema, schema))
		{
			e->last_used = ++lsh_clock;
			return e->lsh;
		}
		if (e->lsh == NULL || (victim->lsh != NULL && e->last_used < victim->last_used))
			victim = e;
		if (e->lsh != NULL)
			cached_draws += lsh_draws(&e->schema);
	}
	/* room for the new draws: the least recently used go first */
	while (cached_draws + lsh_draws(schema) > GENIE_LSH_MAX_DRAWS)
	{
		LshCacheEntry *oldest = NULL;

		for (int i = 0; i < GENIE_LSH_CACHE; i++)
			if (lsh_cache[i].lsh != NULL &&
				(oldest == NULL || lsh_cache[i].last_used < oldest->last_used))
				oldest = &lsh_cache[i];
		if (oldest == NULL)
			break;
		cached_draws -= lsh_draws(&oldest->schema);
		genie_lsh_free(oldest->lsh);
		oldest->lsh = NULL;
		victim = oldest;
	}
	memset(&params, 0, sizeof(params));
	params.family = schema->family;
	params.dim = schema->dimensions;
	params.functions = schema->functions;
	params.buckets = schema->buckets;
	params.width = schema->width;
	params.seed = schema->seed;
	/* the draws' logarithms on the CPU engine's threads (same functions for any count) */
	params.threads = genie_cpu_threads;
	genie_lsh_free(victim->lsh);
	victim->lsh = NULL;
	GENIE_CHECK(genie_lsh_create(&params, genie_cancel_requested, NULL, &victim->lsh, &err),
				&err, "genie: LSH functions");
	victim->schema = *schema;
	victim->last_used = ++lsh_clock;
	return victim->lsh;
}

/* The vector index's schema, from its metapage. */
static void
read_schema(Relation index, GenieVectorSchema *schema)
{
	GenieMetaPageData meta;

	genie_read_meta(index, &meta);
	*schema = meta.vectors;
}

static void
check_dimension(Relation index, int expected, int got, const char *what)
{
	if (got != expected)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s has %d dimensions, but genie index \"%s\" holds vectors of %d",
						what, got, RelationGetRelationName(index), expected)));
}

/*
 * An insert's vector against the index's dimension.  The first vector
 * fixed it; once the index holds no object at all (its rows deleted or
 * rolled back, and VACUUM has removed them), the next vector may fix
 * another: returns true when this one may.
 */
static bool
check_insert_dimension(Relation index, const GenieVectorSchema *schema, int32 n_objects, int dim)
{
	if (schema->dimensions == 0 || (dim != schema->dimensions && n_objects == 0))
		return true;
	if (dim != schema->dimensions)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("the vector has %d dimensions, but genie index \"%s\" holds vectors of %d",
						dim, RelationGetRelationName(index), schema->dimensions),
				 errhint("An index takes the dimension of its first vector. Rows of that dimension whose insert rolled back are cleared by the next insert of another; deleted ones by VACUUM, after which an index left with no row takes the next vector's dimension.")));
	return false;
}

/* The LSH keywords of v (dim elements): none when the schema has no functions. */
static int32 *
lsh_keywords(const GenieVectorSchema *schema, const float *v, int dim, int *n)
{
	GenieVectorSchema s = *schema;
	int32	   *keywords = palloc(sizeof(int32) * Max(s.functions, 1));
	genie_error err;

	*n = 0;
	if (s.functions == 0)
		return keywords;
	s.dimensions = dim;			/* the first vector of an index built empty sets it */
	GENIE_CHECK(genie_lsh_keywords(schema_lsh(&s), v, keywords, &err), &err, "genie: LSH keywords");
	*n = s.functions;
	return keywords;
}

/* A stored or inserted vector's elements; a vector needs at least one. */
static float *
value_vector(Datum value, int *dim)
{
	float	   *v = genie_float4_array_values(DatumGetArrayTypeP(value), "an indexed vector", dim);

	if (*dim == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("an indexed vector must have at least one element"),
				 errhint("Store NULL for a row without a vector.")));
	return v;
}

/* ---- building ---- */

typedef struct VectorBuild
{
	Relation	index;
	GenieVectorSchema schema;
	/* the width estimate's sample (reservoir), while the first scan runs */
	float	   *sample;
	int64		seen;
	uint64		rng;
} VectorBuild;

static void
vector_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* the LSH parameters are the schema's, chosen in vector_build_begin */
}

static uint64
next_random(uint64 *state)
{
	/* splitmix64: a reproducible sample for a given seed */
	uint64		z = (*state += UINT64CONST(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* the first table scan: the dimension and a sample for the width */
static void
sample_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull, bool alive,
				void *state_)
{
	VectorBuild *b = (VectorBuild *) state_;
	int			dim;
	float	   *v;
	int64		slot;

	if (isnull[0])
		return;
	v = value_vector(values[0], &dim);
	if (b->schema.dimensions == 0)
	{
		check_lsh_draws(b->index, b->schema.functions, dim);
		b->schema.dimensions = dim;
		b->sample = MemoryContextAllocHuge(CurrentMemoryContext,
										   sizeof(float) * GENIE_LSH_SAMPLE * (Size) dim);
	}
	check_dimension(b->index, b->schema.dimensions, dim, "a vector of the table");
	slot = b->seen < GENIE_LSH_SAMPLE ? b->seen : (int64) (next_random(&b->rng) % (uint64) (b->seen + 1));
	if (slot < GENIE_LSH_SAMPLE)
		memcpy(b->sample + slot * dim, v, sizeof(float) * dim);
	b->seen++;
}

static void *
vector_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	GenieOptions *opts = (GenieOptions *) index->rd_options;
	VectorBuild *b = palloc0(sizeof(VectorBuild));
	GenieVectorSchema *s = &b->schema;

	b->index = index;
	s->family = opts != NULL ? opts->family : GENIE_LSH_E2LSH;
	s->functions = opts != NULL && opts->functions >= 0 ? opts->functions
		: genie_lsh_functions_for(GENIE_LSH_EPSILON, GENIE_LSH_DELTA);
	s->buckets = opts != NULL ? opts->buckets : GENIE_ROW_DEFAULT_BUCKETS;
	s->width = opts != NULL ? opts->width : 0.0;
	s->seed = opts != NULL ? (uint64) opts->seed : 0;
	if ((int64) s->functions * s->buckets > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genie_vector_ops: m * buckets must be at most %d", PG_INT32_MAX),
				 errdetail("m is %d and buckets %d.", s->functions, s->buckets)));

	/* without a width, one more table scan samples the data for one */
	if (s->functions > 0 && s->width <= 0.0 && scan)
	{
		b->rng = s->seed ^ UINT64CONST(0x5DEECE66D);
		table_index_build_scan(heap, index, indexInfo, true, false, sample_callback, b, NULL);
		if (b->seen >= 2)
		{
			genie_error err;

			GENIE_CHECK(genie_lsh_estimate_width(s->family, b->sample,
												 (int32) Min(b->seen, GENIE_LSH_SAMPLE),
												 s->dimensions, genie_cancel_requested, NULL,
												 &s->width, &err),
						&err, "genie: LSH width");
		}
		if (b->sample != NULL)
			pfree(b->sample);
		b->sample = NULL;
	}
	if (s->functions > 0 && s->width <= 0.0)
	{
		s->width = 1.0;
		ereport(NOTICE,
				(errmsg("genie index \"%s\" has no rows to estimate its LSH width from: it uses width = 1",
						RelationGetRelationName(index)),
				 errhint("Give WITH (width = ...), or REINDEX once the table holds data. Exact searches do not depend on it.")));
	}
	return b;
}

static int32 *
vector_build_value(void *state, Datum value, int *n)
{
	VectorBuild *b = (VectorBuild *) state;
	int			dim;
	float	   *v = value_vector(value, &dim);

	if (b->schema.dimensions == 0)
	{
		check_lsh_draws(b->index, b->schema.functions, dim);
		b->schema.dimensions = dim;
	}
	check_dimension(b->index, b->schema.dimensions, dim, "a vector of the table");
	return lsh_keywords(&b->schema, v, dim, n);
}

/*
 * The LSH keywords of a build's vectors a batch at a time, on every core:
 * the functions x dimensions products were most of an LSH index's build.
 * The dimension checks are vector_build_value's.
 */
static void
vector_encode_batch(void *state, const GenieEncoding *encoding, const char *bytes,
					const int64 *offsets, int count, int32 **keywords, int64 **starts)
{
	VectorBuild *b = (VectorBuild *) state;
	int64		functions;
	GenieVectorSchema s;
	genie_error err;

	for (int i = 0; i < count; i++)
	{
		int			dim = (int) ((offsets[i + 1] - offsets[i]) / (int64) sizeof(float));

		if (b->schema.dimensions == 0)
		{
			check_lsh_draws(b->index, b->schema.functions, dim);
			b->schema.dimensions = dim;
		}
		check_dimension(b->index, b->schema.dimensions, dim, "a vector of the table");
	}
	functions = b->schema.functions;
	*starts = palloc(sizeof(int64) * (count + 1));
	for (int i = 0; i <= count; i++)
		(*starts)[i] = i * functions;
	*keywords = palloc_extended(sizeof(int32) * Max(count * functions, 1), MCXT_ALLOC_HUGE);
	if (count == 0 || functions == 0)
		return;
	s = b->schema;
	GENIE_CHECK(genie_lsh_keywords_batch(schema_lsh(&s), (const float *) bytes, count, genie_cpu_threads,
										 genie_cancel_requested, NULL, *keywords, &err),
				&err, "genie: LSH keywords");
}

/*
 * An index with LSH functions encodes in batches of up to 4M keywords (16
 * MB); an exact one has no keywords to compute.
 */
static int
vector_encode_batch_values(void *state)
{
	int64		functions = ((VectorBuild *) state)->schema.functions;

	return functions == 0 ? 0 : (int) Max((int64) 1, Min((int64) 4 * 1024 * 1024 / functions, (int64) PG_INT32_MAX));
}

static void
vector_build_finish(void *state, GenieMetaPageData *meta)
{
	meta->vectors = ((VectorBuild *) state)->schema;
}

/* ---- the other callbacks ---- */

static const char *
vector_value_bytes(Datum value, size_t *size)
{
	int			dim;
	float	   *v = value_vector(value, &dim);

	*size = sizeof(float) * (size_t) dim;
	return (const char *) v;
}

static int32 *
vector_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	GenieMetaPageData meta;
	int			dim;
	float	   *v = value_vector(value, &dim);

	genie_read_meta(index, &meta);
	/* an index built on an empty table takes the first vector's dimension (insert_prepare) */
	if (check_insert_dimension(index, &meta.vectors, meta.n_objects, dim))
		check_lsh_draws(index, meta.vectors.functions, dim);
	return lsh_keywords(&meta.vectors, v, dim, n);
}

static bool
vector_length_conflict(Relation index, Datum value)
{
	GenieMetaPageData meta;
	int			dim;

	(void) value_vector(value, &dim);
	genie_read_meta(index, &meta);
	return meta.vectors.dimensions != 0 && dim != meta.vectors.dimensions && meta.n_objects > 0;
}

static void
vector_insert_prepare(Relation index, Buffer metabuf, Datum value)
{
	GenieMetaPage meta = GeniePageGetMeta(BufferGetPage(metabuf));
	int			dim;

	(void) value_vector(value, &dim);
	/* another backend may have set it (or added objects) since encode_value read it */
	if (!check_insert_dimension(index, &meta->vectors, meta->n_objects, dim) ||
		meta->vectors.dimensions == dim)
		return;
	{
		GenericXLogState *state = GenericXLogStart(index);
		GenieMetaPage m = GeniePageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));

		m->vectors.dimensions = dim;
		m->stamp++;
		GenericXLogFinish(state);
	}
}

void
genie_vector_check_queries(Relation index, int dim)
{
	GenieVectorSchema schema;

	read_schema(index, &schema);
	/* an index without vectors yet answers any dimension with no rows */
	if (schema.dimensions != 0)
		check_dimension(index, schema.dimensions, dim, "the query vector");
}

static void
vector_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
					Datum value, Oid type, GenieOrderBy *out)
{
	int			dim;
	float	   *v = genie_float4_array_values(DatumGetArrayTypeP(value), "the query vector", &dim);

	memset(out, 0, sizeof(*out));
	genie_vector_check_queries(index, dim);
	out->vector = palloc(sizeof(float) * Max(dim, 1));
	memcpy(out->vector, v, sizeof(float) * dim);
	out->vector_dim = dim;
}

/* the LSH keywords of a query vector, as one item each */
static GenieQuery *
vector_approximate_query(Relation index, const GenieValueBatch *queries, int q)
{
	GenieVectorSchema schema;
	int			dim = queries->dim;
	const float *v = queries->vectors + (Size) q * dim;
	int			n;
	int32	   *keywords;
	GenieQuery *query;

	read_schema(index, &schema);
	if (schema.functions == 0 || schema.dimensions == 0)
		return NULL;
	check_dimension(index, schema.dimensions, dim, "the query vector");
	keywords = lsh_keywords(&schema, v, dim, &n);
	query = genie_query_from_keywords(keywords, n, false);
	pfree(keywords);
	return query;
}

/*
 * The LSH queries of a batch's vectors, their keywords computed together on
 * every core (a query's 238 x 784 products, query after query, were most of
 * a batch's query phase).
 */
static void
vector_approximate_queries(Relation index, const GenieValueBatch *queries, GenieQuery **out)
{
	GenieVectorSchema schema;
	int32	   *keywords;
	genie_error err;

	read_schema(index, &schema);
	if (schema.functions == 0 || schema.dimensions == 0)
	{
		for (int q = 0; q < queries->n; q++)
			out[q] = NULL;
		return;
	}
	check_dimension(index, schema.dimensions, queries->dim, "the query vector");
	keywords = palloc_extended(sizeof(int32) * Max((Size) queries->n * schema.functions, 1), MCXT_ALLOC_HUGE);
	GENIE_CHECK(genie_lsh_keywords_batch(schema_lsh(&schema), queries->vectors, queries->n, genie_cpu_threads,
										 genie_cancel_requested, NULL, keywords, &err),
				&err, "genie: LSH keywords");
	for (int q = 0; q < queries->n; q++)
	{
		out[q] = genie_query_from_keywords(keywords + (Size) q * schema.functions, schema.functions, false);
		if ((q & 1023) == 1023)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(keywords);
}

static const GenieTypeInfo vector_type = {
	.encoding = GENIE_ENCODING_VECTOR,
	.name = "vectors",
	.opclass = "genie_vector_ops",
	.batch_function = "genie_knn",
	.build_encoding = vector_build_encoding,
	.build_begin = vector_build_begin,
	.build_value = vector_build_value,
	.build_finish = vector_build_finish,
	.value_bytes_of = vector_value_bytes,
	.values_required = true,
	.encode_value = vector_encode_value,
	.encode_batch = vector_encode_batch,
	.encode_batch_values = vector_encode_batch_values,
	.insert_prepare = vector_insert_prepare,
	.length_conflict = vector_length_conflict,
	.encode_query = vector_encode_query,
	.approximate_query = vector_approximate_query,
	.approximate_queries = vector_approximate_queries,
};

/* support function 1 of genie_vector_ops */
Datum
genie_vector_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&vector_type);
}

/* ---- SQL functions ---- */

/*
 * real[] <-> real[]: the Euclidean distance, the number every genie engine
 * reports (genie_l2_distance: float64, element order).
 */
Datum
genie_l2_distance_array(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_GETARG_ARRAYTYPE_P(1);
	int			na;
	int			nb;
	float	   *va = genie_float4_array_values(a, "a vector", &na);
	float	   *vb = genie_float4_array_values(b, "a vector", &nb);
	float8		distance;

	if (na != nb)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("vectors of %d and %d dimensions have no distance", na, nb)));
	distance = genie_l2_distance(va, vb, na);
	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	PG_RETURN_FLOAT8(distance);
}

/* genie_lsh_functions(epsilon, delta): Equation 9 of the GENIE paper */
Datum
genie_lsh_functions(PG_FUNCTION_ARGS)
{
	float8		epsilon = PG_GETARG_FLOAT8(0);
	float8		delta = PG_GETARG_FLOAT8(1);

	if (!(epsilon > 0 && epsilon < 1 && delta > 0 && delta < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epsilon and delta must lie strictly between 0 and 1")));
	/* the search is quadratic in m, which grows as 1/epsilon^2: keep it under a second */
	if (epsilon < 0.02)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("epsilon must be at least 0.02"),
				 errdetail("Smaller values need thousands of functions; give m directly.")));
	PG_RETURN_INT32(genie_lsh_functions_for(epsilon, delta));
}

/* Elements a thread checks at once (genie_vector_check_finite on the threads). */
#define FINITE_CHUNK	((int64) 65536)

/* The elements genie_vector_check_finite checks on the threads, and what they find. */
typedef struct FiniteCheck
{
	const float *values;
	int64		count;
	bool	   *bad;			/* a chunk's own: it holds a NaN or an infinity */
} FiniteCheck;

/* On a thread of genie_parallel_for, pure: chunk i's elements all finite, or found set. */
static void
check_finite_chunk(int64 i, void *arg)
{
	FiniteCheck *check = arg;
	int64		end = Min((i + 1) * FINITE_CHUNK, check->count);
	bool		bad = false;

	for (int64 j = i * FINITE_CHUNK; j < end; j++)
		bad |= isnan(check->values[j]) || isinf(check->values[j]);
	check->bad[i] = bad;
}

/*
 * Every one of count query elements (dim a query, the first query's number
 * first + 1) finite.  A batch of millions of elements is read on every core
 * first (31 MB for 10,000 Fashion-MNIST queries: several ms on one), and
 * only the first chunk holding one is read again here, to name it.
 */
void
genie_vector_check_finite(const float *values, int64 count, int dim, int64 first)
{
	int64		from = 0;

	if (count >= 16 * FINITE_CHUNK)
	{
		int64		chunks = (count + FINITE_CHUNK - 1) / FINITE_CHUNK;
		FiniteCheck check;
		genie_error err;

		check.values = values;
		check.count = count;
		check.bad = palloc(sizeof(bool) * chunks);
		if (genie_parallel_for(chunks, genie_cpu_threads, check_finite_chunk, &check,
							   genie_cancel_requested, NULL, &err) != GENIE_OK)
			genie_report_error(&err, "genie: checking the queries");
		/* the first chunk that holds one is read again, to name it */
		while (from < chunks && !check.bad[from])
			from++;
		pfree(check.bad);
		if (from == chunks)
			return;
		from *= FINITE_CHUNK;
	}
	for (int64 i = from; i < count; i++)
		if (isnan(values[i]) || isinf(values[i]))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("queries must not contain %s", isnan(values[i]) ? "NaN" : "infinity"),
					 errdetail("Query %lld, element %lld.", (long long) (first + i / dim + 1),
							   (long long) (i % dim + 1))));
}

/*
 * The query vectors of a real[][] (one per row) or of a real[] (one
 * query): finite, without NULLs; *nq and *dim receive the shape.
 */
float *
genie_vector_queries(ArrayType *array, int *nq, int *dim)
{
	float	   *values = (float *) ARR_DATA_PTR(array);
	int64		n;

	if (ARR_ELEMTYPE(array) != FLOAT4OID)
		elog(ERROR, "genie: queries are not a real[]");
	if (ARR_NDIM(array) > 2)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("queries must be a two-dimensional array, one query vector per row")));
	if (array_contains_nulls(array))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queries must not contain NULL elements")));
	*nq = ARR_NDIM(array) == 2 ? ARR_DIMS(array)[0] : (ARR_NDIM(array) == 1 ? 1 : 0);
	*dim = ARR_NDIM(array) == 2 ? ARR_DIMS(array)[1] : (ARR_NDIM(array) == 1 ? ARR_DIMS(array)[0] : 0);
	n = (int64) *nq * *dim;
	genie_vector_check_finite(values, n, *dim, 0);
	return values;
}
