-- Range queries by edit distance through SQL (issue 30's strings), one
-- session, one run: the word list (wamerican-insane: 663,473 words) in a
-- table with a genie_ngram_ops index (its strings stored, no list); nq
-- queries: random words of 6+ letters with 20% of their letters replaced.
-- Per radius (1, 2, 3) and per genie.device value:
--   single: SELECT array_agg(id) ... WHERE w <@ genie_ball(q, r), one
--     statement per query from a PL/pgSQL loop (EXECUTE ... USING: parsed
--     and planned every time, no client), ms a statement, median of 3
--     passes;
--   batch: genie_within('words_genie', <the nq queries, a stored text[]>,
--     r), one statement, ms, median of 3;
-- against the sequential scan a user writes (levenshtein(w, q) <= r,
-- fuzzystrmatch) on the first `seq` queries, timed the same way.  Exact:
-- every method's ids per query equal the sequential scan's on those, and
-- every device's equal the first device's on all nq.
-- psql variables: words (a file for COPY), devices (e.g. 'cpu,gpu'), nq, seq.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION genie;
CREATE EXTENSION fuzzystrmatch;

CREATE TABLE words (id serial PRIMARY KEY, w text);
COPY words (w) FROM :'words';
DELETE FROM words WHERE length(w) > 255;  -- levenshtein()'s limit
VACUUM ANALYZE words;
\o /dev/null
SELECT clock_timestamp() AS t0 \gset
CREATE INDEX words_genie ON words USING genie (w genie_ngram_ops);
\o
SELECT count(*) AS words, round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric * 1000)
       AS index_build_ms FROM words;

-- the queries: words of 6+ ASCII letters, a fifth of their letters (at
-- distinct positions) replaced by random letters
\o /dev/null
SELECT setseed(0.3);
CREATE FUNCTION substitute(s text, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE p int;
BEGIN
  FOR p IN SELECT x FROM generate_series(1, length(s)) x ORDER BY random() LIMIT n LOOP
    s := overlay(s PLACING chr(97 + floor(random() * 26)::int) FROM p FOR 1);
  END LOOP;
  RETURN s;
END $$;
CREATE TABLE queries AS
  SELECT row_number() OVER () AS qid, substitute(w, greatest(1, length(w) / 5)) AS q
  FROM (SELECT w FROM words WHERE w ~ '^[a-z]{6,}$' ORDER BY random() LIMIT :nq) s;
CREATE TABLE batch AS SELECT array_agg(q ORDER BY qid) AS qs FROM queries;

CREATE TABLE timings (method text, device text, radius int, ms float8, answers bigint);
CREATE TABLE found (method text, device text, radius int, qid bigint, ids int[]);

-- one statement per query (the first n), median of 3 passes; the last
-- pass's ids kept
CREATE FUNCTION singles(method text, device text, r int, n int, sql text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE pass int; t0 timestamptz; ms float8[] := '{}'; rec record; ids int[]; answers bigint;
BEGIN
  FOR pass IN 1..3 LOOP
    DELETE FROM found f WHERE f.method = singles.method AND f.device = singles.device AND f.radius = r;
    answers := 0;
    t0 := clock_timestamp();
    FOR rec IN SELECT qid, q FROM queries WHERE qid <= n ORDER BY qid LOOP
      EXECUTE sql INTO ids USING rec.q, r;
      answers := answers + coalesce(cardinality(ids), 0);
      INSERT INTO found VALUES (method, device, r, rec.qid, coalesce(ids, '{}'));
    END LOOP;
    ms := ms || (extract(epoch FROM clock_timestamp() - t0) * 1000 / n);
  END LOOP;
  INSERT INTO timings SELECT method, device, r, percentile_disc(0.5) WITHIN GROUP (ORDER BY x), answers
  FROM unnest(ms) x;
END $$;

-- genie_within of all nq queries in one statement, median of 3
CREATE FUNCTION within_batch(device text, r int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE pass int; t0 timestamptz; ms float8[] := '{}'; answers bigint;
BEGIN
  FOR pass IN 1..3 LOOP
    t0 := clock_timestamp();
    SELECT count(*) INTO answers FROM batch, genie_within('words_genie', qs, r);
    ms := ms || (extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
  INSERT INTO timings SELECT 'genie_within, batch', device, r, percentile_disc(0.5) WITHIN GROUP (ORDER BY x),
    answers FROM unnest(ms) x;
  INSERT INTO found SELECT 'genie_within, batch', device, r, q.qid, coalesce(x.ids, '{}')
  FROM queries q LEFT JOIN (SELECT g.query_no, array_agg(w.id ORDER BY w.id) AS ids
                            FROM batch, genie_within('words_genie', qs, r) g JOIN words w ON w.ctid = g.ctid
                            GROUP BY g.query_no) x ON x.query_no = q.qid;
END $$;

SELECT singles('sequential scan', 'none', r, :seq,
               'SELECT array_agg(id ORDER BY id) FROM words WHERE levenshtein(w, $1) <= $2')
FROM generate_series(1, 3) r;

\o
SELECT string_to_array(:'devices', ',') AS device_list \gset
\o /dev/null
SET enable_seqscan = off;
CREATE FUNCTION run_device(device text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r int;
BEGIN
  PERFORM set_config('genie.device', device, false);
  FOR r IN 1..3 LOOP
    PERFORM singles('w <@ genie_ball(q, r)', device, r, (SELECT count(*)::int FROM queries),
                    'SELECT array_agg(id ORDER BY id) FROM words WHERE w <@ genie_ball($1, $2)');
    PERFORM within_batch(device, r);
  END LOOP;
END $$;
SELECT run_device(d) FROM unnest(:'device_list'::text[]) d;
\o

\echo 'ms a statement (single: per query; batch: all queries), answers: rows over the queries timed'
SELECT t.method, t.device, t.radius, round(t.ms::numeric, 3) AS ms, t.answers,
       round((s.ms / (CASE WHEN t.method LIKE '%batch' THEN t.ms / (SELECT count(*) FROM queries) ELSE t.ms END))::numeric, 1)
         AS x_sequential_scan
FROM timings t JOIN timings s ON s.method = 'sequential scan' AND s.radius = t.radius
ORDER BY t.radius, t.method, t.device;

\echo 'exactness: queries whose ids differ (against the sequential scan on its queries; between devices on all)'
SELECT f.method, f.device, f.radius, count(*) FILTER (WHERE f.ids IS DISTINCT FROM s.ids) AS differ_from_seqscan
FROM found f JOIN found s ON s.method = 'sequential scan' AND s.radius = f.radius AND s.qid = f.qid
WHERE f.method <> 'sequential scan' GROUP BY 1, 2, 3 ORDER BY 3, 1, 2;
SELECT f.method, f.device, f.radius, count(*) FILTER (WHERE f.ids IS DISTINCT FROM g.ids) AS differ_from_first_device
FROM found f JOIN found g ON g.method = f.method AND g.radius = f.radius AND g.qid = f.qid
  AND g.device = (:'device_list'::text[])[1]
WHERE f.method <> 'sequential scan' GROUP BY 1, 2, 3 ORDER BY 3, 1, 2;

\echo 'the genie service (MODE=service): range requests it answered, by engine'
SELECT content, engine, sum(requests) AS requests, sum(queries) AS queries FROM genie_service_stats()
GROUP BY 1, 2 ORDER BY 1, 2;
