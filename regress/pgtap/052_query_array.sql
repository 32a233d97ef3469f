-- genie_knn over a batch stored in a table as one real[][]: an array
-- stored out of line (pglz or lz4 compressed, or plain) is expanded by
-- genie in pieces of 1,024 queries, each scanned while the next is
-- expanded, on either engine or by the genie service (a request a piece),
-- where one exact scan answers the batch; a
-- value under two pieces or built by the statement is read whole, as
-- before.  Every answer equals the sequential scan's (an oracle that reads
-- no query through genie), and a bad array is the error genie_knn gives
-- any array.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(25);

-- 60 indexed vectors of 512 dimensions: small integers, so ties are
-- decided by the row order as in the scan
CREATE TABLE qa_items (id int PRIMARY KEY, v real[]);
INSERT INTO qa_items
  SELECT i, array_agg(((i * 7 + j * 13) % 11)::real ORDER BY j)
  FROM generate_series(1, 60) i, generate_series(1, 512) j GROUP BY i;
CREATE INDEX qa_items_v ON qa_items USING genie (v) WITH (m = 0);

-- 3,000 queries as rows (the oracle's) and as arrays: a short cycle of
-- small integers (long pglz matches), half zeros with random integers
-- (short matches and literals), and runs of zeros between random bytes
-- (as images: pglz on threads sets its parts right a few kB in)
CREATE TABLE qa_rows (qid int PRIMARY KEY, cyclic real[], mixed real[], pixels real[]);
SELECT setseed(0.52);
INSERT INTO qa_rows
  SELECT q, (SELECT array_agg(((q * 5 + j * (q % 7 + 1)) % 9)::real ORDER BY j) FROM generate_series(1, 512) j),
         (SELECT array_agg(CASE WHEN j % 2 = 0 THEN 0 ELSE floor(random() * 1000) END::real ORDER BY j)
          FROM generate_series(1, 512 + q - q) j),
         (SELECT array_agg(CASE WHEN (j + q) % 64 < 40 THEN 0 ELSE floor(random() * 256) END::real ORDER BY j)
          FROM generate_series(1, 512 + q - q) j)
  FROM generate_series(1, 3000) q;
CREATE TABLE qa_arrays (name text PRIMARY KEY, qs real[]);
ALTER TABLE qa_arrays ALTER qs SET COMPRESSION pglz;
INSERT INTO qa_arrays SELECT 'cyclic', array_agg(cyclic ORDER BY qid) FROM qa_rows;
INSERT INTO qa_arrays SELECT 'mixed', array_agg(mixed ORDER BY qid) FROM qa_rows;
INSERT INTO qa_arrays SELECT 'pixels', array_agg(pixels ORDER BY qid) FROM qa_rows;
INSERT INTO qa_arrays SELECT 'first 1000', array_agg(mixed ORDER BY qid) FROM qa_rows WHERE qid <= 1000;
DO $$ BEGIN
  EXECUTE 'ALTER TABLE qa_arrays ALTER qs SET COMPRESSION lz4';
  INSERT INTO qa_arrays SELECT 'lz4', array_agg(mixed ORDER BY qid) FROM qa_rows;
  INSERT INTO qa_arrays SELECT 'lz4 cyclic', array_agg(cyclic ORDER BY qid) FROM qa_rows;
EXCEPTION WHEN feature_not_supported THEN NULL;
END $$;
ALTER TABLE qa_arrays ALTER qs SET STORAGE EXTERNAL;
INSERT INTO qa_arrays SELECT 'plain', array_agg(mixed ORDER BY qid) FROM qa_rows;
ALTER TABLE qa_arrays ALTER qs SET STORAGE EXTENDED, ALTER qs SET COMPRESSION pglz;
-- bad arrays, each stored pglz and out of line too
INSERT INTO qa_arrays SELECT 'nan', qs FROM qa_arrays WHERE name = 'mixed';
UPDATE qa_arrays SET qs[2500][7] = 'NaN' WHERE name = 'nan';
INSERT INTO qa_arrays SELECT 'null', qs FROM qa_arrays WHERE name = 'mixed';
UPDATE qa_arrays SET qs[1200][3] = NULL WHERE name = 'null';
INSERT INTO qa_arrays SELECT '511', array_agg(cyclic[1:511] ORDER BY qid) FROM qa_rows;
INSERT INTO qa_arrays SELECT 'flat', array_agg(x ORDER BY qid, o) FROM qa_rows, unnest(cyclic) WITH ORDINALITY u(x, o);

SELECT ok((SELECT count(*) FROM qa_arrays WHERE pg_column_compression(qs) = 'pglz'
                                            AND pg_column_size(qs) < 4 * array_length(qs, 1) * coalesce(array_length(qs, 2), 1)) = 8
          AND (SELECT pg_column_compression(qs) IS NULL AND pg_column_size(qs) > 6000000 FROM qa_arrays WHERE name = 'plain')
          AND ((SELECT count(*) FROM qa_arrays WHERE pg_column_compression(qs) = 'lz4') = 2
               OR NOT EXISTS (SELECT FROM pg_settings WHERE name = 'default_toast_compression'
                                                        AND 'lz4' = ANY (enumvals)))
          AND (SELECT array_dims(qs) FROM qa_arrays WHERE name = 'cyclic') = '[1:3000][1:512]',
          'the arrays of 3,000 x 512 queries are stored pglz compressed, lz4 (where the server has it) and plain');

-- the oracle: each query's 3 nearest by the sequential scan of <->
CREATE FUNCTION pg_temp.scan(col text, n int) RETURNS TABLE (query_no int, ctid text, distance float8)
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  RETURN QUERY EXECUTE format(
    'SELECT q.qid, n.ctid::text, n.d FROM qa_rows q CROSS JOIN LATERAL
       (SELECT i.ctid, i.v <-> q.%I AS d FROM qa_items i ORDER BY i.v <-> q.%I, i.ctid LIMIT 3) n
     WHERE q.qid <= %s', col, col, n);
END $$;
CREATE FUNCTION pg_temp.knn(name text) RETURNS TABLE (query_no int, ctid text, distance float8)
LANGUAGE sql AS $$
  SELECT query_no, ctid::text, distance FROM genie_knn('qa_items_v', (SELECT qs FROM qa_arrays WHERE qa_arrays.name = knn.name), 3)
$$;
CREATE FUNCTION pg_temp.genie_explain(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || sql LOOP
    out := out || line || E'\n';
  END LOOP;
  RETURN out;
END $$;
-- EXPLAIN (ANALYZE) of genie_knn over stored array name
CREATE FUNCTION pg_temp.explain_array(name text) RETURNS text LANGUAGE sql AS
  $$ SELECT pg_temp.genie_explain(format('SELECT * FROM genie_knn(''qa_items_v'', (SELECT qs FROM qa_arrays WHERE name = %L), 3)', name)) $$;
-- the error genie_knn gives array name, message and detail
CREATE FUNCTION pg_temp.knn_error(name text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE msg text; detail text;
BEGIN
  PERFORM count(*) FROM pg_temp.knn(name);
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
  RETURN msg || ' / ' || detail;
END $$;

-- array name stored lz4 where the server has lz4, else otherwise (pglz)
CREATE FUNCTION pg_temp.lz4_or(name text, otherwise text) RETURNS text LANGUAGE sql AS
  $$ SELECT CASE WHEN EXISTS (SELECT FROM qa_arrays WHERE qa_arrays.name = 'lz4') THEN lz4_or.name ELSE otherwise END $$;

-- two threads: one core would decline, as the scans and the expanding
-- would only take turns
SET genie.cpu_threads = 2;
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('cyclic') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('cyclic', 3000) ORDER BY 1, 3, 2 $$,
  'genie_knn of a stored pglz array of 3,000 queries (long matches) equals the sequential scan');
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('mixed') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'genie_knn of a stored pglz array of 3,000 queries (short matches, literals) equals the sequential scan');
SELECT matches(pg_temp.explain_array('mixed'),
               'Genie Queries Scanned Ahead: 3000\nGenie Pieces Scanned Ahead: 3\n',
               'EXPLAIN ANALYZE: the array was scanned in three pieces while it was expanded');
SELECT matches(pg_temp.explain_array('cyclic') || pg_temp.explain_array(pg_temp.lz4_or('lz4 cyclic', 'cyclic')),
               'Genie Pieces Scanned Ahead: 3\n(.*\n)*Genie Pieces Scanned Ahead: 3\n',
               'EXPLAIN ANALYZE: the long-match arrays (pglz, lz4) were scanned in pieces too');
-- pglz on the reading's two threads (genie_expand_parallel.c): all of
-- it, or up to a part it could not set right and the rest in order.
-- In-process the CPU engine's scans take the cores once the first piece
-- is read (the reading keeps one), so only the first cut is on threads;
-- the service scans in its own process and the reading keeps both.
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('pixels') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('pixels', 3000) ORDER BY 1, 3, 2 $$,
  'genie_knn of a stored pglz array (runs of zeros, random bytes) expanded on two threads equals the sequential scan');
SELECT matches(pg_temp.explain_array('pixels'),
               CASE WHEN current_setting('shared_preload_libraries') LIKE '%genie%'
                    THEN 'Genie Batch Expanded On Threads: 6000 kB\nGenie Batch Expanded In Order: 0 kB\n'
                    ELSE 'Genie Batch Expanded On Threads: [1-9][0-9]* kB\n' END,
               'EXPLAIN ANALYZE: the array of runs of zeros was expanded on threads (whole through the service)');
SELECT matches(pg_temp.explain_array('mixed'),
               'Genie Batch Expanded On Threads: [1-9][0-9]* kB\nGenie Batch Expanded In Order: [1-9][0-9]* kB\n',
               'EXPLAIN ANALYZE: in the array of short matches of matches, the zeros a part wrote for what lay before it '
               'were copied on: the parts before it on threads, the rest in order');
SET genie.cpu_threads = 1;
SELECT matches(pg_temp.explain_array('pixels'),
               'Genie Batch Expanded On Threads: 0 kB\nGenie Batch Expanded In Order: 6000 kB\n',
               'genie.cpu_threads = 1: the stream expanded in order');
SET genie.cpu_threads = 2;
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('first 1000') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 1000) ORDER BY 1, 3, 2 $$,
  'an array under 4 MB (1,000 queries) is detoasted whole: equal to the sequential scan');
