-- genie 0.8.0 -> 0.9.0: range queries over vectors and stored strings,
-- genie_within and the predicates v <@ genie_ball(q, r).

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

-- Range predicates (issue 30): v <@ genie_ball(q, r) holds when
-- v <-> q <= r (real[]), t <@ genie_ball(q, r) when the edit distance of t
-- and q (genie_edit_distance) is at most r (text), the boundary included;
-- a negative or NaN radius is an error, a NULL one holds for no row.  An
-- index of genie_vector_ops, or of genie_ngram_ops that stores its
-- strings, answers them in bitmap and plain index scans with the same rows.
CREATE TYPE genie_vector_ball AS (center real[], radius float8);
CREATE TYPE genie_text_ball AS (center text, radius int4);

CREATE FUNCTION genie_ball(center real[], radius float8) RETURNS genie_vector_ball
AS 'MODULE_PATHNAME', 'genie_ball_make'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION genie_ball(center text, radius int4) RETURNS genie_text_ball
AS 'MODULE_PATHNAME', 'genie_ball_make'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE FUNCTION genie_vector_in_ball(real[], genie_vector_ball) RETURNS bool
AS 'MODULE_PATHNAME', 'genie_vector_in_ball'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_text_in_ball(text, genie_text_ball) RETURNS bool
AS 'MODULE_PATHNAME', 'genie_text_in_ball'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <@ (
    LEFTARG = real[], RIGHTARG = genie_vector_ball,
    FUNCTION = genie_vector_in_ball,
    RESTRICT = contsel, JOIN = contjoinsel
);

CREATE OPERATOR <@ (
    LEFTARG = text, RIGHTARG = genie_text_ball,
    FUNCTION = genie_text_in_ball,
    RESTRICT = contsel, JOIN = contjoinsel
);

ALTER OPERATOR FAMILY genie_vector_ops USING genie ADD OPERATOR 6 <@ (real[], genie_vector_ball);
ALTER OPERATOR FAMILY genie_ngram_ops USING genie ADD OPERATOR 6 <@ (text, genie_text_ball);
