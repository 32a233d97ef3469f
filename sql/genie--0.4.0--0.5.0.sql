-- genie 0.4.0 -> 0.5.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.5.0'" to load this file. \quit

-- Indexes of 0.4.0 work as they are: the on-disk format is unchanged.

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
