-- The genie index for int4[]: index scans equal sequential scans for every k,
-- under filters, deletes, pending rows, updates and invisible rows.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
-- The engine follows genie.device (PGOPTIONS on the GPU host runs this on the GPU).
SELECT plan(54);

-- 20k rows with a skewed keyword distribution (fixed seed), a few NULL rows
-- and empty arrays.
DO $$ BEGIN PERFORM setseed(0.2024); END $$;
CREATE TABLE docs (id int PRIMARY KEY, tags int4[]);
INSERT INTO docs
SELECT i,
       CASE WHEN i % 997 = 0 THEN NULL
            WHEN i % 991 = 0 THEN '{}'::int4[]
            ELSE ARRAY(SELECT floor(power(random(), 3) * 2000)::int
                       FROM generate_series(1, 1 + (random() * 15)::int + 0 * i))
       END
FROM generate_series(1, 20000) AS i;
CREATE INDEX docs_tags_idx ON docs USING genie (tags);
ANALYZE docs;

CREATE TABLE queries AS
SELECT q AS qid,
       ARRAY(SELECT floor(power(random(), 3) * 2000)::int
             FROM generate_series(1, 1 + (random() * 7)::int + 0 * q)) AS query
FROM generate_series(1, 200) AS q;

-- a build that does not fit in maintenance_work_mem writes sorted runs to tapes and merges them
SET LOCAL maintenance_work_mem = '1MB';
CREATE INDEX docs_tags_small_mem ON docs USING genie (tags);
RESET maintenance_work_mem;
SELECT is((SELECT (live_rows, keywords, postings)::text FROM genie_index_info('docs_tags_small_mem')),
          (SELECT (live_rows, keywords, postings)::text FROM genie_index_info('docs_tags_idx')),
          'a build spilled to disk holds the same postings');
SELECT is((SELECT count(*) FROM genie_topk('docs_tags_small_mem', ARRAY['{1,2,3}', '{7,70,700}']::genie_query[], 50) a
           FULL JOIN genie_topk('docs_tags_idx', ARRAY['{1,2,3}', '{7,70,700}']::genie_query[], 50) b
           USING (query_no, ctid) WHERE a.score IS DISTINCT FROM b.score), 0::bigint,
          'and gives the same answers');
DROP INDEX docs_tags_small_mem;

-- One row with more keywords than a run holds (1MB holds 65,536 pairs) spans
-- three runs, with its repeated keywords in different ones: each (keyword,
-- row) is stored once.  The oracle is the arrays themselves.
CREATE TABLE wide (id int PRIMARY KEY, tags int4[]);
INSERT INTO wide VALUES (1, ARRAY(SELECT i % 100000 FROM generate_series(1, 150000) AS i)),
                        (2, '{1,2,3}'), (3, ARRAY(SELECT i FROM generate_series(99990, 100010) AS i));
SET LOCAL maintenance_work_mem = '1MB';
CREATE INDEX wide_small_mem ON wide USING genie (tags);
RESET maintenance_work_mem;
SELECT is((SELECT (keywords, postings)::text FROM genie_index_info('wide_small_mem')),
          (SELECT (count(DISTINCT k), count(DISTINCT (id, k)))::text FROM wide, unnest(tags) AS k),
          'a row spread over three sorted runs: each of its keywords once');
SELECT bag_eq($$SELECT ctid AS row_ctid, score FROM genie_topk('wide_small_mem', ARRAY['{1,5,100005,-7}']::genie_query[], 10)$$,
              $$SELECT ctid AS row_ctid, (SELECT count(*) FROM unnest('{1,5,100005,-7}'::int4[]) AS q WHERE q = ANY (tags))::int
                FROM wide WHERE tags && '{1,5,100005,-7}'$$,
              'and its scores are the arrays'' own counts');
SELECT lives_ok($$SELECT genie_index_check('wide_small_mem', true)$$, 'genie_index_check passes on it');
DROP TABLE wide;

