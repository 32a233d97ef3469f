-- Stored strings (genie_ngram_ops, store_strings on by default): ORDER BY
-- w <%> q LIMIT k and genie_similar scan the strings kept in the index and
-- return exact distances in one round, equal to levenshtein() over the
-- table, with heavy typos, rows inserted after the build (pending), deleted
-- rows, merges, NULLs and non-ASCII text.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
CREATE EXTENSION fuzzystrmatch;
SELECT plan(21);

DO $$ BEGIN PERFORM setseed(0.1414); END $$;
CREATE TABLE ws (id int PRIMARY KEY, w text);
INSERT INTO ws
SELECT i, CASE WHEN i % 97 = 0 THEN NULL
               ELSE (SELECT string_agg(substr('abcdefghijklmnopqrstuvwxyzéß日', 1 + floor(random() * 29)::int, 1), '')
                     FROM generate_series(1, 2 + floor(random() * random() * 30)::int + 0 * i)) END
FROM generate_series(1, 6000) i;
CREATE INDEX ws_w ON ws USING genie (w genie_ngram_ops);
CREATE INDEX ws_plain ON ws USING genie (w genie_ngram_ops) WITH (store_strings = off);
ANALYZE ws;

SELECT ok(pg_relation_size('ws_w') > pg_relation_size('ws_plain'),
          'the index with stored strings is larger than the one without');

-- CREATE INDEX encodes the strings in batches of 16,384 on every core: 40,000
-- rows (NULLs, empty strings, long ones and non-ASCII among them) hold the
-- keywords genie_ngrams() gives row by row, on one thread or several.
CREATE TABLE many_ws AS
SELECT i AS id, CASE WHEN i % 101 = 0 THEN NULL WHEN i % 103 = 0 THEN ''
                     WHEN i % 107 = 0 THEN repeat(md5(i::text), 1 + i % 7)
                     ELSE substr(md5(i::text), 1, 3 + i % 17) || CASE WHEN i % 3 = 0 THEN 'é日' ELSE '' END END AS w
FROM generate_series(1, 40000) AS i;
CREATE INDEX many_ws_w ON many_ws USING genie (w genie_ngram_ops);
SELECT is((SELECT (live_rows, keywords, postings)::text FROM genie_index_info('many_ws_w')),
          (SELECT (count(*), (SELECT count(DISTINCT k) FROM many_ws, unnest(genie_ngrams(w)) AS k),
                   (SELECT count(*) FROM many_ws, unnest(genie_ngrams(w)) AS k))::text FROM many_ws),
          'the batched build holds every row''s own keywords');
SET LOCAL genie.cpu_threads = 1;
CREATE INDEX many_ws_one_thread ON many_ws USING genie (w genie_ngram_ops);
RESET genie.cpu_threads;
SELECT is((SELECT (keywords, postings, pages)::text FROM genie_index_info('many_ws_one_thread')),
          (SELECT (keywords, postings, pages)::text FROM genie_index_info('many_ws_w')),
          'on one thread: the same index');
SELECT is((SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(w, 'c4ca4238a0b9') AS d FROM many_ws
                                                 ORDER BY w <%> 'c4ca4238a0b9' LIMIT 5) s),
          (SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(w, 'c4ca4238a0b9') AS d FROM many_ws
                                                 WHERE w IS NOT NULL ORDER BY 1 LIMIT 5) s),
          'and its nearest strings are as near as levenshtein()''s');
SELECT is((SELECT array_agg(c ORDER BY c DESC) FROM (SELECT genie_ngram_count(w, '9bf31c7ff0') AS c FROM many_ws
                                                      ORDER BY w <~> '9bf31c7ff0' LIMIT 20) s),
          (SELECT array_agg(c ORDER BY c DESC) FROM (SELECT genie_ngram_count(w, '9bf31c7ff0') AS c FROM many_ws
                                                      WHERE w IS NOT NULL ORDER BY 1 DESC LIMIT 20) s),
          'each row''s keywords are its own: the most shared n-grams are genie_ngram_count()''s');
DROP TABLE many_ws;
-- a value of more than the batch's 4MB of bytes (2.2M four-byte characters,
-- 8.8MB) is encoded alone, between the batches before and after it, and the
-- batch's buffer shrinks back after it; the rows after it are compressed
-- (each row's detoasted copy is made and freed beside the batch's buffer)
CREATE TABLE long_ws AS
SELECT i AS id, CASE WHEN i = 2 THEN repeat(U&'\+01F600', 2200000) ELSE repeat('abc' || i, 1 + (i % 3) * 600) END AS w
FROM generate_series(1, 60) AS i;
CREATE INDEX long_ws_w ON long_ws USING genie (w genie_ngram_ops);
SELECT is((SELECT (live_rows, keywords, postings)::text FROM genie_index_info('long_ws_w')),
          (SELECT (count(*), (SELECT count(DISTINCT k) FROM long_ws, unnest(genie_ngrams(w)) AS k),
                   (SELECT count(*) FROM long_ws, unnest(genie_ngrams(w)) AS k))::text FROM long_ws),
          'a value longer than a batch holds its keywords too');
DROP TABLE long_ws;

-- heavy typos: 40% of the characters of stored words replaced
CREATE TABLE qs AS
SELECT row_number() OVER () AS qid,
       (SELECT string_agg(CASE WHEN random() < 0.4 THEN substr('xyzqéw', 1 + floor(random() * 6)::int, 1)
                               ELSE substr(w, p, 1) END, '' ORDER BY p)
        FROM generate_series(1, length(w)) p) AS q