SELECT doesnt_match(pg_temp.explain_array('first 1000'),
                    'Scanned Ahead',
                    'an array under 4 MB is read, then searched');
-- lz4 (where the server has it) and plain, in pieces too
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn(pg_temp.lz4_or('lz4', 'mixed')) ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'an lz4 array (short matches, literals) in pieces: equal to the sequential scan');
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn(pg_temp.lz4_or('lz4 cyclic', 'cyclic')) ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('cyclic', 3000) ORDER BY 1, 3, 2 $$,
  'an lz4 array (long matches) in pieces: equal to the sequential scan');
SELECT matches(pg_temp.explain_array(pg_temp.lz4_or('lz4', 'mixed')),
               'Genie Pieces Scanned Ahead: 3\n',
               'EXPLAIN ANALYZE: the lz4 array was scanned in three pieces while it was expanded');
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('plain') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'a plain array stored out of line, fetched in pieces: equal to the sequential scan');
SELECT matches(pg_temp.explain_array('plain'),
               'Genie Pieces Scanned Ahead: 3\n',
               'EXPLAIN ANALYZE: the plain array was scanned in three pieces while it was fetched');
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn('qa_items_v', (SELECT array_agg(mixed ORDER BY qid) FROM qa_rows), 3)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'an array built by the statement is read whole: equal to the sequential scan');
SELECT doesnt_match(pg_temp.genie_explain($$SELECT * FROM genie_knn('qa_items_v', (SELECT array_agg(mixed ORDER BY qid) FROM qa_rows), 3)$$),
                    'Scanned Ahead',
                    'an array built by the statement is read, then searched');

