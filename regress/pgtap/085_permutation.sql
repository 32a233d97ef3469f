-- The permutation index (seed 001: WITH (permutants = m), genie.vector_search
-- or genie.text_search = permutation): against the sequential scan ordered by
-- the distance operator and levenshtein(), on clustered vectors and on
-- words with typos.  With genie.permutation_fraction = 1 every row is a
-- candidate and the answers are the exact ones, row for row; with a small
-- fraction every returned distance is the true one and recall@10 is
-- measured.  Rows inserted after the build (pending), merged by VACUUM,
-- deleted; an index built on an empty table draws its permutants at its
-- first merge and is searched exactly until then; REINDEX; and the errors
-- a user can cause.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch;
SELECT plan(38);

DO $$ BEGIN PERFORM setseed(0.1414); END $$;
-- 8 dimensions, 40 clusters of 100 points, 30 queries near cluster members
CREATE TABLE centres AS SELECT c, array_agg((random() * 20 - 10)::real ORDER BY d) AS v
FROM generate_series(1, 40) c, generate_series(1, 8) d GROUP BY c;
CREATE TABLE pts (id int PRIMARY KEY, v real[]);
INSERT INTO pts SELECT (c - 1) * 100 + i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
                                           FROM unnest(v) WITH ORDINALITY u(x, o))
FROM centres, generate_series(1, 100) i;
INSERT INTO pts VALUES (99999, NULL);
CREATE TABLE qv AS SELECT qid, (SELECT array_agg(x + ((random() - 0.5) * 0.3)::real ORDER BY o)
                                FROM unnest(v) WITH ORDINALITY u(x, o)) AS q
FROM (SELECT qid, v FROM generate_series(1, 30) qid JOIN pts ON pts.id = qid * 131) s;
CREATE INDEX pts_perm ON pts USING genie (v genie_vector_ops) WITH (permutants = 24, m = 0, seed = 5);

-- the sequential scan's k nearest of every query, and genie_knn's
CREATE FUNCTION pg_temp.exact_v(k int) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT qid, s.id, s.d FROM qv, LATERAL (SELECT id, v <-> q AS d FROM pts WHERE v IS NOT NULL
                                          ORDER BY v <-> q, id LIMIT k) s
$$;
CREATE FUNCTION pg_temp.knn_v(k int) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT g.query_no, t.id, g.distance
  FROM genie_knn('pts_perm', (SELECT array_agg(q ORDER BY qid) FROM qv), k) g JOIN pts t ON t.ctid = g.ctid
$$;
-- recall@k with ties: a row counts when it is no farther than the exact k-th
CREATE FUNCTION pg_temp.recall_v(k int) RETURNS float8 LANGUAGE sql AS $$
  WITH kth AS (SELECT qid, max(d) AS d FROM pg_temp.exact_v(k) GROUP BY qid)
  SELECT count(*)::float8 / (k * 30) FROM pg_temp.knn_v(k) g JOIN kth USING (qid) WHERE g.d <= kth.d
$$;

SET genie.vector_search = permutation;
SET genie.permutation_fraction = 1;
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.knn_v(10) EXCEPT SELECT * FROM pg_temp.exact_v(10)) s),
          0::bigint, 'fraction 1: genie_knn gives the exact rows and distances');
SELECT is((SELECT count(*) FROM pg_temp.knn_v(10)), 300::bigint, 'fraction 1: ten rows a query');

SET genie.permutation_fraction = 0.05;
SELECT is((SELECT count(*) FROM pg_temp.knn_v(10) g JOIN pts t USING (id) JOIN qv USING (qid)
           WHERE g.d <> (t.v <-> qv.q)), 0::bigint, 'fraction 0.05: every distance is the true one');
SELECT cmp_ok(pg_temp.recall_v(10), '>=', 0.9::float8, 'fraction 0.05 (200 of 4,000 rows): recall@10 of clustered vectors');
SELECT is((SELECT array_agg(id ORDER BY n) FROM (SELECT id, row_number() OVER () n FROM
             (SELECT id FROM pts ORDER BY v <-> (SELECT q FROM qv WHERE qid = 7) LIMIT 10) s) s2),
          (SELECT array_agg(g.id ORDER BY g.d, g.id) FROM pg_temp.knn_v(10) g WHERE g.qid = 7),
          'ORDER BY v <-> q LIMIT 10 gives genie_knn''s rows');