FROM (SELECT w FROM ws WHERE w IS NOT NULL ORDER BY random() LIMIT 30) x;
INSERT INTO qs VALUES (31, ''), (32, 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz');

CREATE FUNCTION pg_temp.order_by_mismatches(ks int[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r record; k int; got int[]; want int[]; bad bigint := 0;
BEGIN
  FOR r IN SELECT q FROM qs LOOP
    FOREACH k IN ARRAY ks LOOP
      SELECT array_agg(d) INTO got FROM (SELECT levenshtein(w, r.q) d FROM ws ORDER BY w <%> r.q LIMIT k) s;
      SELECT array_agg(d ORDER BY d) INTO want FROM (SELECT levenshtein(w, r.q) d FROM ws WHERE w IS NOT NULL ORDER BY 1 LIMIT k) s;
      IF got IS DISTINCT FROM want THEN
        RAISE NOTICE 'query % k %: got % want %', r.q, k, got, want;
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  RETURN bad;
END $$;

CREATE FUNCTION pg_temp.similar_mismatches(idx regclass, k int, max_rounds int DEFAULT 1) RETURNS bigint LANGUAGE sql AS $$
  WITH got AS (SELECT g.query_no, array_agg(g.distance ORDER BY g.distance) d,
                      bool_and(g.exact AND g.rounds <= max_rounds) e, bool_and(g.distance = levenshtein(ws.w, qs.q)) real
               FROM (SELECT array_agg(q ORDER BY qid) a FROM qs) b, genie_similar(idx, b.a, k) g
               JOIN ws ON ws.ctid = g.ctid JOIN qs ON qs.qid = g.query_no
               GROUP BY g.query_no)
  SELECT count(*) FROM qs LEFT JOIN got ON got.query_no = qs.qid
  WHERE NOT coalesce(got.e AND got.real, false)
     OR got.d IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
                                (SELECT levenshtein(w, qs.q) d FROM ws WHERE w IS NOT NULL ORDER BY 1 LIMIT k) t)
$$;

SET enable_seqscan = off;
SET enable_sort = off;
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'ws_plain'::regclass;
SELECT is(pg_temp.order_by_mismatches(ARRAY[1, 5, 40]), 0::bigint,
          'heavy typos: ORDER BY w <%> q LIMIT k equals levenshtein() for k in 1, 5, 40');
SELECT is(pg_temp.similar_mismatches('ws_w', 5), 0::bigint,
          'heavy typos: genie_similar top 5 is exact in one round');
SELECT is(pg_temp.similar_mismatches('ws_w', 1), 0::bigint, 'heavy typos: genie_similar top 1 is exact');
SELECT is((SELECT array_agg(w <%> 'abcdef') FROM (SELECT w FROM ws ORDER BY w <%> 'abcdef' LIMIT 20) s),
          (SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(w, 'abcdef')::float8 d FROM ws WHERE w IS NOT NULL ORDER BY 1 LIMIT 20) s),
          'the scan returns rows in order of their true distance');
SELECT is((SELECT count(*) FROM (SELECT w FROM ws ORDER BY w <%> 'abc' LIMIT 7000) x), 6000::bigint,
          'a LIMIT beyond the table returns every row once');
SELECT is((SELECT count(*) FROM (SELECT w FROM ws ORDER BY w <%> 'abc' OFFSET 6000 - 61) x WHERE w IS NULL), 61::bigint,
          'rows with NULL come last');

-- rows inserted after the build (pending list), deleted rows
INSERT INTO ws SELECT 10000 + i, 'pending' || repeat('é', i % 5) || i FROM generate_series(1, 200) i;
INSERT INTO ws VALUES (20001, NULL), (20002, '');
DELETE FROM ws WHERE id % 5 = 0;
INSERT INTO qs VALUES (33, 'pendinx7'), (34, 'pendingéé12');
SELECT is((SELECT w FROM ws ORDER BY w <%> 'pendingéé12' LIMIT 1), 'pendingéé12', 'a pending row is found by its string');
SELECT is(pg_temp.order_by_mismatches(ARRAY[1, 5, 40]), 0::bigint, 'with pending and deleted rows: ORDER BY equals levenshtein()');
SELECT is(pg_temp.similar_mismatches('ws_w', 5), 0::bigint, 'with pending and deleted rows: genie_similar is exact');
COMMIT;

-- a merge rewrites the strings with the postings (VACUUM runs outside a transaction)
VACUUM ws;
BEGIN;
SET enable_seqscan = off;
SET enable_sort = off;
SELECT ok((SELECT pending_rows FROM genie_index_info('ws_w')) = 0, 'VACUUM merged the pending list');
SELECT is(pg_temp.order_by_mismatches(ARRAY[1, 5, 40]), 0::bigint, 'after the merge: ORDER BY equals levenshtein()');
SELECT is(pg_temp.similar_mismatches('ws_w', 5), 0::bigint, 'after the merge: genie_similar is exact');
INSERT INTO ws VALUES (30001, 'aftermerge');
SELECT is((SELECT w FROM ws ORDER BY w <%> 'aftermerg' LIMIT 1), 'aftermerge', 'a row inserted after the merge is found');
-- the index without strings gives the same answers (n-gram rounds)
UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'ws_plain'::regclass;
SELECT is(pg_temp.similar_mismatches('ws_plain', 5, 1000), 0::bigint, 'without stored strings genie_similar is exact too');
REINDEX INDEX ws_w;
SELECT is(pg_temp.similar_mismatches('ws_w', 5), 0::bigint, 'after REINDEX: genie_similar is exact');
SELECT * FROM finish();
ROLLBACK;
DROP TABLE ws, qs;
DROP EXTENSION fuzzystrmatch;
DROP EXTENSION genie;
