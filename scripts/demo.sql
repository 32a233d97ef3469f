-- genie demo: run by `make demo` against a throwaway cluster.
\set QUIET on
CREATE EXTENSION genie;
\set QUIET off
\echo
\echo '== genie version and the devices it can use'
SELECT * FROM genie_version();
SELECT kind, ordinal, name, pg_size_pretty(memory_bytes) AS memory, compute_capability,
       processors, usable, note
FROM genie_devices();

\echo
\echo '== sample rows: documents tagged with keyword ids'
CREATE TABLE docs (id int PRIMARY KEY, title text, tags int4[]);
INSERT INTO docs VALUES
  (1, 'GPU inverted indexes',          '{10,11,12,20}'),
  (2, 'Top-k selection on the GPU',    '{10,12,30,31}'),
  (3, 'PostgreSQL index access methods','{40,41,20}'),
  (4, 'Locality sensitive hashing',    '{50,51,12}'),
  (5, 'Edit distance and n-grams',     '{60,61,62}'),
  (6, 'Count priority queues',         '{10,11,12,30}');
SELECT * FROM docs ORDER BY id;

\echo
\echo '== match counts against the query {10,12,30}: top 3 by match count'
SELECT id, title, genie_match_count(tags, '{10,12,30}') AS matches
FROM docs
ORDER BY matches DESC, id
LIMIT 3;

\echo
\echo '== a genie index: 200,000 documents with skewed tags (tag 0 is the most common)'
SELECT setseed(0.7);
CREATE TABLE articles AS
SELECT i AS id, ARRAY(SELECT floor(power(random(), 3) * 5000)::int
                      FROM generate_series(1, 3 + (random() * 12)::int + 0 * i)) AS tags
FROM generate_series(1, 200000) AS i;
\timing on
CREATE INDEX articles_tags_idx ON articles USING genie (tags);
\timing off
ANALYZE articles;
SELECT * FROM genie_index_info('articles_tags_idx');

\echo
\echo '== top 5 articles by match count with {3, 7, 42, 77, 150}'
SELECT id, tags, -(tags <~> '{3,7,42,77,150}') AS matches
FROM articles
ORDER BY tags <~> '{3,7,42,77,150}'
LIMIT 5;

\echo
\echo '== the plan: an index scan ordered by <~>'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT id FROM articles ORDER BY tags <~> '{3,7,42,77,150}' LIMIT 5;

\echo
\echo '== set predicates through the same index: @> (all of), && (any of), <@ (nothing but)'
SELECT (SELECT count(*) FROM articles WHERE tags @> '{3,7}') AS with_3_and_7,
       (SELECT count(*) FROM articles WHERE tags && '{3,7}') AS with_3_or_7,
       (SELECT count(*) FROM articles WHERE tags <@ '{0,1,2,3}') AS only_0_to_3,
       (SELECT count(*) FROM articles WHERE (tags || '{}'::int4[]) @> '{3,7}') AS with_3_and_7_by_seqscan;
EXPLAIN (COSTS OFF) SELECT count(*) FROM articles WHERE tags @> '{3,7}';

\echo
\echo '== weighted items and keyword ranges: tag 42 counts 3 times, any tag in 100..110 once each'
SELECT id, tags, genie_match_count(tags, '{42*3, 100..110}'::genie_query) AS score
FROM articles
ORDER BY tags <~> '{42*3, 100..110}'::genie_query
LIMIT 5;

\echo
\echo '== a batch of 3 queries in one engine call (genie_topk), 3 best rows each'
SELECT t.query_no, a.id, t.score, a.tags
FROM genie_topk('articles_tags_idx',
                ARRAY['{1,2,3}', '{4000,4001}', '{42*3, 100..110}']::genie_query[], 3) AS t
JOIN articles a ON a.ctid = t.ctid
ORDER BY t.query_no, t.score DESC, a.id;

\echo
\echo '== text: typo correction on the word list (/usr/share/dict/american-english, wamerican)'
CREATE EXTENSION fuzzystrmatch;
CREATE TABLE words (w text);
COPY words FROM '/usr/share/dict/american-english';
\timing on
CREATE INDEX words_w_idx ON words USING genie (w genie_ngram_ops);
\timing off
ANALYZE words;

\echo
\echo '== the 5 words nearest to "recieve" by edit distance (an index scan, rechecked exactly)'
SELECT w, w <%> 'recieve' AS distance, levenshtein(w, 'recieve') AS levenshtein
FROM words ORDER BY w <%> 'recieve' LIMIT 5;
EXPLAIN (COSTS OFF) SELECT w FROM words ORDER BY w <%> 'recieve' LIMIT 5;

\echo
\echo '== genie_similar: a batch of typos, the nearest word of each, certified exact'
SELECT q.query_no, typo, w.w AS correction, q.distance, q.exact, q.rounds
FROM genie_similar('words_w_idx', ARRAY['recieve', 'langauge', 'definately', 'seperate', 'accomodation'], 1) AS q
JOIN words w ON w.ctid = q.ctid
JOIN unnest(ARRAY['recieve', 'langauge', 'definately', 'seperate', 'accomodation']) WITH ORDINALITY AS t(typo, n)
  ON t.n = q.query_no
