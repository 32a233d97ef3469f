-- Range queries (genie_within, issue 30): every row within a radius of each
-- query, against the sequential scan with the distance operator (vectors)
-- and levenshtein() (strings), as sets and in (query_no, distance, ctid)
-- order, and the predicate v <@ genie_ball(q, r) in bitmap and plain index
-- scans, joins and LATERAL: radius 0, a radius equal to a row's distance (the boundary is
-- included), wider ones, an infinite one; duplicates and a NULL row; rows
-- inserted after the build (pending), deleted, merged; the same through
-- indexes that keep a List of Clusters or of Superclusters (its centres by
-- either rule); words with
-- non-ASCII letters; and the errors a user can cause.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch;
SELECT plan(60);

DO $$ BEGIN PERFORM setseed(0.2718); END $$;
-- 6 dimensions, 20 clusters of 50 points, two exact duplicates, a NULL row
CREATE TABLE centres AS SELECT c, array_agg((random() * 20 - 10)::real ORDER BY d) AS v
FROM generate_series(1, 20) c, generate_series(1, 6) d GROUP BY c;
CREATE TABLE pts (id int PRIMARY KEY, v real[]);
INSERT INTO pts SELECT (c - 1) * 50 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                          FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 50) i;
INSERT INTO pts SELECT 5000 + id, v FROM pts WHERE id IN (7, 8);
INSERT INTO pts VALUES (99999, NULL);
CREATE TABLE qv AS SELECT qid, (SELECT array_agg(x + ((random() - 0.5) * 0.2)::real ORDER BY o)
                                FROM unnest(v) WITH ORDINALITY u(x, o)) AS q
FROM (SELECT qid, v FROM generate_series(1, 20) qid JOIN pts ON pts.id = qid * 47) s;
-- query 21 is row 7 itself: distance 0 to it and to its duplicate
INSERT INTO qv SELECT 21, v FROM pts WHERE id = 7;
CREATE INDEX pts_idx ON pts USING genie (v genie_vector_ops) WITH (m = 0);
-- the List of Superclusters (clusters of 8, 4 a supercluster) and a plain List of Clusters
CREATE INDEX pts_lsc ON pts USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 8, supercluster_clusters = 4);
CREATE INDEX pts_lc ON pts USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 0);
-- the superclusters' centres each the farthest from the centres before it
CREATE INDEX pts_far ON pts USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 8, supercluster_clusters = 4, cluster_centres = farthest);

CREATE FUNCTION pg_temp.seq_v(r float8) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT qid, id, v <-> q FROM qv, pts WHERE v IS NOT NULL AND v <-> q <= r
$$;
CREATE FUNCTION pg_temp.within_v(r float8, idx text DEFAULT 'pts_idx') RETURNS TABLE (qid int, id int, d float8)
LANGUAGE sql AS $$
  SELECT g.query_no, t.id, g.distance
  FROM genie_within(idx::regclass, (SELECT array_agg(q ORDER BY qid) FROM qv), r) g JOIN pts t ON t.ctid = g.ctid
$$;
-- the rows that only one side has, both ways, summed over the four indexes
CREATE FUNCTION pg_temp.diff_v(r float8) RETURNS bigint LANGUAGE sql AS $$
  SELECT sum((SELECT count(*) FROM (SELECT * FROM pg_temp.within_v(r, idx) EXCEPT ALL SELECT * FROM pg_temp.seq_v(r)) a)
           + (SELECT count(*) FROM (SELECT * FROM pg_temp.seq_v(r) EXCEPT ALL SELECT * FROM pg_temp.within_v(r, idx)) b))::bigint
  FROM unnest(ARRAY['pts_idx', 'pts_lsc', 'pts_lc', 'pts_far']) idx
$$;

SELECT is(pg_temp.diff_v(0), 0::bigint, 'radius 0: the rows equal to a query');
SELECT is((SELECT array_agg(id ORDER BY id) FROM pg_temp.within_v(0) WHERE qid = 21), ARRAY[7, 5007],
          'radius 0: the query row and its duplicate');
SELECT is(pg_temp.diff_v(0.8), 0::bigint, 'radius 0.8: the sequential scan''s rows and distances');
SELECT is(pg_temp.diff_v(3), 0::bigint, 'radius 3: the sequential scan''s rows and distances');
SELECT cmp_ok((SELECT count(*) FROM pg_temp.within_v(3)), '>', 200::bigint, 'radius 3 finds many rows');
-- the boundary: a radius equal to the distance of query 1 to row 60
SELECT is((SELECT count(*) FROM pg_temp.within_v((SELECT v <-> q FROM pts, qv WHERE id = 60 AND qid = 1))
           WHERE qid = 1 AND id = 60), 1::bigint, 'a row at exactly the radius is an answer');
