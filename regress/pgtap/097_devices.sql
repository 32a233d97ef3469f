-- Several GPUs: genie.devices and genie.placement, and genie_devices()'s
-- in_use.  Whatever they say, genie_topk, ORDER BY <~>, ORDER BY <%> and genie_knn give
-- the same rows (ties included) as with no GPU at all, and their scores and
-- distances equal plain SQL's.  On a host with two or more GPUs this runs
-- replicated and sharded indexes in-process; here the CPU engine answers.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
CREATE EXTENSION fuzzystrmatch;
SELECT plan(46);

-- the settings and what genie_devices() says of them
SELECT is(current_setting('genie.devices'), 'all', 'genie.devices is all by default');
SELECT is(current_setting('genie.placement'), 'auto', 'genie.placement is auto by default');
SELECT is((SELECT in_use FROM genie_devices() WHERE kind = 'cpu'), true, 'the CPU is always in use');
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'gpu' AND in_use IS DISTINCT FROM usable), 0::bigint,
          'with all, every usable GPU is in use');
SET LOCAL genie.devices = 'none';
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'gpu' AND in_use), 0::bigint,
          'with none, no GPU is in use');
SELECT is((SELECT in_use FROM genie_devices() WHERE kind = 'cpu'), true, 'with none, the CPU still is');
SET LOCAL genie.devices = '1';
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'gpu' AND in_use AND ordinal <> 1), 0::bigint,
          'a list names the GPUs in use');
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'gpu' AND ordinal = 1 AND usable AND NOT in_use), 0::bigint,
          'the GPU it names is in use where usable');
SELECT lives_ok($$SET LOCAL genie.devices = ' 0 , 3,63'$$, 'spaces around the numbers, 63 the largest');
SELECT lives_ok($$SET LOCAL genie.devices = 'ALL'$$, 'all in any case');
SELECT throws_ok($$SET LOCAL genie.devices = 'x'$$, '22023', NULL, 'a word is refused');
SELECT throws_ok($$SET LOCAL genie.devices = '64'$$, '22023', NULL, 'an ordinal beyond 63 is refused');
SELECT throws_ok($$SET LOCAL genie.devices = '-1'$$, '22023', NULL, 'a negative ordinal is refused');
SELECT throws_ok($$SET LOCAL genie.devices = '0,,1'$$, '22023', NULL, 'an empty item is refused');
SELECT throws_ok($$SET LOCAL genie.devices = '1 2'$$, '22023', NULL, 'numbers must be separated by commas');
SELECT throws_ok($$SET LOCAL genie.devices = ''$$, '22023', NULL, 'an empty list is refused');
SELECT throws_ok($$SET LOCAL genie.placement = 'spread'$$, '22023', NULL, 'an unknown placement is refused');
CREATE ROLE genie_devices_user;
SET LOCAL ROLE genie_devices_user;
SELECT throws_ok($$SET LOCAL genie.devices = 'none'$$, '42501', NULL, 'genie.devices is for superusers');
SELECT throws_ok($$SET LOCAL genie.placement = 'shard'$$, '42501', NULL, 'genie.placement is for superusers');
RESET ROLE;
RESET genie.devices;

-- tag sets: skewed keywords, so many ties at the k-th score
DO $$ BEGIN PERFORM setseed(0.4142); END $$;
CREATE TABLE tagged (id int PRIMARY KEY, tags int4[]);
INSERT INTO tagged
SELECT i, (SELECT array_agg(DISTINCT (floor(power(random(), 2) * 60))::int) FROM generate_series(1, 1 + i % 9) g WHERE i > 0)
FROM generate_series(1, 3000) i;
CREATE INDEX tagged_idx ON tagged USING genie (tags);
CREATE TABLE tag_queries AS
SELECT qid, (SELECT array_agg(DISTINCT (floor(random() * 60))::int) FROM generate_series(1, 2 + qid % 6) g WHERE qid > 0) AS q
FROM generate_series(1, 12) qid;
-- vectors of small integers: ties again
CREATE TABLE points (id int PRIMARY KEY, v real[]);
INSERT INTO points SELECT i, ARRAY[floor(random() * 4), floor(random() * 4), floor(random() * 4), random()]::real[]
FROM generate_series(1, 2500) i;
CREATE INDEX points_idx ON points USING genie (v);
CREATE TABLE point_queries AS
SELECT qid, ARRAY[floor(random() * 4), floor(random() * 4), floor(random() * 4), random()]::real[] AS q
FROM generate_series(1, 10) qid;
-- short words over five letters, one of them not ASCII: ties again
CREATE TABLE words (id int PRIMARY KEY, w text);
INSERT INTO words
SELECT i, (SELECT string_agg(substr('abcdé', 1 + floor(random() * 5)::int, 1), '') FROM generate_series(1, 1 + i % 9) g WHERE i > 0)
FROM generate_series(1, 3000) i;
CREATE INDEX words_w ON words USING genie (w genie_ngram_ops);
CREATE TABLE word_queries AS
SELECT qid, (SELECT string_agg(substr('abcdé', 1 + floor(random() * 5)::int, 1), '') FROM generate_series(1, 2 + qid % 7) g WHERE qid > 0) AS q
FROM generate_series(1, 8) qid;
ANALYZE tagged;
ANALYZE points;
ANALYZE words;

