-- Error Weighted Hashing on code indexes (genie.bit_search = ewh, indexes
-- built WITH (m = ...)): recall@10 against the sequential scan ordered by
-- bit_count(code # q) on random 256-bit codes with planted neighbours, every
-- returned distance the true one, rows inserted after the build (pending)
-- and merged, deletes, REINDEX, the options e and weights changed by ALTER
-- INDEX, candidates that run out, and the errors a user can cause.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(31);

CREATE FUNCTION pg_temp.r32() RETURNS bit(32) LANGUAGE sql VOLATILE AS $$
  SELECT (floor(random() * 4294967296)::bigint)::bit(32)
$$;
CREATE FUNCTION pg_temp.r256() RETURNS bit(256) LANGUAGE sql VOLATILE AS $$
  SELECT pg_temp.r32() || pg_temp.r32() || pg_temp.r32() || pg_temp.r32() ||
         pg_temp.r32() || pg_temp.r32() || pg_temp.r32() || pg_temp.r32()
$$;
-- a copy of c with each bit flipped with probability p
CREATE FUNCTION pg_temp.noisy(c bit, p float8) RETURNS bit LANGUAGE sql VOLATILE AS $$
  SELECT c # string_agg(CASE WHEN random() < p THEN '1' ELSE '0' END, '' ORDER BY i)::varbit::bit(256)
  FROM generate_series(1, length(c)) i
$$;

DO $$ BEGIN PERFORM setseed(0.2718); END $$;
-- 24 queries, each with 10 planted neighbours (about 5% to 12% of the bits flipped), among 3,000 random codes
CREATE TABLE qs AS SELECT qid, pg_temp.r256() AS q FROM generate_series(1, 24) qid;
CREATE TABLE items (id int PRIMARY KEY, code bit(256));
INSERT INTO items SELECT i, pg_temp.r256() FROM generate_series(1, 3000) i;
INSERT INTO items SELECT 10000 + qid * 10 + j, pg_temp.noisy(q, 0.05 + 0.007 * j)
FROM qs, generate_series(0, 9) j;
INSERT INTO items VALUES (20000, NULL);
CREATE INDEX items_ewh ON items USING genie (code) WITH (m = 16, seed = 3);
CREATE INDEX items_plain ON items USING genie (code);
ANALYZE items;

-- recall@10 of genie_hamming_knn (ties allowed: a returned row counts when
-- it is no farther than the exact tenth), and the rows whose distance is not
-- bit_count(code # q)
CREATE FUNCTION pg_temp.recall(idx regclass, k int) RETURNS float8 LANGUAGE sql AS $$
  WITH got AS (SELECT g.query_no, g.distance FROM genie_hamming_knn(idx, (SELECT array_agg(q ORDER BY qid) FROM qs), k) g),
       kth AS (SELECT qid, (SELECT max(d) FROM (SELECT bit_count(code # qs.q)::float8 d FROM items
                                                  WHERE code IS NOT NULL ORDER BY 1 LIMIT k) s) AS d FROM qs)
  SELECT sum(least(n, k))::float8 / (k * (SELECT count(*) FROM qs))
  FROM (SELECT kth.qid, count(got.query_no) n FROM kth LEFT JOIN got ON got.query_no = kth.qid AND got.distance <= kth.d
        GROUP BY kth.qid) s
$$;
CREATE FUNCTION pg_temp.wrong_distances(idx regclass, k int) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM genie_hamming_knn(idx, (SELECT array_agg(q ORDER BY qid) FROM qs), k) g
  JOIN qs ON qs.qid = g.query_no JOIN items t ON t.ctid = g.ctid
  WHERE g.distance IS DISTINCT FROM bit_count(t.code # qs.q)::float8
$$;

SELECT cmp_ok((SELECT keywords FROM genie_index_info('items_ewh')), '>', 0, 'WITH (m = 16) keeps EWH keywords');
SELECT is((SELECT keywords FROM genie_index_info('items_plain')), 0, 'a code index without m keeps none');
SELECT is((SELECT postings FROM genie_index_info('items_ewh')), 16 * 3240::int8, 'one keyword per function and code');

SET genie.bit_search = ewh;
SET genie.ewh_candidates = 50;
SELECT cmp_ok(pg_temp.recall('items_ewh', 10), '>=', 0.95::float8, 'EWH recall@10 with 50 candidates');
SELECT is(pg_temp.wrong_distances('items_ewh', 10), 0::bigint, 'every EWH distance is the true Hamming distance');
SELECT is((SELECT array_agg(d) FROM (SELECT code <-> (SELECT q FROM qs WHERE qid = 4) d FROM items
                                      ORDER BY code <-> (SELECT q FROM qs WHERE qid = 4) LIMIT 10) s),
          (SELECT array_agg(d ORDER BY d) FROM (SELECT bit_count(code # (SELECT q FROM qs WHERE qid = 4))::float8 d
                                                  FROM items WHERE code IS NOT NULL ORDER BY 1 LIMIT 10) s),
          'ORDER BY code <-> q LIMIT 10 in the EWH mode finds the planted neighbours');
SELECT is((SELECT count(*) FROM (SELECT id FROM items ORDER BY code <-> (SELECT q FROM qs WHERE qid = 5) LIMIT 5000) s),
          3241::bigint, 'the EWH mode still returns every row once, the candidates and then the rest');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_plain', ARRAY[(SELECT q FROM qs WHERE qid = 1)], 3)$$,
                 '0A000', NULL, 'the EWH mode on an index built without m is an error');

-- candidates that run out: the rest by exact distance (one exact bucket of
-- 24 bits per function, two functions: a random query meets no code)
CREATE TABLE few (id int, code bit(256));
INSERT INTO few SELECT i, pg_temp.r256() FROM generate_series(1, 40) i;
CREATE INDEX few_code ON few USING genie (code) WITH (m = 2, sample_bits = 24, errors = 0);
SELECT is((SELECT count(*) FROM genie_hamming_knn('few_code', ARRAY[(SELECT q FROM qs WHERE qid = 1)], 10)),
          10::bigint, 'a query with fewer candidates than k still gets k rows');
SELECT results_eq(
  $$SELECT distance FROM genie_hamming_knn('few_code', ARRAY[(SELECT q FROM qs WHERE qid = 1)], 10) ORDER BY 1$$,
  $$SELECT bit_count(code # (SELECT q FROM qs WHERE qid = 1))::float8 FROM few ORDER BY 1 LIMIT 10$$,
  'its rows are the exact nearest once the candidates ran out');
SELECT results_eq(
  $$SELECT code <-> (SELECT q FROM qs WHERE qid = 1) FROM few ORDER BY code <-> (SELECT q FROM qs WHERE qid = 1) LIMIT 10$$,
  $$SELECT bit_count(code # (SELECT q FROM qs WHERE qid = 1))::float8 FROM few ORDER BY 1 LIMIT 10$$,
  'ORDER BY on an index of fewer rows than one search asks: the exact rest once the candidates ran out');

-- e and the weights are read at each query
ALTER INDEX items_ewh SET (errors = 0);
SELECT is((SELECT array_agg(g.distance) FROM genie_hamming_knn('items_ewh', ARRAY[(SELECT code FROM items WHERE id = 10013)], 1) g),
          ARRAY[0::float8], 'errors = 0: a stored code finds itself through its exact buckets');
SELECT is(pg_temp.wrong_distances('items_ewh', 10), 0::bigint, 'errors = 0: true distances');
ALTER INDEX items_ewh SET (errors = 3, weights = '8,4,2,1');
SELECT cmp_ok(pg_temp.recall('items_ewh', 10), '>=', 0.95::float8, 'errors = 3 with weights 8,4,2,1: recall@10');
ALTER INDEX items_ewh SET (errors = 2, weights = '5,1');
SELECT throws_ok($$SELECT * FROM genie_hamming_knn('items_ewh', ARRAY[(SELECT q FROM qs WHERE qid = 1)], 3)$$,
                 '22023', NULL, 'fewer weights than error counts is an error');
ALTER INDEX items_ewh RESET (errors, weights);
SELECT throws_ok($$ALTER INDEX items_ewh SET (weights = '3,x')$$, '22023', NULL, 'malformed weights are refused');
SELECT throws_ok($$ALTER INDEX items_ewh SET (weights = '3,0')$$, '22023', NULL, 'a weight below 1 is refused');
SELECT throws_ok($$ALTER INDEX items_ewh SET (errors = 4)$$, '22023', NULL, 'more than 3 errors are refused');
SELECT throws_ok($$CREATE INDEX ON items USING genie (code) WITH (m = 200, sample_bits = 24)$$, '22023', NULL,
                 'm * 2^sample_bits beyond 2^31 is refused');

-- rows inserted after the build (pending), deletes, the merge, REINDEX
INSERT INTO items SELECT 30000 + qid, pg_temp.noisy(q, 0.02) FROM qs WHERE qid <= 12;
SELECT is((SELECT count(*) FROM qs, LATERAL (SELECT id, code <-> qs.q d FROM items ORDER BY code <-> qs.q LIMIT 1) s
           WHERE qid <= 12 AND s.d = (SELECT min(bit_count(code # qs.q)) FROM items)
             AND s.d <= (SELECT bit_count(code # qs.q) FROM items WHERE id = 30000 + qid)), 12::bigint,
          'rows inserted after the build (pending) are EWH candidates: each query''s nearest is found');
DELETE FROM items WHERE id = 30001;
SELECT is((SELECT count(*) FROM genie_hamming_knn('items_ewh', ARRAY[(SELECT q FROM qs WHERE qid = 1)], 10) g
           JOIN items t ON t.ctid = g.ctid WHERE t.id = 30001), 0::bigint, 'a deleted row is not returned');
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO items SELECT 40000 + i, pg_temp.r256() FROM generate_series(1, 1500) i;
SELECT ok((SELECT pending_rows < 1500 FROM genie_index_info('items_ewh')), 'inserts beyond the limit merged the pending list');
SELECT cmp_ok(pg_temp.recall('items_ewh', 10), '>=', 0.95::float8, 'after the merge: recall@10');
SELECT is(pg_temp.wrong_distances('items_ewh', 10), 0::bigint, 'after the merge: true distances');
CREATE TEMP TABLE before_reindex AS
SELECT query_no, ctid AS row_ctid, distance FROM genie_hamming_knn('items_ewh', (SELECT array_agg(q ORDER BY qid) FROM qs), 10);
REINDEX INDEX items_ewh;
SELECT bag_eq($$SELECT query_no, ctid AS row_ctid, distance FROM genie_hamming_knn('items_ewh', (SELECT array_agg(q ORDER BY qid) FROM qs), 10)$$,
              $$SELECT * FROM before_reindex$$, 'REINDEX draws the same functions: the same rows');
SELECT lives_ok($$SELECT genie_index_check('items_ewh', true)$$, 'genie_index_check finds every keyword and no fault');

-- the build sorts its pairs in memory while they fit in half of
-- maintenance_work_mem (103,000 pairs here: 1MB holds 65,536), else in
-- sorted runs on tapes that it merges: the same index either way
SET maintenance_work_mem = '1MB';
CREATE INDEX items_spilled ON items USING genie (code) WITH (m = 32, seed = 9);
RESET maintenance_work_mem;
CREATE INDEX items_in_memory ON items USING genie (code) WITH (m = 32, seed = 9);
SELECT is((SELECT (keywords, postings, pages) FROM genie_index_info('items_spilled'))::text,
          (SELECT (keywords, postings, pages) FROM genie_index_info('items_in_memory'))::text,
          'sorted in memory or in runs on tapes: the same keywords, postings and pages');
SELECT results_eq(
  $$SELECT query_no, ctid::text, distance FROM genie_hamming_knn('items_spilled', (SELECT array_agg(q ORDER BY qid) FROM qs), 10) ORDER BY 1, 3, 2$$,
  $$SELECT query_no, ctid::text, distance FROM genie_hamming_knn('items_in_memory', (SELECT array_agg(q ORDER BY qid) FROM qs), 10) ORDER BY 1, 3, 2$$,
  '... and the same EWH rows');
SELECT lives_ok($$SELECT genie_index_check('items_in_memory', true)$$, 'the index sorted in memory passes genie_index_check');
DROP INDEX items_spilled, items_in_memory;

-- codes shorter than sample_bits: each function reads every bit
CREATE TABLE short (id int, code bit(8));
INSERT INTO short SELECT i, (i % 256)::bit(8) FROM generate_series(1, 600) i;
CREATE INDEX short_code ON short USING genie (code) WITH (m = 4);
SELECT results_eq(
  $$SELECT distance FROM genie_hamming_knn('short_code', ARRAY[B'10100101'], 5) ORDER BY 1$$,
  $$SELECT bit_count(code # B'10100101')::float8 FROM short ORDER BY 1 LIMIT 5$$,
  '8-bit codes with the default 16 sample bits: the nearest rows');
RESET genie.bit_search;
SELECT is(pg_temp.recall('items_ewh', 10), 1::float8, 'genie.bit_search = exact on the EWH index: recall 1');

SELECT * FROM finish();
ROLLBACK;
