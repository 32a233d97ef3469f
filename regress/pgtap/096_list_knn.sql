-- The exact k nearest through a List of Clusters (issue 30: kNN with a
-- shrinking radius, genie.cluster_list_knn): ORDER BY v <-> q LIMIT k and
-- genie_knn over indexes WITH (cluster_list = on), with superclusters and
-- without, under on, auto and off, against the sequential scan ordered by
-- the distance operator: distance lists and rows (ties at the k-th distance
-- from exact duplicates allowed either way), a WHERE filter that widens the
-- scan, k beyond the rows, rows inserted after the build (pending: read one
-- by one), deleted, and merged into a new list; EXPLAIN (ANALYZE) counting
-- the queries answered through the list, and a bad setting.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(18);

DO $$ BEGIN PERFORM setseed(0.577); END $$;
-- 8 dimensions, 30 clusters of 40 points, two exact duplicates, a NULL row
CREATE TABLE centres AS SELECT c, array_agg((random() * 40 - 20)::real ORDER BY d) AS v
FROM generate_series(1, 30) c, generate_series(1, 8) d GROUP BY c;
CREATE TABLE pts (id int PRIMARY KEY, v real[]);
INSERT INTO pts SELECT (c - 1) * 40 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                          FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 40) i;
INSERT INTO pts SELECT 5000 + id, v FROM pts WHERE id IN (7, 8);
INSERT INTO pts VALUES (99999, NULL);
CREATE TABLE qv AS SELECT qid, (SELECT array_agg(x + ((random() - 0.5) * 0.3)::real ORDER BY o)
                                FROM unnest(v) WITH ORDINALITY u(x, o)) AS q
FROM (SELECT qid, v FROM generate_series(1, 24) qid JOIN pts ON pts.id = qid * 47) s;
-- query 25 is row 7 itself: distance 0 to it and to its duplicate; 26 is far from every row
INSERT INTO qv SELECT 25, v FROM pts WHERE id = 7;
INSERT INTO qv VALUES (26, array_fill(500::real, ARRAY[8]));
CREATE INDEX pts_lsc ON pts USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 8, supercluster_clusters = 4);
-- the same rows under a plain List of Clusters
CREATE TABLE flat AS SELECT * FROM pts;
CREATE INDEX flat_lc ON flat USING genie (v genie_vector_ops)
  WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 0);
ANALYZE pts;
ANALYZE flat;
SET genie.device = cpu;

-- The oracle: each query's k nearest distances by the sequential scan (a
-- NULL row last, as an index scan gives it).
CREATE FUNCTION pg_temp.want(tab text, k int, filter text DEFAULT 'true') RETURNS TABLE (qid int, ds float8[])
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_indexscan = off;
  SET LOCAL enable_bitmapscan = off;
  SET LOCAL enable_seqscan = on;
  SET LOCAL enable_sort = on;
  RETURN QUERY EXECUTE format(
    'SELECT qid, (SELECT array_agg(d ORDER BY d) FROM (SELECT v <-> q d FROM %s WHERE %s
                                                        ORDER BY 1 LIMIT %s) s) FROM qv', tab, filter, k);
END $$;
-- ORDER BY v <-> q LIMIT k through the table's genie index, each row's
-- distance the operator's on the row it names.
CREATE FUNCTION pg_temp.got(tab text, k int, filter text DEFAULT 'true') RETURNS TABLE (qid int, ds float8[])
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_seqscan = off;
  SET LOCAL enable_sort = off;
  RETURN QUERY EXECUTE format(
    'SELECT qid, (SELECT array_agg(v <-> q) FROM (SELECT v FROM %s WHERE %s ORDER BY v <-> q LIMIT %s) s) FROM qv',
    tab, filter, k);
END $$;
CREATE FUNCTION pg_temp.mismatches(tab text, k int, filter text DEFAULT 'true') RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pg_temp.got(tab, k, filter) g FULL JOIN pg_temp.want(tab, k, filter) w USING (qid)
  WHERE g.ds IS DISTINCT FROM w.ds
