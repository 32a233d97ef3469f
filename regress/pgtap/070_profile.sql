-- genie.profile and genie_profile(): a session's genie searches charge their
-- time to phases.  Off, nothing is counted; on, each kind of search counts
-- the phases it goes through (in-process or through the genie service, which
-- reports its queue wait and engine time), no phase goes negative, an error
-- in the middle of a search does not upset the next, and
-- genie_profile_reset() starts over.  The answers stay the sequential
-- scan's.  EXPLAIN (ANALYZE) ends with the statement's genie work.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(28);

DO $$ BEGIN PERFORM setseed(0.27); END $$;
CREATE TABLE docs (id int PRIMARY KEY, tags int4[]);
INSERT INTO docs
SELECT i, ARRAY(SELECT floor(power(random(), 2) * 200)::int FROM generate_series(1, 3 + i % 7))
FROM generate_series(1, 3000) AS i;
CREATE INDEX docs_g ON docs USING genie (tags);
CREATE TABLE vecs (id int PRIMARY KEY, v real[]);
INSERT INTO vecs SELECT i, ARRAY[(i % 17)::real, (i % 5)::real, (i % 11)::real]
FROM generate_series(1, 500) AS i;
CREATE INDEX vecs_g ON vecs USING genie (v genie_vector_ops);
ANALYZE docs;
ANALYZE vecs;

-- the phases of this session, as a jsonb of phase -> calls (and -> total_ms)
CREATE FUNCTION calls() RETURNS jsonb LANGUAGE sql AS
  $$ SELECT jsonb_object_agg(phase, calls) FROM genie_profile() $$;
CREATE FUNCTION worst_ms() RETURNS float8 LANGUAGE sql AS
  $$ SELECT min(total_ms) FROM genie_profile() $$;

SELECT is((SELECT array_agg(phase) FROM genie_profile()),
          ARRAY['query', 'cache', 'load', 'upload', 'service', 'queue', 'engine', 'pending',
                'visibility', 'results'],
          'genie_profile() has a row per phase, in the order a search meets them');

SELECT genie_profile_reset();
SET enable_seqscan = off;
SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10) s;
SELECT is((SELECT sum(calls)::int FROM genie_profile()), 0,
          'genie.profile is off by default: nothing is counted');

SET genie.profile = on;
SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT genie_match_count(tags, '{1,2,3}') FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10 $$,
  $$ SELECT genie_match_count(tags, '{1,2,3}') FROM docs
     ORDER BY genie_match_count(tags, '{1,2,3}') DESC LIMIT 10 $$,
  'with genie.profile on the index scan answers as a sequential scan does');
SELECT cmp_ok((calls()->>'query')::int, '>=', 1, 'an index scan counts its query');
SELECT cmp_ok((calls()->>'cache')::int, '>=', 1, 'an index scan counts its cache lookup');
SELECT cmp_ok((calls()->>'engine')::int, '>=', 1,
              'an index scan counts an engine call (in-process or the service''s)');
SELECT cmp_ok(worst_ms(), '>=', 0::float8, 'no phase is negative');
SELECT cmp_ok((SELECT sum(total_ms) FROM genie_profile()), '>', 0::float8, 'the phases took time');

SELECT genie_profile_reset();
SELECT is((SELECT sum(calls)::int FROM genie_profile()), 0, 'genie_profile_reset() starts over');

SELECT ok((SELECT count(*) FROM genie_topk('docs_g', ARRAY['{1,2}', '{5,6,7}']::genie_query[], 5)) = 10,
          'genie_topk with genie.profile on');
SELECT cmp_ok((calls()->>'visibility')::int, '>=', 1, 'genie_topk counts its visibility checks');
SELECT cmp_ok((calls()->>'results')::int, '>=', 1, 'genie_topk counts its result rows');

SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT id FROM genie_knn('vecs_g', ARRAY[[1, 2, 3], [4, 0, 9]]::real[], 3) k
     JOIN vecs ON vecs.ctid = k.ctid ORDER BY query_no, distance, id $$,
  $$ SELECT id FROM (SELECT q.n, vecs.id, row_number() OVER (PARTITION BY q.n ORDER BY vecs.v <-> q.qv, vecs.id) r,
                            vecs.v <-> q.qv AS d
                     FROM vecs, (VALUES (1, ARRAY[1, 2, 3]::real[]), (2, ARRAY[4, 0, 9]::real[])) q(n, qv)) s
     WHERE r <= 3 ORDER BY n, d, id $$,
  'genie_knn with genie.profile on answers as a sequential scan does');
SELECT ok((calls()->>'query')::int >= 1 AND (calls()->>'engine')::int >= 1,
          'genie_knn counts reading its queries and an engine call');

-- the first search of an index scan asks for the LIMIT's rows (the planner's
-- LIMIT, when below genie.scan_batch_size) and widens when rows are filtered
SET genie.scan_batch_size = 100;
SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT genie_match_count(tags, '{7,8,9}') FROM docs ORDER BY tags <~> '{7,8,9}' LIMIT 3 $$,
  $$ SELECT genie_match_count(tags, '{7,8,9}') FROM docs ORDER BY genie_match_count(tags, '{7,8,9}') DESC LIMIT 3 $$,
  'LIMIT 3 through the index: the sequential scan''s scores');
