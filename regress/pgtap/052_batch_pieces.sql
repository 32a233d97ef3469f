-- An exact batch of 2,048 queries or more is scanned in pieces (up to 8 of
-- at least 1,024 queries), each beside the visibility checks of the one
-- before: the rows are the sequential scan's, with rows invisible to the
-- statement taking places in some pieces (their queries searched wider
-- after), with k past the table's size, and for codes by Hamming distance.
-- In-process every piece is one engine call (genie_profile's engine
-- calls); through the genie service a batch is one request.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(9);
SELECT setseed(0.52);

CREATE TABLE bp_items (id int PRIMARY KEY, v real[]);
INSERT INTO bp_items SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 8 + i - i))
  FROM generate_series(1, 500) i;
CREATE INDEX bp_items_v ON bp_items USING genie (v) WITH (m = 0);
CREATE TABLE bp_queries (qid int PRIMARY KEY, q real[]);
INSERT INTO bp_queries SELECT g, (SELECT array_agg(random()::real) FROM generate_series(1, 8 + g - g))
  FROM generate_series(1, 4100) g;
CREATE TABLE bp_batch AS SELECT array_agg(q ORDER BY qid) AS a FROM bp_queries;

-- the oracle: each query's k nearest visible rows by the sequential scan
CREATE FUNCTION pg_temp.scan(k int) RETURNS TABLE (query_no int, ctid text, distance float8)
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  RETURN QUERY SELECT q.qid, n.ctid::text, n.d FROM bp_queries q CROSS JOIN LATERAL
    (SELECT i.ctid, i.v <-> q.q AS d FROM bp_items i ORDER BY i.v <-> q.q, i.ctid LIMIT k) n;
END $$;
CREATE FUNCTION pg_temp.in_process() RETURNS bool LANGUAGE sql AS
  $$ SELECT current_setting('shared_preload_libraries') !~ 'genie' $$;

SELECT genie_profile_reset();
SET genie.profile = on;
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn('bp_items_v', (SELECT a FROM bp_batch), 5)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan(5) ORDER BY 1, 3, 2 $$,
  'genie_knn of 4,100 queries (4 pieces) equals the sequential scan');
SELECT CASE WHEN pg_temp.in_process()
  THEN is((SELECT calls FROM genie_profile() WHERE phase = 'engine'), 4::int8,
          'in-process, the 4,100 queries are scanned in 4 engine calls')
  ELSE skip('through the genie service a batch is one request', 1) END;

-- rows the statement cannot see take places in some queries' first 5:
-- those queries are searched again wider, after the pieces
DELETE FROM bp_items WHERE id % 7 = 0;
UPDATE bp_items SET v = array_fill(0.5::real, ARRAY[8]) WHERE id % 11 = 0;
SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn('bp_items_v', (SELECT a FROM bp_batch), 5)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan(5) ORDER BY 1, 3, 2 $$,
  'with rows deleted and updated in the transaction, genie_knn in pieces equals the sequential scan');
SELECT CASE WHEN pg_temp.in_process()
  THEN cmp_ok((SELECT calls FROM genie_profile() WHERE phase = 'engine'), '>', 4::int8,
              'the queries short of 5 visible rows were searched again after the 4 pieces')
  ELSE skip('through the genie service a batch is one request', 1) END;
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('bp_items_v', 'SELECT q FROM bp_queries ORDER BY qid', 5)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan(5) ORDER BY 1, 3, 2 $$,
  'genie_knn_from in pieces equals the sequential scan');

-- k past the rows: every visible row of each query
CREATE TABLE bp_small (id int PRIMARY KEY, v real[]);
INSERT INTO bp_small SELECT id, v FROM bp_items WHERE id <= 30;
CREATE INDEX bp_small_v ON bp_small USING genie (v) WITH (m = 0);
DELETE FROM bp_small WHERE id IN (3, 4);
SELECT is((SELECT count(*) FROM genie_knn('bp_small_v', (SELECT a[1:2100] FROM bp_batch), 40)),
          2100::bigint * (SELECT count(*) FROM bp_small),
          'genie_knn of 2,100 queries for 40 of 28 visible rows answers every visible row of each');
SELECT is((SELECT count(*) FROM (
             SELECT query_no, ctid::text, distance FROM genie_knn('bp_small_v', (SELECT a[1:2100] FROM bp_batch), 40)
             EXCEPT
             SELECT q.qid, s.ctid::text, s.v <-> q.q FROM bp_queries q, bp_small s WHERE q.qid <= 2100) d),
          0::bigint, 'and each is a visible row at its distance');

-- codes by Hamming distance, 2,600 queries in 2 pieces
CREATE TABLE bp_codes (id int PRIMARY KEY, code bit(64));
INSERT INTO bp_codes SELECT i, (floor(random() * 2^62)::int8)::bit(64) FROM generate_series(1, 400) i;
CREATE INDEX bp_codes_c ON bp_codes USING genie (code genie_bit_ops);
CREATE TABLE bp_code_queries AS SELECT g AS qid, (floor(random() * 2^62)::int8)::bit(64) AS q FROM generate_series(1, 2600) g;
SELECT genie_profile_reset();
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_hamming_knn('bp_codes_c', (SELECT array_agg(q ORDER BY qid) FROM bp_code_queries), 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT q.qid, n.ctid::text, n.d FROM bp_code_queries q CROSS JOIN LATERAL
       (SELECT c.ctid, bit_count(c.code # q.q)::float8 AS d FROM bp_codes c ORDER BY 2, c.ctid LIMIT 3) n
     ORDER BY 1, 3, 2 $$,
  'genie_hamming_knn of 2,600 queries (2 pieces) equals bit_count over the table');
SELECT CASE WHEN pg_temp.in_process()
  THEN is((SELECT calls FROM genie_profile() WHERE phase = 'engine'), 2::int8,
          'in-process, the 2,600 codes are scanned in 2 engine calls')
  ELSE skip('through the genie service a batch is one request', 1) END;

SELECT * FROM finish();
ROLLBACK;
