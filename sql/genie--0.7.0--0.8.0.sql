-- genie 0.7.0 -> 0.8.0: genie_document_query, queries of an index of
-- documents whose terms carry weights (such as idf) that ORDER BY ranks by.
\echo Use "ALTER EXTENSION genie UPDATE TO '0.8.0'" to load this file. \quit

-- genie_document_query: a document query whose terms carry weights of their
-- own.  A term adds its weight times its class's weight to the score of a
-- document that holds it.  genie_document_query(index, query) weighs each
-- term by its inverse document frequency in the index, so that
-- ORDER BY doc <~> genie_document_query('docs_idx', q) LIMIT k ranks as
-- genie_document_topk(..., idf => true) does, and a sequential scan scores
-- with the same numbers.  Text form: 'cat'*120 'dog':AB*35 mouse (a lexeme,
-- quoted or bare; optional classes; optional weight, 1 to 1,000,000,
-- default 1).
CREATE TYPE genie_document_query;

CREATE FUNCTION genie_document_query_in(cstring) RETURNS genie_document_query
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_document_query_out(genie_document_query) RETURNS cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_document_query_recv(internal) RETURNS genie_document_query
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_document_query_send(genie_document_query) RETURNS bytea
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE genie_document_query (
    INPUT = genie_document_query_in,
    OUTPUT = genie_document_query_out,
    RECEIVE = genie_document_query_recv,
    SEND = genie_document_query_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = extended
);

CREATE FUNCTION genie_match_count(document tsvector, query genie_document_query) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_weighted'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_negated_match_count(tsvector, genie_document_query) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_weighted'
LANGUAGE C STABLE STRICT PARALLEL SAFE COST 10;

CREATE OPERATOR <~> (
    LEFTARG = tsvector, RIGHTARG = genie_document_query,
    FUNCTION = genie_negated_match_count
);

ALTER OPERATOR FAMILY genie_tsvector_ops USING genie
    ADD OPERATOR 3 <~> (tsvector, genie_document_query) FOR ORDER BY float_ops;

-- A query's terms weighed by their inverse document frequency in the index
-- (idf, as genie_document_weights gives it), or all 1: the weights of the
-- index when the query is made.  STABLE so that ORDER BY can hand it to an
-- index scan, which computes it once; the counts move with writes.
CREATE FUNCTION genie_document_query(index regclass, query tsquery, idf bool DEFAULT true)
RETURNS genie_document_query
AS 'MODULE_PATHNAME', 'genie_document_query_of_index'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_document_query(index regclass, query tsvector, idf bool DEFAULT true)
RETURNS genie_document_query
AS 'MODULE_PATHNAME', 'genie_document_query_of_index'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

-- genie_document_topk of queries that carry their weights.
CREATE FUNCTION genie_document_topk(index regclass, queries genie_document_query[], k int4)
RETURNS TABLE (query_no int4, ctid tid, score int4)
AS 'MODULE_PATHNAME', 'genie_topk'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
