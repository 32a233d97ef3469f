-- genie 0.11.0
\echo Use "CREATE EXTENSION genie" to load this file. \quit

-- GENIE's match count of keyword sets: the number of distinct query keywords
-- that occur in the object.  Duplicates count once on either side, an empty
-- array gives 0, a NULL array gives NULL, and a NULL element is an error.
CREATE FUNCTION genie_match_count(object int4[], query int4[])
RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_int4_array'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION genie_match_count(int4[], int4[]) IS
'number of distinct query keywords that occur in the object';

-- One row per compute device genie can use: the CPU first, then each GPU;
-- in_use says whether genie.devices lets genie use it (the CPU always).
CREATE FUNCTION genie_devices(
    OUT kind text,
    OUT ordinal int4,
    OUT name text,
    OUT memory_bytes int8,
    OUT free_memory_bytes int8,
    OUT compute_capability text,
    OUT processors int4,
    OUT usable bool,
    OUT note text,
    OUT in_use bool)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_devices'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- The extension's version, and the CUDA version it was built against (NULL
-- when built without CUDA).
CREATE FUNCTION genie_version(
    OUT version text,
    OUT with_cuda bool,
    OUT cuda_version text)
RETURNS record
AS 'MODULE_PATHNAME', 'genie_version'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- The genie service (genie in shared_preload_libraries): whether it is
-- configured and running, its process, whether it found a usable GPU (and
-- why not), and what it holds: index versions, host and device bytes.
CREATE FUNCTION genie_service_status(
    OUT configured bool,
    OUT running bool,
    OUT pid int4,
    OUT gpu bool,
    OUT gpu_note text,
    OUT resident_indexes int4,
    OUT host_bytes int8,
    OUT device_bytes int8)
