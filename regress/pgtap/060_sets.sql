-- Set predicates through genie_int4_ops: WHERE tags @> q, tags && q and
-- tags <@ q as bitmap scans and plain index scans return exactly the rows of
-- a sequential scan, for skewed random data with NULL rows, empty arrays and
-- repeated elements, queries with absent keywords, NULL elements, repeats
-- and two dimensions, combined predicates, pending rows, deletes, updates,
-- merges and invisible rows.  Also: the packed postings (on-disk format 5)
-- and their size, and (on a GPU host) the GPU's list intersection.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(30);
-- Where this backend searches on a GPU (scripts/gpu-host-pg runs this file
-- with genie.device = gpu), every set scan's lists are matched on the
-- device however short they are; elsewhere the setting changes nothing.
SET genie.gpu_set_min_postings = 0;

DO $$ BEGIN PERFORM setseed(0.615); END $$;
CREATE TABLE docs (id int PRIMARY KEY, tags int4[]);
INSERT INTO docs
SELECT i,
       CASE WHEN i % 499 = 0 THEN NULL
            WHEN i % 491 = 0 THEN '{}'::int4[]
            ELSE ARRAY(SELECT floor(power(random(), 3) * 300)::int
                       FROM generate_series(1, 1 + (random() * 9)::int + 0 * i))
       END
FROM generate_series(1, 12000) AS i;
-- a merge every few inserts: the pending list and its merges are both exercised
CREATE INDEX docs_g ON docs USING genie (tags) WITH (pending_list_limit = 64);
ANALYZE docs;

-- queries: common and rare keywords, keywords no row has, repeats, NULLs,
-- empty arrays, a two-dimensional array
CREATE TABLE queries (qid serial, q int4[]);
INSERT INTO queries (q)
SELECT ARRAY(SELECT floor(power(random(), 3) * 330)::int FROM generate_series(1, n + 0 * g))
FROM generate_series(1, 60) g, LATERAL (SELECT (g % 5) AS n) s;
INSERT INTO queries (q) VALUES ('{}'), ('{0}'), ('{0,0,1}'), ('{1,NULL}'), ('{NULL}'),
  ('{5000}'), ('{0,5000}'), ('{{0,1},{2,3}}'), ('{299,298,297,296,295,294,293,292}');

-- The ids a predicate selects under one plan shape: 'seq', 'bitmap' or 'index'.
CREATE FUNCTION pg_temp.ids(op text, q int4[], method text) RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = on;
  IF method = 'seq' THEN
    SET LOCAL enable_bitmapscan = off; SET LOCAL enable_indexscan = off;
  ELSIF method = 'bitmap' THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;
  ELSE
    SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  END IF;
  EXECUTE format('SELECT coalesce(array_agg(id ORDER BY id), ''{}'') FROM docs WHERE tags %s $1', op)
    INTO r USING q;
  RETURN r;
END $$;