SELECT is((calls()->>'engine')::int, 1, 'LIMIT 3 with every row passing: one engine call');
SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT genie_match_count(tags, '{7,8,9}') FROM docs WHERE id % 10 = 0
     ORDER BY tags <~> '{7,8,9}' LIMIT 3 $$,
  $$ SELECT genie_match_count(tags, '{7,8,9}') FROM docs WHERE id % 10 = 0
     ORDER BY genie_match_count(tags, '{7,8,9}') DESC LIMIT 3 $$,
  'LIMIT 3 under a filter that drops 9 rows in 10: the sequential scan''s scores');
SELECT cmp_ok((calls()->>'engine')::int, '>=', 2,
              'LIMIT 3 under the filter: the first search asked for 3 rows, and widened');

-- an error in the middle of a phase (a NaN while the queries are read): the
-- abort closes the phase, so the time until the next search is no phase's
CREATE TEMP TABLE before_ms AS SELECT total_ms FROM genie_profile() WHERE phase = 'query';
SELECT throws_ok($$ SELECT genie_knn('vecs_g', ARRAY[['NaN'::real, 2, 3]], 3) $$, '22000',
                 'queries must not contain NaN', 'a NaN query is an error (raised while the queries are read)');
SELECT pg_sleep(0.3);
SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{4}' LIMIT 5) s;
SELECT cmp_ok((SELECT total_ms FROM genie_profile() WHERE phase = 'query') -
              (SELECT total_ms FROM before_ms), '<', 150::float8,
              'an error inside a phase leaves no phase open (the 0.3 s after it are not charged)');

-- a subtransaction that aborts inside a phase (an EXCEPTION block in the
-- query genie_knn_from reads its queries with) closes only what it opened:
-- the query phase goes on, and is charged the sleep after the abort
CREATE FUNCTION pg_temp.caught(v real[]) RETURNS real[] LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM 1 / 0;
  EXCEPTION WHEN division_by_zero THEN NULL;
  END;
  PERFORM pg_sleep(0.05);
  RETURN v;
END $$;
SELECT genie_profile_reset();
SELECT count(*) FROM genie_knn_from('vecs_g', 'SELECT pg_temp.caught(v) FROM vecs WHERE id <= 2 ORDER BY id', 3);
SELECT cmp_ok((SELECT total_ms FROM genie_profile() WHERE phase = 'query'), '>=', 90::float8,
              'a subtransaction aborted inside the query phase leaves that phase open: its sleeps are charged to it');

-- EXPLAIN (ANALYZE): a block of the statement's genie work after the plan
CREATE FUNCTION pg_temp.explained(sql text, options text DEFAULT 'ANALYZE, COSTS OFF') RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE format('EXPLAIN (%s) %s', options, sql) LOOP out := out || line || E'\n'; END LOOP;
  RETURN out;
END $$;
SET genie.profile = off;
SELECT genie_profile_reset();
SET enable_seqscan = off;
SET genie.scan_batch_size = 100;
-- LIMIT 300 over genie.scan_batch_size: k = 100 runs out, the scan searches again 4 times wider
SELECT matches(pg_temp.explained('SELECT id FROM docs ORDER BY tags <~> ''{4, 9}'' LIMIT 300'),
               E'Genie Searches: 2\n.*Genie Largest k: 400\n.*Genie Scan Rows: 300\n',
               'EXPLAIN ANALYZE: two searches, the second with k = 400, 300 rows handed on');
SELECT matches(pg_temp.explained('SELECT id FROM docs ORDER BY tags <~> ''{4, 9}'' LIMIT 10'),
               E'Genie Engines: (cpu|gpu), (this backend|genie service)(, the genie service''s shared postings)?\n.*Genie Engine Time: [0-9.]+ ms',
               'where the searches ran and the engine time');
SELECT is((SELECT sum(calls) FROM genie_profile()), 0::numeric,
          'a session whose genie.profile is off keeps its genie_profile() sums');
SELECT unalike(pg_temp.explained('SELECT id FROM docs ORDER BY tags <~> ''{4, 9}'' LIMIT 10', 'COSTS OFF'),
               '%Genie%', 'plain EXPLAIN runs nothing and says nothing of genie');
SELECT unalike(pg_temp.explained('SELECT count(*) FROM vecs'), '%Genie%',
               'a statement without genie work gets no block');
-- a batch function fetches its rows from the heap: deleted rows are invisible
DELETE FROM docs WHERE id % 3 = 0 AND 4 = ANY (tags);
SELECT matches(pg_temp.explained('SELECT count(*) FROM genie_topk(''docs_g'', ARRAY[''{4}''::genie_query], 20)'),
               E'Genie Heap Fetches: [1-9][0-9]*\n.*Genie Invisible Rows: [1-9]',
               'genie_topk: the heap rows fetched and the deleted ones dropped as invisible');
SELECT is((SELECT j->1->>'Genie Searches' FROM (SELECT pg_temp.explained('SELECT id FROM docs ORDER BY tags <~> ''{4}'' LIMIT 5',
                                                                           'ANALYZE, FORMAT JSON')::json AS j) x),
          '1', 'FORMAT JSON: valid JSON, the genie object beside the plan''s');
RESET enable_seqscan;
RESET genie.scan_batch_size;

SELECT * FROM finish();
ROLLBACK;
