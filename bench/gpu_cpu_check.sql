-- GPU and CPU engines give the same results on a 1M-row table (GPU host).
--   psql -v rows=1000000 -f bench/gpu_cpu_check.sql
\set ON_ERROR_STOP 1
\if :{?rows} \else \set rows 1000000 \endif
CREATE EXTENSION IF NOT EXISTS genie;
SELECT setseed(0.9);
CREATE TABLE check_docs AS
SELECT i AS id, ARRAY(SELECT floor(power(random(), 3) * 50000)::int
                      FROM generate_series(1, 5 + (random() * 25)::int + 0 * i)) AS tags
FROM generate_series(1, :rows) AS i;
\timing on
CREATE INDEX check_docs_idx ON check_docs USING genie (tags);
\timing off
CREATE TABLE check_queries AS
SELECT q AS qid, genie_query_add(genie_query(ARRAY(SELECT floor(power(random(), 3) * 50000)::int
                                                   FROM generate_series(1, 2 + (random() * 10)::int + 0 * q))),
                                 ARRAY[int4range(q * 37 % 50000, q * 37 % 50000 + 50)], 2) AS query
FROM generate_series(1, 1024) AS q;

CREATE TABLE check_results (device text, query_no int, scores int[]);
SET genie.device = 'cpu';
\timing on
INSERT INTO check_results
SELECT 'cpu', query_no, array_agg(score ORDER BY score DESC)
FROM genie_topk('check_docs_idx', (SELECT array_agg(query ORDER BY qid) FROM check_queries), 100)
GROUP BY query_no;
SET genie.device = 'gpu';
INSERT INTO check_results
SELECT 'gpu', query_no, array_agg(score ORDER BY score DESC)
FROM genie_topk('check_docs_idx', (SELECT array_agg(query ORDER BY qid) FROM check_queries), 100)
GROUP BY query_no;
\timing off
SELECT count(*) AS queries_compared,
       count(*) FILTER (WHERE c.scores IS DISTINCT FROM g.scores) AS queries_differing,
       sum(cardinality(c.scores)) AS rows_compared
FROM check_results c FULL JOIN check_results g ON c.query_no = g.query_no AND g.device = 'gpu'
WHERE c.device = 'cpu';

-- single ORDER BY scans on the GPU agree with the CPU engine too
SET enable_seqscan = off;
CREATE TABLE scan_results (device text, qid int, scores float8[]);
SET genie.device = 'cpu';
INSERT INTO scan_results SELECT 'cpu', qid, (SELECT array_agg(s) FROM (SELECT tags <~> query AS s FROM check_docs
                                             ORDER BY tags <~> query LIMIT 20) x) FROM check_queries WHERE qid <= 50;
SET genie.device = 'gpu';
INSERT INTO scan_results SELECT 'gpu', qid, (SELECT array_agg(s) FROM (SELECT tags <~> query AS s FROM check_docs
                                             ORDER BY tags <~> query LIMIT 20) x) FROM check_queries WHERE qid <= 50;
SELECT count(*) AS scans_compared, count(*) FILTER (WHERE c.scores IS DISTINCT FROM g.scores) AS scans_differing
FROM scan_results c JOIN scan_results g USING (qid) WHERE c.device = 'cpu' AND g.device = 'gpu';

-- A device memory limit too small for the index: the GPU engine splits the
-- objects into parts (multiple loading); results stay the same.
SET genie.device = 'gpu';
SET genie.device_memory_limit = '64MB';
CREATE TABLE limited_results AS
SELECT query_no, array_agg(score ORDER BY score DESC) AS scores
FROM genie_topk('check_docs_idx', (SELECT array_agg(query ORDER BY qid) FROM check_queries WHERE qid <= 256), 100)
GROUP BY query_no;
SELECT count(*) AS limited_queries, count(*) FILTER (WHERE l.scores IS DISTINCT FROM c.scores) AS limited_differing
FROM limited_results l JOIN check_results c ON c.query_no = l.query_no AND c.device = 'cpu';
-- A limit too small for even one part: the search falls back to the CPU with a NOTICE.
SET genie.device_memory_limit = '1MB';
SET client_min_messages = notice;
SELECT count(*) AS fallback_rows FROM genie_topk('check_docs_idx', (SELECT array_agg(query ORDER BY qid) FROM check_queries WHERE qid <= 4), 10);
RESET genie.device_memory_limit;

-- Warm batch timings: genie_topk of all 1024 queries, k = 100, three times per engine.
CREATE TABLE batch_timings (device text, run int, ms float8);
CREATE FUNCTION time_batch(device text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n bigint; qs genie_query[];
BEGIN
  PERFORM set_config('genie.device', device, true);
  SELECT array_agg(query ORDER BY qid) INTO qs FROM check_queries;
  PERFORM count(*) FROM genie_topk('check_docs_idx', qs, 100);   -- warm the cache
  FOR r IN 1..3 LOOP
    t0 := clock_timestamp();
    SELECT count(*) INTO n FROM genie_topk('check_docs_idx', qs, 100);
    INSERT INTO batch_timings VALUES (device, r, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
END $$;
SELECT time_batch('cpu');
SELECT time_batch('gpu');
SELECT device, round(min(ms)::numeric, 1) AS best_ms_1024_queries,
       round((1024 / (min(ms) / 1000))::numeric) AS queries_per_s
FROM batch_timings GROUP BY device ORDER BY device;
