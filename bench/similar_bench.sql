-- Sequence-similarity benchmark (issue 6), after the GENIE paper's Tables VI
-- and VII: 1024 queries made by modifying 10%, 20%, 30% and 40% of the
-- characters of random words of a word list, top-k by edit distance.
--   genie_similar (K candidates, one round / all rounds), pg_trgm GiST
--   (trigram KNN re-ranked by levenshtein) and a sequential scan with
--   levenshtein, side by side in one session.
-- psql variables: words (path of the word list), k, devices (genie.device
-- values to run genie_similar on, e.g. 'cpu,gpu'), trgm_candidates (K values
-- for pg_trgm, e.g. '8,16,32,64'), seq_queries (queries timed for the
-- sequential scan).
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION genie;
CREATE EXTENSION pg_trgm;
CREATE EXTENSION fuzzystrmatch;

CREATE TABLE words (id serial PRIMARY KEY, w text);
COPY words (w) FROM :'words';
DELETE FROM words WHERE length(w) > 255;	-- levenshtein()'s limit
CREATE INDEX words_genie ON words USING genie (w genie_ngram_ops);
CREATE INDEX words_trgm ON words USING gist (w gist_trgm_ops);
VACUUM ANALYZE words;
SELECT count(*) AS words, round(avg(length(w)), 1) AS avg_length FROM words;