RETURNS record
AS 'MODULE_PATHNAME', 'genie_service_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- A row per index version and engine the genie service holds, with what
-- it did for it: loads, engine calls (batches), requests and queries they
-- served, mean and largest batch (queries per engine call), the mean wait
-- of a request in the queue and the engine time.  database and index are
-- OIDs, since the service serves every database of the cluster.  content is
-- 'postings' (the main postings, for searches by match count), 'vectors' (the
-- main objects' stored vectors, for exact vector scans), 'codes' (their
-- stored binary codes, for Hamming scans) or 'strings' (the main objects'
-- stored strings, for edit-distance scans: a batch is one scan request).
CREATE FUNCTION genie_service_stats(
    OUT database oid,
    OUT index oid,
    OUT engine text,
    OUT resident bool,
    OUT objects int4,
    OUT host_bytes int8,
    OUT device_bytes int8,
    OUT loads int8,
    OUT batches int8,
    OUT requests int8,
    OUT queries int8,
    OUT mean_batch float8,
    OUT max_batch int8,
    OUT mean_queue_wait_ms float8,
    OUT engine_ms float8,
    OUT content text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_service_stats'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION genie_service_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genie_service_stats() TO pg_monitor;

-- ---------------------------------------------------------------------------
-- genie_query: a list of items, each a set of keyword ranges with a weight.
-- Text form: {3, 17, 10..20*2, (1..3, 7)*5}
--   17          the keyword 17, weight 1
--   10..20*2    the keywords 10 to 20 (inclusive) as one item, weight 2
--   (1..3, 7)*5 the keywords 1, 2, 3 and 7 as one item, weight 5
-- score(object, query) = sum over items of weight * (number of the object's
-- distinct keywords the item contains).
-- ---------------------------------------------------------------------------

CREATE TYPE genie_query;

CREATE FUNCTION genie_query_in(cstring) RETURNS genie_query
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_out(genie_query) RETURNS cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_recv(internal) RETURNS genie_query
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_send(genie_query) RETURNS bytea
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE genie_query (
    INPUT = genie_query_in,
    OUTPUT = genie_query_out,
    RECEIVE = genie_query_recv,
    SEND = genie_query_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = extended,
    -- In the array category like int4[], so that an untyped literal next to an
    -- int4[] argument, as in genie_match_count(tags, '{1,2}'), resolves to the
    -- int4[] overload: '{1,1}' means one keyword as int4[] but two items as
    -- genie_query.
    CATEGORY = 'A'
);

-- Equality, a total order and hashing: DISTINCT, GROUP BY, UNION, IN and hash
-- joins over genie_query.  Equal means the same items in the same order (the
-- order of the comparison operators is arbitrary but total).
CREATE FUNCTION genie_query_cmp(genie_query, genie_query) RETURNS int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_eq(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_ne(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_lt(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_le(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_gt(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_ge(genie_query, genie_query) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_hash(genie_query) RETURNS int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_query_hash_extended(genie_query, int8) RETURNS int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR = (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = genie_query, RIGHTARG = genie_query, FUNCTION = genie_query_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel);

CREATE OPERATOR CLASS genie_query_ops DEFAULT FOR TYPE genie_query USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 genie_query_cmp(genie_query, genie_query);
CREATE OPERATOR CLASS genie_query_hash_ops DEFAULT FOR TYPE genie_query USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 genie_query_hash(genie_query),
    FUNCTION 2 genie_query_hash_extended(genie_query, int8);

-- Each distinct keyword its own item of weight 1 (GENIE's keyword-set query).
CREATE FUNCTION genie_query(keywords int4[]) RETURNS genie_query
AS 'MODULE_PATHNAME', 'genie_query_from_int4_array'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE CAST (int4[] AS genie_query) WITH FUNCTION genie_query(int4[]);

-- Appends one item: the union of the ranges, with a weight.
CREATE FUNCTION genie_query_add(query genie_query, ranges int4range[], weight int4 DEFAULT 1)
RETURNS genie_query
AS 'MODULE_PATHNAME', 'genie_query_add_ranges'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Appends one item: the set of the keywords, with a weight.
CREATE FUNCTION genie_query_add(query genie_query, keywords int4[], weight int4 DEFAULT 1)
RETURNS genie_query
AS 'MODULE_PATHNAME', 'genie_query_add_keywords'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The items of a query, one row per keyword range.
CREATE FUNCTION genie_query_items(query genie_query,
    OUT item_no int4, OUT weight int4, OUT lo int4, OUT hi int4)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_query_items'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_match_count(object int4[], query genie_query)
RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_query'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION genie_match_count(int4[], genie_query) IS
'weighted match count: sum over query items of weight times the object keywords the item contains';

-- ---------------------------------------------------------------------------
-- Ordering operators: the negated match count, because index scans order
-- ascending only; ORDER BY tags <~> query LIMIT k is the top-k by match count.
-- ---------------------------------------------------------------------------

CREATE FUNCTION genie_negated_match_count(int4[], int4[]) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_int4_array'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 10;

CREATE FUNCTION genie_negated_match_count(int4[], genie_query) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_query'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 10;

CREATE OPERATOR <~> (
    LEFTARG = int4[], RIGHTARG = int4[],
    FUNCTION = genie_negated_match_count,
    COMMUTATOR = '<~>'
);

CREATE OPERATOR <~> (
    LEFTARG = int4[], RIGHTARG = genie_query,
    FUNCTION = genie_negated_match_count
);

-- ---------------------------------------------------------------------------
-- The access method
-- ---------------------------------------------------------------------------

CREATE FUNCTION genie_handler(internal) RETURNS index_am_handler
AS 'MODULE_PATHNAME' LANGUAGE C;

CREATE ACCESS METHOD genie TYPE INDEX HANDLER genie_handler;
COMMENT ON ACCESS METHOD genie IS 'GENIE inverted index: top-k by match count on the GPU or CPU';

-- Support function 1 of an operator class returns its type's callbacks (how
-- values and queries become keywords, extension/genie_type.h); the index
-- keeps the type's encoding in its metapage.
CREATE FUNCTION genie_int4_support(internal) RETURNS internal
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_ngram_support(internal) RETURNS internal
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS genie_int4_ops
DEFAULT FOR TYPE int4[] USING genie AS
    OPERATOR 1 <~> (int4[], int4[]) FOR ORDER BY float_ops,
    OPERATOR 2 <~> (int4[], genie_query) FOR ORDER BY float_ops,
    FUNCTION 1 genie_int4_support(internal);

-- ---------------------------------------------------------------------------
-- Sequence similarity on text (GENIE section V-A): ordered n-grams.
-- ---------------------------------------------------------------------------

-- The keywords an index of n-grams stores for a text: its ordered n-grams
-- (gram, occurrence number) of the text padded with n - 1 marks at each end,
-- hashed to int4, distinct and ascending.
CREATE FUNCTION genie_ngrams(value text, n int4 DEFAULT 3) RETURNS int4[]
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The ordered n-gram match count of two texts, as an index of n-grams
-- counts it: sum over grams of min(occurrences), up to hash collisions.
CREATE FUNCTION genie_ngram_count(a text, b text, n int4 DEFAULT 3) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_ngram_count_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Levenshtein distance, unit costs, counted in characters.
CREATE FUNCTION genie_edit_distance(a text, b text) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_edit_distance_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_negated_ngram_count(text, text) RETURNS float8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 10;

CREATE FUNCTION genie_edit_distance_float8(text, text) RETURNS float8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 50;

-- ORDER BY w <~> 'query': most shared 3-grams first (negated count).
CREATE OPERATOR <~> (
    LEFTARG = text, RIGHTARG = text,
    FUNCTION = genie_negated_ngram_count,
    COMMUTATOR = '<~>'
);

-- ORDER BY w <%> 'query': nearest by edit distance first.  (pg_trgm owns
-- text <-> text; this name lets both live in one schema.)
CREATE OPERATOR <%> (
    LEFTARG = text, RIGHTARG = text,
    FUNCTION = genie_edit_distance_float8,
    COMMUTATOR = '<%>'
);

CREATE OPERATOR CLASS genie_ngram_ops
FOR TYPE text USING genie AS
    OPERATOR 1 <~> (text, text) FOR ORDER BY float_ops,
    OPERATOR 2 <%> (text, text) FOR ORDER BY float_ops,
    FUNCTION 1 genie_ngram_support(internal);

-- The batch pipeline: for each query (query_no is its 1-based position) the
-- k rows nearest by edit distance, verified from the top `candidates` rows
-- by n-gram count and certified; uncertified queries run again with twice
-- the candidates.  rounds is how many rounds the query took; max_rounds
-- (NULL: no limit) stops early, and then exact says which rows are proven
-- to be among the k nearest.
CREATE FUNCTION genie_similar(index regclass, queries text[], k int4,
    candidates int4 DEFAULT 32, max_rounds int4 DEFAULT NULL)
RETURNS TABLE (query_no int4, ctid tid, distance int4, exact bool, rounds int4)
AS 'MODULE_PATHNAME', 'genie_similar'
LANGUAGE C VOLATILE CALLED ON NULL INPUT PARALLEL RESTRICTED;

-- A batch of queries in one engine call: for each query (query_no is its
-- 1-based position in the array) the k best rows visible to the caller, with
-- their match counts; rows come in query order, best first.
CREATE FUNCTION genie_topk(index regclass, queries genie_query[], k int4)
RETURNS TABLE (query_no int4, ctid tid, score int4)
AS 'MODULE_PATHNAME', 'genie_topk'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- What a genie index holds, read from its metapage.
CREATE FUNCTION genie_index_info(index regclass,
    OUT live_rows int4, OUT dead_rows int4, OUT pending_rows int4, OUT pending_bytes int8,
    OUT keywords int4, OUT postings int8, OUT split_length int4, OUT pages int8,
    OUT stamp int8, OUT format_version int4, OUT encoding text, OUT ngram_length int4)
RETURNS record
AS 'MODULE_PATHNAME', 'genie_index_info'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

-- Verifies an index as amcheck's bt_index_check does a B-tree: pages, chains,
-- orders, counts and flags; with heapallindexed, that every row the caller's
-- snapshot sees is in the index with exactly its keywords.  An error
-- (SQLSTATE XX002, index_corrupted) says what is wrong; nothing is returned.
CREATE FUNCTION genie_index_check(index regclass, heapallindexed bool DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'genie_index_check'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
-- as amcheck's: for superusers and whom they grant it to
REVOKE ALL ON FUNCTION genie_index_check(regclass, bool) FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- Range-tuple scoring over relational rows (paper Example 2.1, section V-C).
--
--   CREATE INDEX adult_ranges ON adult USING genie ((adult))
--       WITH (attributes = 'age, workclass, hours_per_week 1..99', buckets = 1024);
--   SELECT * FROM adult
--   ORDER BY adult <~> genie_ranges('adult_ranges',
--       '{"age": [30, 40], "workclass": ["Private", "State-gov"]}')
--   LIMIT 10;
--
-- A genie_ranges value is bound to one build of one row index and carries
-- what scoring a row needs, so row <~> query gives the same order with or
-- without the index.

CREATE TYPE genie_ranges;

CREATE FUNCTION genie_ranges_in(cstring) RETURNS genie_ranges
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_out(genie_ranges) RETURNS cstring
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_recv(internal) RETURNS genie_ranges
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_send(genie_ranges) RETURNS bytea
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE TYPE genie_ranges (
    INPUT = genie_ranges_in,
    OUTPUT = genie_ranges_out,
    RECEIVE = genie_ranges_recv,
    SEND = genie_ranges_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = double,
    STORAGE = extended
);

-- Equality, a total order and hashing: DISTINCT, GROUP BY, UNION, IN and hash
-- joins over genie_ranges.  Equal means the same items in the same order (the
-- order of the comparison operators is arbitrary but total).
CREATE FUNCTION genie_ranges_cmp(genie_ranges, genie_ranges) RETURNS int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_eq(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_ne(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_lt(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_le(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_gt(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_ge(genie_ranges, genie_ranges) RETURNS bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_hash(genie_ranges) RETURNS int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION genie_ranges_hash_extended(genie_ranges, int8) RETURNS int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR = (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = eqsel, JOIN = eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = neqsel, JOIN = neqjoinsel);
CREATE OPERATOR < (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = scalarltsel, JOIN = scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = scalarlesel, JOIN = scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = scalargtsel, JOIN = scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = genie_ranges, RIGHTARG = genie_ranges, FUNCTION = genie_ranges_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = scalargesel, JOIN = scalargejoinsel);

CREATE OPERATOR CLASS genie_ranges_ops DEFAULT FOR TYPE genie_ranges USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 genie_ranges_cmp(genie_ranges, genie_ranges);
CREATE OPERATOR CLASS genie_ranges_hash_ops DEFAULT FOR TYPE genie_ranges USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 genie_ranges_hash(genie_ranges),
    FUNCTION 2 genie_ranges_hash_extended(genie_ranges, int8);

-- The query: per attribute of the index, a numeric range [lo, hi] (null for
-- an open end) or one value, a set of categorical values or one value, each
-- optionally {"range" | "values": ..., "weight": n}.
CREATE FUNCTION genie_ranges(index regclass, ranges jsonb) RETURNS genie_ranges
AS 'MODULE_PATHNAME', 'genie_ranges_make'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- The summed weights of the attributes a row matches.
CREATE FUNCTION genie_match_count("row" record, query genie_ranges) RETURNS int4
AS 'MODULE_PATHNAME', 'genie_match_count_row'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION genie_negated_match_count(record, genie_ranges) RETURNS float8
AS 'MODULE_PATHNAME', 'genie_negated_match_count_row'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR <~> (
    LEFTARG = record,
    RIGHTARG = genie_ranges,
    FUNCTION = genie_negated_match_count
);

CREATE FUNCTION genie_row_support(internal) RETURNS internal
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS genie_row_ops
DEFAULT FOR TYPE record USING genie AS
    OPERATOR 1 <~> (record, genie_ranges) FOR ORDER BY float_ops,
    FUNCTION 1 genie_row_support(internal);

-- genie_topk for range queries (a name of its own: an overload would make
-- genie_topk(index, NULL or '{...}', k) ambiguous).
-- A row index's `attributes` storage parameter follows ALTER TABLE: a renamed
-- column under its new name, a dropped one left out (extension/genie_ddl.c).
CREATE FUNCTION genie_alter_table_end() RETURNS event_trigger
AS 'MODULE_PATHNAME' LANGUAGE C;
CREATE EVENT TRIGGER genie_row_attributes ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION genie_alter_table_end();

CREATE FUNCTION genie_ranges_topk(index regclass, queries genie_ranges[], k int4)
RETURNS TABLE (query_no int4, ctid tid, score int4)
AS 'MODULE_PATHNAME', 'genie_topk'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- How a row index encodes each attribute: mode 'buckets' (equal-width
-- buckets between lower and upper, as float8: dates in days and timestamps
-- in microseconds since 2000-01-01) or 'values' (one keyword per distinct
-- value, distinct_values of them so far).
CREATE FUNCTION genie_index_attributes(index regclass)
RETURNS TABLE (attribute text, type regtype, mode text, buckets int4,
               lower float8, upper float8, distinct_values int4)
AS 'MODULE_PATHNAME', 'genie_index_attributes'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

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

-- ---------------------------------------------------------------------------
-- 0.4.0: set predicates through genie_int4_ops.  WHERE tags @> q, tags && q
-- and tags <@ q (the built-in array operators) are answered by intersecting
-- or uniting the postings of q's elements, as bitmap or plain index scans
-- whose rows need no recheck (an ordered scan by <~> leaves the predicate to
-- the executor).  Strategies 3 to 5; 1 and 2 are the orderings.
-- ---------------------------------------------------------------------------
ALTER OPERATOR FAMILY genie_int4_ops USING genie ADD
    OPERATOR 3 && (anyarray, anyarray),
    OPERATOR 4 @> (anyarray, anyarray),
    OPERATOR 5 <@ (anyarray, anyarray);

-- ---------------------------------------------------------------------------
-- 0.5.0: where a session's genie searches spend their time.  With
-- genie.profile = on every search charges its time to phases (query,
-- cache, load, upload, service, queue, engine, pending, visibility,
-- results), each exclusively; genie_profile() shows the sums since
-- genie_profile_reset().
-- ---------------------------------------------------------------------------
CREATE FUNCTION genie_profile(OUT phase text, OUT calls int8, OUT total_ms float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'genie_profile'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

CREATE FUNCTION genie_profile_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'genie_profile_reset'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- genie_knn over the rows of a query: each row of query (one real[]
-- column) is a query vector, query_no its 1-based position in the query's
-- order; the rows are read from a cursor (read-only, as the caller), so a
-- batch of thousands of vectors is never built into one array:
--   SELECT * FROM genie_knn_from('items_v_idx', 'SELECT v FROM probes ORDER BY id', 10);
CREATE FUNCTION genie_knn_from(index regclass, query text, k int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_knn_from'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

-- genie_knn over queries sent as raw bytes: float32 values, little-endian,
-- one vector of dim values after another (numpy's astype('<f4').tobytes());
-- dim must be the index's, query_no counts the vectors from 1.  A client
-- sends a batch as one binary bytea parameter, which the server takes
-- without parsing an array element by element:
--   SELECT * FROM genie_knn_bytes('items_v_idx', $1, 784, 10);
CREATE FUNCTION genie_knn_bytes(index regclass, queries bytea, dim int4, k int4)
RETURNS TABLE (query_no int4, ctid tid, distance float8)
AS 'MODULE_PATHNAME', 'genie_knn_bytes'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

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

CREATE FUNCTION genie_document_support(internal) RETURNS internal
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS genie_tsvector_ops
DEFAULT FOR TYPE tsvector USING genie AS
    OPERATOR 1 <~> (tsvector, tsquery) FOR ORDER BY float_ops,
    OPERATOR 2 <~> (tsvector, tsvector) FOR ORDER BY float_ops,
    OPERATOR 3 <~> (tsvector, genie_document_query) FOR ORDER BY float_ops,
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
