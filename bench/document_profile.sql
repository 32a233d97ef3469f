-- Where a document statement's time goes before 10,000 updates, while their
-- rows are pending, and after VACUUM (genie.profile's phases), one session:
--   psql -v file=corpus.tsv [-v queries=300] [-v updates=10000] [-v fetch=1 | -v batch=1] -f bench/document_profile.sql
-- fetch=1 runs bench/document_bench.sql's statement instead (EXECUTE, the
-- documents fetched and scored by genie_match_count); batch=1 its batch:
-- one genie_document_topk(docs_genie, all the query documents, 10) a round
-- (ms and phases are then a batch's, the query array built before the clock).
-- The corpus, query documents and updates of bench/document_bench.sql; ORDER
-- BY doc <~> q LIMIT 10, 3 rounds a state; ms a statement (server side) and
-- each phase's ms a statement, with the engine and pending calls.
\set ON_ERROR_STOP 1
\if :{?queries} \else \set queries 300 \endif
\if :{?updates} \else \set updates 10000 \endif
\if :{?fetch} \else \set fetch 0 \endif
\if :{?batch} \else \set batch 0 \endif
SET client_min_messages = warning;
SET jit = off;
CREATE EXTENSION IF NOT EXISTS genie;
DROP TABLE IF EXISTS corpus, docs, src, qd, prof;
CREATE TABLE corpus (body text);
COPY corpus FROM :'file';
SELECT setseed(0.77);
CREATE TABLE docs AS SELECT row_number() OVER () AS id, to_tsvector('english', body) AS doc FROM corpus;
DROP TABLE corpus;
CREATE TABLE qd AS SELECT row_number() OVER () AS qid, doc AS q
FROM (SELECT doc FROM docs WHERE length(doc) BETWEEN 5 AND 60 ORDER BY random() LIMIT :queries) s;
CREATE TABLE src AS SELECT * FROM docs;
CREATE INDEX docs_genie ON docs USING genie (doc);
VACUUM ANALYZE docs;
CREATE TABLE prof (state text, round int, ms float8, phase text, calls int8, phase_ms float8);
CREATE FUNCTION prof_run(state text, round int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record; t0 timestamptz; x int; t float8; n int; s int[];
  fetch_docs bool := current_setting('prof.fetch')::bool;
  batch bool := current_setting('prof.batch')::bool;
  qs tsvector[];
BEGIN
  SET LOCAL enable_seqscan = off;
  SELECT count(*), array_agg(q ORDER BY qid) INTO n, qs FROM qd;
  PERFORM genie_profile_reset();
  t0 := clock_timestamp();
  IF batch THEN
    SELECT count(*) INTO x FROM genie_document_topk('docs_genie', qs, 10);
    n := 1;
  END IF;
  FOR r IN SELECT * FROM qd WHERE NOT batch ORDER BY qid LOOP
    IF fetch_docs THEN
      EXECUTE 'SELECT array_agg(genie_match_count(doc, $1)) FROM (SELECT doc FROM docs ORDER BY doc <~> $1 LIMIT 10) t'
        INTO s USING r.q;
    ELSE
      SELECT count(*) INTO x FROM (SELECT id FROM docs ORDER BY doc <~> r.q LIMIT 10) s;
    END IF;
  END LOOP;
  t := extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
  INSERT INTO prof SELECT state, round, t, p.phase, p.calls, p.total_ms / n FROM genie_profile() p WHERE p.total_ms > 0;
END $$;
SET genie.profile = on;
SELECT set_config('prof.fetch', CASE WHEN :fetch = 1 THEN 'on' ELSE 'off' END, false);
SELECT set_config('prof.batch', CASE WHEN :batch = 1 THEN 'on' ELSE 'off' END, false);
SELECT prof_run('warm-up', 0);
SELECT prof_run('1 before the updates', g) FROM generate_series(1, 3) g;
SELECT setseed(0.5);
SELECT max(id) AS max_id FROM docs \gset
UPDATE docs d SET doc = g.doc
FROM (SELECT id, 1 + floor(random() * :max_id)::int AS src FROM docs ORDER BY random() LIMIT :updates) pick
JOIN src g ON g.id = pick.src WHERE d.id = pick.id;
SELECT prof_run('warm-up', 0);
SELECT prof_run('2 pending', g) FROM generate_series(1, 3) g;
VACUUM docs;
SELECT prof_run('warm-up', 0);
SELECT prof_run('3 vacuumed', g) FROM generate_series(1, 3) g;
REINDEX INDEX docs_genie;
SELECT prof_run('warm-up', 0);
SELECT prof_run('4 reindexed', g) FROM generate_series(1, 3) g;
\echo == ms a statement (the median of 3 rounds) and the ms of each phase a statement, with its calls
SELECT state, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 3) AS ms, phase,
       max(calls) AS calls, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY phase_ms)::numeric, 4) AS phase_ms
FROM prof WHERE state <> 'warm-up' GROUP BY state, phase ORDER BY state, phase;
