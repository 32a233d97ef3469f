/*-------------------------------------------------------------------------
 *
 * genie_document.c
 *	  Short documents (genie_tsvector_ops, GENIE section V-B): a tsvector's
 *	  lexemes are its keywords, and documents are ranked by the words they
 *	  share with a query, a tsquery or a whole query document (tsvector).
 *
 * Each distinct lexeme gets a code from the index's dictionary (the row
 * index's dictionary chain, types/rows/genie_row_dictionary.c: built with
 * the index, appended to by inserts of new lexemes, never renumbered), and
 * a document gives one keyword per lexeme, code << 2 | class, where class
 * is the lexeme's highest weight class in the document (D = 0 ... A = 3, as
 * tsvector stores them; a lexeme without positions is of class D).
 *
 * The score of a document for a query is the sum, over the query's terms,
 * of genie.document_weights[class] for each term the document contains in
 * an allowed class.  The terms of a tsquery are its distinct lexemes, less
 * those under a NOT; a weight restriction ('cat:AB') allows only those
 * classes; the operators themselves (&, |, <->) do not change the score
 * (to require them, add WHERE doc @@ query).  The terms of a tsvector are
 * its lexemes, in any class.  With the default weights (all 1) the score is
 * the number of shared words, the inner product of the binary word vectors
 * the paper ranks tweets by.  genie_match_count(tsvector, query) computes
 * the same score without the index: the oracle of every test.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "tsearch/ts_type.h"
#include "tsearch/ts_utils.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "access/table.h"
#include "funcapi.h"
#include "utils/rls.h"
#include "storage/genie_content.h"
#include "genie_utils.h"

#include "types/documents/genie_document.h"
#include "types/documents/genie_document_query.h"
#include "types/genie_type.h"
#include "types/rows/genie_row_dictionary.h"

PG_FUNCTION_INFO_V1(genie_document_support);
PG_FUNCTION_INFO_V1(genie_match_count_tsquery);
PG_FUNCTION_INFO_V1(genie_match_count_tsvector);
PG_FUNCTION_INFO_V1(genie_negated_match_count_tsquery);
PG_FUNCTION_INFO_V1(genie_negated_match_count_tsvector);
PG_FUNCTION_INFO_V1(genie_document_weights);
PG_FUNCTION_INFO_V1(genie_match_count_weighted);
PG_FUNCTION_INFO_V1(genie_negated_match_count_weighted);
PG_FUNCTION_INFO_V1(genie_document_query_of_index);

#define DOCUMENT_CLASSES		4
#define DOCUMENT_ALL_CLASSES	GENIE_DOCUMENT_ALL_CLASSES
#define DOCUMENT_KEYWORD(code, class) ((int32) (((uint32) (code) << 2) | (uint32) (class)))
/*
 * A lexeme has at most 2,047 bytes (tsvector's 11-bit WordEntry.len): it
 * always fits a dictionary entry (a uint16 length, on one page).
 */

/* genie.document_weights, by class: D, C, B, A (the order of ts_rank's weights) */
char	   *genie_document_weights_setting = NULL;
static int32 document_weights[DOCUMENT_CLASSES] = {1, 1, 1, 1};

/* ---- genie.document_weights ---- */

/* Parses "{d, c, b, a}" (braces optional) into four weights; false with a message. */
static bool
parse_weights(const char *value, int32 *weights, char **message)
{
	const char *p = value;
	int			n = 0;
	bool		any = false;
	bool		braced = false;

	while (isspace((unsigned char) *p))
		p++;
	if (*p == '{')
	{
		braced = true;
		p++;
	}
	for (;;)
	{
		char	   *end;
		long		w;

		while (isspace((unsigned char) *p))
			p++;
		errno = 0;
		w = strtol(p, &end, 10);
		if (end == p || errno != 0)
		{
			*message = psprintf("\"%s\" is not a list of four integer weights", value);
			return false;
		}
		if (w < 0 || w > GENIE_DOCUMENT_MAX_WEIGHT)
		{
			*message = psprintf("weight %ld is out of range 0 to %d", w, GENIE_DOCUMENT_MAX_WEIGHT);
			return false;
		}
		if (n == DOCUMENT_CLASSES)
		{
			*message = psprintf("\"%s\" has more than four weights", value);
			return false;
		}
		weights[n++] = (int32) w;
		any |= w > 0;
		p = end;
		while (isspace((unsigned char) *p))
			p++;
		if (*p == ',')
		{
			p++;
			continue;
		}
		break;
	}
	if (braced)
	{
		if (*p != '}')
		{
			*message = psprintf("\"%s\" is not a list of four integer weights", value);
			return false;
		}
		p++;
	}
	while (isspace((unsigned char) *p))
		p++;
	if (*p != '\0' || n != DOCUMENT_CLASSES)
	{
		*message = psprintf("\"%s\" is not a list of four integer weights", value);
		return false;
	}
	if (!any)
	{
		*message = pstrdup("at least one weight must be positive");
		return false;
	}
	return true;
}

