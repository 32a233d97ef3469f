-- genie 0.6.0 -> 0.7.0: short documents, genie_tsvector_ops on tsvector.
\echo Use "ALTER EXTENSION genie UPDATE TO '0.7.0'" to load this file. \quit

-- ---- Short documents: genie_tsvector_ops on tsvector (GENIE section V-B) ----

-- The score an index of documents gives a document for a query: over the
-- query's terms (a tsquery's distinct lexemes outside any NOT, with their
-- weight restrictions; a tsvector's lexemes), the weight
-- (genie.document_weights) of the class each term has in the document, its
-- highest (a lexeme without positions is of class D).  With the default
-- weights, the number of shared words.  STABLE: it reads the setting.
CREATE FUNCTION genie_match_count(document tsvector, query tsquery) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_tsquery'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_match_count(document tsvector, query tsvector) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_tsvector'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_negated_match_count(tsvector, tsquery) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_tsquery'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 10;

CREATE FUNCTION genie_negated_match_count(tsvector, tsvector) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_tsvector'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 10;

-- ORDER BY doc <~> query: the best score first (negated).  RUM's <=>,
-- GIN's @@ and pg_trgm's operators live beside these in one schema.  An
-- untyped literal on the right is a tsvector (a query document of words):
-- cast a query with operators, doc <~> 'cat & !dog'::tsquery.  No
-- commutator: the classes, and so the weights, are the left document's.
CREATE OPERATOR <~> (
    LEFTARG = tsvector, RIGHTARG = tsquery,
    FUNCTION = genie_negated_match_count
);

CREATE OPERATOR <~> (
    LEFTARG = tsvector, RIGHTARG = tsvector,
    FUNCTION = genie_negated_match_count
);

CREATE FUNCTION genie_document_support(internal) RETURNS internal
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS genie_tsvector_ops
DEFAULT FOR TYPE tsvector USING genie AS
    OPERATOR 1 <~> (tsvector, tsquery) FOR ORDER BY float_ops,
    OPERATOR 2 <~> (tsvector, tsvector) FOR ORDER BY float_ops,
    FUNCTION 1 genie_document_support(internal);

-- genie_topk for an index of documents: per query (query_no is its 1-based
-- position) the k best visible rows of a positive score, best first, in one
-- engine call.  Queries as tsquery[] or as query documents (tsvector[]).
-- With idf, each term's weight is times its inverse document frequency in
-- the index (genie_document_weights shows it): a TF-IDF-like ranking.
CREATE FUNCTION genie_document_topk(index regclass, queries tsquery[], k int4, idf bool DEFAULT false)
RETURNS TABLE (query_no int4, ctid tid, score int4)
AS 'MODULE_PATHNAME', 'genie_topk'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_document_topk(index regclass, queries tsvector[], k int4, idf bool DEFAULT false)
RETURNS TABLE (query_no int4, ctid tid, score int4)
AS 'MODULE_PATHNAME', 'genie_topk'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- Per term of a query, the documents of the index that hold it (rows
-- deleted since the last VACUUM included) and its idf weight:
-- greatest(1, floor(100 * ln(1 + (n - documents + 0.5) / (documents + 0.5)) + 0.5))
-- for the index's n documents (BM25's idf, times 100).
CREATE FUNCTION genie_document_weights(index regclass, query tsquery)
RETURNS TABLE (lexeme text, documents int8, weight int4)
AS 'MODULE_PATHNAME', 'genie_document_weights'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_document_weights(index regclass, query tsvector)
RETURNS TABLE (lexeme text, documents int8, weight int4)
AS 'MODULE_PATHNAME', 'genie_document_weights'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
