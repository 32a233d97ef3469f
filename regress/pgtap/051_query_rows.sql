-- genie_knn_from reads its query rows as they are stored: rows pglz or lz4
-- compressed (expanded together on the threads), plain and stored
-- out of line, in one query; in batches small and large enough for the
-- threads, and past the bytes it reads at once.  Every answer equals the
-- sequential scan's (an oracle that reads no query through genie), and a
-- bad row anywhere is the error of that row.  A batch of more than a
-- piece (1,024 rows here) is scanned in pieces while it is read, on either
-- engine, where one exact scan answers it: EXPLAIN (ANALYZE) counts them;
-- an error or a cancel in the middle stops the scans, and the next
-- statement is answered.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(31);

-- 40 indexed vectors of 2,000 dimensions: small integers, so ties are
-- decided by the row order as in the scan
CREATE TABLE qr_items (id int PRIMARY KEY, v real[]);
INSERT INTO qr_items
  SELECT i, array_agg(((i * 7 + j * 13) % 11)::real ORDER BY j)
  FROM generate_series(1, 40) i, generate_series(1, 2000) j GROUP BY i;
CREATE INDEX qr_items_v ON qr_items USING genie (v) WITH (m = 0);

-- queries of 2,000 small integers in a short cycle (8 kB; pglz keeps them inline), each
-- stored as the column says
CREATE FUNCTION pg_temp.qvec(q int) RETURNS real[] LANGUAGE sql AS
  $$ SELECT array_agg(((q * 5 + j * (q % 7 + 1)) % 9)::real ORDER BY j) FROM generate_series(1, 2000) j $$;
CREATE TABLE qr_pglz (qid int PRIMARY KEY, q real[]);
ALTER TABLE qr_pglz ALTER q SET COMPRESSION pglz;
INSERT INTO qr_pglz SELECT q, pg_temp.qvec(q) FROM generate_series(1, 5000) q;
-- fresh values each way (a value copied from another table keeps its
-- form): rows 1-100 pglz, 101-150 lz4 (where the server has it), 151-200
-- plain out of line, 201-260 pglz, 261-270 random (pglz gains too little:
-- plain), 271-300 half zeros (pglz, too large still to stay inline: out of line)
CREATE TABLE qr_mixed (qid int PRIMARY KEY, q real[]);
ALTER TABLE qr_mixed ALTER q SET COMPRESSION pglz;
INSERT INTO qr_mixed SELECT q, pg_temp.qvec(q) FROM generate_series(1, 100) q;
DO $$ BEGIN
  EXECUTE 'ALTER TABLE qr_mixed ALTER q SET COMPRESSION lz4';
EXCEPTION WHEN feature_not_supported THEN NULL;
END $$;
INSERT INTO qr_mixed SELECT q, pg_temp.qvec(q) FROM generate_series(101, 150) q;
ALTER TABLE qr_mixed ALTER q SET STORAGE EXTERNAL;
INSERT INTO qr_mixed SELECT q, pg_temp.qvec(q) FROM generate_series(151, 200) q;
ALTER TABLE qr_mixed ALTER q SET STORAGE EXTENDED, ALTER q SET COMPRESSION pglz;
INSERT INTO qr_mixed SELECT q, pg_temp.qvec(q) FROM generate_series(201, 260) q;
SELECT setseed(0.51);
INSERT INTO qr_mixed SELECT q, (SELECT array_agg(random()::real) FROM generate_series(1, 2000 + q - q))
  FROM generate_series(261, 270) q;
INSERT INTO qr_mixed SELECT q, (SELECT array_agg(CASE WHEN j % 2 = 0 THEN 0 ELSE floor(random() * 1000) END::real ORDER BY j)
                                FROM generate_series(1, 2000 + q - q) j)
  FROM generate_series(271, 300) q;

SELECT ok((SELECT count(*) FROM qr_pglz WHERE pg_column_compression(q) = 'pglz') = 5000,
          'the 5,000 query rows are stored pglz compressed');