SELECT is(pg_temp.diff_v((SELECT v <-> q FROM pts, qv WHERE id = 60 AND qid = 1)), 0::bigint,
          'radius equal to a row''s distance: the sequential scan''s rows');
SELECT is((SELECT count(*) FROM pg_temp.within_v('infinity')), 21 * 1002::bigint,
          'an infinite radius: every row with a vector, for every query');
-- the order: query_no, distance, ctid
SELECT ok((SELECT bool_and(ok) FROM (SELECT (query_no, distance, ctid) >= lag((query_no, distance, ctid))
                                               OVER (ORDER BY n) IS NOT FALSE AS ok
                                     FROM (SELECT g.*, row_number() OVER () n
                                           FROM genie_within('pts_idx', (SELECT array_agg(q ORDER BY qid) FROM qv), 3) g) s) o),
          'rows come in (query_no, distance, ctid) order');
SELECT is((SELECT count(*) FROM genie_within('pts_idx', (SELECT q FROM qv WHERE qid = 3), 2)),
          (SELECT count(*) FROM pg_temp.seq_v(2) WHERE qid = 3), 'a real[] is one query');

CREATE FUNCTION pg_temp.explain_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || q;
END $$;
-- EXPLAIN (ANALYZE): the lists compute fewer distances than reading every row
CREATE FUNCTION pg_temp.explained(q text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
  RETURN (j::jsonb)->1;
END $$;
CREATE FUNCTION pg_temp.range_distances(idx text, r float8) RETURNS bigint LANGUAGE sql AS $$
  SELECT (e->>'Genie Range Distances')::bigint FROM pg_temp.explained(
    format('SELECT * FROM genie_within(%L, (SELECT array_agg(q ORDER BY qid) FROM qv), %s)', idx, r)) e
$$;
-- (the CPU engine skips the NULL row's object; the GPU reads every member of its plan)
SELECT ok(pg_temp.range_distances('pts_idx', 0.5) BETWEEN 21 * 1002 AND 21 * 1003,
          'without a list every row is read');
SELECT cmp_ok(pg_temp.range_distances('pts_lsc', 0.5), '<', 21 * 1002 / 3::bigint,
              'the List of Superclusters computes a third of the distances or fewer');
SELECT cmp_ok(pg_temp.range_distances('pts_lc', 0.5), '<', 21 * 1002 / 3::bigint,
              'so does the plain List of Clusters');
SELECT cmp_ok(pg_temp.range_distances('pts_far', 0.5), '<', 21 * 1002 / 3::bigint,
              'and the list with the farthest centres');
SELECT cmp_ok((SELECT (e->>'Genie Discarded Superclusters')::bigint FROM pg_temp.explained(
                 'SELECT * FROM genie_within(''pts_lsc'', (SELECT array_agg(q ORDER BY qid) FROM qv), 0.5)') e),
              '>', 0::bigint, 'EXPLAIN (ANALYZE) reports discarded superclusters');

-- pending rows, deletes, the merge
INSERT INTO pts SELECT 10000 + c * 10 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                   FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 5) i WHERE c <= 10;
DELETE FROM pts WHERE id % 9 = 0;
SELECT is(pg_temp.diff_v(1.5), 0::bigint, 'pending rows and deletes: the sequential scan''s rows');
SELECT lives_ok($$SELECT genie_index_check('pts_lsc')$$, 'genie_index_check of a list of clusters');
SELECT is((SELECT count(*) FROM pg_temp.within_v(1.5) WHERE id % 9 = 0), 0::bigint, 'no deleted row');
SELECT cmp_ok((SELECT count(*) FROM pg_temp.within_v(1.5) WHERE id >= 10000), '>', 0::bigint,
              'pending rows are answers');
-- inserts beyond a small pending list merge it: the list is built again over the live rows
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO pts SELECT 20000 + c * 1000 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                   FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 150) i;
RESET genie.pending_list_limit;
SELECT ok((SELECT pending_rows < 3000 FROM genie_index_info('pts_lsc')), 'the inserts merged the pending list');
SELECT is(pg_temp.diff_v(1.5), 0::bigint, 'after the merge: the sequential scan''s rows');
SELECT is(pg_temp.diff_v(0.3), 0::bigint, 'after the merge, radius 0.3: the sequential scan''s rows');
SELECT is((SELECT format_version FROM genie_index_info('pts_lsc')), 7, 'an index with a list is format 7');
SELECT lives_ok($$SELECT genie_index_check('pts_lsc')$$, 'genie_index_check after the merge');
SELECT lives_ok($$SELECT genie_index_check('pts_far')$$, 'genie_index_check of the farthest rule''s list after the merge');
SELECT is((SELECT count(*) FROM genie_within('pts_idx', '{}'::real[], 1)), 0::bigint, 'no queries, no rows');
SELECT is((SELECT count(*) FROM genie_within('pts_idx', (SELECT q FROM qv WHERE qid = 3), NULL)), 0::bigint,
          'a NULL radius: no rows');

