-- genie_ngram_ops: ORDER BY w <%> q equals a sequential scan by levenshtein()
-- for every k, genie_similar is exact, and pg_trgm lives in the same schema.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
CREATE EXTENSION pg_trgm;
CREATE EXTENSION fuzzystrmatch;
SELECT plan(53);

-- ---- the SQL functions ----------------------------------------------------
SELECT is(genie_edit_distance('kitten', 'sitting'), 3, 'edit distance of kitten and sitting');
SELECT is(genie_edit_distance('naïve', 'naive'), 1, 'edit distance counts characters, not bytes');
SELECT is(genie_edit_distance('', 'abc'), 3, 'edit distance to the empty string');
SELECT is('日本語' <%> '日本', 1.0::float8, '<%> on CJK text');
-- Lemma 5.1: banana and bandana share the padded 3-grams ##b #ba ban and na$ a$$ (7 of 8)
SELECT is(genie_ngram_count('banana', 'bandana'), 6, 'ordered 3-gram count of banana and bandana');
SELECT is(genie_ngram_count('aaaa', 'aa', 2), 3, 'occurrences count: min(3, 1) of aa plus the two padded grams');
SELECT is(cardinality(genie_ngrams('', 3)), 2, 'the empty string has n - 1 keywords');
SELECT is(cardinality(genie_ngrams('x', 8)), 8, 'a string shorter than n has L + n - 1 keywords');
-- genie_ngrams returns the keywords themselves: distinct, ascending, and the
-- ones genie_ngram_count intersects (its count, computed by the core alone)
SELECT is(genie_ngrams('banana', 3), ARRAY(SELECT DISTINCT k FROM unnest(genie_ngrams('banana', 3)) k ORDER BY k),
          'genie_ngrams of banana: distinct keywords in ascending order');
SELECT is(cardinality(genie_ngrams('banana', 3)), 8, 'banana has 6 + 3 - 1 = 8 keywords');
SELECT is((SELECT count(*)::int FROM (SELECT unnest(genie_ngrams(a, n)) INTERSECT SELECT unnest(genie_ngrams(b, n))) x),
          genie_ngram_count(a, b, n), format('genie_ngrams(%s) and genie_ngrams(%s) share genie_ngram_count keywords (n = %s)', a, b, n))
FROM (VALUES ('banana', 'bandana', 3), ('postgres', 'postgis', 2), ('日本語テキスト', '日本のテキスト', 4)) v(a, b, n);
SELECT ok((SELECT cardinality(genie_ngrams(string_agg(md5(i::text), ''), 3)) FROM generate_series(1, 20000) i) > 600000,
          'genie_ngrams of a 640,000-character string');
SELECT is('abc' <~> 'abd', -(genie_ngram_count('abc', 'abd'))::float8, '<~> is the negated 3-gram count');
SELECT throws_ok($$SELECT genie_ngram_count('a', 'b', 9)$$, '22023', NULL, 'n outside [2, 8] is refused');

-- ---- random strings (fixed seed): short, empty, NULL, non-ASCII ----------
DO $$ BEGIN PERFORM setseed(0.606); END $$;
CREATE TABLE strs (id int PRIMARY KEY, s text);
INSERT INTO strs
SELECT i,
       CASE WHEN i % 211 = 0 THEN NULL
            WHEN i % 199 = 0 THEN ''
            ELSE (SELECT string_agg(substr('abcdeéß日本x', 1 + floor(random() * 11)::int, 1), '')
                  FROM generate_series(1, 1 + floor(power(random(), 2) * 24)::int + 0 * i))
       END
FROM generate_series(1, 3000) AS i;
CREATE INDEX strs_s3 ON strs USING genie (s genie_ngram_ops);
CREATE INDEX strs_s2 ON strs USING genie (s genie_ngram_ops) WITH (n = 2);
CREATE INDEX strs_s8 ON strs USING genie (s genie_ngram_ops) WITH (n = 8);
-- without stored strings genie_similar runs its n-gram rounds (the path of older indexes)
CREATE INDEX strs_s3_plain ON strs USING genie (s genie_ngram_ops) WITH (store_strings = off);
CREATE INDEX strs_trgm ON strs USING gist (s gist_trgm_ops);
ANALYZE strs;
CREATE TABLE strs_queries AS
SELECT q AS qid,
       CASE WHEN q = 1 THEN '' WHEN q = 2 THEN 'é'
            ELSE (SELECT string_agg(substr('abcdeéß日本x', 1 + floor(random() * 11)::int, 1), '')
                  FROM generate_series(1, 1 + floor(random() * 16)::int + 0 * q)) END AS query
