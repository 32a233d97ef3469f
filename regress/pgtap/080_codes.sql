-- Binary codes (genie_bit_ops on bit(n)): bit <-> bit equals bit_count(a # b);
-- ORDER BY code <-> q LIMIT k and genie_hamming_knn equal a sequential scan ordered
-- by that expression (distance lists, ties allowed) on random codes with
-- planted neighbours and on codes with massive ties, with WHERE filters,
-- NULL rows, rows inserted after the build, deletes, merges and REINDEX;
-- bit varying columns; bad input gets clear errors.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(40);

-- 32 random bits (PostgreSQL's bigint -> bit(32) keeps the low 32)
CREATE FUNCTION pg_temp.r32() RETURNS bit(32) LANGUAGE sql VOLATILE AS $$
  SELECT (floor(random() * 4294967296)::bigint)::bit(32)
$$;
-- a copy of c with each bit flipped with probability p
CREATE FUNCTION pg_temp.noisy(c bit, p float8) RETURNS bit LANGUAGE sql VOLATILE AS $$
  SELECT c # string_agg(CASE WHEN random() < p THEN '1' ELSE '0' END, '' ORDER BY i)::varbit::bit(128)
  FROM generate_series(1, length(c)) i
$$;

SELECT has_operator('bit', '<->', 'bit', 'double precision', 'bit <-> bit exists');
SELECT is(B'1010' <-> B'0110', 2::float8, '<-> is the Hamming distance');
SELECT is(B'1' <-> B'1', 0::float8, 'a code is at distance 0 from itself');
SELECT throws_ok($$SELECT B'101' <-> B'11'$$, '22026', NULL, 'codes of different lengths have no distance');

DO $$ BEGIN PERFORM setseed(0.1415); END $$;
-- 128-bit codes: 40 centres, each row a centre with about 8% of its bits flipped
CREATE TABLE centres AS SELECT c, pg_temp.r32() || pg_temp.r32() || pg_temp.r32() || pg_temp.r32() AS code
FROM generate_series(0, 39) c;
CREATE TABLE items (id int PRIMARY KEY, code bit(128));
INSERT INTO items
SELECT i, CASE WHEN i % 97 = 0 THEN NULL ELSE pg_temp.noisy((SELECT code FROM centres WHERE c = i % 40), 0.08) END
FROM generate_series(1, 3000) i;
-- 12-bit codes from 6 distinct values: thousands of ties at every distance
CREATE TABLE ties (id int PRIMARY KEY, code bit(12));
INSERT INTO ties SELECT i, (ARRAY[B'000000000000', B'000000000111', B'111111000000', B'101010101010',
                                  B'111111111111', B'000011110000'])[1 + floor(random() * 6)::int]
FROM generate_series(1, 3000) i;
CREATE INDEX items_code ON items USING genie (code);
CREATE INDEX ties_code ON ties USING genie (code);
ANALYZE items;
ANALYZE ties;

SELECT is((SELECT count(*) FROM items a, items b
           WHERE a.id < 40 AND b.id BETWEEN 100 AND 140 AND a.code IS NOT NULL AND b.code IS NOT NULL
             AND (a.code <-> b.code) IS DISTINCT FROM bit_count(a.code # b.code)::float8), 0::bigint,
          '<-> equals bit_count(a # b)');

CREATE TABLE qs AS
SELECT qid, CASE WHEN qid % 4 = 0 THEN code ELSE pg_temp.noisy(code, 0.03) END AS q
FROM (SELECT row_number() OVER () AS qid, code FROM
        (SELECT code FROM items WHERE code IS NOT NULL ORDER BY random() LIMIT 20) r) s;
INSERT INTO qs VALUES (21, ~(SELECT q FROM qs WHERE qid = 1)), (22, B'0'::bit(128));

-- distance lists of the index scan against the oracle's sequential scan
CREATE FUNCTION pg_temp.mismatches(tab regclass, queries text, ks int[], filter text DEFAULT 'true')
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; k int; got float8[]; want float8[]; bad bigint := 0;
BEGIN
  FOR r IN EXECUTE queries LOOP
    FOREACH k IN ARRAY ks LOOP
      EXECUTE format('SELECT array_agg(d) FROM (SELECT code <-> $1 d FROM %s WHERE %s ORDER BY code <-> $1 LIMIT %s) s',
                     tab, filter, k) INTO got USING r.q::varbit;
      EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT bit_count(code # $1)::float8 d FROM %s WHERE code IS NOT NULL AND %s ORDER BY 1 LIMIT %s) s',
                     tab, filter, k) INTO want USING r.q::varbit;
      IF got IS DISTINCT FROM want THEN
        RAISE NOTICE '% k %: got % want %', r.q, k, got, want;
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  RETURN bad;
END $$;

-- genie_hamming_knn's distance lists against the oracle, each distance the row's own
CREATE FUNCTION pg_temp.knn_mismatches(idx regclass, tab regclass, k int) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; got float8[]; want float8[]; bad bigint := 0;
BEGIN
  CREATE TEMP TABLE knn_out ON COMMIT DROP AS
  SELECT g.query_no, g.ctid AS row_ctid, g.distance FROM genie_hamming_knn(idx, (SELECT array_agg(q ORDER BY qid) FROM qs), k) g;
  FOR r IN SELECT qid, q FROM qs LOOP
    EXECUTE format('SELECT array_agg(o.distance ORDER BY o.distance) FROM knn_out o JOIN %s t ON t.ctid = o.row_ctid
                    WHERE o.query_no = $1 AND o.distance = bit_count(t.code # $2)', tab) INTO got USING r.qid, r.q;
    EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT bit_count(code # $1)::float8 d FROM %s WHERE code IS NOT NULL ORDER BY 1 LIMIT %s) s',
                   tab, k) INTO want USING r.q;
    IF got IS DISTINCT FROM want THEN bad := bad + 1; END IF;
  END LOOP;
  DROP TABLE knn_out;
  RETURN bad;
END $$;

SET enable_seqscan = off;
SET enable_sort = off;
CREATE FUNCTION pg_temp.plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP out := out || line || E'\n'; END LOOP;
  RETURN out;
END $$;
SELECT alike(pg_temp.plan($$SELECT id FROM items ORDER BY code <-> (SELECT q FROM qs WHERE qid = 1) LIMIT 5$$),
            '%Index Scan using items_code%', 'ORDER BY code <-> q LIMIT k uses the code index');
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[1, 5, 20]), 0::bigint,
          'planted neighbours: ORDER BY code <-> q LIMIT k equals the sequential scan for k in 1, 5, 20');
SELECT is(pg_temp.mismatches('ties', $$SELECT B'000000000001'::bit(12) q UNION ALL SELECT B'110000000011'$$, ARRAY[1, 7, 700, 2999]),
          0::bigint, 'massive ties: equal distance lists up to k = 2999');
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs WHERE qid <= 6', ARRAY[10], 'id % 7 = 3'), 0::bigint,
          'a WHERE filter that keeps one row in seven: the scan widens and stays exact');
SELECT is(pg_temp.knn_mismatches('items_code', 'items', 10), 0::bigint,
          'genie_hamming_knn top 10 equals the sequential scan, with true distances');
SELECT is((SELECT array_agg(DISTINCT query_no ORDER BY query_no) FROM
             genie_hamming_knn('items_code', (SELECT array_agg(q ORDER BY qid) FROM qs), 3)),
          (SELECT array_agg(qid::int ORDER BY qid) FROM qs), 'genie_hamming_knn answers every query, numbered from 1');
-- ties come in row order: the same rows as an index scan
SELECT results_eq(
  $$ SELECT ctid::text, distance FROM genie_hamming_knn('ties_code', ARRAY[B'000000000001'::bit(12)], 50) ORDER BY distance, ctid $$,
  $$ SELECT ctid::text, code <-> B'000000000001' FROM (SELECT ctid, code FROM ties ORDER BY code <-> B'000000000001' LIMIT 50) s ORDER BY 2, 1 $$,
  'genie_hamming_knn and the index scan take the same tied rows');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('items_code', 'SELECT q FROM qs ORDER BY qid', 10)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT query_no, ctid::text, distance FROM genie_hamming_knn('items_code', (SELECT array_agg(q ORDER BY qid) FROM qs), 10)
     ORDER BY query_no, distance, ctid $$,
  'genie_knn_from over a bit column equals genie_hamming_knn over the same queries as an array');
SELECT is((SELECT count(*) FROM (SELECT id FROM items ORDER BY code <-> (SELECT q FROM qs WHERE qid = 2) LIMIT 5000) s),
          3000::bigint, 'a LIMIT beyond the table returns every row once');
SELECT is((SELECT count(*) FROM (SELECT code FROM items ORDER BY code <-> (SELECT q FROM qs WHERE qid = 2) OFFSET 3000 - 30) s
           WHERE code IS NULL), 30::bigint, 'rows with a NULL code come last');

SELECT ok(NOT coalesce((SELECT bool_or(running) FROM genie_service_status()), false) OR
          EXISTS (SELECT 1 FROM genie_service_stats() WHERE content = 'codes' AND queries > 0),
          'with genie preloaded, the genie service holds and scans the codes');

-- rows inserted after the build (pending), deletes, the merge, REINDEX
INSERT INTO items SELECT 5000 + qid, q FROM qs WHERE qid <= 10;
INSERT INTO items VALUES (6000, NULL);
DELETE FROM items WHERE id % 5 = 1;
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[3, 30]), 0::bigint,
          'pending rows and deletes: equal distance lists');