SELECT ok((SELECT bool_and(d1 <= d2) FROM (SELECT d AS d1, lead(d) OVER (PARTITION BY qid ORDER BY d, id) AS d2
                                            FROM pg_temp.knn_v(10)) s WHERE d2 IS NOT NULL),
          'rows come by distance');

-- EXPLAIN (ANALYZE) reports the candidates and the recall against the exact search
CREATE FUNCTION pg_temp.explained(q text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
  RETURN (j::jsonb)->1;
END $$;
SELECT is((SELECT (e->>'Genie Permutation Candidates')::bigint FROM pg_temp.explained(
             'SELECT * FROM genie_knn(''pts_perm'', (SELECT array_agg(q ORDER BY qid) FROM qv), 10)') e),
          30 * ceil(0.05 * (SELECT count(*) FROM pts))::bigint,
          'EXPLAIN (ANALYZE): 5% of the rows re-ranked for each of 30 queries');
SELECT is((SELECT (e->>'Genie Permutation Recall')::float8 FROM pg_temp.explained(
             'SELECT * FROM genie_knn(''pts_perm'', (SELECT array_agg(q ORDER BY qid) FROM qv), 10)') e),
          round(pg_temp.recall_v(10)::numeric, 3)::float8, 'EXPLAIN (ANALYZE): the recall is the measured recall@10');

-- range queries: genie_within reads the permutation index's candidates
-- alone (approximate, every distance true); the predicate stays exact
CREATE FUNCTION pg_temp.within_v(r float8) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT g.query_no, t.id, g.distance
  FROM genie_within('pts_perm', (SELECT array_agg(q ORDER BY qid) FROM qv), r) g JOIN pts t ON t.ctid = g.ctid
$$;
CREATE FUNCTION pg_temp.exact_within_v(r float8) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT qid, id, v <-> q FROM qv, pts WHERE v IS NOT NULL AND v <-> q <= r
$$;
SET genie.permutation_fraction = 1;
SELECT is((SELECT count(*) FROM ((SELECT * FROM pg_temp.within_v(1.5) EXCEPT ALL SELECT * FROM pg_temp.exact_within_v(1.5))
                                 UNION ALL (SELECT * FROM pg_temp.exact_within_v(1.5) EXCEPT ALL SELECT * FROM pg_temp.within_v(1.5))) s),
          0::bigint, 'genie_within, fraction 1: the sequential scan''s rows and distances');
SET genie.permutation_fraction = 0.02;
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.within_v(1.5) EXCEPT ALL SELECT * FROM pg_temp.exact_within_v(1.5)) s),
          0::bigint, 'genie_within, fraction 0.02: every row is within the radius, at its true distance');
SELECT cmp_ok((SELECT count(*) FROM pg_temp.within_v(1.5))::float8 / (SELECT count(*) FROM pg_temp.exact_within_v(1.5)),
              '>=', 0.8::float8, 'genie_within, fraction 0.02 (80 of 4,000 rows): recall of clustered vectors');
SELECT is((SELECT (e->>'Genie Permutation Recall')::float8 FROM pg_temp.explained(
             'SELECT * FROM genie_within(''pts_perm'', (SELECT array_agg(q ORDER BY qid) FROM qv), 1.5)') e),
          round((SELECT count(*) FROM pg_temp.within_v(1.5))::numeric / (SELECT count(*) FROM pg_temp.exact_within_v(1.5)), 3)::float8,
          'EXPLAIN (ANALYZE) of genie_within: the recall is the share of the exact rows found');
SET genie.permutation_fraction = 0;
SELECT cmp_ok((SELECT count(*) FROM pg_temp.within_v(3)), '<=', 30::bigint,
              'genie_within, one candidate a query: at most one row a query');
SET LOCAL enable_seqscan = off;
SELECT is((SELECT count(*) FROM qv, LATERAL (SELECT id FROM pts WHERE v <@ genie_ball(qv.q, 1.5)) s),
          (SELECT count(*) FROM pg_temp.exact_within_v(1.5)), 'v <@ genie_ball(q, r) stays exact in the permutation mode');
RESET enable_seqscan;
SET genie.permutation_fraction = 0.05;

-- pending rows: a planted exact copy of a query is found
INSERT INTO pts SELECT 50000 + qid, q FROM qv WHERE qid <= 5;
SELECT is((SELECT count(*) FROM pg_temp.knn_v(1) g WHERE g.qid <= 5 AND g.id = 50000 + g.qid AND g.d = 0),
          5::bigint, 'pending rows are candidates (their rows computed at load)');