FROM generate_series(1, 25) AS q;

-- k nearest by the index scan (distances in output order) and by the oracle
CREATE FUNCTION pg_temp.knn_mismatches(tbl regclass, col text, queries text[], ks int[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  q text; k int; got int[]; want int[]; bad int := 0;
BEGIN
  FOREACH q IN ARRAY queries LOOP
    FOREACH k IN ARRAY ks LOOP
      EXECUTE format('SELECT array_agg(d) FROM (SELECT levenshtein(%I, $1) AS d FROM %s ORDER BY %I <%%> $1 LIMIT $2) s',
                     col, tbl, col) INTO got USING q, k;
      EXECUTE format('SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(%I, $1) AS d FROM %s WHERE %I IS NOT NULL ORDER BY 1 LIMIT $2) s',
                     col, tbl, col) INTO want USING q, k;
      IF got IS DISTINCT FROM want THEN
        RAISE NOTICE 'query % k %: got % want %', q, k, got, want;
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  RETURN bad;
END $$;

SET enable_seqscan = off;
SET enable_sort = off;
CREATE FUNCTION pg_temp.plan_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP out := out || line || ' '; END LOOP;
  RETURN out;
END $$;

SELECT alike(pg_temp.plan_of($$SELECT id FROM strs ORDER BY s <%> 'abc' LIMIT 5$$),
            '%Index Scan using strs_s%', 'ORDER BY s <%> q LIMIT k uses a genie index');
SET enable_indexscan = off;
SELECT unalike(pg_temp.plan_of($$SELECT id FROM strs ORDER BY s <%> 'abc' LIMIT 5$$),
              '%genie%', 'and without index scans the same query is a sort');
RESET enable_indexscan;

-- each index in turn: drop the others' chance by disabling them through a transaction-local hint
SELECT is(pg_temp.knn_mismatches('strs', 's', ARRAY(SELECT query FROM strs_queries), ARRAY[1, 5, 50]), 0,
          'n = 3 (planner''s choice): k nearest by <%> equal levenshtein() for k in 1, 5, 50');
UPDATE pg_index SET indisvalid = false WHERE indexrelid IN ('strs_s3'::regclass, 'strs_s8'::regclass, 'strs_s3_plain'::regclass);
SELECT alike(pg_temp.plan_of($$SELECT id FROM strs ORDER BY s <%> 'abc' LIMIT 5$$),
            '%strs_s2%', 'the n = 2 index is used when it is the only one');
SELECT is(pg_temp.knn_mismatches('strs', 's', ARRAY(SELECT query FROM strs_queries), ARRAY[1, 5, 50]), 0,
          'n = 2: k nearest equal levenshtein()');
UPDATE pg_index SET indisvalid = (indexrelid = 'strs_s8'::regclass)
 WHERE indexrelid IN ('strs_s2'::regclass, 'strs_s8'::regclass);
SELECT alike(pg_temp.plan_of($$SELECT id FROM strs ORDER BY s <%> 'abc' LIMIT 5$$),
            '%strs_s8%', 'the n = 8 index is used when it is the only one');
SELECT is(pg_temp.knn_mismatches('strs', 's', ARRAY(SELECT query FROM strs_queries), ARRAY[1, 5, 50]), 0,
          'n = 8: k nearest equal levenshtein()');
UPDATE pg_index SET indisvalid = (indexrelid = 'strs_s3_plain'::regclass)
 WHERE indexrelid IN ('strs_s8'::regclass, 'strs_s3_plain'::regclass);
SELECT is(pg_temp.knn_mismatches('strs', 's', ARRAY(SELECT query FROM strs_queries), ARRAY[1, 5, 50]), 0,
          'n = 3 without stored strings (count order, rechecked): k nearest equal levenshtein()');
-- n = 8 cannot order by 3-gram counts: the planner leaves <~> to a sort
RESET enable_sort;
SELECT unalike(pg_temp.plan_of($$SELECT id FROM strs ORDER BY s <~> 'abc' LIMIT 5$$),
              '%strs_s8%', 'an index of 8-grams is not used for text <~> text (3-grams)');
SET enable_sort = off;
UPDATE pg_index SET indisvalid = true WHERE indexrelid IN ('strs_s2'::regclass, 'strs_s3'::regclass, 'strs_s8'::regclass);

-- every row, NULLs last, for a LIMIT beyond the table
SELECT is((SELECT count(*) FROM (SELECT s FROM strs ORDER BY s <%> 'abc' LIMIT 5000) x), 3000::bigint,
          'a LIMIT beyond the table returns every row once');
SELECT is((SELECT array_agg(id ORDER BY id) FROM (SELECT id, s FROM strs ORDER BY s <%> 'abc' OFFSET 2985) x WHERE s IS NULL),
          (SELECT array_agg(id ORDER BY id) FROM strs WHERE s IS NULL), 'rows with NULL come last');

-- <~> through the index equals the count ranking
SELECT is((SELECT array_agg(c) FROM (SELECT genie_ngram_count(s, 'abcde') c FROM strs ORDER BY s <~> 'abcde' LIMIT 40) x),
          (SELECT array_agg(c ORDER BY c DESC) FROM (SELECT genie_ngram_count(s, 'abcde') c FROM strs WHERE s IS NOT NULL ORDER BY 1 DESC LIMIT 40) x),
          'ORDER BY s <~> q LIMIT k is the top k by 3-gram count');

-- ---- genie_similar ---------------------------------------------------------
CREATE TEMP TABLE sim AS
SELECT g.query_no, g.distance, g.exact, g.rounds, q.query, levenshtein(s.s, q.query) AS real
FROM strs_queries q,
     LATERAL genie_similar('strs_s3', ARRAY[q.query], 5) g
     JOIN strs s ON s.ctid = g.ctid;
SELECT is((SELECT count(*) FROM sim WHERE distance <> real), 0::bigint, 'genie_similar distances equal levenshtein()');
SELECT is((SELECT count(*) FROM sim WHERE NOT exact), 0::bigint, 'every row is exact without a round limit');
SELECT is((SELECT count(*) FROM strs_queries q WHERE
             (SELECT array_agg(distance ORDER BY distance) FROM sim WHERE sim.query = q.query) IS DISTINCT FROM
             (SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(s, q.query) d FROM strs WHERE s IS NOT NULL ORDER BY 1 LIMIT 5) t)),
          0::bigint, 'genie_similar returns the true 5 nearest of every query');

-- one batch of all queries, candidates < k, and n at both ends
CREATE FUNCTION pg_temp.similar_mismatches(idx regclass, k int, candidates int)
RETURNS bigint LANGUAGE sql AS $$
  WITH qs AS (SELECT array_agg(query ORDER BY qid) a FROM strs_queries),
       got AS (SELECT g.query_no, array_agg(g.distance ORDER BY g.distance) d, bool_and(g.exact) e,
                      bool_and(g.distance = levenshtein(s.s, q.query)) real
               FROM qs, genie_similar(idx, qs.a, k, candidates) g
               JOIN strs s ON s.ctid = g.ctid JOIN strs_queries q ON q.qid = g.query_no
               GROUP BY g.query_no)
  SELECT count(*) FROM strs_queries q LEFT JOIN got ON got.query_no = q.qid
  WHERE NOT coalesce(got.e AND got.real, false)
     OR got.d IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
                                (SELECT levenshtein(s, q.query) d FROM strs WHERE s IS NOT NULL ORDER BY 1 LIMIT k) t)