bool
genie_document_weights_check(char **newval, void **extra, GucSource source)
{
	int32		weights[DOCUMENT_CLASSES];
	char	   *message = NULL;
	int32	   *copy;

	if (!parse_weights(*newval, weights, &message))
	{
		GUC_check_errmsg("%s", message);
		GUC_check_errhint("Give the weights of classes D, C, B and A, as ts_rank does: '{1, 1, 1, 1}' or '{1, 2, 4, 10}'.");
		return false;
	}
	/* the GUC machinery frees it (with free(), or guc_free() since 16) */
	copy = genie_guc_malloc(sizeof(weights));
	if (copy == NULL)
		return false;
	memcpy(copy, weights, sizeof(weights));
	*extra = copy;
	return true;
}

void
genie_document_weights_assign(const char *newval, void *extra)
{
	memcpy(document_weights, extra, sizeof(document_weights));
}

/* ---- a query's terms ---- */

typedef struct DocumentTerm
{
	char	   *lexeme;
	int			length;
	uint8		classes;		/* bit 1 << class for each class it counts in */
	int32		weight;			/* times the class's weight: 1 but in a genie_document_query */
} DocumentTerm;

/* The three types a query of an index of documents can have. */
typedef enum DocumentQueryKind
{
	DOCUMENT_TSQUERY,
	DOCUMENT_TSVECTOR,
	DOCUMENT_WEIGHTED			/* genie_document_query */
} DocumentQueryKind;

static int
term_order(const void *a, const void *b)
{
	const DocumentTerm *x = a;
	const DocumentTerm *y = b;

	return tsCompareString(x->lexeme, x->length, y->lexeme, y->length, false);
}

/*
 * The terms of a tsquery: its operands outside any NOT, one term per
 * distinct lexeme (the union of their weight restrictions), in
 * tsCompareString order.  The tree is walked with a stack: a tsquery can be
 * as deep as it is long.
 */
static DocumentTerm *
tsquery_terms(TSQuery query, int *n)
{
	QueryItem  *items = GETQUERY(query);
	char	   *operands = GETOPERAND(query);
	DocumentTerm *terms = palloc(sizeof(DocumentTerm) * Max(query->size, 1));
	int32	   *stack = palloc(sizeof(int32) * Max(query->size, 1));
	int			depth = 0;
	int			count = 0;
	int			kept = 0;

	if (query->size > 0)
		stack[depth++] = 0;
	while (depth > 0)
	{
		int32		i = stack[--depth];
		QueryItem  *item = &items[i];

		CHECK_FOR_INTERRUPTS();
		if (item->type == QI_VAL)
		{
			QueryOperand *op = &item->qoperand;

			if (op->prefix)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("genie does not rank documents by a prefix (\"%.*s:*\")",
								(int) op->length, operands + op->distance),
						 errhint("Write out the lexemes to rank by; a prefix can still filter rows with WHERE document @@ query.")));
			terms[count].lexeme = operands + op->distance;
			terms[count].length = op->length;
			terms[count].classes = op->weight != 0 ? op->weight : DOCUMENT_ALL_CLASSES;
			terms[count].weight = 1;
			count++;
		}
		else if (item->qoperator.oper != OP_NOT)
		{
			/* both operands; a NOT's operand does not count */
			stack[depth++] = i + 1;
			stack[depth++] = i + item->qoperator.left;
		}
	}
	pfree(stack);
	if (count > 1)
		qsort(terms, count, sizeof(DocumentTerm), term_order);
	for (int i = 0; i < count; i++)
	{
		if (kept > 0 && term_order(&terms[kept - 1], &terms[i]) == 0)
			terms[kept - 1].classes |= terms[i].classes;
		else
			terms[kept++] = terms[i];
	}
	*n = kept;
	return terms;
}