-- bad arrays: the errors of any array, and the next statement answered
SELECT is(pg_temp.knn_error('nan'), 'queries must not contain NaN / Query 2500, element 7.',
          'a NaN in the third piece: the error names its query and element');
SELECT is(pg_temp.knn_error('null'), 'queries must not contain NULL elements / ',
          'an array with a NULL element: the error of any array');
SELECT alike(pg_temp.knn_error('511'), 'the query vector has 511 dimensions, but genie index "qa_items_v" holds vectors of 512%',
            'an array of another width: the error of any array');
SELECT alike(pg_temp.knn_error('flat'), 'the query vector has 1536000 dimensions%',
            'a one-dimensional array is one query, as any array');
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('mixed') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'after the errors, the stored array is answered again');

-- rows pending since the build, and dead ones, with pieces scanned ahead
INSERT INTO qa_items
  SELECT i, array_agg(((i * 3 + j * 7) % 13)::real ORDER BY j)
  FROM generate_series(61, 80) i, generate_series(1, 512) j GROUP BY i;
DELETE FROM qa_items WHERE id % 9 = 0;
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('mixed') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('mixed', 3000) ORDER BY 1, 3, 2 $$,
  'with pending and deleted rows, the stored array equals the sequential scan');
SET genie.device = cpu;
SELECT results_eq(
  $$ SELECT * FROM pg_temp.knn('cyclic') ORDER BY query_no, distance, ctid $$,
  $$ SELECT * FROM pg_temp.scan('cyclic', 3000) ORDER BY 1, 3, 2 $$,
  'genie.device = cpu: the stored array equals the sequential scan');
RESET genie.device;

SELECT * FROM finish();
ROLLBACK;
