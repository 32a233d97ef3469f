/*-------------------------------------------------------------------------
 *
 * genie_document_query.c
 *	  The genie_document_query type: text and binary I/O.
 *
 * A genie_document_query is a query of an index of documents whose terms
 * carry weights of their own: a term adds its weight times its class's
 * weight (genie.document_weights) to the score of each document holding it
 * in an allowed class.  genie_document_query(index, query) gives each term
 * its inverse document frequency in the index (genie_document.c), and
 * since the weights travel in the value, a sequential scan, the index scan
 * and genie_match_count all score with the same numbers.
 *
 * Text form: terms separated by spaces, each a lexeme, quoted as tsvector
 * writes one ('it''s', with \ escaping the next character) or bare,
 * optionally followed by its classes (:AB) and its weight (*120, default
 * 1).  Example:
 *		'cat'*120 'dog':AB*35 mouse
 * The output quotes every lexeme and gives every weight: canonical, and
 * input(output(q)) = q.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "tsearch/ts_utils.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "types/documents/genie_document_query.h"
#include "types/genie_query.h"

PG_FUNCTION_INFO_V1(genie_document_query_in);
PG_FUNCTION_INFO_V1(genie_document_query_out);
PG_FUNCTION_INFO_V1(genie_document_query_recv);
PG_FUNCTION_INFO_V1(genie_document_query_send);

static int
term_input_order(const void *a, const void *b)
{
	const GenieDocumentTermInput *x = a;
	const GenieDocumentTermInput *y = b;

	return tsCompareString((char *) x->lexeme, x->length, (char *) y->lexeme, y->length, false);
}

GenieDocumentQuery *
genie_document_query_make(GenieDocumentTermInput *terms, int n)
{
	Size		size = offsetof(GenieDocumentQuery, terms) + sizeof(GenieDocumentTerm) * (Size) n;
	GenieDocumentQuery *q;
	char	   *lexemes;
	uint32		offset = 0;

	for (int i = 0; i < n; i++)
	{
		if (terms[i].length < 1 || terms[i].length > GENIE_DOCUMENT_MAX_LEXEME)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("a genie_document_query lexeme must have 1 to %d bytes, not %d",
							GENIE_DOCUMENT_MAX_LEXEME, terms[i].length)));
		if (terms[i].weight < 1 || terms[i].weight > GENIE_QUERY_MAX_WEIGHT)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genie_document_query term weight must be between 1 and %d, not %d",
							GENIE_QUERY_MAX_WEIGHT, terms[i].weight)));
		if (terms[i].classes == 0 || (terms[i].classes & ~GENIE_DOCUMENT_ALL_CLASSES) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid classes %d of a genie_document_query term", terms[i].classes)));
		size += terms[i].length;
		if (!AllocSizeIsValid(size))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a genie_document_query can have at most %d bytes", (int) MaxAllocSize)));
	}
	if (n > 1)
		qsort(terms, n, sizeof(GenieDocumentTermInput), term_input_order);
	for (int i = 1; i < n; i++)
		if (term_input_order(&terms[i - 1], &terms[i]) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lexeme \"%.*s\" appears twice in a genie_document_query",
							terms[i].length, terms[i].lexeme),
					 errhint("Give each lexeme once, with its classes and weight.")));

	q = palloc0(size);
	SET_VARSIZE(q, size);
	q->n_terms = n;
	lexemes = GENIE_DOCUMENT_QUERY_LEXEMES(q);
	for (int i = 0; i < n; i++)
	{
		q->terms[i].weight = terms[i].weight;
		q->terms[i].offset = offset;
		q->terms[i].length = (uint16) terms[i].length;
		q->terms[i].classes = terms[i].classes;
		memcpy(lexemes + offset, terms[i].lexeme, terms[i].length);
		offset += terms[i].length;
	}
	return q;
}

Oid
genie_document_query_type(Oid ns)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("genie_document_query"),
						   ObjectIdGetDatum(ns));
}

/* ---- text I/O ---- */

static void
syntax_error(const char *input, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type genie_document_query: \"%s\"", input),
			 errdetail("%s", detail),
			 errhint("Write terms as 'lexeme':classes*weight, for example 'cat'*120 'dog':AB*35 mouse.")));
}

/* One lexeme, quoted or bare, appended to buf; p is left after it. */
static const char *
read_lexeme(const char *input, const char *p, StringInfo buf)
{
	bool		quoted = *p == '\'';

	if (quoted)
		p++;
	for (;;)
	{
		int			len;

		if (*p == '\0')
		{
			if (quoted)
				syntax_error(input, "A quoted lexeme is not closed.");
			break;
		}
		if (quoted && *p == '\'')
		{
			if (p[1] != '\'')
			{
				p++;
				break;
			}
			p++;				/* '' is one quote */
		}
		else if (!quoted && (scanner_isspace(*p) || *p == ':' || *p == '*' || *p == '\''))
			break;
		else if (*p == '\\')
		{
			p++;
			if (*p == '\0')
				syntax_error(input, "A backslash ends the input.");
		}
		len = pg_mblen(p);
		appendBinaryStringInfo(buf, p, len);
		p += len;
	}
	return p;
}

