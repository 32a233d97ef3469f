-- Vectors (genie_vector_ops on real[]): real[] <-> real[] equals a plain
-- SQL expression to the bit; ORDER BY v <-> q LIMIT k and genie_knn equal a
-- sequential scan ordered by that expression (distance lists, ties allowed)
-- on random and tied data, with WHERE filters, NULL rows, rows inserted
-- after the build, deletes, merges and REINDEX; bad input gets clear
-- errors; the LSH mode keeps a recall floor; the LSH parameters are kept.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(56);

-- the oracle: the distance in plain SQL, float8, element order
CREATE FUNCTION pg_temp.l2(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT sqrt(sum((x::float8 - y::float8) * (x::float8 - y::float8))) FROM unnest(a, b) AS t(x, y)
$$;

SELECT has_operator('real[]', '<->', 'real[]', 'double precision', 'real[] <-> real[] exists');
SELECT is('{3,0}'::real[] <-> '{0,4}'::real[], 5::float8, '<-> is the Euclidean distance');
SELECT is('{}'::real[] <-> '{}'::real[], 0::float8, 'two empty vectors are at distance 0');
SELECT is(genie_lsh_functions(), 238, 'Equation 9 for epsilon = delta = 0.06');

DO $$ BEGIN PERFORM setseed(0.2718); END $$;
-- 16 Gaussian-ish clusters in 24 dimensions, some NULL rows
CREATE TABLE centres AS
SELECT c, v FROM generate_series(0, 15) c,
  LATERAL (SELECT array_agg((random() * 20 - 10)::real) AS v FROM generate_series(1, 24) g WHERE c >= 0) s;
CREATE TABLE items (id int PRIMARY KEY, v real[]);
INSERT INTO items
SELECT i, CASE WHEN i % 101 = 0 THEN NULL ELSE
       (SELECT array_agg(x + (random() + random() + random() - 1.5)::real ORDER BY o)
        FROM unnest((SELECT v FROM centres WHERE c = i % 16)) WITH ORDINALITY u(x, o)) END
FROM generate_series(1, 4000) i;
-- small integers: many exact ties
CREATE TABLE ties (id int PRIMARY KEY, v real[]);
INSERT INTO ties SELECT i, ARRAY[floor(random() * 3), floor(random() * 3), floor(random() * 3)]::real[]
FROM generate_series(1, 3000) i;
CREATE INDEX items_v ON items USING genie (v);
CREATE INDEX ties_v ON ties USING genie (v);
ANALYZE items;
ANALYZE ties;

SELECT is((SELECT count(*) FROM items a, items b
           WHERE a.id < 40 AND b.id BETWEEN 100 AND 140 AND a.v IS NOT NULL AND b.v IS NOT NULL
             AND (a.v <-> b.v) IS DISTINCT FROM pg_temp.l2(a.v, b.v)), 0::bigint,
          '<-> equals the plain SQL distance to the bit');

CREATE TABLE qs AS
SELECT qid, CASE WHEN qid % 4 = 0 THEN v  -- a stored vector itself
                 ELSE (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o) FROM unnest(v) WITH ORDINALITY u(x, o)) END AS q
FROM (SELECT row_number() OVER () AS qid, v FROM
        (SELECT v FROM items WHERE v IS NOT NULL ORDER BY random() LIMIT 24) r) s;
INSERT INTO qs VALUES (25, array_fill(100::real, ARRAY[24])), (26, array_fill(0::real, ARRAY[24]));

-- distance lists of the index scan against the oracle's sequential scan
CREATE FUNCTION pg_temp.mismatches(tab regclass, queries text, ks int[], filter text DEFAULT 'true')
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; k int; got float8[]; want float8[]; bad bigint := 0;
BEGIN
  FOR r IN EXECUTE queries LOOP
    FOREACH k IN ARRAY ks LOOP
      EXECUTE format('SELECT array_agg(d) FROM (SELECT v <-> $1 d FROM %s WHERE %s ORDER BY v <-> $1 LIMIT %s) s',
                     tab, filter, k) INTO got USING r.q;
      EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT pg_temp.l2(v, $1) d FROM %s WHERE v IS NOT NULL AND %s ORDER BY 1 LIMIT %s) s',
                     tab, filter, k) INTO want USING r.q;
      IF got IS DISTINCT FROM want THEN
        RAISE NOTICE '% k %: got % want %', r.q, k, got, want;
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  RETURN bad;
END $$;