-- EXPLAIN as rows, to check plans.
CREATE FUNCTION plan_of(sql text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP RETURN NEXT line; END LOOP;
END $$;

SELECT ok(EXISTS (SELECT 1 FROM plan_of($$SELECT id FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10$$) p
                  WHERE p LIKE '%Index Scan using docs_tags_idx%'),
          'the planner uses the genie index for ORDER BY <~> LIMIT k');
SELECT ok(NOT EXISTS (SELECT 1 FROM plan_of($$SELECT id FROM docs WHERE id < 10$$) p
                      WHERE p LIKE '%docs_tags_idx%'),
          'the planner does not use the genie index for plans it cannot serve');
SELECT ok(EXISTS (SELECT 1 FROM plan_of($$SELECT id FROM docs ORDER BY tags <~> '{1,2,3}'::genie_query LIMIT 10$$) p
                  WHERE p LIKE '%Index Scan using docs_tags_idx%'),
          'the index serves genie_query arguments too');

-- results(label, k list, query filter, where clause) as score arrays, in scan order
CREATE FUNCTION scores_of(use_index bool, ks int[], max_qid int, filter text DEFAULT 'true')
RETURNS TABLE (qid int, k int, scores float8[]) LANGUAGE plpgsql AS $$
BEGIN
  IF use_index THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = on; SET LOCAL enable_bitmapscan = off;
  ELSE
    SET LOCAL enable_seqscan = on; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
  END IF;
  RETURN QUERY EXECUTE format($q$
    SELECT q.qid, kk.k, r.scores
    FROM queries q CROSS JOIN unnest(%L::int[]) AS kk(k)
    CROSS JOIN LATERAL (
      SELECT array_agg(s) AS scores FROM (
        SELECT d.tags <~> q.query AS s FROM docs d WHERE %s
        ORDER BY d.tags <~> q.query LIMIT kk.k) x) r
    WHERE q.qid <= %s$q$, ks, filter, max_qid);
END $$;

CREATE FUNCTION mismatches(ks int[], max_qid int, filter text DEFAULT 'true') RETURNS bigint
LANGUAGE sql AS $$
  SELECT count(*) FROM scores_of(true, ks, max_qid, filter) i
  JOIN scores_of(false, ks, max_qid, filter) s USING (qid, k)
  WHERE i.scores IS DISTINCT FROM s.scores
$$;

SELECT is(mismatches('{1,10,100}', 200), 0::bigint,
          'index scan scores equal the sequential scan for 200 queries, k in {1,10,100}');
SELECT is(mismatches('{5000}', 20), 0::bigint, 'k = 5000 (beyond the first batch)');
SELECT is(mismatches('{25000}', 10), 0::bigint,
          'k beyond the row count: every row, zero scores and NULLs last');
SELECT is(mismatches('{10,100}', 100, 'd.id % 50 = 0'), 0::bigint,
          'a WHERE filter that removes 98% of the rows');
SELECT is((SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{5}') x), 20000::bigint,
          'an index scan with no LIMIT returns every row');
SELECT is((SELECT count(DISTINCT id) FROM (SELECT id FROM docs ORDER BY tags <~> '{5}') x), 20000::bigint,
          'and no row twice');
SELECT is((SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM docs ORDER BY tags <~> '{5}' OFFSET 19960) x
           WHERE id % 997 = 0),
          (SELECT array_agg(id ORDER BY id) FROM docs WHERE tags IS NULL),
          'rows with NULL arrays come last');

-- genie_query arguments: weights and ranges
CREATE TABLE gqueries AS
SELECT qid, genie_query_add(genie_query(query), ARRAY[int4range(qid, qid + 20)], 3) AS gq FROM queries WHERE qid <= 50;
SELECT is((SELECT count(*) FROM gqueries g CROSS JOIN LATERAL (
             SELECT array_agg(s) AS a FROM (SELECT d.tags <~> g.gq AS s FROM docs d ORDER BY d.tags <~> g.gq LIMIT 20) x) r
           WHERE r.a IS DISTINCT FROM (
             SELECT array_agg(s) FROM (SELECT -genie_match_count(d.tags, g.gq)::float8 AS s FROM docs d
                                       ORDER BY 1 LIMIT 20) y)),
          0::bigint, 'weighted range queries: index top-20 equals ranking by genie_match_count');

-- pending rows (not merged yet), then delete + vacuum, then update
INSERT INTO docs SELECT i, ARRAY[5001, 5002, 5003, i % 7] FROM generate_series(20001, 20500) AS i;
SELECT ok((SELECT pending_rows FROM genie_index_info('docs_tags_idx')) = 500, 'new rows wait in the pending list');
SELECT lives_ok($$SELECT genie_index_check('docs_tags_idx', true)$$, 'genie_index_check with heapallindexed passes with a pending list');
SELECT is(mismatches('{1,10,100}', 100), 0::bigint, 'with rows in the pending list');
SELECT is((SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{5001,5002,5003}' LIMIT 500) x WHERE id > 20000),
          500::bigint, 'pending rows with the best score come first');

DELETE FROM docs WHERE id % 3 = 0;
SELECT is(mismatches('{1,10,100}', 100), 0::bigint, 'after DELETE, before VACUUM');
-- VACUUM cannot run in a transaction block: merge through the pending limit instead
SELECT is(mismatches('{1000}', 10), 0::bigint, 'after DELETE, k = 1000');

UPDATE docs SET tags = tags || ARRAY[1999, 1998] WHERE id % 5 = 0;
SELECT is(mismatches('{1,10,100}', 100), 0::bigint, 'after UPDATE');
SELECT is((SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{1999,1998}' LIMIT 100) x WHERE id % 5 = 0),
          100::bigint, 'updated rows are found by their new keywords');

-- rows this transaction cannot see: inserted and rolled back in a subtransaction
SAVEPOINT before_invisible;
INSERT INTO docs SELECT i, ARRAY[777777, 888888] FROM generate_series(30001, 30200) AS i;
ROLLBACK TO SAVEPOINT before_invisible;
SELECT is((SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{777777,888888}' LIMIT 10) x WHERE id > 30000),
          0::bigint, 'rolled-back rows are never returned');
SELECT is(mismatches('{10}', 50), 0::bigint, 'with invisible rows in the index');
SELECT is((SELECT count(*) FROM genie_topk('docs_tags_idx',
             ARRAY['{777777,888888}', '{777777}', '{888888,5001}']::genie_query[], 10) t
           JOIN docs d ON d.ctid = t.ctid WHERE d.id > 30000), 0::bigint,
          'genie_topk never returns rolled-back rows, also when queries share them');

-- genie_topk agrees with ORDER BY
CREATE TABLE topk (query_no int, row_ctid tid, score int);
INSERT INTO topk SELECT * FROM genie_topk('docs_tags_idx', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM queries WHERE qid <= 50), 10);
SELECT is((SELECT count(*) FROM queries q CROSS JOIN LATERAL (
             SELECT array_agg(score ORDER BY score DESC) AS a FROM topk t WHERE t.query_no = q.qid) t
           CROSS JOIN LATERAL (
             SELECT array_agg(-s ORDER BY s) AS a FROM (SELECT (d.tags <~> q.query) AS s FROM docs d
                                                       ORDER BY d.tags <~> q.query LIMIT 10) x WHERE s < 0) o
           WHERE q.qid <= 50 AND t.a IS DISTINCT FROM o.a::int[]),
          0::bigint, 'genie_topk returns the same scores as ORDER BY ... LIMIT 10');
SELECT is((SELECT count(*) FROM topk t JOIN docs d ON d.ctid = t.row_ctid JOIN queries q ON q.qid = t.query_no
           WHERE genie_match_count(d.tags, q.query) <> t.score), 0::bigint,
          'every genie_topk row has its true score and a visible ctid');
SELECT ok((SELECT bool_and(in_order) FROM (
             SELECT ROW(query_no, -score) >= lag(ROW(query_no, -score)) OVER (ORDER BY ord) IS NOT FALSE AS in_order
             FROM genie_topk('docs_tags_idx', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM queries WHERE qid <= 50), 10)
                  WITH ORDINALITY AS t(query_no, row_ctid, score, ord)) x),
          'genie_topk rows come in query order, best first');
-- a result past work_mem gets a store of its size (genie_result_rows_expected):
-- the rows, in order, of a result within it, also when a scroll cursor has
-- gone to the end and reads them again from the start
SET LOCAL work_mem = '64kB';
CREATE TEMP TABLE topk_small_mem AS
  SELECT * FROM genie_topk('docs_tags_idx', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM queries WHERE qid <= 50), 200)
       WITH ORDINALITY AS t(query_no, row_ctid, score, ord);
DECLARE topk_cursor SCROLL CURSOR FOR
  SELECT * FROM genie_topk('docs_tags_idx', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM queries WHERE qid <= 50), 200);