-- errors a user can cause
SELECT throws_ok($$SELECT * FROM genie_within('pts_idx', (SELECT q FROM qv WHERE qid = 3), -1)$$, '22023',
                 'the radius must be at least 0', 'a negative radius');
SELECT throws_ok($$SELECT * FROM genie_within('pts_idx', (SELECT q FROM qv WHERE qid = 3), 'NaN')$$, '22023',
                 'the radius must be at least 0', 'a NaN radius');
SELECT throws_ok($$SELECT * FROM genie_within('pts_idx', '{1,2,Infinity,4,5,6}'::real[], 1)$$, '22000',
                 'queries must not contain infinity', 'an infinite coordinate');
SELECT throws_like($$SELECT * FROM genie_within('pts_idx', '{1,2,3}'::real[], 1)$$,
                   '%has 3 dimensions, but genie index "pts_idx" holds vectors of 6%', 'another dimension');
SELECT throws_ok($$SELECT * FROM genie_within('pts_idx', ARRAY['abc'], 1)$$, '42809', NULL,
                 'text queries against a vector index');

-- A table beyond genie.device_memory_limit: 48,000 vectors of 6 small
-- whole numbers (1.5 MB at the device's 8 floats a row; many ties at the
-- radius) under a limit of 2 MB stream through the device in parts on a
-- GPU (the multi-pipeline: two slots, the plan's rows only), with and
-- without a List of Superclusters; on the CPU engine the same rows.
CREATE TABLE big AS
SELECT i AS id, ARRAY[i % 97, i % 89, (i * 7) % 83, i % 5, (i * 13) % 101, i % 3]::real[] AS v
FROM generate_series(1, 48000) i;
CREATE INDEX big_idx ON big USING genie (v genie_vector_ops) WITH (m = 0);
CREATE INDEX big_lsc ON big USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 64, supercluster_clusters = 4);
CREATE TABLE bq AS SELECT id AS qid, v AS q FROM big WHERE id IN (5, 1000, 20000, 33333, 47999);
CREATE FUNCTION pg_temp.big_diff(r float8) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint := 0; idx text;
BEGIN
  SET LOCAL genie.device_memory_limit = 2;
  FOREACH idx IN ARRAY ARRAY['big_idx', 'big_lsc'] LOOP
    n := n + (SELECT count(*) FROM (
      (SELECT g.query_no, t.id, g.distance
       FROM genie_within(idx::regclass, (SELECT array_agg(q ORDER BY qid) FROM bq), r) g JOIN big t ON t.ctid = g.ctid
       EXCEPT ALL
       SELECT o.n::int, b.id, b.v <-> o.q FROM (SELECT row_number() OVER (ORDER BY qid) n, q FROM bq) o, big b
       WHERE b.v <-> o.q <= r)
      UNION ALL
      (SELECT o.n::int, b.id, b.v <-> o.q FROM (SELECT row_number() OVER (ORDER BY qid) n, q FROM bq) o, big b
       WHERE b.v <-> o.q <= r
       EXCEPT ALL
       SELECT g.query_no, t.id, g.distance
       FROM genie_within(idx::regclass, (SELECT array_agg(q ORDER BY qid) FROM bq), r) g JOIN big t ON t.ctid = g.ctid)) d);
  END LOOP;
  RETURN n;
END $$;
SELECT is(pg_temp.big_diff(12), 0::bigint, 'beyond the device limit, radius 12: the sequential scan''s rows');
SELECT is(pg_temp.big_diff(45), 0::bigint, 'beyond the device limit, radius 45: the sequential scan''s rows');
SELECT cmp_ok((SELECT count(*) FROM genie_within('big_lsc', (SELECT array_agg(q ORDER BY qid) FROM bq), 45)), '>',
              1000::bigint, 'radius 45 finds many rows');