SELECT is((SELECT min(code <-> (SELECT q FROM qs WHERE qid = 3)) FROM
             (SELECT code FROM items ORDER BY code <-> (SELECT q FROM qs WHERE qid = 3) LIMIT 1) s), 0::float8,
          'a query inserted as a row is its own nearest, at distance 0');
SELECT is(pg_temp.knn_mismatches('items_code', 'items', 7), 0::bigint, 'genie_hamming_knn over pending rows and deletes');
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO items SELECT 7000 + i, (SELECT q FROM qs WHERE qid = 1 + i % 20) FROM generate_series(1, 3000) i;
SELECT is((SELECT pending_rows < 3000 FROM genie_index_info('items_code')), true, 'inserts beyond the limit merged the pending list');
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[3, 30]), 0::bigint, 'after the merge: equal distance lists');
REINDEX INDEX items_code;
SELECT is(pg_temp.mismatches('items', 'SELECT q FROM qs', ARRAY[3, 30]), 0::bigint, 'after REINDEX: equal distance lists');
SELECT lives_ok($$SELECT genie_index_check('items_code', true)$$, 'genie_index_check finds every row and no fault');

-- bit varying: one length per index
CREATE TABLE vb (id int, code varbit);
INSERT INTO vb SELECT id, code::varbit FROM ties;
CREATE INDEX vb_code ON vb USING genie (code);
SELECT is(pg_temp.mismatches('vb', $$SELECT B'000000000001'::bit(12) q$$, ARRAY[5, 40]), 0::bigint,
          'a bit varying column: equal distance lists');
