-- Set predicates, genie against GIN, in one session (bench/run-set-bench):
--   psql -v rows=200000 -v queries=200 -v sample=20 -f bench/set_bench.sql
-- The table of issue 15 (bench/service_bench.sql's: 5 to 45 draws of
-- 50000 * u^3 per row, distinct), twice: docs with a genie index and docs_gin
-- with GIN (array_ops), so that each method is timed with its own index and
-- nothing else; then both indexes on docs_both, where the planner chooses.
-- GIN answers <@ by reading every posting list: it runs the sample only
-- there.  Query sets (queries each): @> one drawn tag, @> two drawn tags, @> one
-- uniform (rare) tag, && 3 and && 8 drawn tags, <@ the tags below a random
-- bound in [200, 1000).  Each query runs SELECT count(*), sum(id) ... WHERE
-- tags OP q; every method's answers are compared with the sequential scan's
-- (on a sample of the queries) and with each other (on all).
\set ON_ERROR_STOP 1
\if :{?rows} \else \set rows 200000 \endif
\if :{?queries} \else \set queries 200 \endif
\if :{?sample} \else \set sample 20 \endif
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
DROP TABLE IF EXISTS docs, docs_gin, docs_both, set_queries, set_results, am_docs;

SELECT setseed(0.42);
CREATE TABLE docs (id int, tags int4[]);
INSERT INTO docs
SELECT i, ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int
                FROM generate_series(1, 5 + (i::int8 * 7919 % 41)::int))
FROM generate_series(1, :rows) i;
CREATE TABLE docs_gin AS SELECT * FROM docs;
CREATE TABLE docs_both AS SELECT * FROM docs;

CREATE TABLE set_queries (qid serial, kind text, op text, q int4[]);
INSERT INTO set_queries (kind, op, q)
SELECT kind, op, CASE kind
    WHEN '@> 1 drawn' THEN ARRAY[floor(50000 * power(random(), 3))::int + 0 * g]
    WHEN '@> 2 drawn' THEN ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int FROM generate_series(1, 2 + 0 * g))
    WHEN '@> 1 rare' THEN ARRAY[floor(50000 * random())::int + 0 * g]
    WHEN '&& 3 drawn' THEN ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int FROM generate_series(1, 3 + 0 * g))
    WHEN '&& 8 drawn' THEN ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int FROM generate_series(1, 8 + 0 * g))
    ELSE ARRAY(SELECT generate_series(0, 200 + (random() * 800)::int + 0 * g)) END
FROM (VALUES ('@> 1 drawn', '@>'), ('@> 2 drawn', '@>'), ('@> 1 rare', '@>'),
             ('&& 3 drawn', '&&'), ('&& 8 drawn', '&&'), ('<@ tags < bound', '<@')) k(kind, op),
     generate_series(1, :queries) g;

\echo == index builds (ms) and sizes
\timing on
CREATE INDEX docs_genie ON docs USING genie (tags);
CREATE INDEX docs_gin_idx ON docs_gin USING gin (tags);
\timing off
CREATE INDEX docs_both_genie ON docs_both USING genie (tags);
CREATE INDEX docs_both_gin ON docs_both USING gin (tags);
VACUUM ANALYZE docs;
VACUUM ANALYZE docs_gin;
VACUUM ANALYZE docs_both;
SELECT c.relname, pg_relation_size(c.oid) / 8192 AS pages,
       pg_size_pretty(pg_relation_size(c.oid)) AS size
FROM pg_class c WHERE relname IN ('docs', 'docs_genie', 'docs_gin_idx') ORDER BY 2 DESC;
SELECT (SELECT pg_relation_size('docs_genie')::float8 / pg_relation_size('docs_gin_idx'))::numeric(4,2)
         AS genie_over_gin,
       postings, (postings * 4 / 8192.0)::int AS int32_postings_pages, pages
FROM genie_index_info('docs_genie');

\echo == the same on the table of bench/am_bench.sql (5 to 25 tags of 20,000, u^3 skew)
SELECT setseed(0.5);
CREATE TABLE am_docs AS
SELECT i AS id, ARRAY(SELECT floor(power(random(), 3) * 20000)::int
                      FROM generate_series(1, 5 + (random() * 20)::int + 0 * i)) AS tags
FROM generate_series(1, :rows) AS i;
\timing on
CREATE INDEX am_docs_gin ON am_docs USING gin (tags);
CREATE INDEX am_docs_genie ON am_docs USING genie (tags);
\timing off
SELECT c.relname, pg_relation_size(c.oid) / 8192 AS pages
FROM pg_class c WHERE relname IN ('am_docs', 'am_docs_genie', 'am_docs_gin') ORDER BY 2 DESC;
SELECT (pg_relation_size('am_docs_genie')::float8 / pg_relation_size('am_docs_gin'))::numeric(4,2) AS genie_over_gin;
DROP TABLE am_docs;

CREATE TABLE set_results (method text, qid int, ms float8, n bigint, idsum bigint, plan text);