-- Queries (of every operator) whose index answer differs from the sequential scan.
CREATE FUNCTION pg_temp.mismatches(method text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM queries, unnest(ARRAY['@>', '&&', '<@']) op
  WHERE pg_temp.ids(op, q, method) IS DISTINCT FROM pg_temp.ids(op, q, 'seq')
$$;

-- The plan the planner makes under a method's settings, as text.
CREATE FUNCTION pg_temp.plan(sql text, method text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = on;
  IF method = 'bitmap' THEN SET LOCAL enable_indexscan = off; ELSE SET LOCAL enable_bitmapscan = off; END IF;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP out := out || line || E'\n'; END LOOP;
  RETURN out;
END $$;

SELECT is(amvalidate(oid), true, 'genie_int4_ops with its set predicates is valid')
FROM pg_opclass WHERE opcname = 'genie_int4_ops';
SELECT matches(pg_temp.plan($$SELECT id FROM docs WHERE tags @> '{1,2}'$$, 'bitmap'),
               'Bitmap Index Scan on docs_g', '@> is a bitmap scan of the genie index');
SELECT matches(pg_temp.plan($$SELECT id FROM docs WHERE tags && '{1,2}'$$, 'index'),
               'Index Scan using docs_g', '&& is an index scan of the genie index');
SELECT matches(pg_temp.plan($$SELECT id FROM docs WHERE '{1,2,3}' @> tags$$, 'bitmap'),
               'Index Cond: \(tags <@', 'a commuted @> becomes <@ on the index');

SELECT is(pg_temp.mismatches('bitmap'), 0::bigint, 'bitmap scans equal the sequential scan (@>, &&, <@)');
SELECT is(pg_temp.mismatches('index'), 0::bigint, 'index scans equal the sequential scan');
SELECT ok((SELECT count(*) FROM queries WHERE cardinality(pg_temp.ids('&&', q, 'seq')) > 1000) > 5
          AND (SELECT count(*) FROM queries WHERE cardinality(pg_temp.ids('@>', q, 'seq')) BETWEEN 1 AND 100) > 5,
          'the queries select many rows and few rows');

-- values, not only counts
SELECT is(pg_temp.ids('@>', '{}', 'bitmap'), (SELECT array_agg(id ORDER BY id) FROM docs WHERE tags IS NOT NULL),
          '@> {} holds for every non-NULL row, empty arrays included');
SELECT is(pg_temp.ids('&&', '{}', 'bitmap'), '{}'::int[], '&& {} holds for no row');
SELECT is(pg_temp.ids('<@', '{}', 'bitmap'), (SELECT array_agg(id ORDER BY id) FROM docs WHERE tags = '{}'),
          '<@ {} holds for the empty arrays only');
SELECT is(pg_temp.ids('@>', '{1,NULL}', 'bitmap'), '{}'::int[], 'a NULL element in @> matches no row');
SELECT is(pg_temp.ids('&&', '{1,NULL}', 'index'), pg_temp.ids('&&', '{1}', 'seq'), 'a NULL element in && is ignored');
SELECT is(pg_temp.ids('@>', NULL, 'bitmap'), '{}'::int[], 'a NULL query selects nothing');
SELECT is((SELECT count(*) FROM docs WHERE tags @> '{5000}'), 0::bigint, 'a keyword no row has selects nothing');

-- combined predicates, and with ORDER BY <~> (the executor checks the predicate)
SELECT is((SELECT array_agg(id ORDER BY id) FROM docs WHERE tags @> '{0}' AND tags && '{5,6,7}' AND tags <@ '{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}'),
          (SELECT array_agg(id ORDER BY id) FROM docs WHERE (tags || '{}') @> '{0}' AND (tags || '{}') && '{5,6,7}'
             AND (tags || '{}') <@ '{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20}'),
          'three predicates on the column are intersected');
SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
SELECT is((SELECT array_agg(s ORDER BY s) FROM (SELECT tags <~> '{0,1,2}' s FROM docs WHERE tags && '{7,8}'
                                                ORDER BY tags <~> '{0,1,2}' LIMIT 25) x),
          (SELECT array_agg(s ORDER BY s) FROM (SELECT -genie_match_count(tags, '{0,1,2}'::int4[])::float8 s FROM docs
                                                WHERE (tags || '{}') && '{7,8}' ORDER BY 1 LIMIT 25) y),
          'ORDER BY <~> with a WHERE && returns the best rows that satisfy it');
RESET enable_seqscan; RESET enable_bitmapscan;

-- pending rows, then deletes and updates (merges through the small pending limit)
INSERT INTO docs SELECT i, ARRAY[1000, i % 3, 1001] FROM generate_series(12001, 12040) AS i;
SELECT ok((SELECT pending_rows FROM genie_index_info('docs_g')) > 0, 'rows wait in the pending list');
SELECT is(pg_temp.mismatches('bitmap'), 0::bigint, 'with pending rows');
SELECT is(pg_temp.ids('@>', '{1000,1001}', 'bitmap'), (SELECT array_agg(i) FROM generate_series(12001, 12040) i),
          'pending rows are found by their keywords');
DELETE FROM docs WHERE id % 4 = 0;
UPDATE docs SET tags = tags || 1002 WHERE id % 7 = 0;
INSERT INTO docs SELECT i, ARRAY[i % 50, 1003] FROM generate_series(12041, 14000) AS i;
SELECT ok((SELECT stamp FROM genie_index_info('docs_g')) > 1, 'the index was merged on the way');
SELECT is(pg_temp.mismatches('bitmap'), 0::bigint, 'after deletes, updates and merges: bitmap scans');
SELECT is(pg_temp.mismatches('index'), 0::bigint, 'after deletes, updates and merges: index scans');
SELECT is(pg_temp.ids('&&', '{1002}', 'bitmap'), pg_temp.ids('&&', '{1002}', 'seq'), 'updated rows are found by their new keyword');
SELECT lives_ok($$SELECT genie_index_check('docs_g', true)$$, 'genie_index_check passes');

-- rows this transaction cannot see
SAVEPOINT invisible;
INSERT INTO docs SELECT i, ARRAY[777777] FROM generate_series(20001, 20100) AS i;
ROLLBACK TO SAVEPOINT invisible;
SELECT is(pg_temp.ids('@>', '{777777}', 'bitmap'), '{}'::int[], 'rolled-back rows are never returned');
SELECT is(pg_temp.mismatches('bitmap'), 0::bigint, 'with invisible rows in the index');

-- REINDEX, and the packed postings: format 5, their size, their content
REINDEX INDEX docs_g;
SELECT is(pg_temp.mismatches('bitmap'), 0::bigint, 'after REINDEX');
SELECT is((SELECT format_version FROM genie_index_info('docs_g')), 5, 'the index is of on-disk format 5 (packed postings)');
-- format 4 needed 4 bytes a posting and 8 a row; the packed postings take less
SELECT cmp_ok(pg_relation_size('docs_g'), '<', (SELECT postings * 4 + live_rows * 8 FROM genie_index_info('docs_g')),
              'the packed index is smaller than int32 postings alone would be');
CREATE TABLE fresh AS SELECT * FROM docs;
CREATE INDEX fresh_g ON fresh USING genie (tags);
SELECT is((SELECT (keywords, postings)::text FROM genie_index_info('fresh_g')),
          (SELECT (count(DISTINCT k), count(*))::text FROM fresh, LATERAL (SELECT DISTINCT unnest(tags) k) u),
          'the packed index holds every row''s distinct keywords');

SELECT * FROM finish();
ROLLBACK;