SELECT throws_like($$INSERT INTO vb VALUES (1, B'101')$$, '%holds codes of 12 bits%',
                   'a code of another length is refused');
SELECT throws_ok($$INSERT INTO vb VALUES (1, B'101')$$, '22026', NULL, '... with SQLSTATE 22026');

-- an index built on an empty table takes its first code's length
CREATE TABLE fresh (id int, code bit varying);
CREATE INDEX fresh_code ON fresh USING genie (code);
SELECT is((SELECT count(*) FROM (SELECT id FROM fresh ORDER BY code <-> B'1' LIMIT 3) s), 0::bigint, 'an empty index answers any query with no rows');
INSERT INTO fresh VALUES (1, B'1100'), (2, B'0011'), (3, B'1111');
SELECT is((SELECT array_agg(id ORDER BY code <-> B'1110', id) FROM fresh), ARRAY[1, 3, 2],
          'the first codes fix the length; the search is exact');
SELECT throws_ok($$SELECT id FROM fresh ORDER BY code <-> B'101' LIMIT 1$$, '22026', NULL,
                 'a query code of another length is refused');

-- a cursor declared on an empty index, which an insert then gives another length
CREATE TABLE relength (code varbit);
CREATE INDEX relength_code ON relength USING genie (code);
DECLARE relength_cursor CURSOR FOR SELECT code FROM relength ORDER BY code <-> B'1' LIMIT 5;
INSERT INTO relength VALUES (B'1'::bit(128));
SELECT throws_ok('FETCH 1 FROM relength_cursor', '22026', NULL,
                 'a cursor whose index took codes of another length after DECLARE refuses its query at the first FETCH');

-- bad input to genie_hamming_knn
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_code', ARRAY[NULL::bit(128)], 3)$$, '22004', NULL,
                 'a NULL query code is an error');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_code', ARRAY[B'1'::bit(128), B'1'::bit(64)::bit(128), B'1'::bit(12)::varbit::bit], 3)$$,
                 '22026', NULL, 'query codes of two lengths are an error');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_code', ARRAY[B'101'], 3)$$, '22026', NULL,
                 'query codes of another length than the index holds are an error');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_code', ARRAY[ARRAY[B'1'::bit(128)]], 3)$$, '2202E', NULL,
                 'a two-dimensional bit[] is an error');
SELECT throws_ok($$SELECT * FROM genie_knn('items_code', ARRAY[1.5::real], 3)$$, '42809', NULL,
                 'genie_knn (real[] queries) on a code index is an error');
SELECT throws_ok($$SELECT * FROM genie_knn('items_code', '{1.5}', 3)$$, '42809', NULL,
                 'an untyped literal is still real[] queries for genie_knn');
CREATE TABLE vecs (v real[]);
INSERT INTO vecs VALUES ('{1,2}');
CREATE INDEX vecs_v ON vecs USING genie (v) WITH (m = 0);
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('vecs_v', ARRAY[B'1'], 3)$$, '42809', NULL,
                 'genie_hamming_knn on a vector index is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_from('vecs_v', 'SELECT code FROM items LIMIT 2', 3)$$, '42809', NULL,
                 'genie_knn_from with bit rows on a vector index is an error');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_code', ARRAY[B'1'::bit(128)], 0)$$, '22023', NULL, 'k = 0 is an error');
SELECT is((SELECT count(*) FROM genie_hamming_knn('items_code', '{}'::bit[], 3)), 0::bigint, 'no queries: no rows');

SELECT * FROM finish();
ROLLBACK;
