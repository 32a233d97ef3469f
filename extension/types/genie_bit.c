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
 * popcount scan, or the GPU's); it has no keywords.  The codes' length in
 * bits is fixed by the first code (at build, or at the first insert into an
 * index built on an empty table) and kept in the metapage as the schema's
 * dimensions, as a vector index keeps its dimension.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "fmgr.h"
#include "port/pg_bitutils.h"
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
				 errhint("An index takes the length of its first code: use bit(%d), or an index per length (a partial index on length(code) works). If the rows of that length are gone, VACUUM the table: an index left with no row takes the next code's length.",
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

/* ---- building ---- */

typedef struct CodeBuild
{
	Relation	index;
	int32		bits;			/* the first code's */
} CodeBuild;

static void
code_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* nothing beyond the kind: the length comes with the first code */
}

static void *
code_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	CodeBuild  *b = palloc0(sizeof(CodeBuild));

	b->index = index;
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
	*n = 0;
	return palloc(sizeof(int32));
}

static void
code_build_finish(void *state, GenieMetaPageData *meta)
{
	memset(&meta->vectors, 0, sizeof(meta->vectors));
	meta->vectors.dimensions = ((CodeBuild *) state)->bits;
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

static int32 *
code_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	GenieMetaPageData meta;

	genie_read_meta(index, &meta);
	/* an index built on an empty table takes the first code's length (insert_prepare) */
	(void) check_insert_length(index, meta.vectors.dimensions, meta.n_objects,
							   genie_code_bits(DatumGetVarBitP(value), "an indexed code"));
	*n = 0;
	return palloc(sizeof(int32));
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
	.encode_query = code_encode_query,
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
