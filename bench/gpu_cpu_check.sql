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