-- the range predicate v <@ genie_ball(q, r): an index answers it with the sequential scan's rows
CREATE FUNCTION pg_temp.ball_rows(r float8, via text) RETURNS TABLE (qid int, id int) LANGUAGE plpgsql AS $$
BEGIN
  IF via = 'seq' THEN
    SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  ELSE
    SET LOCAL enable_seqscan = off;
    IF via = 'index' THEN SET LOCAL enable_bitmapscan = off; END IF;
  END IF;
  RETURN QUERY SELECT qv.qid, s.id FROM qv, LATERAL (SELECT p.id FROM pts p WHERE p.v <@ genie_ball(qv.q, r)) s;
  SET LOCAL enable_indexscan = on; SET LOCAL enable_bitmapscan = on; SET LOCAL enable_seqscan = on;
END $$;
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.ball_rows(1.5, 'bitmap')
                                 EXCEPT ALL SELECT * FROM pg_temp.ball_rows(1.5, 'seq')) a)
        + (SELECT count(*) FROM (SELECT * FROM pg_temp.ball_rows(1.5, 'seq')
                                 EXCEPT ALL SELECT * FROM pg_temp.ball_rows(1.5, 'bitmap')) b),
          0::bigint, 'v <@ genie_ball(q, r) in a LATERAL join: bitmap scans give the sequential scan''s rows');
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.ball_rows(0.8, 'index')
                                 EXCEPT ALL SELECT * FROM pg_temp.ball_rows(0.8, 'seq')) a)
        + (SELECT count(*) FROM (SELECT * FROM pg_temp.ball_rows(0.8, 'seq')
                                 EXCEPT ALL SELECT * FROM pg_temp.ball_rows(0.8, 'index')) b),
          0::bigint, 'and so do plain index scans');
SELECT cmp_ok((SELECT count(*) FROM pg_temp.ball_rows(1.5, 'seq')), '>', 100::bigint, 'the balls hold rows');
SET enable_seqscan = off;
SELECT ok((SELECT string_agg(l.l, ' ') FROM pg_temp.explain_lines(
             'SELECT id FROM pts WHERE v <@ genie_ball((SELECT q FROM qv WHERE qid = 4), 1.0) AND id % 2 = 0') l(l)) ~ 'Bitmap Index Scan on pts_(idx|lsc|lc)',
          'the planner takes an index for the predicate');
SELECT is((SELECT array_agg(id ORDER BY id) FROM pts
           WHERE v <@ genie_ball((SELECT q FROM qv WHERE qid = 4), 1.0) AND id % 2 = 0),
          (SELECT array_agg(id ORDER BY id) FROM pts
           WHERE genie_l2_distance(v, (SELECT q FROM qv WHERE qid = 4)) <= 1.0 AND id % 2 = 0),
          'with another predicate: the rows within the distance');
SELECT is((SELECT count(*) FROM pts WHERE v <@ genie_ball((SELECT q FROM qv WHERE qid = 4), NULL)), 0::bigint,
          'a NULL radius holds no row');
SELECT throws_ok($$SELECT count(*) FROM pts WHERE v <@ genie_ball((SELECT q FROM qv WHERE qid = 4), -1)$$, '22023',
                 'the radius must be at least 0', 'a negative radius through the index');
RESET enable_seqscan;
SELECT throws_ok($$SELECT genie_vector_in_ball('{1,2}', genie_ball('{1,2}'::real[], 'NaN'))$$, '22023',
                 'the radius must be at least 0', 'a NaN radius without the index');

-- strings: hex words of 3 to 8 letters, words with non-ASCII letters, typos as queries
CREATE TABLE words (id int PRIMARY KEY, w text);
INSERT INTO words SELECT i, substr(md5(i::text), 1, 3 + i % 6) FROM generate_series(1, 3000) i;
INSERT INTO words VALUES (4001, 'café'), (4002, 'cafe'), (4003, 'caff'), (4004, '日本語'), (4005, '日本'),
                         (4006, ''), (4007, NULL);
CREATE INDEX words_idx ON words USING genie (w genie_ngram_ops);
CREATE INDEX words_lsc ON words USING genie (w genie_ngram_ops) WITH (cluster_list = on, cluster_size = 16);
CREATE TABLE qw AS SELECT qid, overlay(w placing 'z' from 1 + qid % 3 for 1) AS q
FROM (SELECT id AS qid, w FROM words WHERE id % 150 = 0) s;
INSERT INTO qw VALUES (9001, 'cafè'), (9002, '日本'), (9003, '');

CREATE FUNCTION pg_temp.diff_w(r int, idx text DEFAULT 'words_idx') RETURNS bigint LANGUAGE sql AS $$
  WITH got AS (SELECT g.query_no AS n, t.id, g.distance AS d
               FROM genie_within(idx::regclass, (SELECT array_agg(q ORDER BY qid) FROM qw), r) g
               JOIN words t ON t.ctid = g.ctid),
       want AS (SELECT n, id, levenshtein(w, q)::float8 AS d
                FROM (SELECT row_number() OVER (ORDER BY qid)::int AS n, q FROM qw) qq, words
                WHERE w IS NOT NULL AND levenshtein(w, q) <= r)
  SELECT (SELECT count(*) FROM (SELECT * FROM got EXCEPT ALL SELECT * FROM want) a)
       + (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM got) b)