SELECT ok((SELECT count(*) FROM qr_mixed WHERE pg_column_compression(q) IS NOT NULL) = 240
          AND (SELECT count(*) FROM qr_mixed WHERE pg_column_compression(q) IS NULL) = 60
          AND (SELECT count(*) FROM qr_mixed WHERE pg_column_compression(q) = 'pglz'
                                                AND pg_column_size(q) > 2100) = 30
          AND ((SELECT count(*) FROM qr_mixed WHERE pg_column_compression(q) = 'lz4') = 50
               OR NOT EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression'
                                                        AND 'lz4' = ANY (enumvals))),
          'the mixed rows are stored pglz (30 of them out of line), lz4, and plain out of line');

-- the oracle: each query's 3 nearest by the sequential scan of <->
CREATE FUNCTION pg_temp.scan(tab text, n int) RETURNS TABLE (query_no int, ctid text, distance float8)
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  RETURN QUERY EXECUTE format(
    'SELECT q.qid, n.ctid::text, n.d FROM %I q CROSS JOIN LATERAL
       (SELECT i.ctid, i.v <-> q.q AS d FROM qr_items i ORDER BY i.v <-> q.q, i.ctid LIMIT 3) n
     WHERE q.qid <= %s', tab, n);
END $$;

SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_pglz', 5000) ORDER BY 1, 3, 2 $$,
  'genie_knn_from of 5,000 pglz rows (read on the threads, in two goes) equals the sequential scan');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz WHERE qid <= 40 ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_pglz', 40) ORDER BY 1, 3, 2 $$,
  'genie_knn_from of 40 pglz rows (read by the backend alone) equals the sequential scan');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_mixed ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_mixed', 300) ORDER BY 1, 3, 2 $$,
  'genie_knn_from of rows stored pglz, lz4, plain and out of line, mixed, equals the sequential scan');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT query_no, ctid::text, distance FROM genie_knn('qr_items_v', (SELECT array_agg(q ORDER BY qid) FROM qr_pglz), 3)
     ORDER BY query_no, distance, ctid $$,
  'genie_knn_from equals genie_knn over the same rows as one array');

-- the 5,000 rows were scanned in five pieces while they were read (the
-- first answer above); with the permutation index asked, read, then searched
-- (two threads: one core would decline, as the scans and the reading would
-- only take turns)
SET genie.cpu_threads = 2;
CREATE FUNCTION pg_temp.genie_explain(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || sql LOOP
    out := out || line || E'\n';
  END LOOP;
  RETURN out;
END $$;
SELECT matches(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)$$),
               'Genie Queries Scanned Ahead: 5000\nGenie Pieces Scanned Ahead: 5\n',
               'EXPLAIN ANALYZE: the 5,000 rows were scanned ahead in five pieces of 1,024 or fewer');
-- genie.profile charges each phase what it took: a piece answered while
-- the next was read (through the genie service) leaves the engine phase
-- only the wait it caused, not the service's time a second time
SET genie.profile = on;
SELECT genie_profile_reset();
SELECT count(*) FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3);
SELECT ok((SELECT min(total_ms) >= 0 AND sum(calls) FILTER (WHERE phase = 'query') > 0 FROM genie_profile()),
          'genie.profile: no phase of a batch scanned ahead is charged less than nothing');
RESET genie.profile;
SELECT doesnt_match(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz WHERE qid <= 1000 ORDER BY qid', 3)$$),
                    'Scanned Ahead',
                    'a batch of one piece is read, then searched');
SET genie.vector_search = permutation;
SELECT doesnt_match(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)$$),
                    'Scanned Ahead',
                    'genie.vector_search = permutation (no permutants: exact): the rows are read, then searched');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_pglz', 5000) ORDER BY 1, 3, 2 $$,
  'read, then searched: genie_knn_from of the 5,000 rows equals the sequential scan');
RESET genie.vector_search;
SET genie.device = cpu;
SELECT matches(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)$$),
               format('Genie Engines: cpu, %s\n(.*\n)*Genie Queries Scanned Ahead: 5000\n',
                      CASE WHEN current_setting('shared_preload_libraries') LIKE '%genie%'
                           THEN 'genie service' ELSE 'this backend' END),
               'genie.device = cpu: the CPU engine scans ahead too (in-process, or in the genie service)');
RESET genie.device;

-- rows pending since the index's build, and dead ones, with pieces scanned ahead
INSERT INTO qr_items
  SELECT i, array_agg(((i * 3 + j * 7) % 13)::real ORDER BY j)
  FROM generate_series(41, 60) i, generate_series(1, 2000) j GROUP BY i;