$$;
SELECT is(pg_temp.similar_mismatches('strs_s3', 50, 8), 0::bigint, 'a batch, k = 50 with 8 candidates: exact');
SELECT is(pg_temp.similar_mismatches('strs_s2', 1, 1), 0::bigint, 'n = 2, k = 1, one candidate: exact');
SELECT is(pg_temp.similar_mismatches('strs_s8', 5, 32), 0::bigint, 'n = 8, k = 5: exact');
SELECT is(pg_temp.similar_mismatches('strs_s3_plain', 5, 4), 0::bigint, 'without stored strings (n-gram rounds), k = 5: exact');

-- a round limit: rows flagged exact are in the true top k, distances still real
CREATE TEMP TABLE limited AS
SELECT g.query_no, g.distance, g.exact, g.rounds, q.query, levenshtein(s.s, q.query) AS real
FROM (SELECT array_agg(query ORDER BY qid) a FROM strs_queries) qs,
     genie_similar('strs_s3_plain', qs.a, 10, 1, 1) g
     JOIN strs s ON s.ctid = g.ctid JOIN strs_queries q ON q.qid = g.query_no;
SELECT is((SELECT max(rounds) FROM limited), 1, 'max_rounds = 1 stops after one round');
SELECT is((SELECT count(*) FROM limited WHERE distance <> real), 0::bigint, 'with a round limit, distances are real');
SELECT is((SELECT count(*) FROM limited l WHERE exact AND l.distance >
             (SELECT max(d) FROM (SELECT levenshtein(s, l.query) d FROM strs WHERE s IS NOT NULL ORDER BY 1 LIMIT 10) t)),
          0::bigint, 'every row flagged exact is within the true top 10');