-- genie_knn's distance lists against the oracle
CREATE FUNCTION pg_temp.knn_mismatches(idx regclass, tab regclass, k int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; got float8[]; want float8[]; bad bigint := 0;
BEGIN
  CREATE TEMP TABLE knn_out ON COMMIT DROP AS
  SELECT g.query_no, g.ctid AS row_ctid, g.distance FROM (SELECT array_agg(q ORDER BY qid) a FROM qs) b, genie_knn(idx, b.a, k) g;
  FOR r IN SELECT qid, q FROM qs LOOP
    EXECUTE format('SELECT array_agg(o.distance ORDER BY o.distance) FROM knn_out o JOIN %s t ON t.ctid = o.row_ctid
                    WHERE o.query_no = $1 AND o.distance = pg_temp.l2(t.v, $2)', tab) INTO got USING r.qid, r.q;
    EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT pg_temp.l2(v, $1) d FROM %s WHERE v IS NOT NULL ORDER BY 1 LIMIT %s) s',
                   tab, k) INTO want USING r.q;
    IF got IS DISTINCT FROM want THEN bad := bad + 1; END IF;
  END LOOP;
  DROP TABLE knn_out;
  RETURN bad;
END $$;

SET enable_seqscan = off;
SET enable_sort = off;
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[1, 5, 20]), 0::bigint,
          'clusters: ORDER BY v <-> q LIMIT k equals the sequential scan for k in 1, 5, 20');
SELECT is(pg_temp.mismatches('ties', 'SELECT ARRAY[1, 1, 1]::real[] q UNION ALL SELECT ARRAY[0, 2, 0.5]::real[]', ARRAY[1, 7, 300]),
          0::bigint, 'small integers with many ties: equal distance lists');
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs WHERE qid <= 8', ARRAY[10], 'id % 7 = 3'), 0::bigint,
          'a WHERE filter that keeps one row in seven: the scan widens and stays exact');
SELECT is(pg_temp.knn_mismatches('items_v', 'items', 10), 0::bigint,
          'genie_knn top 10 equals the sequential scan, with true distances');
SELECT is((SELECT array_agg(query_no ORDER BY query_no) FROM (SELECT DISTINCT query_no FROM
             (SELECT array_agg(q ORDER BY qid) a FROM qs) b, genie_knn('items_v', b.a, 3) g) s),
          (SELECT array_agg(qid::int ORDER BY qid) FROM qs), 'genie_knn answers every query, numbered from 1');
SELECT is((SELECT array_agg(distance) FROM genie_knn('items_v', (SELECT q FROM qs WHERE qid = 1), 5)),
          (SELECT array_agg(v <-> (SELECT q FROM qs WHERE qid = 1)) FROM (SELECT v FROM items ORDER BY v <-> (SELECT q FROM qs WHERE qid = 1) LIMIT 5) s),
          'a one-dimensional real[] is one query, nearest first');
-- genie_knn_from: the queries as a query, read from a cursor
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('items_v', 'SELECT q FROM qs ORDER BY qid', 10)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT g.query_no, g.ctid::text, g.distance FROM (SELECT array_agg(q ORDER BY qid) a FROM qs) b,
            genie_knn('items_v', b.a, 10) g ORDER BY query_no, distance, ctid $$,
  'genie_knn_from over a query equals genie_knn over the same queries as an array');
SELECT is((SELECT count(*) FROM genie_knn_from('items_v', 'SELECT q FROM qs WHERE false', 3)), 0::bigint,
          'genie_knn_from: a query without rows has no answers');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'SELECT q, qid FROM qs', 3)$$, '42804', NULL,
                 'genie_knn_from: a query of two columns is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'SELECT ARRAY[qid::int] FROM qs', 3)$$, '42804', NULL,
                 'genie_knn_from: a column of another type is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'SELECT q FROM qs UNION ALL SELECT NULL::real[]', 3)$$,
                 '22004', NULL, 'genie_knn_from: a NULL query is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'SELECT q FROM qs UNION ALL SELECT ''{1,2}''::real[]', 3)$$,
                 '2202E', NULL, 'genie_knn_from: queries of two dimensions are an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'SELECT array_fill(''NaN''::real, ARRAY[24])', 3)$$,
                 '22000', NULL, 'genie_knn_from: a NaN query is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('items_v', 'WITH d AS (DELETE FROM items RETURNING v) SELECT v FROM d', 3)$$,
                 '0A000', NULL, 'genie_knn_from runs its query read-only: a DELETE in it is refused');