DELETE FROM pts WHERE id = 50001;
SELECT is((SELECT count(*) FROM pg_temp.knn_v(10) WHERE id = 50001), 0::bigint, 'a deleted row is not returned');
SELECT lives_ok($$SELECT genie_index_check('pts_perm')$$, 'genie_index_check after inserts');

-- inserts beyond a small pending list merge it: the main rows keep theirs, the pending ones' are computed
SET LOCAL genie.pending_list_limit = 64;
INSERT INTO pts SELECT 60000 + g.i, (SELECT array_agg(x) FROM (SELECT (random() * 20 - 10)::real + 0 * g.i AS x
                                                             FROM generate_series(1, 8)) s)
FROM generate_series(1, 1500) g(i);
SELECT ok((SELECT pending_rows < 1500 FROM genie_index_info('pts_perm')), 'the inserts merged the pending list');
SELECT is((SELECT count(*) FROM pg_temp.knn_v(1) g WHERE g.qid BETWEEN 2 AND 5 AND g.id = 50000 + g.qid AND g.d = 0),
          4::bigint, 'after the merge the merged rows are found');
SELECT is((SELECT count(*) FROM pg_temp.knn_v(10) g JOIN pts t USING (id) JOIN qv USING (qid)
           WHERE g.d <> (t.v <-> qv.q)), 0::bigint, 'after the merge every distance is the true one');
SET genie.permutation_fraction = 1;
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.knn_v(10) EXCEPT SELECT * FROM pg_temp.exact_v(10)) s),
          0::bigint, 'after the merge, fraction 1 is exact');
REINDEX INDEX pts_perm;
SELECT is((SELECT count(*) FROM (SELECT * FROM pg_temp.knn_v(10) EXCEPT SELECT * FROM pg_temp.exact_v(10)) s),
          0::bigint, 'after REINDEX, fraction 1 is exact');
SELECT lives_ok($$SELECT genie_index_check('pts_perm')$$, 'genie_index_check after the merge and REINDEX');

-- an index built on an empty table: exact until a merge finds m objects
CREATE TABLE late (id int PRIMARY KEY, v real[]);
CREATE INDEX late_perm ON late USING genie (v genie_vector_ops) WITH (permutants = 16, m = 0);
INSERT INTO late SELECT id, v FROM pts WHERE id <= 200;
SET genie.permutation_fraction = 0;
SELECT is((SELECT array_agg(id) FROM (SELECT id FROM late ORDER BY v <-> (SELECT q FROM qv WHERE qid = 1) LIMIT 5) s),
          (SELECT array_agg(id) FROM (SELECT id FROM late WHERE v IS NOT NULL ORDER BY v <-> (SELECT q FROM qv WHERE qid = 1), id LIMIT 5) s),
          'no permutants drawn yet: the index is searched exactly');
INSERT INTO late SELECT id, v FROM pts WHERE id > 200 AND id <= 2000;
SET genie.permutation_fraction = 1;
SELECT is((SELECT array_agg(id) FROM (SELECT id FROM late ORDER BY v <-> (SELECT q FROM qv WHERE qid = 1) LIMIT 5) s),
          (SELECT array_agg(id) FROM (SELECT id FROM late WHERE v IS NOT NULL ORDER BY v <-> (SELECT q FROM qv WHERE qid = 1), id LIMIT 5) s),
          'after the merge that drew the permutants, fraction 1 is exact');
RESET genie.pending_list_limit;

-- words with typos by edit distance
CREATE TABLE words (id int PRIMARY KEY, w text);
INSERT INTO words SELECT i, substr(md5(i::text), 1, 6 + i % 7) FROM generate_series(1, 3000) i;
INSERT INTO words VALUES (3001, NULL);
CREATE INDEX words_perm ON words USING genie (w genie_ngram_ops) WITH (permutants = 32, seed = 11);
CREATE TABLE qw AS SELECT qid, overlay(w placing 'z' from 3 for 1) AS q FROM words JOIN generate_series(1, 20) qid ON id = qid * 97;
CREATE FUNCTION pg_temp.similar_w(k int) RETURNS TABLE (qid int, id int, d int) LANGUAGE sql AS $$
  SELECT g.query_no, t.id, g.distance
  FROM genie_similar('words_perm', (SELECT array_agg(q ORDER BY qid) FROM qw), k) g JOIN words t ON t.ctid = g.ctid
