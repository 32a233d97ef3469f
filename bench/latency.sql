-- Single-query latency of ORDER BY tags <~> q LIMIT 10 through the genie
-- index, per engine, warm cache, in one session.
--   psql -v rows=200000 -v queries=200 -f bench/latency.sql
\set ON_ERROR_STOP 1
\if :{?rows} \else \set rows 200000 \endif
\if :{?queries} \else \set queries 200 \endif
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
SELECT setseed(0.5);
CREATE TABLE lat_docs AS
SELECT i AS id, ARRAY(SELECT floor(power(random(), 3) * 20000)::int
                      FROM generate_series(1, 5 + (random() * 20)::int + 0 * i)) AS tags
FROM generate_series(1, :rows) AS i;
CREATE INDEX lat_docs_idx ON lat_docs USING genie (tags);
CREATE TABLE lat_queries AS
SELECT q AS qid, ARRAY(SELECT floor(power(random(), 3) * 20000)::int
                       FROM generate_series(1, 3 + (random() * 7)::int + 0 * q)) AS query
FROM generate_series(1, :queries) AS q;
VACUUM ANALYZE lat_docs;
CREATE TABLE lat_results (device text, batch_size int, queries int, ms float8);

CREATE FUNCTION lat_run(device text, batch_size int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE q record; t0 timestamptz; n int := 0; dummy int;
BEGIN
  PERFORM set_config('genie.device', device, true);
  PERFORM set_config('genie.scan_batch_size', batch_size::text, true);
  SET LOCAL enable_seqscan = off;
  PERFORM id FROM lat_docs ORDER BY tags <~> '{1}' LIMIT 1;   -- load the cache
  t0 := clock_timestamp();
  FOR q IN SELECT * FROM lat_queries ORDER BY qid LOOP
    SELECT count(*) INTO dummy FROM (SELECT id FROM lat_docs ORDER BY tags <~> q.query LIMIT 10) x;
    n := n + 1;
  END LOOP;
  INSERT INTO lat_results VALUES (device, batch_size, n, extract(epoch FROM clock_timestamp() - t0) * 1000);
END $$;

SELECT lat_run('cpu', 100);
SELECT lat_run('cpu', 10);
SELECT lat_run(:'device', 100);
SELECT lat_run(:'device', 10);
SELECT device, batch_size AS scan_batch_size, queries, round(ms::numeric, 1) AS total_ms,
       round((ms / queries)::numeric, 3) AS ms_per_query
FROM lat_results;
\timing on
SET genie.device = :'device';
SET enable_seqscan = off;
EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM lat_docs ORDER BY tags <~> '{5,77,1234}' LIMIT 10;
SELECT id FROM lat_docs ORDER BY tags <~> '{5,77,1234}' LIMIT 10;
SELECT id FROM lat_docs ORDER BY tags <~> '{5,77,1234}' LIMIT 10;
SELECT * FROM genie_topk('lat_docs_idx', ARRAY['{5,77,1234}']::genie_query[], 10);
SELECT * FROM genie_topk('lat_docs_idx', ARRAY['{5,77,1234}']::genie_query[], 10);