-- Runs every query (or the first :sample of each kind) under one method.
CREATE FUNCTION set_run(method text, tab text, per_kind int, sample_size int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  r record; t0 timestamptz; n bigint; s bigint; plan text; line text;
BEGIN
  SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = on;
  IF method = 'seqscan' THEN
    SET LOCAL enable_bitmapscan = off; SET LOCAL enable_indexscan = off;
  ELSIF method IN ('genie bitmap', 'gin bitmap') THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;
  ELSIF method = 'genie index scan' THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  END IF;
  -- warm: the table in shared buffers, genie's postings in this backend
  -- (an ORDER BY <~>, which only genie serves, loads them)
  EXECUTE format('SELECT count(*) FROM %I WHERE tags @> ''{1}''', tab);
  IF tab <> 'docs_gin' THEN
    EXECUTE format('SELECT id FROM %I ORDER BY tags <~> ''{1}'' LIMIT 1', tab);
  END IF;
  FOR r IN SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY kind ORDER BY qid) rn FROM set_queries) x
           -- GIN has to read every posting list for <@: a sample, as for the sequential scan
           WHERE rn <= CASE WHEN op = '<@' AND method = 'gin bitmap' THEN least(per_kind, sample_size) ELSE per_kind END
           ORDER BY qid LOOP
    plan := '';
    IF method = 'planner' THEN
      FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) SELECT count(*), sum(id) FROM %I WHERE tags %s $1', tab, r.op)
          USING r.q LOOP
        IF line ~ 'Scan' THEN plan := plan || trim(line) || '; '; END IF;
      END LOOP;
    END IF;
    t0 := clock_timestamp();
    EXECUTE format('SELECT count(*), sum(id) FROM %I WHERE tags %s $1', tab, r.op) INTO n, s USING r.q;
    INSERT INTO set_results VALUES (method, r.qid, extract(epoch FROM clock_timestamp() - t0) * 1000, n, s, plan);
  END LOOP;
END $$;

SELECT set_run('genie bitmap', 'docs', :queries, :sample);
SELECT set_run('genie index scan', 'docs', :queries, :sample);
SELECT set_run('gin bitmap', 'docs_gin', :queries, :sample);
SELECT set_run('planner', 'docs_both', :queries, :sample);
SELECT set_run('seqscan', 'docs', :sample, :sample);

\echo == milliseconds per query (mean over the queries of each kind; seqscan over the sample)
SELECT kind,
       (avg(n) FILTER (WHERE method = 'gin bitmap'))::int AS mean_rows,
       (avg(ms) FILTER (WHERE method = 'genie bitmap'))::numeric(10,3) AS genie_bitmap,
       (avg(ms) FILTER (WHERE method = 'genie index scan'))::numeric(10,3) AS genie_index,
       (avg(ms) FILTER (WHERE method = 'gin bitmap'))::numeric(10,3) AS gin_bitmap,
       (avg(ms) FILTER (WHERE method = 'seqscan'))::numeric(10,3) AS seqscan,
       (avg(ms) FILTER (WHERE method = 'planner'))::numeric(10,3) AS planner,
       ((avg(ms) FILTER (WHERE method = 'gin bitmap')) / (avg(ms) FILTER (WHERE method = 'genie bitmap')))::numeric(6,1)
         AS gin_over_genie,
       ((avg(ms) FILTER (WHERE method = 'seqscan')) / (avg(ms) FILTER (WHERE method = 'genie bitmap')))::numeric(8,1)
         AS seqscan_over_genie,
       (1000.0 / avg(ms) FILTER (WHERE method = 'genie bitmap'))::int AS genie_queries_per_s,
       (1000.0 / avg(ms) FILTER (WHERE method = 'gin bitmap'))::int AS gin_queries_per_s
FROM set_results JOIN set_queries USING (qid) GROUP BY kind ORDER BY min(qid);

\echo == what the planner chose with both indexes on the table, with the genie postings loaded
SELECT kind, plan, count(*) AS queries, avg(ms)::numeric(10,3) AS ms_per_query
FROM set_results JOIN set_queries USING (qid) WHERE method = 'planner'
GROUP BY kind, plan ORDER BY min(qid), 3 DESC;

\echo == exactness: answers (count, sum of ids) that differ from the sequential scan's / from GIN's
SELECT m.method,
       count(*) FILTER (WHERE s.qid IS NOT NULL AND (m.n, m.idsum) IS DISTINCT FROM (s.n, s.idsum)) AS differ_from_seqscan,
       count(s.qid) AS checked_against_seqscan,
       count(*) FILTER (WHERE g.qid IS NOT NULL AND (m.n, m.idsum) IS DISTINCT FROM (g.n, g.idsum)) AS differ_from_gin,
       count(g.qid) AS checked_against_gin,
       count(*) AS queries
FROM set_results m
LEFT JOIN set_results g ON g.method = 'gin bitmap' AND g.qid = m.qid
LEFT JOIN set_results s ON s.method = 'seqscan' AND s.qid = m.qid
WHERE m.method <> 'seqscan' GROUP BY m.method ORDER BY 1;