-- s with `edits` random substitutions, insertions and deletions (a-z)
CREATE FUNCTION mutate(s text, edits int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE pos int; c text;
BEGIN
  FOR i IN 1 .. edits LOOP
    pos := 1 + floor(random() * greatest(length(s), 1))::int;
    c := chr(97 + floor(random() * 26)::int);
    CASE floor(random() * 3)::int
      WHEN 0 THEN s := overlay(s placing c from pos for 1);
      WHEN 1 THEN s := overlay(s placing c from pos for 0);
      ELSE IF length(s) > 1 THEN s := overlay(s placing '' from pos for 1); END IF;
    END CASE;
  END LOOP;
  RETURN s;
END $$;

SELECT setseed(0.2017);
CREATE TABLE queries AS
SELECT row_number() OVER (ORDER BY rate, r) AS qid, rate,
       mutate(w, greatest(1, round(rate * length(w))::int)) AS query
FROM (SELECT rate, r, (SELECT w FROM words WHERE id >= 1 + floor(random() * (SELECT max(id) FROM words) + 0 * r * rate)::int
                        ORDER BY id LIMIT 1) AS w
      FROM unnest(ARRAY[0.1, 0.2, 0.3, 0.4]) rate, generate_series(1, 256) r) x;

-- the truth: genie_similar without a round limit certifies every query
-- (checked against the sequential scan below)
CREATE TABLE truth AS
SELECT query_no AS qid, array_agg(distance ORDER BY distance) AS d, bool_and(exact) AS exact
FROM genie_similar('words_genie', (SELECT array_agg(query ORDER BY qid) FROM queries), :k, 64)
GROUP BY query_no;
SELECT count(*) FILTER (WHERE exact) AS certified_queries, count(*) AS queries FROM truth;

CREATE TABLE results (method text, device text, candidates int, rate numeric, queries int, accurate int,
                      certified_one_round int, max_rounds int, avg_rounds numeric, batch_ms numeric);

-- genie_similar with K candidates: one round, then until certified
CREATE FUNCTION run_genie(device text, candidates int, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; one_ms numeric; all_ms numeric; qs text[];
BEGIN
  PERFORM set_config('genie.device', device, true);
  qs := (SELECT array_agg(query ORDER BY qid) FROM queries);
  PERFORM count(*) FROM genie_similar('words_genie', qs[1:64], k, candidates, 1);	-- warm
  t0 := clock_timestamp();
  CREATE TEMP TABLE one AS SELECT query_no, distance, exact, rounds FROM genie_similar('words_genie', qs, k, candidates, 1);
  one_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  t0 := clock_timestamp();
  CREATE TEMP TABLE full_run AS SELECT query_no, distance, exact, rounds FROM genie_similar('words_genie', qs, k, candidates);
  all_ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  INSERT INTO results
  SELECT 'genie_similar, 1 round', device, candidates, q.rate, count(*),
         count(*) FILTER (WHERE o.d = t.d), count(*) FILTER (WHERE o.e), 1, 1, NULL
  FROM queries q JOIN truth t USING (qid)
  LEFT JOIN (SELECT query_no, array_agg(distance ORDER BY distance) d, bool_and(exact) e
             FROM one GROUP BY query_no) o ON o.query_no = q.qid
  GROUP BY q.rate;
  INSERT INTO results VALUES ('genie_similar, 1 round', device, candidates, NULL, 1024, NULL, NULL, NULL, NULL, one_ms);
  INSERT INTO results
  SELECT 'genie_similar, certified', device, candidates, q.rate, count(*),
         count(*) FILTER (WHERE f.d = t.d), count(*) FILTER (WHERE f.rounds = 1), max(f.rounds),
         avg(f.rounds), NULL
  FROM queries q JOIN truth t USING (qid)
  LEFT JOIN (SELECT query_no, array_agg(distance ORDER BY distance) d, max(rounds) rounds
             FROM full_run GROUP BY query_no) f ON f.query_no = q.qid
  GROUP BY q.rate;
  INSERT INTO results VALUES ('genie_similar, certified', device, candidates, NULL, 1024, NULL, NULL, NULL, NULL, all_ms);
  DROP TABLE one; DROP TABLE full_run;
END $$;
SELECT count(run_genie(d, c, :k)) AS genie_runs
FROM unnest(string_to_array(:'devices', ',')) d, unnest(ARRAY[8, 16, 32, 64]) c;

-- pg_trgm: the K nearest by trigram distance (GiST KNN), re-ranked by levenshtein
CREATE FUNCTION run_trgm(candidates int, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ms numeric;
BEGIN
  SET LOCAL enable_seqscan = off;
  PERFORM (SELECT count(*) FROM (SELECT w FROM words ORDER BY w <-> q.query LIMIT candidates) c)
  FROM queries q WHERE qid <= 16;	-- warm
  t0 := clock_timestamp();
  CREATE TEMP TABLE trgm AS
  SELECT q.qid, (SELECT array_agg(d ORDER BY d) FROM
                 (SELECT levenshtein(c.w, q.query) d FROM
                  (SELECT w FROM words ORDER BY w <-> q.query LIMIT candidates) c ORDER BY 1 LIMIT k) x) AS d
  FROM queries q;
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  INSERT INTO results
  SELECT 'pg_trgm GiST + levenshtein', NULL, candidates, q.rate, count(*), count(*) FILTER (WHERE g.d = t.d),
         NULL, NULL, NULL, NULL
  FROM queries q JOIN truth t USING (qid) JOIN trgm g USING (qid) GROUP BY q.rate;
  INSERT INTO results VALUES ('pg_trgm GiST + levenshtein', NULL, candidates, NULL, 1024, NULL, NULL, NULL, NULL, ms);
  DROP TABLE trgm;
END $$;
SELECT count(run_trgm(c::int, :k)) AS trgm_runs FROM unnest(string_to_array(:'trgm_candidates', ',')) c;

-- the sequential scan: exact by definition, timed on seq_queries queries
-- spread over the rates and scaled to 1024; also checks the truth
CREATE FUNCTION run_seqscan(n int, k int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ms numeric;
BEGIN
  t0 := clock_timestamp();
  CREATE TEMP TABLE seq AS
  SELECT q.qid, (SELECT array_agg(d ORDER BY d) FROM
                 (SELECT levenshtein(w, q.query) d FROM words ORDER BY 1 LIMIT k) x) AS d
  FROM queries q WHERE q.qid % (1024 / n) = 0;
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  INSERT INTO results
  SELECT 'sequential scan, levenshtein', NULL, NULL, NULL, count(*), count(*) FILTER (WHERE s.d = t.d),
         NULL, NULL, NULL, ms * 1024 / count(*)
  FROM seq s JOIN truth t USING (qid);
END $$;
SELECT run_seqscan(:seq_queries, :k);

\echo
\echo accuracy (rows whose top-k distances equal the true ones) per modification rate
SELECT method, device, candidates AS "K", rate, queries, accurate,
       certified_one_round AS certified_1_round, max_rounds, round(avg_rounds, 2) AS avg_rounds
FROM results WHERE rate IS NOT NULL ORDER BY method, device, candidates, rate;
\echo batch time of the 1024 queries, the sequential scan scaled from its sample
SELECT method, device, candidates AS "K", queries AS timed_queries, accurate,
       round(batch_ms) AS batch_ms, round(1024 / (batch_ms / 1000), 1) AS queries_per_s,
       round(batch_ms / min(batch_ms) FILTER (WHERE method = 'genie_similar, certified') OVER (), 2)
         AS time_vs_best_genie_certified
FROM results WHERE rate IS NULL ORDER BY method, device, candidates;