$$;
SELECT is(pg_temp.diff_w(0), 0::bigint, 'edit distance 0: levenshtein()''s rows');
SELECT is(pg_temp.diff_w(1), 0::bigint, 'edit distance 1: levenshtein()''s rows');
SELECT is(pg_temp.diff_w(2), 0::bigint, 'edit distance 2: levenshtein()''s rows');
SELECT is(pg_temp.diff_w(1, 'words_lsc') + pg_temp.diff_w(2, 'words_lsc') + pg_temp.diff_w(3, 'words_lsc'), 0::bigint,
          'a list of clusters of words, distances 1 to 3: levenshtein()''s rows');
SET enable_seqscan = off;
SELECT is((SELECT array_agg(w ORDER BY w) FROM words WHERE w <@ genie_ball('cafè', 1)), ARRAY['cafe', 'caff', 'café'],
          'w <@ genie_ball(q, r) through the index: edit distance in characters');
SELECT is((SELECT count(*) FROM qw, words WHERE w <@ genie_ball(q, 2)),
          (SELECT count(*) FROM qw, words WHERE levenshtein(w, q) <= 2), 'a join on w <@ genie_ball(q, 2)');
RESET enable_seqscan;
SELECT is((SELECT array_agg(t.w ORDER BY g.distance, g.ctid) FROM genie_within('words_idx', ARRAY['cafè'], 1) g
           JOIN words t ON t.ctid = g.ctid), ARRAY['café', 'cafe', 'caff'], 'code points: è is one edit from é, e and f');
DELETE FROM words WHERE id % 7 = 0;
INSERT INTO words SELECT 5000 + i, substr(md5((i * 13)::text), 2, 4 + i % 3) FROM generate_series(1, 200) i;
SELECT is(pg_temp.diff_w(2), 0::bigint, 'after deletes and pending inserts: levenshtein()''s rows');
-- inserts beyond a small pending list merge it (VACUUM cannot run in the test's transaction)
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO words SELECT 6000 + i, substr(md5((i * 7)::text), 3, 3 + i % 4) FROM generate_series(1, 1500) i;
SELECT ok((SELECT pending_rows < 1500 FROM genie_index_info('words_idx')), 'the inserts merged the pending list');
SELECT is(pg_temp.diff_w(2), 0::bigint, 'after the merge: levenshtein()''s rows');
SELECT is(pg_temp.diff_w(2, 'words_lsc'), 0::bigint, 'after the merge, the list of clusters: levenshtein()''s rows');

CREATE INDEX words_plain ON words USING genie (w genie_ngram_ops) WITH (store_strings = off);
-- an index without its strings cannot answer the predicate: the planner leaves it to a sequential scan
DROP INDEX words_idx, words_lsc;
SET enable_seqscan = off;
SELECT is((SELECT array_agg(w ORDER BY w) FROM words WHERE w <@ genie_ball('cafè', 1)), ARRAY['cafe', 'caff', 'café'],
          'w <@ genie_ball(q, r) beside an index without its strings: the sequential scan''s rows');
RESET enable_seqscan;
SELECT throws_ok($$SELECT * FROM genie_within('words_plain', ARRAY['abc'], 1)$$, '0A000',
                 'genie index "words_plain" does not store its strings', 'an index without its strings');
SELECT throws_ok($$CREATE INDEX ON words USING genie (w genie_ngram_ops) WITH (store_strings = off, cluster_list = on)$$,
                 '0A000', 'cluster_list needs an index that stores its strings', 'a list needs the strings');
CREATE TABLE tags (t int4[]);
SELECT throws_ok($$CREATE INDEX ON tags USING genie (t) WITH (cluster_list = on)$$, '0A000',
                 'cluster_list needs an index of genie_vector_ops or genie_ngram_ops', 'a list needs a metric');
SELECT throws_like($$CREATE INDEX ON pts USING genie (v) WITH (cluster_list = on, cluster_size = 1)$$,
                   '%cluster_size%', 'clusters of at least two');
SELECT throws_like($$CREATE INDEX ON pts USING genie (v) WITH (cluster_list = on, cluster_centres = nearest)$$,
                   '%cluster_centres%', 'cluster_centres is sum or farthest');

SELECT * FROM finish();
ROLLBACK;