Datum
genie_document_query_in(PG_FUNCTION_ARGS)
{
	char	   *input = PG_GETARG_CSTRING(0);
	const char *p = input;
	int			capacity = 16;
	int			n = 0;
	GenieDocumentTermInput *terms = palloc(sizeof(GenieDocumentTermInput) * capacity);

	for (;;)
	{
		StringInfoData lexeme;
		uint8		classes = 0;
		int64		weight = 1;

		while (scanner_isspace(*p))
			p++;
		if (*p == '\0')
			break;
		/* an input can hold millions of terms */
		if ((n & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
		initStringInfo(&lexeme);
		p = read_lexeme(input, p, &lexeme);
		if (lexeme.len == 0)
			syntax_error(input, "A lexeme is empty.");
		if (*p == ':')
		{
			for (p++; *p != '\0' && strchr("ABCDabcd", *p) != NULL; p++)
				classes |= 1 << (3 - (pg_toupper((unsigned char) *p) - 'A'));
			if (classes == 0)
				syntax_error(input, "A colon must be followed by classes among A, B, C and D.");
		}
		if (*p == '*')
		{
			char	   *end;

			p++;
			errno = 0;
			weight = strtol(p, &end, 10);
			if (end == p || errno != 0 || !isdigit((unsigned char) *p))
				syntax_error(input, "A star must be followed by a positive integer weight.");
			if (weight < 1 || weight > GENIE_QUERY_MAX_WEIGHT)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("genie_document_query term weight must be between 1 and %d, not %ld",
								GENIE_QUERY_MAX_WEIGHT, (long) weight)));
			p = end;
		}
		if (*p != '\0' && !scanner_isspace(*p))
			syntax_error(input, "Terms must be separated by spaces.");
		if (n == capacity)
		{
			capacity *= 2;
			terms = repalloc_huge(terms, sizeof(GenieDocumentTermInput) * capacity);
		}
		terms[n].lexeme = lexeme.data;
		terms[n].length = lexeme.len;
		terms[n].classes = classes != 0 ? classes : GENIE_DOCUMENT_ALL_CLASSES;
		terms[n].weight = (int32) weight;
		n++;
	}
	PG_RETURN_POINTER(genie_document_query_make(terms, n));
}

Datum
genie_document_query_out(PG_FUNCTION_ARGS)
{
	GenieDocumentQuery *q = DatumGetGenieDocumentQueryP(PG_GETARG_DATUM(0));
	const char *lexemes = GENIE_DOCUMENT_QUERY_LEXEMES(q);
	StringInfoData out;

	initStringInfo(&out);
	for (int i = 0; i < q->n_terms; i++)
	{
		const GenieDocumentTerm *t = &q->terms[i];

		if (i > 0)
			appendStringInfoChar(&out, ' ');
		appendStringInfoChar(&out, '\'');
		for (int j = 0; j < t->length; j++)
		{
			char		c = lexemes[t->offset + j];

			/* doubled as tsvector_out does: '' and \\ */
			if (c == '\'' || c == '\\')
				appendStringInfoChar(&out, c);
			appendStringInfoChar(&out, c);
		}
		appendStringInfoChar(&out, '\'');
		if (t->classes != GENIE_DOCUMENT_ALL_CLASSES)
		{
			appendStringInfoChar(&out, ':');
			for (int c = 3; c >= 0; c--)
				if (t->classes & (1 << c))
					appendStringInfoChar(&out, 'A' + (3 - c));
		}
		appendStringInfo(&out, "*%d", t->weight);
	}
	PG_RETURN_CSTRING(out.data);
}

/* ---- binary I/O: the term count, then per term its weight, classes and lexeme ---- */

Datum
genie_document_query_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int32		n = pq_getmsgint(buf, 4);
	GenieDocumentTermInput *terms;

	/* each term takes at least 9 bytes of the message */
	if (n < 0 || n > (buf->len - buf->cursor) / 9)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid number of genie_document_query terms: %d", n)));
	terms = palloc(sizeof(GenieDocumentTermInput) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		int			nbytes;

		terms[i].weight = (int32) pq_getmsgint(buf, 4);
		terms[i].classes = (uint8) pq_getmsgint(buf, 1);
		terms[i].lexeme = pq_getmsgtext(buf, pq_getmsgint(buf, 4), &nbytes);
		terms[i].length = nbytes;
		/* refused here as the binary form's faults; genie_document_query_make checks again */
		if (terms[i].weight < 1 || terms[i].weight > GENIE_QUERY_MAX_WEIGHT ||
			terms[i].classes == 0 || (terms[i].classes & ~GENIE_DOCUMENT_ALL_CLASSES) != 0 ||
			nbytes < 1 || nbytes > GENIE_DOCUMENT_MAX_LEXEME)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("invalid genie_document_query term %d: weight %d, classes %d, %d bytes",
							i + 1, terms[i].weight, terms[i].classes, nbytes)));
	}
	PG_RETURN_POINTER(genie_document_query_make(terms, n));
}

Datum
genie_document_query_send(PG_FUNCTION_ARGS)
{
	GenieDocumentQuery *q = DatumGetGenieDocumentQueryP(PG_GETARG_DATUM(0));
	const char *lexemes = GENIE_DOCUMENT_QUERY_LEXEMES(q);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint32(&buf, q->n_terms);
	for (int i = 0; i < q->n_terms; i++)
	{
		pq_sendint32(&buf, q->terms[i].weight);
		pq_sendint8(&buf, q->terms[i].classes);
		/* the length as converted to the client's encoding, then the bytes */
		genie_sendcountedtext(&buf, lexemes + q->terms[i].offset, q->terms[i].length);
	}
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}
