-- genie access-method benchmark: one session, one table, three methods.
--   psql -v rows=200000 -v queries=200 -v device=cpu -f bench/am_bench.sql
-- Methods, each asked for the top 10 rows by match count:
--   seqscan  ORDER BY genie_match_count(tags, q) DESC LIMIT 10 over the table
--   gin      WHERE tags && q (GIN array_ops index), then the same sort
--   genie    ORDER BY tags <~> q LIMIT 10 (genie index), one query at a time
--   genie_topk  all queries in one genie_topk call (one engine batch)
\set ON_ERROR_STOP 1
\if :{?rows} \else \set rows 200000 \endif
\if :{?queries} \else \set queries 200 \endif
\if :{?device} \else \set device cpu \endif
SET genie.device = :'device';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;

DROP TABLE IF EXISTS bench_docs, bench_queries, bench_results;
SELECT setseed(0.5);
-- tag sets with a Zipf-like skew: a few tags are very common
CREATE TABLE bench_docs AS
SELECT i AS id, ARRAY(SELECT floor(power(random(), 3) * 20000)::int
                      FROM generate_series(1, 5 + (random() * 20)::int + 0 * i)) AS tags
FROM generate_series(1, :rows) AS i;
ALTER TABLE bench_docs ADD PRIMARY KEY (id);
CREATE TABLE bench_queries AS
SELECT q AS qid, ARRAY(SELECT floor(power(random(), 3) * 20000)::int
                       FROM generate_series(1, 3 + (random() * 7)::int + 0 * q)) AS query
FROM generate_series(1, :queries) AS q;

\timing on
CREATE INDEX bench_docs_gin ON bench_docs USING gin (tags);
CREATE INDEX bench_docs_genie ON bench_docs USING genie (tags);
\timing off
VACUUM ANALYZE bench_docs;

CREATE TABLE bench_results (method text, queries int, ms float8, top_scores int[]);

CREATE OR REPLACE FUNCTION bench_run(method text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  q record; t0 timestamptz; scores int[]; all_scores int[] := '{}'; n int := 0;
BEGIN
  IF method = 'seqscan' THEN
    SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  ELSIF method = 'gin' THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;
  ELSE
    SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  END IF;
  -- warm the caches (and the genie engine) outside the timing; EXECUTE plans
  -- it under this method's settings (a static statement would keep the plan
  -- of the first method and leave the genie index cold)
  EXECUTE 'SELECT id FROM bench_docs ORDER BY tags <~> ''{1}'' LIMIT 1';
  IF method = 'genie' THEN
    PERFORM id FROM bench_docs ORDER BY tags <~> (SELECT query FROM bench_queries ORDER BY qid LIMIT 1) LIMIT 10;
  END IF;
  t0 := clock_timestamp();
  FOR q IN SELECT * FROM bench_queries ORDER BY qid LOOP
    IF method = 'seqscan' THEN
      SELECT array_agg(s) INTO scores FROM (SELECT genie_match_count(tags, q.query) s FROM bench_docs
                                            ORDER BY 1 DESC LIMIT 10) x;
    ELSIF method = 'gin' THEN
      SELECT array_agg(s) INTO scores FROM (SELECT genie_match_count(tags, q.query) s FROM bench_docs
                                            WHERE tags && q.query ORDER BY 1 DESC LIMIT 10) x;
    ELSE
      SELECT array_agg(-s::int) INTO scores FROM (SELECT tags <~> q.query s FROM bench_docs
                                                  ORDER BY tags <~> q.query LIMIT 10) x;
    END IF;
    all_scores := all_scores || scores;
    n := n + 1;
  END LOOP;
  INSERT INTO bench_results VALUES (method, n, extract(epoch FROM clock_timestamp() - t0) * 1000, all_scores);
END $$;

CREATE OR REPLACE FUNCTION bench_topk() RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; all_scores int[]; n int;
BEGIN
  SELECT count(*) INTO n FROM bench_queries;
  t0 := clock_timestamp();
  SELECT array_agg(score ORDER BY query_no, score DESC) INTO all_scores
  FROM genie_topk('bench_docs_genie', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM bench_queries), 10);
  INSERT INTO bench_results VALUES ('genie_topk', n, extract(epoch FROM clock_timestamp() - t0) * 1000, all_scores);
END $$;

\if :{?genie_only}
-- genie methods only (for profiling); the seqscan row then reads 'genie'
SELECT bench_run('genie');
SELECT bench_topk();
INSERT INTO bench_results SELECT 'seqscan', queries, ms, top_scores FROM bench_results WHERE method = 'genie';
\else
SELECT bench_run('seqscan');
SELECT bench_run('gin');
SELECT bench_run('genie');
SELECT bench_topk();
\endif

\echo
\echo '== top-10 by match count:' :rows 'rows,' :queries 'queries, genie.device =' :device
SELECT r.method, r.queries,
       round(r.ms::numeric, 1) AS total_ms,
       round((r.ms / r.queries)::numeric, 3) AS ms_per_query,
       round((r.queries / (r.ms / 1000))::numeric, 1) AS queries_per_s,
       round((s.ms / r.ms)::numeric, 1) AS speedup_vs_seqscan,
       (SELECT array_agg(x ORDER BY x) FROM unnest(r.top_scores) x)
         = (SELECT array_agg(x ORDER BY x) FROM unnest(s.top_scores) x) AS same_scores_as_seqscan
FROM bench_results r, bench_results s
WHERE s.method = 'seqscan'
ORDER BY r.ms DESC;