MOVE LAST IN topk_cursor;
MOVE ABSOLUTE 0 IN topk_cursor;
SELECT results_eq('topk_cursor'::refcursor, $$SELECT query_no, row_ctid, score FROM topk_small_mem ORDER BY ord$$,
                  'a scroll cursor reads a batch result past work_mem again from its start');
CLOSE topk_cursor;
RESET work_mem;
SELECT results_eq($$SELECT query_no, row_ctid, score FROM topk_small_mem ORDER BY ord$$,
  $$SELECT * FROM genie_topk('docs_tags_idx', (SELECT array_agg(genie_query(query) ORDER BY qid) FROM queries WHERE qid <= 50), 200)$$,
  'a batch result past work_mem (64kB) has the rows, in order, of one within it (4MB)');
SELECT ok((SELECT count(*) > 2000 FROM topk_small_mem), 'more rows than 64kB hold');
SELECT is((SELECT count(*) FROM genie_topk('docs_tags_idx', ARRAY[]::genie_query[], 5)), 0::bigint,
          'an empty batch gives no rows');
SELECT is((SELECT count(*) FROM genie_topk('docs_tags_idx', NULL, 5)), 0::bigint, 'a NULL batch gives no rows');

-- objects whose pending records span pages, and an int4[] query beyond genie_query's item limit
INSERT INTO docs SELECT 40000 + j, ARRAY(SELECT g FROM generate_series(100000, 100000 + 2500 + j * 700) g)
FROM generate_series(1, 5) AS j;
SET LOCAL enable_seqscan = off;
SELECT is((SELECT array_agg(-s::int ORDER BY s) || array_agg(id ORDER BY id) FROM (
             SELECT id, tags <~> ARRAY[100001, 103300, 103900, 104500] AS s FROM docs
             ORDER BY tags <~> ARRAY[100001, 103300, 103900, 104500] LIMIT 5) x),
          ARRAY[4, 4, 4, 3, 1, 40001, 40002, 40003, 40004, 40005],
          'large arrays spanning pending pages are indexed whole');