$$;
-- genie_knn's rows: the distances the operator gives on the rows named, per query
CREATE FUNCTION pg_temp.knn_mismatches(idx text, tab text, k int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE bad bigint;
BEGIN
  EXECUTE format(
    'WITH g AS (SELECT g.query_no AS qid, array_agg(p.v <-> q.q ORDER BY g.distance) AS ds,
                       bool_and(g.distance = p.v <-> q.q) AS true_distances
                FROM genie_knn(%L::regclass, (SELECT array_agg(q ORDER BY qid) FROM qv), %s) g
                JOIN %s p ON p.ctid = g.ctid JOIN qv q ON q.qid = g.query_no GROUP BY g.query_no)
     SELECT count(*) FROM g FULL JOIN pg_temp.want(%L, %s) w USING (qid)
     WHERE g.ds IS DISTINCT FROM w.ds OR NOT g.true_distances', idx, k, tab, tab, k) INTO bad;
  RETURN bad;
END $$;
-- EXPLAIN (ANALYZE)'s lines of a statement
CREATE FUNCTION pg_temp.explain_lines(stmt text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || stmt LOOP
    RETURN NEXT ltrim(line);
  END LOOP;
END $$;

SET genie.cluster_list_knn = on;
SELECT is(pg_temp.mismatches('pts', 10), 0::bigint,
          'on, superclusters: ORDER BY v <-> q LIMIT 10 equals the sequential scan');
SELECT is(pg_temp.mismatches('flat', 10), 0::bigint,
          'on, a plain List of Clusters: ORDER BY v <-> q LIMIT 10 equals the sequential scan');
SELECT is(pg_temp.mismatches('pts', 1) + pg_temp.mismatches('pts', 3), 0::bigint,
          'on: k = 1 and 3, the duplicates tied at distance 0 included');
SELECT is(pg_temp.mismatches('pts', 1300), 0::bigint, 'on: k beyond the rows gives every row, the NULL one last');
SELECT is(pg_temp.mismatches('pts', 10, 'id % 5 = 2'), 0::bigint,
          'on: a WHERE filter that keeps one row in five: the scan widens and stays exact');
SELECT is(pg_temp.knn_mismatches('pts_lsc', 'pts', 10) + pg_temp.knn_mismatches('flat_lc', 'flat', 7), 0::bigint,
          'on: genie_knn equals the sequential scan, with true distances');
SELECT is((SELECT array_agg(p.id ORDER BY p.id) FROM genie_knn('pts_lsc', (SELECT q FROM qv WHERE qid = 25), 2) g
           JOIN pts p ON p.ctid = g.ctid), ARRAY[7, 5007], 'a query equal to a row: the row and its duplicate');
SELECT is((SELECT count(*) FROM pg_temp.explain_lines(
             $$SELECT * FROM genie_knn('pts_lsc', (SELECT array_agg(q ORDER BY qid) FROM qv), 5)$$) l
           WHERE l = 'Genie List Queries: 26'), 1::bigint,
          'EXPLAIN (ANALYZE): the 26 queries went through the list');
SET enable_seqscan = off;
SET enable_sort = off;
SELECT is((SELECT count(*) FROM pg_temp.explain_lines(
             format('SELECT id FROM pts ORDER BY v <-> %L LIMIT 5', (SELECT q FROM qv WHERE qid = 3))) l
           WHERE l = 'Genie List Queries: 1'), 1::bigint,
          'EXPLAIN (ANALYZE): an index scan''s query went through the list');
RESET enable_seqscan;
RESET enable_sort;

SET genie.cluster_list_knn = off;
SELECT is((SELECT count(*) FROM pg_temp.explain_lines(
             $$SELECT * FROM genie_knn('pts_lsc', (SELECT array_agg(q ORDER BY qid) FROM qv), 5)$$) l
           WHERE l LIKE 'Genie List%'), 0::bigint, 'off: no query goes through the list');
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.knn_mismatches('pts_lsc', 'pts', 10), 0::bigint,
          'off: every stored vector read, the same rows');
SET genie.cluster_list_knn = auto;
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.knn_mismatches('flat_lc', 'flat', 10), 0::bigint,
          'auto: the same rows');
-- genie.device = auto: the GPU's exact scan where there is one, else the CPU engine's choice
SET genie.device = auto;
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.knn_mismatches('pts_lsc', 'pts', 10), 0::bigint,
          'auto on genie.device = auto: the same rows');
SET genie.device = cpu;

-- pending rows (read one by one after the list), deletes, and a merge
SET genie.cluster_list_knn = on;
INSERT INTO pts SELECT 2000 + qid, (SELECT array_agg(x + 0.01::real ORDER BY o) FROM unnest(q) WITH ORDINALITY u(x, o))
FROM qv WHERE qid <= 20;
INSERT INTO pts SELECT 3000 + i, array_fill((i * 3)::real, ARRAY[8]) FROM generate_series(1, 30) i;
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.knn_mismatches('pts_lsc', 'pts', 10), 0::bigint,
          'pending rows nearer than any listed one are found');
DELETE FROM pts WHERE id % 9 = 4 OR id IN (2005, 2006, 7);
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.mismatches('pts', 4), 0::bigint,
          'deleted rows (listed and pending) are not answers');
-- inserts beyond a small pending list merge it: the list is built again over the live rows
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO pts SELECT 10000 + c * 100 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                   FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 60) i;
RESET genie.pending_list_limit;
SELECT ok((SELECT pending_rows < 1800 FROM genie_index_info('pts_lsc')), 'the inserts merged the pending list');
SELECT is(pg_temp.mismatches('pts', 10) + pg_temp.knn_mismatches('pts_lsc', 'pts', 10), 0::bigint,
          'after the merge: the same rows as the sequential scan');
SELECT throws_ok($$SET genie.cluster_list_knn = sometimes$$, '22023', NULL, 'a bad setting is an error');
SELECT * FROM finish();
ROLLBACK;