$$;
SET genie.text_search = permutation;
SET genie.permutation_fraction = 1;
SELECT is((SELECT count(*) FROM (SELECT qid, d FROM pg_temp.similar_w(5)
                                 EXCEPT SELECT qid, d FROM qw, LATERAL (SELECT levenshtein(w, q) d FROM words
                                        WHERE w IS NOT NULL ORDER BY 1 LIMIT 5) s) s),
          0::bigint, 'strings, fraction 1: the exact distances');
SET genie.permutation_fraction = 0.1;
SELECT is((SELECT count(*) FROM pg_temp.similar_w(5) g JOIN words USING (id) JOIN qw USING (qid)
           WHERE g.d <> levenshtein(w, q)), 0::bigint, 'strings, fraction 0.1: every distance is levenshtein()');
SELECT is((SELECT count(*) FROM pg_temp.similar_w(1) g JOIN qw USING (qid) WHERE g.d <= 1), 20::bigint,
          'strings, fraction 0.1: every one-typo query finds a word within distance 1');
-- only the candidates are re-ranked: with one candidate a query (fraction 0, k = 1)
-- some queries of four typos miss a nearest word, which the exact search finds
SET genie.permutation_fraction = 0;
SELECT cmp_ok((SELECT (e->>'Genie Permutation Recall')::float8 FROM pg_temp.explained(
                 'SELECT * FROM genie_similar(''words_perm'', (SELECT array_agg(overlay(q placing ''zzzz'' from 2 for 4) ORDER BY qid) FROM qw), 1)') e),
              '<', 1::float8, 'strings, one candidate a query: the re-rank reads the candidates alone');
CREATE FUNCTION pg_temp.within_w(r int) RETURNS TABLE (qid int, id int, d float8) LANGUAGE sql AS $$
  SELECT g.query_no, t.id, g.distance
  FROM genie_within('words_perm', (SELECT array_agg(q ORDER BY qid) FROM qw), r) g JOIN words t ON t.ctid = g.ctid
$$;
SET genie.permutation_fraction = 1;
SELECT is((SELECT count(*) FROM ((SELECT * FROM pg_temp.within_w(3) EXCEPT ALL
                                  SELECT qid, id, levenshtein(w, q) FROM qw, words WHERE levenshtein(w, q) <= 3)
                                 UNION ALL (SELECT qid, id, levenshtein(w, q) FROM qw, words WHERE levenshtein(w, q) <= 3
                                            EXCEPT ALL SELECT * FROM pg_temp.within_w(3))) s),
          0::bigint, 'strings, genie_within, fraction 1: levenshtein()''s rows');
SET genie.permutation_fraction = 0.1;
SELECT is((SELECT count(*) FROM pg_temp.within_w(3) g JOIN words USING (id) JOIN qw USING (qid)
           WHERE g.d <> levenshtein(w, q) OR g.d > 3), 0::bigint,
          'strings, genie_within, fraction 0.1: every row within the radius by levenshtein()');
SELECT is((SELECT w <%> (SELECT q FROM qw WHERE qid = 3) FROM words
           ORDER BY w <%> (SELECT q FROM qw WHERE qid = 3) LIMIT 1), 1::float8, 'ORDER BY w <%> q in the permutation mode');

-- format 6 marks an index with permutants, so that an older genie refuses it
SELECT is((SELECT format_version FROM genie_index_info('pts_perm')), 6, 'an index with permutants is of format 6');
SET LOCAL genie.write_format = 4;
SELECT throws_ok($$CREATE INDEX ON words USING genie (w genie_ngram_ops) WITH (permutants = 8)$$,
                 '0A000', 'permutants needs genie.write_format 5 or later', 'no permutants in format 4');
RESET genie.write_format;

-- errors a user can cause
SELECT throws_ok($$CREATE INDEX ON words USING genie (w genie_ngram_ops) WITH (permutants = 8, store_strings = off)$$,
                 '0A000', 'permutants needs an index that stores its strings', 'permutants without stored strings');
CREATE TABLE tags (id int, t int4[]);
INSERT INTO tags VALUES (1, '{1,2}');
SELECT throws_ok($$CREATE INDEX ON tags USING genie (t) WITH (permutants = 8)$$,
                 '0A000', 'permutants needs an index of genie_vector_ops or genie_ngram_ops', 'permutants on int4[]');
SELECT throws_ok($$CREATE INDEX ON words USING genie (w genie_ngram_ops) WITH (permutants = 129)$$,
                 '22023', NULL, 'permutants beyond 128');
SELECT throws_ok($$SET genie.permutation_fraction = 1.5$$, '22023', NULL, 'a fraction above 1');

SELECT * FROM finish();
ROLLBACK;
