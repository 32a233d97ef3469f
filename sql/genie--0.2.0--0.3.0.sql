-- genie 0.2.0 -> 0.3.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.3.0'" to load this file. \quit

-- The on-disk format is unchanged: indexes built by 0.2.0 keep working.
-- 0.3.0 adds vectors: genie_vector_ops on real[], the operator <->, genie_knn,
-- genie_vector_info and genie_lsh_functions.

-- ---- Vectors: genie_vector_ops on real[] (GENIE section IV) ----

-- real[] <-> real[]: the Euclidean distance, summed in float8 in element
-- order: exactly the number every genie engine reports.  Vectors of other
-- dimensions, NULL elements, NaN and infinity are errors.  (pgvector's
-- <-> is on its vector type, cube's on cube, pg_trgm's on text: all of
-- them live in one schema with this one.)
CREATE FUNCTION genie_l2_distance(real[], real[])
RETURNS float8
AS 'MODULE_PATHNAME', 'genie_l2_distance_array'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <-> (
    LEFTARG = real[], RIGHTARG = real[],
    FUNCTION = genie_l2_distance,
    COMMUTATOR = '<->'
);

CREATE FUNCTION genie_vector_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- CREATE INDEX ON items USING genie (v) WITH (m = ..., family = 'e2lsh' |
-- 'rbh', buckets = ..., width = ..., seed = ...): every row's vector is
-- stored in the index (exact search), with m LSH keywords (approximate
-- search; m = 0 for none).  The dimension is fixed by the first vector.
CREATE OPERATOR CLASS genie_vector_ops
DEFAULT FOR TYPE real[] USING genie AS
    OPERATOR 3 <-> (real[], real[]) FOR ORDER BY float_ops,
    FUNCTION 1 genie_vector_support(internal);

-- A batch of query vectors (a real[][], one per row; a real[] is one
-- query) in one engine call: for each query (query_no is its 1-based row)
-- the k nearest rows visible to the caller by real[] <-> real[], nearest
-- first; exact, or the LSH candidates re-ranked with genie.vector_search = lsh.
CREATE FUNCTION genie_knn(index regclass, queries real[], k int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_knn'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- A vector index's dimension (NULL before its first vector) and the LSH
-- functions its keywords come from.
CREATE FUNCTION genie_vector_info(index regclass,
    OUT dimensions int4, OUT family text, OUT functions int4, OUT buckets int4,
    OUT width float8, OUT seed int8)
RETURNS record
AS 'MODULE_PATHNAME', 'genie_vector_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- Equation 9 of the GENIE paper: the LSH functions m for which the match
-- count estimates the similarity within epsilon with probability 1 - delta
-- (238 for the default 0.06 and 0.06, the m of a vector index by default).
CREATE FUNCTION genie_lsh_functions(epsilon float8 DEFAULT 0.06, delta float8 DEFAULT 0.06)
RETURNS int4
AS 'MODULE_PATHNAME', 'genie_lsh_functions'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
