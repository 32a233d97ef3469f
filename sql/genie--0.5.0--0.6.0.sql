-- genie 0.5.0 -> 0.6.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.6.0'" to load this file. \quit

-- Indexes of 0.5.0 work as they are: the on-disk format is unchanged (a
-- code index is a new encoding of it).

-- ---------------------------------------------------------------------------
-- 0.6.0: binary codes.  genie_bit_ops indexes bit(n) (and bit varying)
-- for exact nearest neighbours by Hamming distance, bit <-> bit, through
-- ORDER BY ... LIMIT k and genie_hamming_knn(index, bit[], k); genie_knn_from
-- takes a bit column too.
-- ---------------------------------------------------------------------------

-- ---- Binary codes: genie_bit_ops on bit(n) (Hamming space) ----

-- bit <-> bit: the Hamming distance, bit_count(a # b), as float8 like every
-- genie distance; codes of different lengths are an error, as a # b is.
-- (pgvector's Hamming and Jaccard operators on bit are <~> and <%>: both
-- extensions live in one schema.)
CREATE FUNCTION genie_hamming_distance(bit, bit)
RETURNS float8
AS 'MODULE_PATHNAME', 'genie_hamming_distance_bit'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <-> (
    LEFTARG = bit, RIGHTARG = bit,
    FUNCTION = genie_hamming_distance,
    COMMUTATOR = '<->'
);

CREATE FUNCTION genie_bit_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

-- CREATE INDEX ON images USING genie (code): every row's code is stored in
-- the index and ORDER BY code <-> q LIMIT k is exact (the GPU or the CPU
-- engine scans every code by popcount).  bit varying columns use it too;
-- an index takes the length of its first code.
CREATE OPERATOR CLASS genie_bit_ops
DEFAULT FOR TYPE bit USING genie AS
    OPERATOR 3 <-> (bit, bit) FOR ORDER BY float_ops,
    FUNCTION 1 genie_bit_support(internal);

-- A batch of query codes in one engine call: for each query (query_no is
-- its 1-based position) the k nearest rows visible to the caller by
-- bit <-> bit, nearest first, ties in row order; exact.  (Not an overload
-- of genie_knn: genie_knn(index, '{...}', k) with an untyped literal must
-- keep meaning real[].)
CREATE FUNCTION genie_hamming_knn(index regclass, queries bit[], k int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_hamming_knn'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