SELECT is((SELECT count(*) FROM (SELECT id FROM docs
           ORDER BY tags <~> ARRAY(SELECT g FROM generate_series(1, 150000) g) LIMIT 3) x), 3::bigint,
          'an int4[] ORDER BY argument is not bound by the genie_query item limit');
RESET enable_seqscan;

-- unlogged tables: the index has an init fork and works the same
CREATE UNLOGGED TABLE udocs AS SELECT * FROM docs WHERE id <= 3000;
CREATE INDEX udocs_idx ON udocs USING genie (tags);
SELECT is((SELECT count(*) FROM pg_class WHERE relname = 'udocs_idx' AND relpersistence = 'u'), 1::bigint,
          'the index of an unlogged table is unlogged');
SET LOCAL enable_seqscan = off;
SELECT is((SELECT array_agg(s) FROM (SELECT tags <~> '{1,2,3}' AS s FROM udocs ORDER BY tags <~> '{1,2,3}' LIMIT 50) x),
          (SELECT array_agg(s) FROM (SELECT -genie_match_count(tags, '{1,2,3}')::float8 AS s FROM udocs ORDER BY 1 LIMIT 50) y),
          'an unlogged genie index answers like the sequential scan');
RESET enable_seqscan;

-- bad input
SELECT throws_ok($$SELECT * FROM genie_topk('docs_tags_idx', ARRAY['{1}'::genie_query], 0)$$, '22023',
                 'k must be at least 1', 'k = 0 is an error');
SELECT throws_ok($$SELECT * FROM genie_topk('docs', ARRAY['{1}'::genie_query], 5)$$, '42809',
                 '"docs" is not an index', 'a table is not an index');
SELECT throws_ok($$SELECT * FROM genie_topk('docs_pkey', ARRAY['{1}'::genie_query], 5)$$, '42809',
                 '"docs_pkey" is not a genie index', 'a btree index is not a genie index');
SELECT throws_ok($$SELECT * FROM genie_topk('docs_tags_idx', ARRAY['{1}'::genie_query, NULL], 5)$$, '22004',
                 'queries must not contain NULL elements', 'NULL queries in the batch are an error');
SELECT throws_ok($$INSERT INTO docs VALUES (99999, '{1,NULL}')$$, '22004',
                 'indexed array must not contain NULL elements', 'NULL elements cannot be indexed');