-- each setting's answers, kept to compare: genie_topk, genie_knn, and the
-- scores of ORDER BY <~> LIMIT 10
CREATE TABLE answers (setting text, what text, query_no int, pos int, row_ctid tid, value float8);
CREATE FUNCTION pg_temp.answer(setting text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  INSERT INTO answers
  SELECT setting, 'topk', t.query_no, t.pos, t.ctid, t.score
  FROM (SELECT array_agg(q::genie_query ORDER BY qid) a FROM tag_queries) b,
       genie_topk('tagged_idx', b.a, 25) WITH ORDINALITY t(query_no, ctid, score, pos);
  INSERT INTO answers
  SELECT setting, 'knn', k.query_no, k.pos, k.ctid, k.distance
  FROM (SELECT array_agg(q ORDER BY qid) a FROM point_queries) b,
       genie_knn('points_idx', b.a, 15) WITH ORDINALITY k(query_no, ctid, distance, pos);
  SET LOCAL enable_seqscan = off;
  FOR r IN SELECT qid, q FROM tag_queries LOOP
    INSERT INTO answers
    SELECT setting, 'order by', r.qid, s.pos, s.ctid, genie_match_count(s.tags, r.q)
    FROM (SELECT ctid, tags, row_number() OVER () AS pos FROM (SELECT ctid, tags FROM tagged ORDER BY tags <~> r.q LIMIT 10) o) s;
  END LOOP;
  FOR r IN SELECT qid, q FROM word_queries LOOP
    INSERT INTO answers
    SELECT setting, 'strings', r.qid, s.pos, s.ctid, levenshtein(s.w, r.q)
    FROM (SELECT ctid, w, row_number() OVER () AS pos FROM (SELECT ctid, w FROM words ORDER BY w <%> r.q LIMIT 10) o) s;
  END LOOP;
  RESET enable_seqscan;
END $$;

SET LOCAL genie.devices = 'none';
SET LOCAL genie.device = 'auto';  -- the GPU host's runs set gpu, which none refuses (the last test)
SELECT pg_temp.answer('none');
RESET genie.device;
RESET genie.devices;
SELECT pg_temp.answer('all, auto');
SET LOCAL genie.placement = 'replicate';
SELECT pg_temp.answer('all, replicate');
SET LOCAL genie.placement = 'shard';
SELECT pg_temp.answer('all, shard');
SET LOCAL genie.devices = '1, 0';
SELECT pg_temp.answer('1 and 0, shard');
SET LOCAL genie.devices = '1';
-- a one-GPU host has no GPU 1: auto answers there on the CPU engine, where
-- the GPU host's runs' gpu would refuse
SET LOCAL genie.device = 'auto';
SELECT pg_temp.answer('1, shard');
RESET genie.device;
RESET genie.devices;
RESET genie.placement;

-- the oracle: plain SQL scores and distances, the k best of each query
SELECT is((SELECT count(*) FROM (
             SELECT query_no, array_agg(value ORDER BY value DESC) s FROM answers WHERE setting = 'none' AND what = 'topk' GROUP BY 1) a
           FULL JOIN (
             SELECT qid, array_agg(score::float8 ORDER BY score DESC) s FROM (
               SELECT qid, genie_match_count(t.tags, q.q) score,
                      row_number() OVER (PARTITION BY qid ORDER BY genie_match_count(t.tags, q.q) DESC) n
               FROM tag_queries q, tagged t WHERE genie_match_count(t.tags, q.q) > 0) x
             WHERE n <= 25 GROUP BY qid) o ON o.qid = a.query_no
           WHERE a.s IS DISTINCT FROM o.s), 0::bigint,
          'genie_topk''s scores equal genie_match_count''s best 25 of each query');
SELECT is((SELECT count(*) FROM answers a JOIN tagged t ON t.ctid = a.row_ctid JOIN tag_queries q ON q.qid = a.query_no
           WHERE a.what = 'topk' AND a.value <> genie_match_count(t.tags, q.q)), 0::bigint,
          'every genie_topk score is the row''s match count');
SELECT is((SELECT count(*) FROM (
             SELECT query_no, array_agg(value ORDER BY value) d FROM answers WHERE setting = 'none' AND what = 'knn' GROUP BY 1) a
           FULL JOIN (
             SELECT qid, array_agg(d ORDER BY d) d FROM (
               SELECT qid, p.v <-> q.q d, row_number() OVER (PARTITION BY qid ORDER BY p.v <-> q.q) n
               FROM point_queries q, points p) x
             WHERE n <= 15 GROUP BY qid) o ON o.qid = a.query_no
           WHERE a.d IS DISTINCT FROM o.d), 0::bigint,
          'genie_knn''s distances equal the sequential scan''s 15 nearest');
SELECT is((SELECT count(*) FROM answers a JOIN points p ON p.ctid = a.row_ctid JOIN point_queries q ON q.qid = a.query_no
           WHERE a.what = 'knn' AND a.value <> (p.v <-> q.q)), 0::bigint,
          'every genie_knn distance is the row''s <->');
SELECT is((SELECT count(*) FROM (
             SELECT query_no, array_agg(value ORDER BY value DESC) s FROM answers WHERE setting = 'none' AND what = 'order by' GROUP BY 1) a
           FULL JOIN (
             SELECT query_no, (array_agg(value ORDER BY value DESC))[1:10] s FROM answers WHERE setting = 'none' AND what = 'topk' GROUP BY 1) o
             USING (query_no)
           WHERE a.s IS DISTINCT FROM o.s), 0::bigint,
          'ORDER BY <~> LIMIT 10 scores equal genie_topk''s first 10');

SELECT is((SELECT count(*) FROM (
             SELECT query_no, array_agg(value ORDER BY value) d FROM answers WHERE setting = 'none' AND what = 'strings' GROUP BY 1) a
           FULL JOIN (
             SELECT qid, (array_agg(levenshtein(w.w, q.q)::float8 ORDER BY levenshtein(w.w, q.q)))[1:10] d
             FROM word_queries q, words w GROUP BY qid) o ON o.qid = a.query_no
           WHERE a.d IS DISTINCT FROM o.d), 0::bigint,
          'ORDER BY <%> LIMIT 10 distances equal levenshtein()''s 10 smallest');

-- every setting: the very rows of 'none', in the same order
CREATE FUNCTION pg_temp.differing(setting text, kind text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM (SELECT query_no, array_agg(row_ctid ORDER BY pos) r, array_agg(value ORDER BY pos) v
                        FROM answers WHERE answers.setting = 'none' AND what = kind GROUP BY 1) a
  FULL JOIN (SELECT query_no, array_agg(row_ctid ORDER BY pos) r, array_agg(value ORDER BY pos) v
             FROM answers WHERE answers.setting = $1 AND what = kind GROUP BY 1) b USING (query_no)
  WHERE a.r IS DISTINCT FROM b.r OR a.v IS DISTINCT FROM b.v
$$;
SELECT is(pg_temp.differing(s, w), 0::bigint, format('%s: %s rows equal those with no GPU', s, w))
FROM unnest(ARRAY['all, auto', 'all, replicate', 'all, shard', '1 and 0, shard', '1, shard']) s,
     unnest(ARRAY['topk', 'knn', 'order by', 'strings']) w
ORDER BY s, w;

-- genie.device = gpu with genie.devices = none is an error with a hint (in-process: the service reads its own)
SET LOCAL genie.devices = 'none';
SET LOCAL genie.device = 'gpu';
SET LOCAL enable_seqscan = off;
SELECT CASE WHEN current_setting('shared_preload_libraries') LIKE '%genie%'
            THEN skip('the genie service reads genie.devices when it starts', 1)
            ELSE throws_ok($$SELECT id FROM tagged ORDER BY tags <~> '{1}' LIMIT 1$$, '55000',
                           'genie.device is gpu but genie.devices is none',
                           'genie.device = gpu with genie.devices = none is an error') END;
RESET genie.device;
RESET genie.devices;
RESET enable_seqscan;

SELECT * FROM finish();
ROLLBACK;