SELECT is((SELECT count(*) FROM (SELECT id FROM items ORDER BY v <-> (SELECT q FROM qs WHERE qid = 2) LIMIT 5000) s),
          4000::bigint, 'a LIMIT beyond the table returns every row once');
SELECT is((SELECT count(*) FROM (SELECT v FROM items ORDER BY v <-> (SELECT q FROM qs WHERE qid = 2) OFFSET 4000 - 39) s WHERE v IS NULL),
          39::bigint, 'rows with a NULL vector come last');
SELECT is((SELECT bool_and(a.v <-> q.q >= prev) FROM
             (SELECT v, lag(v <-> (SELECT q FROM qs WHERE qid = 3)) OVER () AS prev FROM
                (SELECT v FROM items ORDER BY v <-> (SELECT q FROM qs WHERE qid = 3) LIMIT 300) s) a,
             (SELECT q FROM qs WHERE qid = 3) q WHERE prev IS NOT NULL), true,
          'rows come in order of their distance across widenings (k = 100, 400)');

-- rows inserted after the build (pending), deletes, the merge, REINDEX
INSERT INTO items SELECT 5000 + qid, q FROM qs WHERE qid <= 10;
INSERT INTO items VALUES (6000, NULL);
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[3, 10]), 0::bigint,
          'with pending rows (copies of queries: distance 0)');
SELECT is(pg_temp.knn_mismatches('items_v', 'items', 4), 0::bigint, 'genie_knn with pending rows');
DELETE FROM items WHERE id % 5 = 0 OR id BETWEEN 5001 AND 5003;
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[3, 10]), 0::bigint,
          'after deletes (not yet vacuumed)');
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO items SELECT 7000 + i, (SELECT q FROM qs WHERE qid = 1 + i % 20) FROM generate_series(1, 400) i;
SELECT is((SELECT pending_rows < 400 FROM genie_index_info('items_v')), true, 'inserts beyond the limit merged the pending list');
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[5, 30]), 0::bigint, 'after the merge');
REINDEX INDEX items_v;
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[5]), 0::bigint, 'after REINDEX');

-- An LSH build computes its rows' keywords a batch (16,384 rows) at a time
-- on every core: over 20,000 rows, each row's keywords are its own (each of
-- 21 stored vectors, from both batches, is found by its own keywords at
-- distance 0 among the 20 of highest LSH count), and a vector of another
-- dimension in the second batch stops the build with the usual error.
CREATE TABLE many_v AS
SELECT i AS id, ARRAY(SELECT sin(i * (k + 0.37))::real FROM generate_series(1, 16) AS k) AS v
FROM generate_series(1, 20000) AS i;
CREATE INDEX many_v_lsh ON many_v USING genie (v) WITH (m = 64);
SET LOCAL genie.vector_search = lsh;
SET LOCAL genie.lsh_candidates = 20;
SELECT is((SELECT count(*) FROM many_v AS a
           WHERE a.id % 997 = 3 AND (SELECT b.v <-> a.v FROM many_v AS b ORDER BY b.v <-> a.v LIMIT 1) = 0),
          21::bigint, 'a batched LSH build: each row found by its own keywords');
SELECT is((SELECT count(*) FROM genie_knn('many_v_lsh', (SELECT array_agg(v ORDER BY id) FROM many_v WHERE id % 997 = 3), 1)
           WHERE distance = 0), 21::bigint, 'and by genie_knn');
RESET genie.vector_search;
RESET genie.lsh_candidates;
DROP INDEX many_v_lsh;
INSERT INTO many_v VALUES (20001, '{1,2,3}');
-- (a width given: no sampling scan, which would meet the vector first)
SELECT throws_ok($$CREATE INDEX many_v_lsh ON many_v USING genie (v) WITH (m = 64, width = 1)$$, '22000',
                 'a vector of the table has 3 dimensions, but genie index "many_v_lsh" holds vectors of 16',
                 'a vector of another dimension in a later batch is an error');
DROP TABLE many_v;

-- bad input
SELECT throws_ok($$INSERT INTO items VALUES (9001, '{1,2,3}')$$, '22000',
                 'the vector has 3 dimensions, but genie index "items_v" holds vectors of 24',
                 'an insert of another dimension is an error');
