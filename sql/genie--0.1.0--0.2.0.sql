-- genie 0.1.0 -> 0.2.0
\echo Use "ALTER EXTENSION genie UPDATE TO '0.2.0'" to load this file. \quit

-- The on-disk format is unchanged: indexes built by 0.1.0 keep working.
-- genie_ngram_ops indexes built by 0.1.0 store their strings already
-- (store_strings, default on); with 0.2.0 the genie service holds them
-- too, and genie_service_stats() says which rows are postings and which
-- are stored strings.

DROP FUNCTION genie_service_stats();

-- A row per index version and engine the genie service holds, with what
-- it did for it: loads, engine calls (batches), requests and queries they
-- served, mean and largest batch (queries per engine call), the mean wait
-- of a request in the queue and the engine time.  database and index are
-- OIDs, since the service serves every database of the cluster.  content is
-- 'postings' (the main postings, for searches by match count) or 'strings'
-- (the main objects' stored strings, for edit-distance scans: a batch is
-- one scan request).
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