/* The terms of a query document: each lexeme, in any class. */
static DocumentTerm *
tsvector_terms(TSVector query, int *n)
{
	WordEntry  *entries = ARRPTR(query);
	DocumentTerm *terms = palloc(sizeof(DocumentTerm) * Max(query->size, 1));

	for (int i = 0; i < query->size; i++)
	{
		terms[i].lexeme = STRPTR(query) + entries[i].pos;
		terms[i].length = entries[i].len;
		terms[i].classes = DOCUMENT_ALL_CLASSES;
		terms[i].weight = 1;
	}
	*n = query->size;
	return terms;
}

/* The terms of a genie_document_query: as it holds them, with their weights. */
static DocumentTerm *
weighted_terms(GenieDocumentQuery *query, int *n)
{
	char	   *lexemes = GENIE_DOCUMENT_QUERY_LEXEMES(query);
	DocumentTerm *terms = palloc(sizeof(DocumentTerm) * Max(query->n_terms, 1));

	for (int i = 0; i < query->n_terms; i++)
	{
		terms[i].lexeme = lexemes + query->terms[i].offset;
		terms[i].length = query->terms[i].length;
		terms[i].classes = query->terms[i].classes;
		terms[i].weight = query->terms[i].weight;
	}
	*n = query->n_terms;
	return terms;
}

/* The schema of the index's operator family: the extension's. */
static Oid
opfamily_namespace(Relation index)
{
	HeapTuple	tuple = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(index->rd_opfamily[0]));
	Oid			ns;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator family %u", index->rd_opfamily[0]);
	ns = ((Form_pg_opfamily) GETSTRUCT(tuple))->opfnamespace;
	ReleaseSysCache(tuple);
	return ns;
}

/*
 * The kind of a query of type type; ns is the extension's schema, where
 * genie_document_query is (InvalidOid where only tsquery and tsvector are
 * taken).
 */
static DocumentQueryKind
query_kind(Oid type, Oid ns)
{
	if (type == TSQUERYOID)
		return DOCUMENT_TSQUERY;
	if (type == TSVECTOROID)
		return DOCUMENT_TSVECTOR;
	if (OidIsValid(ns) && type == genie_document_query_type(ns))
		return DOCUMENT_WEIGHTED;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("a genie document query must be a tsquery, a tsvector or a genie_document_query, not %s",
					format_type_be(type))));
	return DOCUMENT_TSQUERY;	/* keep the compiler quiet */
}

/* The terms of a query; the query's detoasted copy stays with them. */
static DocumentTerm *
document_terms(Datum query, DocumentQueryKind kind, int *n)
{
	switch (kind)
	{
		case DOCUMENT_TSQUERY:
			return tsquery_terms(DatumGetTSQuery(query), n);
		case DOCUMENT_TSVECTOR:
			return tsvector_terms(DatumGetTSVector(query), n);
		case DOCUMENT_WEIGHTED:
			return weighted_terms(DatumGetGenieDocumentQueryP(query), n);
	}
	return NULL;				/* keep the compiler quiet */
}

/* A lexeme's class in a document: its highest position's weight, D without positions. */
static int
entry_class(TSVector doc, WordEntry *entry)
{
	int			npos = POSDATALEN(doc, entry);
	WordEntryPos *pos = POSDATAPTR(doc, entry);
	int			class = 0;

	for (int i = 0; i < npos && class < DOCUMENT_CLASSES - 1; i++)
		class = Max(class, WEP_GETWEIGHT(pos[i]));
	return class;
}

/* ---- scoring without the index (the oracle) ---- */