DELETE FROM qr_items WHERE id IN (3, 44);
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_pglz', 5000) ORDER BY 1, 3, 2 $$,
  'genie_knn_from of 5,000 rows scanned ahead, with pending and deleted rows, equals the sequential scan');

-- a query whose rows are themselves searched through genie while pieces
-- are out: through the genie service, each such search first takes the
-- answer to the piece out of the session's one request segment
SET enable_seqscan = off;
SET enable_indexscan = on;
SELECT matches(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v',
                 'SELECT p.q FROM qr_pglz p WHERE (SELECT i.id FROM qr_items i ORDER BY i.v <-> p.q LIMIT 1) > 0', 3)$$),
               'Genie Searches: 500[1-9]\n(.*\n)*Genie Pieces Scanned Ahead: 5\n',
               'EXPLAIN ANALYZE: 5,000 searches by the query (and a widening round) among the five pieces scanned ahead');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v',
       'SELECT p.q FROM qr_pglz p WHERE (SELECT i.id FROM qr_items i ORDER BY i.v <-> p.q LIMIT 1) > 0', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_pglz', 5000) ORDER BY 1, 3, 2 $$,
  'genie_knn_from whose query searches the index row by row equals the sequential scan');
RESET enable_seqscan;

-- an error in a late piece, after the first ones were scanned, and a
-- cancel under way: the statement ends with its error, the next is answered
CREATE TABLE qr_late (qid int PRIMARY KEY, q real[]);
INSERT INTO qr_late SELECT qid, q FROM qr_pglz;
UPDATE qr_late SET q[3] = 'Infinity' WHERE qid = 4700;
SELECT throws_ok($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_late ORDER BY qid', 3)$$,
                 '22000', 'queries must not contain infinity',
                 'genie_knn_from: a bad row after four pieces were scanned ahead is the error');