ORDER BY q.query_no, w.w;

\echo
\echo '== rows: range-tuple scoring over the Debian package index of this machine (/var/lib/apt/lists)'
CREATE TABLE packages (package text, version text, section text, priority text, installed_size int,
                       size bigint, depends int, maintainer text, architecture text, source text);
COPY packages FROM :'packages';
\timing on
CREATE INDEX packages_rows ON packages USING genie ((packages))
  WITH (attributes = 'section, priority, installed_size, depends, maintainer, architecture', buckets = 1024);
\timing off
ANALYZE packages;
\echo 'how each attribute is encoded: equal-width buckets, or exact values'
SELECT * FROM genie_index_attributes('packages_rows');

\echo
\echo '== the 8 packages most like a mid-sized database server, by how many of 5 attributes match'
SELECT package, section, priority, installed_size, depends, architecture, genie_match_count(p, q) AS score
FROM packages p,
     genie_ranges('packages_rows', '{"section": ["database", "misc"], "priority": "optional",
                                     "installed_size": [20000, 60000], "depends": [10, 30],
                                     "architecture": "amd64"}') AS q
ORDER BY p <~> q, package
LIMIT 8;
EXPLAIN (COSTS OFF)
SELECT package FROM packages p
ORDER BY p <~> genie_ranges('packages_rows', '{"section": ["database"], "installed_size": [20000, 60000]}')
LIMIT 8;

\echo
\echo '== weighted: the maintainer counts three times, the size range once'
SELECT package, maintainer, installed_size, genie_match_count(p, q) AS score
FROM packages p,
     genie_ranges('packages_rows', '{"maintainer": {"values": ["Debian PostgreSQL Maintainers <team+postgresql@tracker.debian.org>"], "weight": 3},
                                     "installed_size": [0, 100]}') AS q
ORDER BY p <~> q, package
LIMIT 5;

\echo
\echo '== a batch of 3 range queries in one engine call (genie_ranges_topk), 2 best rows each'
SELECT t.query_no, p.package, p.section, p.installed_size, t.score
FROM genie_ranges_topk('packages_rows', ARRAY[
       genie_ranges('packages_rows', '{"section": "python", "installed_size": [0, 50]}'),
       genie_ranges('packages_rows', '{"section": "games", "depends": [0, 2], "architecture": "all"}'),
       genie_ranges('packages_rows', '{"priority": "required", "installed_size": [1000, null]}')], 2) AS t
JOIN packages p ON p.ctid = t.ctid
ORDER BY t.query_no, t.score DESC, p.package;

\echo
\echo '== vectors: 50,000 points in 32 dimensions around 200 centres, genie_vector_ops'
SELECT setseed(0.5);
CREATE TABLE centres AS
SELECT c, v FROM generate_series(1, 200) c,
  LATERAL (SELECT array_agg((random() * 20)::real) AS v FROM generate_series(1, 32) g WHERE c > 0) s;
CREATE TABLE points (id int PRIMARY KEY, v real[]);
INSERT INTO points
SELECT i, (SELECT array_agg(x + (random() - 0.5)::real ORDER BY o)
           FROM unnest((SELECT v FROM centres WHERE c = 1 + i % 200)) WITH ORDINALITY u(x, o))
FROM generate_series(1, 50000) i;
CREATE INDEX points_v ON points USING genie (v);
SELECT * FROM genie_vector_info('points_v');

\echo
\echo '== the 5 nearest points to point 42 (exact; the same distances as a sequential scan)'
SELECT id, round((v <-> (SELECT v FROM points WHERE id = 42))::numeric, 4) AS distance
FROM points ORDER BY v <-> (SELECT v FROM points WHERE id = 42) LIMIT 5;
EXPLAIN (COSTS OFF) SELECT id FROM points ORDER BY v <-> '{1,2,3}' LIMIT 5;

\echo
\echo '== a batch of 3 query vectors in one engine call (genie_knn), 3 nearest each'
SELECT g.query_no, p.id, round(g.distance::numeric, 4) AS distance
FROM genie_knn('points_v', (SELECT array_agg(v ORDER BY id) FROM points WHERE id IN (1, 2, 3)), 3) g
JOIN points p ON p.ctid = g.ctid
ORDER BY g.query_no, g.distance;

\echo
\echo '== approximate: the 300 rows of the highest LSH match count, re-ranked; recall against exact'
SET genie.vector_search = lsh;
SET genie.lsh_candidates = 300;
WITH q AS (SELECT id, v FROM points WHERE id % 5000 = 7),
     approx AS (SELECT q.id, a.id AS hit FROM q, LATERAL (SELECT id FROM points ORDER BY v <-> q.v LIMIT 10) a)
SELECT round(avg((SELECT count(*) FROM approx WHERE approx.id = q.id AND approx.hit IN
         (SELECT id FROM points ORDER BY (v <-> q.v) + 0 LIMIT 10)) / 10.0), 3) AS recall_at_10
FROM q;
RESET genie.vector_search;
RESET genie.lsh_candidates;