static int32
document_score(TSVector doc, const DocumentTerm *terms, int n)
{
	WordEntry  *entries = ARRPTR(doc);
	int64		score = 0;

	for (int t = 0; t < n; t++)
	{
		int			lo = 0;
		int			hi = doc->size;

		/* the entries are in tsCompareString order */
		while (lo < hi)
		{
			int			mid = lo + (hi - lo) / 2;
			int			cmp = tsCompareString(STRPTR(doc) + entries[mid].pos, entries[mid].len,
											  terms[t].lexeme, terms[t].length, false);

			if (cmp == 0)
			{
				int			class = entry_class(doc, &entries[mid]);

				if (terms[t].classes & (1 << class))
					score += (int64) document_weights[class] * terms[t].weight;
				break;
			}
			if (cmp < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	if (score > PG_INT32_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("a document's score is out of range for int4"),
				 errhint("Lower genie.document_weights or the query's term weights.")));
	return (int32) score;
}

/* The score of argument 0 (a tsvector) for argument 1, a query of the kind. */
static int32
score_arguments(FunctionCallInfo fcinfo, DocumentQueryKind kind)
{
	TSVector	doc = PG_GETARG_TSVECTOR(0);
	int			n;
	DocumentTerm *terms = document_terms(PG_GETARG_DATUM(1), kind, &n);
	int32		score = document_score(doc, terms, n);

	pfree(terms);
	PG_FREE_IF_COPY(doc, 0);
	return score;
}

static Datum
negated(int32 score)
{
	return Float8GetDatum(score == 0 ? 0.0 : -(float8) score);
}

/*
 * genie_match_count(document tsvector, query tsquery | tsvector) -> int4:
 * the score an index of documents gives the document.  STABLE: it reads
 * genie.document_weights.  One C function per query type, so that no call
 * depends on the caller's expression tree.
 */
Datum
genie_match_count_tsquery(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(score_arguments(fcinfo, DOCUMENT_TSQUERY));
}

Datum
genie_match_count_tsvector(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(score_arguments(fcinfo, DOCUMENT_TSVECTOR));
}

Datum
genie_match_count_weighted(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(score_arguments(fcinfo, DOCUMENT_WEIGHTED));
}

/* tsvector <~> tsquery | tsvector | genie_document_query: the negated score (index scans order ascending) */
Datum
genie_negated_match_count_tsquery(PG_FUNCTION_ARGS)
{
	return negated(score_arguments(fcinfo, DOCUMENT_TSQUERY));
}

Datum
genie_negated_match_count_tsvector(PG_FUNCTION_ARGS)
{
	return negated(score_arguments(fcinfo, DOCUMENT_TSVECTOR));
}

Datum
genie_negated_match_count_weighted(PG_FUNCTION_ARGS)
{
	return negated(score_arguments(fcinfo, DOCUMENT_WEIGHTED));
}

/* ---- the index's keywords ---- */

static int32 *
document_keywords(Relation index, GenieRowDictionary *d, Datum value, GenieRowEncodeMode mode,
				  int *n)
{
	TSVector	doc = DatumGetTSVector(value);
	WordEntry  *entries = ARRPTR(doc);
	int32	   *keywords = palloc(sizeof(int32) * Max(doc->size, 1));

	for (int i = 0; i < doc->size; i++)
	{
		int32		code;

		if ((i & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
		code = genie_row_dictionary_code(index, d, 0, STRPTR(doc) + entries[i].pos,
										 entries[i].len, mode);
		keywords[i] = DOCUMENT_KEYWORD(code, entry_class(doc, &entries[i]));
	}
	*n = doc->size;
	if ((Pointer) doc != DatumGetPointer(value))
		pfree(doc);
	return keywords;
}

/* ---- the type's callbacks ---- */

static void
document_build_encoding(Relation index, GenieEncoding *encoding)
{
	/* the dictionary goes to the metapage's schema (build_finish) */
}

/* A build's state: the dictionary it makes. */
typedef struct DocumentBuild
{
	Relation	index;
	GenieRowDictionary *dictionary;
} DocumentBuild;

static void *
document_build_begin(Relation heap, Relation index, IndexInfo *indexInfo, bool scan)
{
	DocumentBuild *b = palloc(sizeof(DocumentBuild));
	GenieRowSchema schema;

	memset(&schema, 0, sizeof(schema));
	schema.n_attributes = 1;
	schema.attributes[0].attnum = 1;
	schema.attributes[0].mode = GENIE_ROW_VALUES;
	schema.attributes[0].type = TEXTOID;
	schema.schema_id = genie_row_schema_new_id(index);
	schema.dictionary.head = schema.dictionary.tail = InvalidBlockNumber;
	b->index = index;
	b->dictionary = genie_row_dictionary_create(CurrentMemoryContext, index, &schema);
	return b;
}

static int32 *
document_build_value(void *state, Datum value, int *n)
{
	DocumentBuild *b = state;

	return document_keywords(b->index, b->dictionary, value, GENIE_ROW_ENCODE_BUILD, n);
}

static void
document_build_finish(void *state, GenieMetaPageData *meta)
{
	DocumentBuild *b = state;

	genie_row_dictionary_write(b->index, b->dictionary, &meta->rows);
	MemoryContextDelete(b->dictionary->cxt);
	pfree(b);
}

static int32 *
document_encode_value(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	return document_keywords(index, genie_row_dictionary_of(index, GENIE_ROW_ENCODE_INSERT),
							 value, GENIE_ROW_ENCODE_INSERT, n);
}

static int32 *
document_encode_check(Relation index, const GenieEncoding *encoding, Datum value, int *n)
{
	return document_keywords(index, genie_row_dictionary_of(index, GENIE_ROW_ENCODE_CHECK),
							 value, GENIE_ROW_ENCODE_CHECK, n);
}

/* ---- inverse document frequencies ---- */

/*
 * A backend's document frequencies of one index, for one content stamp
 * (every insert and merge gives a new one): per lexeme code, the documents
 * holding it in any class.  Read from the pages, not from an engine's
 * copy, so that in-process and service searches weigh alike.  Rows deleted
 * since the last merge still count, in n_documents too: the index cannot
 * tell them apart until VACUUM merges it.
 */
typedef struct DocumentFrequencies
{
	Oid			index;
	Oid			relfilenode;
	uint64		stamp;
	int64		n_documents;	/* objects that are not NULL */
	int32		n_codes;
	int32	   *documents;		/* by code */
	MemoryContext cxt;
} DocumentFrequencies;

static DocumentFrequencies *frequencies = NULL;

static void
count_keyword(DocumentFrequencies *f, int32 keyword, int64 n)
{
	int32		code = keyword >> 2;

	/* a code the backend's dictionary has not read yet is never asked for */
	if (code >= 0 && code < f->n_codes)
		f->documents[code] += (int32) n;
}

/* The documents holding the lexeme of code (0 for a code the counts do not know). */
static int64
code_documents(const DocumentFrequencies *f, int32 code)
{
	return code >= 0 && code < f->n_codes ? f->documents[code] : 0;
}

/* The documents of the index holding a query term. */
static int64
term_documents(GenieRowDictionary *d, const DocumentFrequencies *f, const DocumentTerm *term)
{
	return code_documents(f, genie_row_dictionary_lookup(d, 0, term->lexeme, term->length));
}

/* The frequencies of the index's current content, read when it changed. */
static DocumentFrequencies *
document_frequencies(Relation index, int32 n_codes)
{
	uint64		stamp = genie_read_stamp(index);
	MemoryContext cxt;
	MemoryContext old;
	GenieIndexContent content;
	DocumentFrequencies *f;

	if (frequencies != NULL && frequencies->index == RelationGetRelid(index) &&
		frequencies->relfilenode == GENIE_REL_FILE_NUMBER(index) && frequencies->stamp == stamp &&
		frequencies->n_codes >= n_codes)
		return frequencies;
	if (frequencies != NULL)
	{
		MemoryContextDelete(frequencies->cxt);
		frequencies = NULL;
	}
	cxt = AllocSetContextCreate(TopMemoryContext, "genie document frequencies",
								ALLOCSET_DEFAULT_SIZES);
	old = CurrentMemoryContext;
	/* everything in cxt, which an error deletes: nothing is left in TopMemoryContext */
	PG_TRY();
	{
		f = MemoryContextAllocZero(cxt, sizeof(DocumentFrequencies));
		f->cxt = cxt;
		f->index = RelationGetRelid(index);
		f->relfilenode = GENIE_REL_FILE_NUMBER(index);
		f->n_codes = n_codes;
		f->documents = MemoryContextAllocExtended(cxt, sizeof(int32) * Max(n_codes, 1),
												  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		/* the content (keyword counts, pending keywords) in a context of its own */
		MemoryContextSwitchTo(AllocSetContextCreate(cxt, "genie content", ALLOCSET_DEFAULT_SIZES));
		GENIE_CONTENT_LOCK_SHARE(index);
		genie_read_content_counts(index, &content);
		GENIE_CONTENT_UNLOCK_SHARE(index);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	f->stamp = content.stamp;
	for (int32 i = 0; i < content.n_keywords; i++)
		count_keyword(f, content.keywords[i],
					  content.keyword_offsets[i + 1] - content.keyword_offsets[i]);
	for (int32 o = content.n_main_objects; o < content.n_objects; o++)
	{
		int32		local = o - content.n_main_objects;

		for (int64 j = content.pending_offsets[local]; j < content.pending_offsets[local + 1]; j++)
			count_keyword(f, content.pending_keywords[j], 1);
	}
	for (int32 o = 0; o < content.n_objects; o++)
		if (!(content.objects[o].flags & GENIE_OBJECT_NULL))
			f->n_documents++;
	MemoryContextDelete(MemoryContextSwitchTo(old));
	frequencies = f;
	return f;
}

/*
 * The inverse document frequency weight of a term held by df of n
 * documents: BM25's idf, ln(1 + (n - df + 0.5) / (df + 0.5)), times 100,
 * rounded, at least 1.  SQL computes the same with
 * greatest(1, floor(100 * ln(1 + (n - df + 0.5) / (df + 0.5)) + 0.5)).
 */
static int32
idf_weight(int64 df, int64 n)
{
	double		w = floor(100.0 * log(1.0 + ((double) n - df + 0.5) / ((double) df + 0.5)) + 0.5);

	return (int32) Max(w, 1.0);
}

/*
 * A query as items: per term the dictionary knows, one item per distinct
 * weight among its allowed classes, holding the keyword of each such class;
 * with idf, each weight times the term's idf_weight.  A term no document
 * has ever held scores nothing and is left out.  The dictionary is caught
 * up with the metapage first, so every lexeme of a row the statement can
 * see is in it.
 */
GenieQuery *
genie_document_engine_query(Relation index, Datum value, Oid type, bool idf)
{
	GenieRowDictionary *d;
	DocumentFrequencies *f = NULL;
	GenieQueryBuilder b;
	int			n;
	DocumentTerm *terms = document_terms(value, query_kind(type, opfamily_namespace(index)), &n);
	int64		total = 0;
	GenieQuery *query;

	d = genie_dictionary_current(index);
	if (idf)
		f = document_frequencies(index, d->schema.attributes[0].n_values);
	genie_query_builder_init(&b);
	b.limited = false;			/* whatever the sequential scan can score */
	for (int t = 0; t < n; t++)
	{
		int32		code = genie_row_dictionary_lookup(d, 0, terms[t].lexeme, terms[t].length);
		int64		scale = terms[t].weight;
		int32		best = 0;
		uint8		done = 0;

		if (code < 0)
			continue;
		if (f != NULL)
			scale *= idf_weight(code_documents(f, code), f->n_documents);
		/* a document holds a lexeme in one class: its best weight is what it can add */
		for (int c = 0; c < DOCUMENT_CLASSES; c++)
			if (terms[t].classes & (1 << c))
				best = Max(best, document_weights[c]);
		/* the engines count in int32: checked before any item's weight is formed */
		total += best * scale;
		if (total > PG_INT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a document query of genie index \"%s\" weighs more than an int4 score can hold",
							RelationGetRelationName(index)),
					 errhint("Use fewer terms, lower term weights or lower genie.document_weights.")));
		for (int c = 0; c < DOCUMENT_CLASSES; c++)
		{
			int32		w = document_weights[c];

			if (!(terms[t].classes & (1 << c)) || (done & (1 << c)) || w == 0)
				continue;
			genie_query_builder_begin_item(&b, (int32) (w * scale));
			for (int c2 = c; c2 < DOCUMENT_CLASSES; c2++)
				if ((terms[t].classes & (1 << c2)) && document_weights[c2] == w)
				{
					genie_query_builder_add_range(&b, DOCUMENT_KEYWORD(code, c2),
												  DOCUMENT_KEYWORD(code, c2));
					done |= 1 << c2;
				}
		}
	}
	query = genie_query_builder_finish(&b);
	pfree(terms);
	return query;
}

static void
document_encode_query(Relation index, const GenieEncoding *encoding, StrategyNumber strategy,
					  Datum value, Oid type, GenieOrderBy *out)
{
	memset(out, 0, sizeof(*out));
	out->query = genie_document_engine_query(index, value, type, false);
}

/*
 * An index of documents opened to read its document frequencies, for the
 * function called (which the errors name).
 */
static Relation
open_frequencies(Oid indexoid, Relation *heap, const char *called)
{
	Relation	index = genie_open_index(indexoid, heap, GENIE_ACCESS_READ);
	GenieIndexType itype;

	/* the counts include rows that row-level security would hide */
	if (check_enable_rls(RelationGetRelid(*heap), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s cannot be used on table \"%s\", which has row-level security enabled",
						called, RelationGetRelationName(*heap))));
	genie_index_type(index, &itype);
	if (itype.encoding.kind != GENIE_ENCODING_DOCUMENT)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("genie index \"%s\" is not an index of documents", RelationGetRelationName(index)),
				 errhint("Document frequencies are kept by indexes of operator class genie_tsvector_ops.")));
	return index;
}

/*
 * genie_document_weights(index, query tsquery | tsvector) -> (lexeme,
 * documents, weight): per term of the query, the documents of the index
 * that hold it and its idf_weight, as genie_document_topk(..., idf => true)
 * weighs it (times its class's weight).
 */
Datum
genie_document_weights(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	heap;
	Relation	index;
	GenieRowDictionary *d;
	DocumentFrequencies *f;
	int			n;
	DocumentTerm *terms;

	InitMaterializedSRF(fcinfo, 0);
	index = open_frequencies(indexoid, &heap, "genie_document_weights");
	terms = document_terms(PG_GETARG_DATUM(1), query_kind(type, InvalidOid), &n);
	d = genie_dictionary_current(index);
	f = document_frequencies(index, d->schema.attributes[0].n_values);
	for (int t = 0; t < n; t++)
	{
		int64		df = term_documents(d, f, &terms[t]);
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = PointerGetDatum(cstring_to_text_with_len(terms[t].lexeme, terms[t].length));
		values[1] = Int64GetDatum(df);
		values[2] = Int32GetDatum(idf_weight(df, f->n_documents));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	return (Datum) 0;
}

/*
 * genie_document_query(index, query tsquery | tsvector, idf bool) ->
 * genie_document_query: the query's terms, with idf each weighing its
 * idf_weight in the index (as genie_document_weights gives it), else 1.  A
 * term no document holds weighs as one held by none.  The weights are
 * those of the index when the query is made: an ORDER BY computes them
 * once, and a sequential scan scores with the same numbers.
 */
Datum
genie_document_query_of_index(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);
	bool		idf = PG_GETARG_BOOL(2);
	Relation	heap;
	Relation	index;
	GenieRowDictionary *d;
	DocumentFrequencies *f;
	int			n;
	DocumentTerm *terms;
	GenieDocumentTermInput *inputs;

	index = open_frequencies(indexoid, &heap, "genie_document_query");
	terms = document_terms(PG_GETARG_DATUM(1), query_kind(type, InvalidOid), &n);
	inputs = palloc(sizeof(GenieDocumentTermInput) * Max(n, 1));
	d = genie_dictionary_current(index);
	f = idf ? document_frequencies(index, d->schema.attributes[0].n_values) : NULL;
	for (int t = 0; t < n; t++)
	{
		inputs[t].lexeme = terms[t].lexeme;
		inputs[t].length = terms[t].length;
		inputs[t].classes = terms[t].classes;
		inputs[t].weight = f != NULL ? idf_weight(term_documents(d, f, &terms[t]), f->n_documents) : 1;
	}
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	PG_RETURN_POINTER(genie_document_query_make(inputs, n));
}

static const GenieTypeInfo document_type = {
	.encoding = GENIE_ENCODING_DOCUMENT,
	.name = "document",
	.opclass = "genie_tsvector_ops",
	.batch_function = "genie_document_topk",
	.build_encoding = document_build_encoding,
	.build_begin = document_build_begin,
	.build_value = document_build_value,
	.build_finish = document_build_finish,
	.encode_value = document_encode_value,
	.encode_check = document_encode_check,
	.encode_query = document_encode_query,
};

/* support function 1 of genie_tsvector_ops */
Datum
genie_document_support(PG_FUNCTION_ARGS)
{
	PG_RETURN_POINTER(&document_type);
}