-- (40,000 rows streamed from the cursor, no sort first: about 0.8 s on two
-- cores, of which the first piece is handed over after about 20 ms; a
-- cancel is caught by name only)
SELECT matches(pg_temp.genie_explain($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz, generate_series(1, 8) g', 3)$$),
               'Genie Queries Scanned Ahead: 40000\n',
               'the 40,000 rows streamed are scanned ahead');
SET statement_timeout = '60ms';
DO $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  PERFORM * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz, generate_series(1, 8) g', 3);
  CREATE TEMP TABLE qr_cancel AS SELECT 'answered'::text AS outcome, clock_timestamp() - t0 AS took;
EXCEPTION WHEN query_canceled THEN
  CREATE TEMP TABLE qr_cancel AS SELECT 'cancelled'::text AS outcome, clock_timestamp() - t0 AS took;
END $$;
RESET statement_timeout;
SELECT ok((SELECT outcome = 'cancelled' AND took < interval '560ms' FROM qr_cancel),
          'genie_knn_from: statement_timeout cancels a batch while its pieces are scanned, at once');
SELECT is((SELECT count(*) FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_pglz WHERE qid <= 2100 ORDER BY qid', 3)),
          6300::bigint, 'the next batch after the error and the cancel is answered');
RESET genie.cpu_threads;

-- bit rows on a vector index: the kind's error; none of them: no rows
CREATE TABLE qr_bits AS SELECT B'1010'::bit(4) AS c FROM generate_series(1, 3);
SELECT throws_ok($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT c FROM qr_bits', 3)$$,
                 '42809', NULL, 'genie_knn_from: bit rows on a vector index are the wrong kind of query');
SELECT is((SELECT count(*) FROM genie_knn_from('qr_items_v', 'SELECT c FROM qr_bits WHERE false', 3)),
          0::bigint, 'genie_knn_from: no bit rows on a vector index, no rows');

-- a bad row among pglz rows that the threads read: the error names it
CREATE TABLE qr_bad (qid int PRIMARY KEY, q real[]);
INSERT INTO qr_bad SELECT qid, q FROM qr_pglz WHERE qid <= 500;
UPDATE qr_bad SET q[1700] = 'NaN' WHERE qid = 377;
SELECT ok((SELECT pg_column_compression(q) FROM qr_bad WHERE qid = 377) = 'pglz', 'the NaN row is pglz compressed');
SELECT throws_ok($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_bad ORDER BY qid', 3)$$,
                 '22000', 'queries must not contain NaN',
                 'genie_knn_from: a NaN in a compressed row read on the threads is an error');
DO $$
DECLARE d text;
BEGIN
  PERFORM * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_bad ORDER BY qid', 3);
EXCEPTION WHEN data_exception THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  CREATE TEMP TABLE qr_detail AS SELECT d AS detail;
END $$;
SELECT is((SELECT detail FROM qr_detail), 'Query 377, element 1700.', 'the error names the row and element');
UPDATE qr_bad SET q = q[1:1999] WHERE qid = 400;
UPDATE qr_bad SET q[1700] = 0 WHERE qid = 377;
SELECT throws_ok($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_bad ORDER BY qid', 3)$$,
                 '2202E', 'the queries have 2000 and 1999 dimensions',
                 'genie_knn_from: a compressed row of other dimensions is an error');
UPDATE qr_bad SET q = q[1:1999] || (pg_temp.qvec(400))[2000:2000] WHERE qid = 400;
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_bad ORDER BY qid', 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('qr_bad', 500) ORDER BY 1, 3, 2 $$,
  'genie_knn_from of the mended rows equals the sequential scan');
UPDATE qr_bad SET q[5] = NULL WHERE qid = 222;
SELECT throws_ok($$SELECT * FROM genie_knn_from('qr_items_v', 'SELECT q FROM qr_bad ORDER BY qid', 3)$$,
                 '2202E', 'each query must be a one-dimensional real[] without NULL elements',
                 'genie_knn_from: a compressed row with a NULL element is an error');

-- genie_knn's array of 600 x 2,000 elements is checked on the threads, then named
CREATE TEMP TABLE qr_array AS SELECT array_agg(q ORDER BY qid) AS a FROM qr_pglz WHERE qid <= 600;
UPDATE qr_array SET a[555][7] = '-Infinity';
DO $$
DECLARE d text; m text;
BEGIN
  PERFORM * FROM genie_knn('qr_items_v', (SELECT a FROM qr_array), 3);
EXCEPTION WHEN data_exception THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, m = MESSAGE_TEXT;
  CREATE TEMP TABLE qr_array_error AS SELECT m AS message, d AS detail;
END $$;
SELECT is((SELECT message || ' / ' || detail FROM qr_array_error),
          'queries must not contain infinity / Query 555, element 7.',
          'genie_knn: an infinity in a batch of 1.2M elements is named by query and element');
UPDATE qr_array SET a[555][7] = 1;
SELECT is((SELECT count(*) FROM genie_knn('qr_items_v', (SELECT a FROM qr_array), 3)), 1800::bigint,
          'genie_knn: the mended batch answers every query');

-- a row too large to expand on a thread's stack (20,000 dimensions) is read by the backend
CREATE TABLE qr_wide_items (id int PRIMARY KEY, v real[]);
INSERT INTO qr_wide_items SELECT i, array_agg(((i + j) % 5)::real ORDER BY j)
  FROM generate_series(1, 5) i, generate_series(1, 20000) j GROUP BY i;
CREATE INDEX qr_wide_v ON qr_wide_items USING genie (v) WITH (m = 0);
CREATE TABLE qr_wide (qid int PRIMARY KEY, q real[]);
INSERT INTO qr_wide SELECT q, array_agg(((q * 3 + j) % 4)::real ORDER BY j)
  FROM generate_series(1, 70) q, generate_series(1, 20000) j GROUP BY q;
SELECT ok((SELECT bool_and(pg_column_compression(q) = 'pglz') FROM qr_wide), 'the wide rows are pglz compressed');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_from('qr_wide_v', 'SELECT q FROM qr_wide ORDER BY qid', 2)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT q.qid, n.ctid::text, n.d FROM qr_wide q CROSS JOIN LATERAL
       (SELECT i.ctid, i.v <-> q.q AS d FROM qr_wide_items i ORDER BY i.v <-> q.q, i.ctid LIMIT 2) n ORDER BY 1, 3, 2 $$,
  'genie_knn_from of 70 rows of 20,000 dimensions equals the sequential scan');

SELECT * FROM finish();
ROLLBACK;