SELECT ok((SELECT count(*) FROM limited WHERE NOT exact) > 0, 'one candidate and one round leave rows unproven');
SELECT ok((SELECT max(rounds) FROM genie_similar('strs_s3_plain', ARRAY(SELECT query FROM strs_queries), 10, 1)) > 1,
          'without the limit, queries take more rounds');

-- rows inserted after the build (pending list) and deleted rows
INSERT INTO strs VALUES (100001, 'zzzqqq'), (100002, 'zzzqq');
DELETE FROM strs WHERE id = 100002;
SELECT is((SELECT s FROM strs ORDER BY s <%> 'zzzqqx' LIMIT 1), 'zzzqqq', 'a row inserted after the build is found');
SELECT is((SELECT string_agg(s.s, ',') FROM genie_similar('strs_s3', ARRAY['zzzqq'], 2) g JOIN strs s ON s.ctid = g.ctid
           WHERE g.distance <= 1), 'zzzqqq', 'genie_similar sees inserts and not deleted rows');

-- ---- real words: /usr/share/dict/american-english (wamerican) ---------------------------
CREATE TABLE words (w varchar(100));
COPY words FROM '/usr/share/dict/american-english';
CREATE INDEX words_w ON words USING genie (w genie_ngram_ops);
ANALYZE words;
DO $$ BEGIN PERFORM setseed(0.1999); END $$;
-- queries: random words with one or two characters changed
CREATE TABLE word_queries AS
SELECT qid, overlay(w::text placing substr('aeioust', 1 + floor(random() * 7)::int, 1)
                    from 1 + floor(random() * length(w))::int for (qid % 2)::int) AS query
FROM (SELECT row_number() OVER () AS qid, w FROM words WHERE length(w) > 3 ORDER BY random() LIMIT 12) x;
SELECT alike(pg_temp.plan_of($$SELECT w FROM words ORDER BY w <%> 'recieve' LIMIT 5$$),
            '%Index Scan using words_w%', 'a varchar column uses the text operator class');
SELECT is(pg_temp.knn_mismatches('words', 'w', ARRAY(SELECT query FROM word_queries), ARRAY[1, 5, 50]), 0,
          'dictionary words: k nearest by <%> equal levenshtein() for k in 1, 5, 50');
SELECT is((SELECT count(*) FROM word_queries q, LATERAL (
             SELECT array_agg(g.distance ORDER BY g.distance) d, bool_and(g.exact) e
             FROM genie_similar('words_w', ARRAY[q.query], 5) g) got
           WHERE NOT got.e OR got.d IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
                 (SELECT levenshtein(w, q.query) d FROM words ORDER BY 1 LIMIT 5) t)),
          0::bigint, 'dictionary words: genie_similar top 5 equals levenshtein()');

-- pg_trgm in the same schema, on the same table
CREATE INDEX words_trgm ON words USING gist (w gist_trgm_ops);
SELECT is((SELECT count(*) FROM (SELECT w FROM words ORDER BY w <-> 'recieve' LIMIT 5) t), 5::bigint,
          'pg_trgm''s <-> still works beside genie');
SELECT ok(similarity('receive', 'recieve') > 0 AND 'receive' % 'recieve', 'pg_trgm''s functions and % still work');

-- ---- misuse ------------------------------------------------------------------
CREATE TABLE arrs (a int4[]);
CREATE INDEX arrs_a ON arrs USING genie (a);
SELECT throws_ok($$SELECT * FROM genie_similar('arrs_a', ARRAY['x'], 1)$$, '42809', NULL,
                 'genie_similar refuses an index that is not genie_ngram_ops');
SELECT throws_ok($$SELECT * FROM genie_topk('strs_s3', ARRAY['{1}'::genie_query], 1)$$, '42809',
                 'genie_topk cannot search genie index "strs_s3", which is of operator class genie_ngram_ops',
                 'genie_topk refuses an n-gram index (the hint names genie_similar)');
SELECT throws_ok($$SELECT * FROM genie_similar('strs_s3', ARRAY['x'], 0)$$, '22023', NULL, 'k = 0 is refused');
SELECT throws_ok($$SELECT * FROM genie_similar('strs_s3', ARRAY['x', NULL], 1)$$, '22004', NULL,
                 'a NULL query is refused');
SELECT throws_ok($$SELECT * FROM genie_similar('strs_s3', ARRAY['x'], 1, 8, 0)$$, '22023', NULL,
                 'max_rounds = 0 is refused');
SELECT throws_ok($$CREATE INDEX ON strs USING genie (s genie_ngram_ops) WITH (n = 9)$$, '22023', NULL,
                 'n = 9 is refused');

SELECT * FROM finish();
ROLLBACK;