SELECT throws_ok($$INSERT INTO items VALUES (9002, array_fill('NaN'::real, ARRAY[24]))$$, '22000', NULL,
                 'NaN is rejected');
SELECT throws_ok($$INSERT INTO items VALUES (9003, array_fill('Infinity'::real, ARRAY[24]))$$, '22000', NULL,
                 'infinity is rejected');
SELECT throws_ok($$INSERT INTO items VALUES (9004, ARRAY[1, NULL]::real[])$$, '22004', NULL,
                 'NULL elements are rejected');
SELECT throws_ok($$INSERT INTO items VALUES (9005, '{}')$$, '22000', NULL, 'an empty vector is rejected');
SELECT throws_ok($$INSERT INTO items VALUES (9006, '{{1,2},{3,4}}')$$, '2202E', NULL,
                 'a two-dimensional array is not a vector');
SELECT throws_ok($$SELECT id FROM items ORDER BY v <-> '{1,2}' LIMIT 1$$, '22000', NULL,
                 'a query of another dimension is an error');
SELECT throws_ok($$SELECT '{1,2}'::real[] <-> '{1,2,3}'::real[]$$, '22000',
                 'vectors of 2 and 3 dimensions have no distance', 'so is <-> on two dimensions');
SELECT throws_ok($$SELECT * FROM genie_knn('items_v', '{{1,2}}', 0)$$, '22023', 'k must be at least 1',
                 'genie_knn with k = 0');
CREATE TABLE tags (t int4[]);
CREATE INDEX tags_t ON tags USING genie (t);
SELECT throws_ok($$SELECT * FROM genie_knn('tags_t', '{{1,2}}', 1)$$, '42809', NULL,
                 'genie_knn on an index of another operator class');

-- the LSH mode: approximate, with a recall floor; the parameters are kept
SELECT results_eq($$SELECT dimensions, family, functions, buckets FROM genie_vector_info('items_v')$$,
                  $$VALUES (24, 'e2lsh', 238, 1024)$$, 'the index keeps its dimension and LSH functions');
SELECT ok((SELECT width > 0 FROM genie_vector_info('items_v')), 'the width is estimated from the table');
CREATE FUNCTION pg_temp.lsh_recall(idx regclass, k int) RETURNS float8 LANGUAGE sql AS $$
  WITH b AS (SELECT array_agg(q ORDER BY qid) a FROM qs),
       approx AS (SELECT g.query_no, g.ctid FROM b, genie_knn(idx, b.a, k) g)
  SELECT avg(hit) FROM (
    SELECT (SELECT count(*) FROM approx WHERE approx.query_no = qs.qid
              AND approx.ctid IN (SELECT ctid FROM items WHERE v IS NOT NULL ORDER BY pg_temp.l2(v, qs.q) LIMIT k))::float8 / k AS hit
    FROM qs WHERE qid <= 24) s
$$;
SET LOCAL genie.vector_search = lsh;
SET LOCAL genie.lsh_candidates = 200;
SELECT cmp_ok(pg_temp.lsh_recall('items_v', 10), '>=', 0.9::float8, 'LSH recall@10 with 200 candidates');
SELECT is((SELECT count(*) FROM (SELECT id FROM items ORDER BY v <-> (SELECT q FROM qs WHERE qid = 5) LIMIT 5000) s),
          (SELECT count(*) FROM items), 'the LSH mode still returns every row once');
CREATE INDEX items_rbh ON items USING genie (v) WITH (family = rbh, m = 100, seed = 7);
CREATE INDEX items_exact ON items USING genie (v) WITH (m = 0);
SELECT results_eq($$SELECT family, functions, seed FROM genie_vector_info('items_rbh')$$,
                  $$VALUES ('rbh', 100, 7::int8)$$, 'family, m and seed are the options given');
SELECT cmp_ok(pg_temp.lsh_recall('items_rbh', 10), '>=', 0.7::float8, 'RBH (Laplacian kernel) recall@10');
SELECT throws_ok($$SELECT * FROM genie_knn('items_exact', (SELECT q FROM qs WHERE qid = 1), 3)$$, '0A000', NULL,
                 'the LSH mode on an index built with m = 0 is an error');