-- genie.device = gpu with no usable GPU is an error with a hint
SET LOCAL genie.device = 'gpu';
SET LOCAL enable_seqscan = off;
SELECT CASE WHEN EXISTS (SELECT 1 FROM genie_devices() WHERE kind = 'gpu' AND usable)
            THEN skip('a GPU is usable here', 1)
            ELSE throws_ok($$SELECT id FROM docs ORDER BY tags <~> '{1}' LIMIT 1$$, '55000', NULL,
                           'genie.device = gpu without a usable GPU is an error') END;
RESET genie.device;
RESET enable_seqscan;

-- row-level security: genie_topk refuses what it cannot filter
CREATE ROLE genie_test_reader;
CREATE TABLE secret (id int, owner text, tags int4[]);
INSERT INTO secret VALUES (1, 'genie_test_reader', '{1,2}'), (2, 'someone_else', '{1,2,3}');
CREATE INDEX secret_idx ON secret USING genie (tags);
ALTER TABLE secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON secret USING (owner = current_user);
GRANT SELECT ON secret TO genie_test_reader;
SET LOCAL ROLE genie_test_reader;
SELECT throws_ok($$SELECT * FROM genie_topk('secret_idx', ARRAY['{1,2,3}'::genie_query], 5)$$, '42501', NULL,
                 'genie_topk refuses a table with row-level security');
SET LOCAL enable_seqscan = off;
SELECT is((SELECT array_agg(id) FROM (SELECT id FROM secret ORDER BY tags <~> '{1,2,3}') x), ARRAY[1],
          'ORDER BY through the index applies the policies');
RESET enable_seqscan;
-- genie_index_info counts rows the policy hides: the owner and pg_stat_scan_tables only
SELECT throws_ok($$SELECT * FROM genie_index_info('secret_idx')$$, '42501', NULL,
                 'genie_index_info refuses a reader who is not the table''s owner');
RESET ROLE;
SELECT is((SELECT live_rows FROM genie_index_info('secret_idx')), 2, 'the table''s owner reads genie_index_info');
GRANT pg_stat_scan_tables TO genie_test_reader;
SET LOCAL ROLE genie_test_reader;
SELECT is((SELECT live_rows FROM genie_index_info('secret_idx')), 2,
          'a member of pg_stat_scan_tables reads genie_index_info');
RESET ROLE;
REVOKE pg_stat_scan_tables FROM genie_test_reader;

CREATE ROLE genie_test_nobody;
SET LOCAL ROLE genie_test_nobody;
SELECT throws_ok($$SELECT * FROM genie_topk('docs_tags_idx', ARRAY['{1}'::genie_query], 5)$$, '42501',
                 NULL, 'genie_topk needs SELECT on the table');
SELECT throws_ok($$SELECT * FROM genie_index_info('docs_tags_idx')$$, '42501',
                 NULL, 'genie_index_info needs ownership or pg_stat_scan_tables');
RESET ROLE;

-- HOT updates (no indexed column changes): the index keeps each row's
-- first version, and a batch, whose rows are checked page by page in id
-- order, answers with the visible version's ctid
CREATE TABLE hot (id int, tags int4[]) WITH (fillfactor = 50);
INSERT INTO hot SELECT i, ARRAY[i % 10, 100 + i % 7] FROM generate_series(1, 2000) i;
CREATE INDEX hot_idx ON hot USING genie (tags);
UPDATE hot SET id = id + 10000 WHERE id % 3 = 0;
SELECT is((SELECT count(*) FROM genie_topk('hot_idx', ARRAY['{1,101}', '{2,102}', '{3,103}']::genie_query[], 50) t
           JOIN hot h ON h.ctid = t.ctid AND genie_match_count(h.tags, ARRAY[t.query_no, 100 + t.query_no]) = t.score),
          150::bigint, 'after HOT updates every genie_topk row is a visible row, found by its ctid, with its score');
SELECT ok((SELECT count(*) FROM genie_topk('hot_idx', ARRAY['{1,101}', '{2,102}', '{3,103}']::genie_query[], 50) t
           JOIN hot h ON h.ctid = t.ctid WHERE h.id > 10000) > 0,
          'updated rows come back with their new version''s ctid');

SELECT * FROM finish();
ROLLBACK;
