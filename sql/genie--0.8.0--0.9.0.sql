-- genie 0.8.0 -> 0.9.0: genie_within, range queries over vectors and stored
-- strings.

\echo Use "ALTER EXTENSION genie UPDATE TO '0.9.0'" to load this file. \quit

-- Range queries (issue 30): every row visible to the caller within radius
-- of each query of a batch (query_no is its 1-based position), exact, the
-- boundary included, in (query_no, distance, ctid) order.  Vectors by
-- real[] <-> real[] over a genie_vector_ops index; strings by edit distance
-- (levenshtein(), in code points) over a genie_ngram_ops index that
-- stores its strings.
CREATE FUNCTION genie_within(index regclass, queries real[], radius float8)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_within_vectors'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_within(index regclass, queries text[], radius int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_within_strings'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