-- rows of LSH match count 0 are never candidates: once the candidates run
-- out, genie_knn goes on by exact distance, as the index scan does
CREATE TABLE vo (id int, v real[]);
INSERT INTO vo SELECT i, ARRAY[i % 10, i % 7, i % 3]::real[] FROM generate_series(1, 2000) i;
CREATE INDEX vo_rbh ON vo USING genie (v) WITH (family = rbh, m = 5);
SELECT is((SELECT count(*) FROM genie_knn('vo_rbh', '{1000,-1000,3}', 10)), 10::int8,
          'a far query with no LSH candidate still gets k rows from genie_knn');
SELECT results_eq($$SELECT g.distance FROM genie_knn('vo_rbh', '{1000,-1000,3}', 10) g ORDER BY g.distance$$,
                  $$SELECT v <-> '{1000,-1000,3}' FROM vo ORDER BY 1 LIMIT 10$$,
                  'those rows are the nearest by exact distance');
SELECT bag_eq($$SELECT g.ctid AS c FROM genie_knn('vo_rbh', (SELECT v FROM vo WHERE id = 17), 700) g$$,
              $$SELECT ctid AS c FROM (SELECT ctid FROM vo ORDER BY v <-> (SELECT v FROM vo WHERE id = 17) LIMIT 700) s$$,
              'genie_knn returns the rows the index scan returns when the candidates run out past them');
CREATE TABLE vo2 (id int, v real[]);
INSERT INTO vo2 SELECT i, ARRAY[sin(i), cos(i * 3), i % 17]::real[] FROM generate_series(1, 10000) i;
CREATE INDEX vo2_v ON vo2 USING genie (v) WITH (m = 8);
SELECT is((SELECT count(DISTINCT ctid) FROM genie_knn('vo2_v', '{0,0,0}', 20000)), 10000::int8,
          'k beyond the table: every row once, the candidates and then the rest');
-- an index scan over fewer rows than its first search asks: the candidates
-- run out at k = every row, and the rest still follow by exact distance
CREATE TABLE vo4 (id int, v real[]);
INSERT INTO vo4 SELECT i, ARRAY[i, i % 3, 0]::real[] FROM generate_series(1, 40) i;
CREATE INDEX vo4_v ON vo4 USING genie (v) WITH (family = rbh, m = 5);
SELECT results_eq($$SELECT v <-> '{1000,-1000,3}' FROM vo4 ORDER BY v <-> '{1000,-1000,3}' LIMIT 10$$,
                  $$SELECT d FROM (SELECT (v <-> '{1000,-1000,3}') + 0 AS d FROM vo4) s ORDER BY d LIMIT 10$$,
                  'ORDER BY on a small index whose LSH candidates run out: the exact nearest rows');

-- two queries whose candidates run out in different rounds (the far one at
-- once, the near one after invisible rows made it widen), then an exact
-- rest that needs a second round for one of them: each query keeps its
-- own rows
CREATE TABLE vo3 (id int, v real[]);
INSERT INTO vo3 SELECT i, ARRAY[0, 0, 0]::real[] FROM generate_series(1, 15) i;
INSERT INTO vo3 SELECT i, ARRAY[1000 + i, 5000 + 2 * i, 37 * i]::real[] FROM generate_series(16, 2000) i;
CREATE INDEX vo3_v ON vo3 USING genie (v) WITH (family = rbh, m = 5, width = 1, buckets = 100000);
DELETE FROM vo3 WHERE id <= 8;
SET LOCAL genie.lsh_candidates = 10;
SELECT results_eq(
  $$SELECT g.query_no, g.distance FROM genie_knn('vo3_v', '{{0,0,0},{-500,-500,-500}}', 10) g
    ORDER BY 1, 2$$,
  $$SELECT 1, d FROM (SELECT v <-> '{0,0,0}' d FROM vo3 ORDER BY 1 LIMIT 10) a
    UNION ALL SELECT 2, d FROM (SELECT v <-> '{-500,-500,-500}' d FROM vo3 ORDER BY 1 LIMIT 10) b ORDER BY 1, 2$$,
  'candidates that run out in different rounds: each query gets its own nearest rows');
SELECT is((SELECT count(DISTINCT (g.query_no, g.ctid)) FROM genie_knn('vo3_v', '{{0,0,0},{-500,-500,-500}}', 10) g),
          20::int8, 'no row twice');
RESET genie.lsh_candidates;
RESET genie.vector_search;
SELECT is((SELECT keywords FROM genie_index_info('items_exact')), 0, 'm = 0 stores no keywords');

SELECT * FROM finish();
ROLLBACK;
