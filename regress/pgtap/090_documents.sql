-- Short documents through genie_tsvector_ops: ORDER BY doc <~> tsquery and
-- doc <~> tsvector LIMIT k give exactly the scores of a sequential scan
-- ranked by genie_match_count (the oracle), for random documents with
-- weight classes, stripped and empty documents and NULL rows, queries of 1
-- to 10 lexemes with |, &, !, weight restrictions and lexemes no row has,
-- and query documents; with class weights; genie_document_topk against the
-- oracle; new lexemes from inserts, deletes, rolled-back rows, merges,
-- REINDEX; an expression index over to_tsvector; GIN beside it; the edge
-- cases and errors.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(61);
-- JIT would compile the oracles' plans again and again: none here
SET jit = off;

DO $$ BEGIN PERFORM setseed(0.33); END $$;
-- titles in class A (every 7th row) or B/C/D, bodies in class D; every 11th
-- row stripped of positions (class D); words drawn skewed from 3,000
CREATE TABLE docs (id int PRIMARY KEY, body text, doc tsvector);
INSERT INTO docs
SELECT i, b,
       CASE WHEN i % 997 = 0 THEN NULL
            WHEN i % 991 = 0 THEN ''::tsvector
            WHEN i % 11 = 0 THEN strip(to_tsvector('simple', b))
            WHEN i % 7 = 0 THEN setweight(to_tsvector('simple', t), 'A') || to_tsvector('simple', b)
            ELSE setweight(to_tsvector('simple', t), (ARRAY['B', 'C', 'D'])[1 + i % 3]::"char") ||
                 to_tsvector('simple', b)
       END
FROM generate_series(1, 6000) AS i,
     LATERAL (SELECT string_agg('w' || floor(power(random(), 2.5) * 3000)::int, ' ') AS b
              FROM generate_series(1, 3 + (random() * 25)::int + 0 * i)) bb,
     LATERAL (SELECT string_agg('w' || floor(power(random(), 2.5) * 3000)::int, ' ') AS t
              FROM generate_series(1, 1 + (random() * 3)::int + 0 * i)) tt;
-- a merge every few inserts: the pending list and its merges are both exercised
CREATE INDEX docs_g ON docs USING genie (doc) WITH (pending_list_limit = 64);
ANALYZE docs;

-- tsqueries of 1 to 10 lexemes, OR-ed and AND-ed, some restricted to
-- classes, some no row has; then negations and edge cases
CREATE TABLE tq (qid int PRIMARY KEY, q tsquery);
INSERT INTO tq
SELECT g, string_agg('w' || floor(power(random(), 2.5) * 3200)::int ||
                     CASE WHEN random() < 0.1 THEN ':A' WHEN random() < 0.1 THEN ':BC' ELSE '' END,
                     CASE WHEN random() < 0.7 THEN ' | ' ELSE ' & ' END)::tsquery
FROM generate_series(1, 60) g, LATERAL generate_series(1, 1 + g % 10 + 0 * g) j
GROUP BY g;
INSERT INTO tq VALUES (61, 'w0 & !w1'), (62, '!w0'), (63, 'nosuchword | w5'), (64, 'w3:A'),
  (65, 'w2 <-> w4'), (66, 'w0 | w0 | w0:A'), (67, '(w1 | !w2) & !(w3 & w4)'), (68, 'nosuchword');
-- query documents: rows of the table (near duplicates) and one of new words
CREATE TABLE vq (qid int PRIMARY KEY, q tsvector);
INSERT INTO vq SELECT row_number() OVER (ORDER BY id), doc FROM docs WHERE id % 150 = 1 AND doc IS NOT NULL;
INSERT INTO vq SELECT count(*) + 1, 'unseen words only' FROM vq;

-- The scores of the top k of a table under one plan shape: 'seq' or 'index'.
CREATE FUNCTION pg_temp.scores(q anyelement, k int, method text, tab text DEFAULT 'docs') RETURNS int[] LANGUAGE plpgsql AS $$
DECLARE r int[];
BEGIN
  SET LOCAL enable_bitmapscan = off;
  IF method = 'seq' THEN
    SET LOCAL enable_indexscan = off; SET LOCAL enable_seqscan = on;
  ELSE
    SET LOCAL enable_indexscan = on; SET LOCAL enable_seqscan = off;
  END IF;
  EXECUTE format('SELECT array_agg(s) FROM (SELECT genie_match_count(doc, $1) s FROM %I
                  ORDER BY doc <~> $1 LIMIT %s) x', tab, k) INTO r USING q;
  RETURN r;
END $$;
-- Queries whose index top k differs from the sequential scan's.
CREATE FUNCTION pg_temp.mismatches(k int) RETURNS bigint LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM tq WHERE pg_temp.scores(q, k, 'index') IS DISTINCT FROM pg_temp.scores(q, k, 'seq')) +
         (SELECT count(*) FROM vq WHERE pg_temp.scores(q, k, 'index') IS DISTINCT FROM pg_temp.scores(q, k, 'seq'))
$$;

-- EXPLAIN as one line, to check plans.
CREATE FUNCTION pg_temp.plan(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP out := out || line || ' '; END LOOP;
  RETURN out;
END $$;

SET enable_seqscan = off;
SELECT matches(pg_temp.plan('SELECT id FROM docs ORDER BY doc <~> ''w1 | w2''::tsquery LIMIT 10'),
               'Index Scan using docs_g', 'ORDER BY doc <~> tsquery LIMIT k is a genie index scan');
SELECT matches(pg_temp.plan('SELECT id FROM docs ORDER BY doc <~> ''w1 w2''::tsvector LIMIT 10'),
               'Index Scan using docs_g', 'ORDER BY doc <~> tsvector LIMIT k is a genie index scan');
RESET enable_seqscan;

-- the score itself, on literals
SELECT is(genie_match_count('w1:1 w2:2 w3'::tsvector, 'w1 | w2 | w9'::tsquery), 2, 'shared words are counted');
SELECT is(genie_match_count('w1:1 w2:2'::tsvector, 'w1 & !w2'::tsquery), 1, 'a lexeme under NOT does not count');
SELECT is(genie_match_count('w1:1A w2:2'::tsvector, 'w1:B | w2'::tsquery), 1,
          'a weight restriction counts only its classes (w1 is of class A)');
SELECT is(genie_match_count('w1:1A,2D'::tsvector, 'w1:A'::tsquery), 1, 'a lexeme is of its highest class');
SELECT is(genie_match_count('w1 w2'::tsvector, 'w1:D | w2:A'::tsquery), 1, 'a lexeme without positions is of class D');
SELECT is(genie_match_count('w1:1 w2:2'::tsvector, 'w1 & w1 | w1:A'::tsquery), 1, 'a repeated lexeme counts once');
SELECT is(genie_match_count('w1:1 w2:2'::tsvector, 'w2 w1 w7'::tsvector), 2, 'a query document counts shared words');
SET LOCAL genie.document_weights = '{1, 2, 4, 10}';
SELECT is(genie_match_count('w1:1A w2:2B w3:3C w4'::tsvector, 'w1 | w2 | w3 | w4'::tsquery), 17,
          'genie.document_weights weighs classes D, C, B, A as ts_rank does');
RESET genie.document_weights;
SELECT is(genie_match_count(''::tsvector, 'w1'::tsquery), 0, 'an empty document scores 0');
SELECT is('w1:1 w2:2'::tsvector <~> 'w1 w2 w3', -2::float8, 'an untyped literal is a query document (a tsvector)');

-- the index against the sequential scan
SELECT is(pg_temp.mismatches(10), 0::bigint, 'top 10: every tsquery and query document scores as the sequential scan');
SELECT is(pg_temp.mismatches(200), 0::bigint, 'top 200: the same');
SET genie.document_weights = '{1, 2, 4, 10}';
SELECT is(pg_temp.mismatches(10), 0::bigint, 'with class weights {1, 2, 4, 10}');
SET genie.document_weights = '{0, 0, 0, 1}';
SELECT is(pg_temp.mismatches(10), 0::bigint, 'with only class A counted');
RESET genie.document_weights;

-- the batch function: the oracle's scores, and ORDER BY's score lists
SELECT is((SELECT count(*) FROM genie_document_topk('docs_g', (SELECT array_agg(q ORDER BY qid) FROM tq), 10) t
           JOIN docs d ON d.ctid = t.ctid JOIN tq ON tq.qid = t.query_no
           WHERE t.score <> genie_match_count(d.doc, tq.q)), 0::bigint,
          'genie_document_topk(tsquery[]): every score is the oracle''s');
-- (a batch returns rows of a positive score; ORDER BY goes on with the rest)
SELECT is((SELECT count(*) FROM tq WHERE
             (SELECT array_agg(s) FROM unnest(pg_temp.scores(q, 10, 'index')) s WHERE s > 0) IS DISTINCT FROM
             (SELECT array_agg(score ORDER BY score DESC)
              FROM genie_document_topk('docs_g', ARRAY[tq.q], 10))), 0::bigint,
          'genie_document_topk(tsquery[]): the positive scores of ORDER BY');
SELECT is((SELECT count(*) FROM genie_document_topk('docs_g', (SELECT array_agg(q ORDER BY qid) FROM vq), 5) t
           JOIN docs d ON d.ctid = t.ctid JOIN vq ON vq.qid = t.query_no
           WHERE t.score <> genie_match_count(d.doc, vq.q)), 0::bigint,
          'genie_document_topk(tsvector[]): every score is the oracle''s');
SELECT is((SELECT count(*) FROM genie_document_topk('docs_g', (SELECT array_agg(q ORDER BY qid) FROM vq), 5) t
           JOIN vq ON vq.qid = t.query_no JOIN docs d ON d.ctid = t.ctid
           WHERE t.score = length(vq.q) AND d.doc = vq.q), (SELECT count(*) FROM vq WHERE length(q) > 0 AND qid < (SELECT max(qid) FROM vq)),
          'near duplicates: each query document finds its own row with every word shared');
SELECT throws_ok($$SELECT * FROM genie_topk('docs_g', ARRAY['{1}'::genie_query], 1)$$, '42809', NULL,
                 'genie_topk refuses an index of documents');

-- inserts of new words (the dictionary grows), updates, deletes
INSERT INTO docs SELECT i, NULL, to_tsvector('simple', 'fresh' || (i % 40) || ' w1 w' || (i % 3000))
FROM generate_series(6001, 6400) i;
UPDATE docs SET doc = to_tsvector('simple', 'fresh1 updated') WHERE id % 13 = 0;
DELETE FROM docs WHERE id % 17 = 0;
INSERT INTO tq VALUES (69, 'fresh1 | fresh2 | updated'), (70, 'fresh39 & w1');
SELECT is(pg_temp.mismatches(10), 0::bigint, 'after inserts of new words, updates and deletes');
SELECT is(pg_temp.scores('fresh1 | updated'::tsquery, 3, 'index'), '{2,2,2}'::int[],
          'a lexeme first seen after the build is found');
SAVEPOINT invisible;
INSERT INTO docs SELECT i, NULL, 'ghostword'::tsvector FROM generate_series(7001, 7100) i;
ROLLBACK TO SAVEPOINT invisible;
SELECT is(pg_temp.scores('ghostword'::tsquery, 3, 'index'), '{0,0,0}'::int[], 'rolled-back rows are never returned');
SELECT is((SELECT count(*) FROM genie_index_check('docs_g')), 1::bigint, 'genie_index_check passes');
REINDEX INDEX docs_g;
SELECT is(pg_temp.mismatches(10), 0::bigint, 'after REINDEX');
SELECT is((SELECT encoding FROM genie_index_info('docs_g')), 'document', 'genie_index_info names the encoding');

-- an expression index over to_tsvector, beside GIN on the same expression
CREATE TABLE notes (id int PRIMARY KEY, body text);
INSERT INTO notes SELECT id, body FROM docs WHERE body IS NOT NULL;
CREATE INDEX notes_g ON notes USING genie (to_tsvector('english', body));
CREATE INDEX notes_gin ON notes USING gin (to_tsvector('english', body));
ANALYZE notes;
SET enable_seqscan = off;
SELECT matches(pg_temp.plan($$SELECT id FROM notes ORDER BY to_tsvector('english', body) <~> 'w1 | w2'::tsquery LIMIT 10$$),
               'Index Scan using notes_g', 'an expression index serves ORDER BY to_tsvector(...) <~> q');
SELECT is((SELECT array_agg(s) FROM (SELECT genie_match_count(to_tsvector('english', body), 'w1 | w2 | w7'::tsquery) s
           FROM notes ORDER BY to_tsvector('english', body) <~> 'w1 | w2 | w7'::tsquery LIMIT 20) x),
          (SELECT array_agg(s) FROM (SELECT genie_match_count(to_tsvector('english', body), 'w1 | w2 | w7'::tsquery) s
           FROM notes ORDER BY 1 DESC LIMIT 20) x),
          'the expression index ranks as the oracle');
SELECT is((SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM notes WHERE to_tsvector('english', body) @@ 'w1 & w2'::tsquery
           ORDER BY to_tsvector('english', body) <~> 'w1 & w2'::tsquery LIMIT 1000) x),
          (SELECT array_agg(id ORDER BY id) FROM notes WHERE body ~ '\mw1\M' AND body ~ '\mw2\M'),
          'WHERE @@ filters the ranked rows (GIN beside genie)');
RESET enable_seqscan;

-- RUM (make deps installs it) and pg_trgm on the same columns: no operator
-- clash, each index serves its own ordering
CREATE EXTENSION IF NOT EXISTS pg_trgm;
SELECT CASE WHEN EXISTS (SELECT FROM pg_available_extensions WHERE name = 'rum')
            THEN 'CREATE EXTENSION IF NOT EXISTS rum' ELSE 'SELECT 1' END AS rum_sql \gset
:rum_sql;
CREATE FUNCTION pg_temp.rum_plans() RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
  CREATE INDEX notes_trgm ON notes USING gist (body gist_trgm_ops);
  CREATE INDEX notes_rum ON notes USING rum (to_tsvector('english', body) rum_tsvector_ops);
  ANALYZE notes;
  SET LOCAL enable_seqscan = off;
  RETURN NEXT pg_temp.plan($q$SELECT id FROM notes ORDER BY to_tsvector('english', body) <=> 'w1 | w2'::tsquery LIMIT 5$q$);
  RETURN NEXT pg_temp.plan($q$SELECT id FROM notes ORDER BY to_tsvector('english', body) <~> 'w1 | w2'::tsquery LIMIT 5$q$);
  RETURN NEXT pg_temp.plan($q$SELECT id FROM notes ORDER BY body <-> 'w1 w2' LIMIT 5$q$);
END $$;
SELECT CASE WHEN NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'rum')
            THEN skip('postgresql-15-rum is not installed', 1)
            ELSE is((SELECT array_agg(substring(p FROM 'Index Scan using (\w+)')) FROM pg_temp.rum_plans() p),
                    '{notes_rum,notes_g,notes_trgm}'::text[],
                    'RUM <=>, genie <~> and pg_trgm <-> on one column each use their own index') END;

-- inverse document frequencies: a table of its own, built, then new rows
-- pending (every row visible, none deleted: the index's counts are then the
-- table's); the oracle counts documents with ts_stat
CREATE TABLE idf_docs AS SELECT id, doc FROM docs WHERE id <= 3000;
CREATE INDEX idf_d ON idf_docs USING genie (doc);
INSERT INTO idf_docs SELECT i, to_tsvector('simple', 'fresh' || (i % 7) || ' w' || (i % 50)) FROM generate_series(9001, 9300) i;
CREATE TEMP TABLE idf_w AS
SELECT word, ndoc, greatest(1, floor(100 * ln(1 + (n - ndoc + 0.5) / (ndoc + 0.5)) + 0.5))::int AS w
FROM ts_stat('SELECT doc FROM idf_docs'), (SELECT count(*) AS n FROM idf_docs WHERE doc IS NOT NULL) c;
SELECT is((SELECT count(*) FROM vq, LATERAL genie_document_weights('idf_d', vq.q) g
           LEFT JOIN idf_w ON idf_w.word = g.lexeme
           WHERE (g.documents, g.weight) IS DISTINCT FROM (coalesce(idf_w.ndoc, 0), coalesce(idf_w.w, greatest(1, floor(100 * ln(1 + ((SELECT count(*) FROM idf_docs WHERE doc IS NOT NULL) + 0.5) / 0.5) + 0.5))::int))),
          0::bigint, 'genie_document_weights: each term''s documents and weight are those ts_stat gives');
-- the score with idf, in SQL: per (query document, row) the weights of the
-- shared words, set-based
CREATE TEMP TABLE idf_truth AS
SELECT v.qid, d.ctid AS tid, sum(w.w)::int AS s
FROM vq v CROSS JOIN LATERAL unnest(tsvector_to_array(v.q)) ql
JOIN (SELECT ctid, unnest(tsvector_to_array(doc)) AS dl FROM idf_docs) d ON d.dl = ql
JOIN idf_w w ON w.word = ql
GROUP BY 1, 2;
CREATE TEMP TABLE idf_topk AS
SELECT query_no, ctid AS tid, score FROM genie_document_topk('idf_d', (SELECT array_agg(q ORDER BY qid) FROM vq), 10, idf => true);
SELECT is((SELECT count(*) FROM idf_topk t LEFT JOIN idf_truth i ON i.qid = t.query_no AND i.tid = t.tid
           WHERE i.s IS DISTINCT FROM t.score), 0::bigint,
          'genie_document_topk(idf => true): every score is the idf-weighted count of shared words');
SELECT is((SELECT count(*) FROM vq WHERE
             (SELECT array_agg(score ORDER BY score DESC) FROM idf_topk WHERE query_no = vq.qid) IS DISTINCT FROM
             (SELECT array_agg(s ORDER BY s DESC) FROM (SELECT s FROM idf_truth WHERE qid = vq.qid ORDER BY s DESC LIMIT 10) x)),
          0::bigint, 'genie_document_topk(idf => true): the top 10 of every row scored that way');
SELECT throws_ok($$SELECT * FROM genie_document_weights('docs_tags_none', 'w1'::tsquery)$$, '42P01', NULL,
                 'genie_document_weights of no index is an error');

-- genie_document_query: the idf weights in the query value, so that ORDER BY
-- ranks as genie_document_topk(idf => true) and a sequential scan agrees
SELECT is((SELECT count(*) FROM vq WHERE genie_document_query('idf_d', q)::text IS DISTINCT FROM
             (SELECT string_agg(quote_literal(lexeme) || '*' || weight, ' ' ORDER BY lexeme COLLATE "C")
              FROM genie_document_weights('idf_d', vq.q))), 0::bigint,
          'genie_document_query(index, q) holds each term with the weight genie_document_weights gives');
SET enable_seqscan = off;
SELECT matches(pg_temp.plan($$SELECT id FROM idf_docs ORDER BY doc <~> genie_document_query('idf_d', 'w1 | w2'::tsquery) LIMIT 10$$),
               'Index Scan using idf_d', 'ORDER BY doc <~> genie_document_query(index, q) LIMIT k is a genie index scan');
RESET enable_seqscan;
SELECT is((SELECT count(*) FROM vq WHERE
             (SELECT array_agg(s) FROM unnest(pg_temp.scores(genie_document_query('idf_d', vq.q), 10, 'index', 'idf_docs')) s WHERE s > 0)
             IS DISTINCT FROM
             (SELECT array_agg(s ORDER BY s DESC) FROM (SELECT s FROM idf_truth WHERE qid = vq.qid ORDER BY s DESC LIMIT 10) x)),
          0::bigint, 'ORDER BY doc <~> genie_document_query(index, q): the top 10 by the idf-weighted count of shared words');
SET genie.document_weights = '{1, 2, 4, 10}';
SELECT is((SELECT count(*) FROM (SELECT genie_document_query('idf_d', q) AS q FROM tq UNION ALL
                                 SELECT genie_document_query('idf_d', q) FROM vq) w
           WHERE pg_temp.scores(w.q, 10, 'index', 'idf_docs') IS DISTINCT FROM pg_temp.scores(w.q, 10, 'seq', 'idf_docs')), 0::bigint,
          'genie_document_query of every tsquery and query document, class weights {1, 2, 4, 10}: the index scan scores as the sequential scan');
RESET genie.document_weights;
SELECT is((SELECT count(*) FROM (
             (SELECT query_no, ctid AS tid, score FROM genie_document_topk('idf_d',
                (SELECT array_agg(genie_document_query('idf_d', q) ORDER BY qid) FROM vq), 10)
              EXCEPT SELECT * FROM idf_topk)
             UNION ALL
             (SELECT * FROM idf_topk EXCEPT
              SELECT query_no, ctid, score FROM genie_document_topk('idf_d',
                (SELECT array_agg(genie_document_query('idf_d', q) ORDER BY qid) FROM vq), 10))) x), 0::bigint,
          'genie_document_topk(genie_document_query[]) answers as genie_document_topk(idf => true)');
SELECT is(genie_match_count('w1:1A w2:2 w3'::tsvector, $$w1*5 w2:A*7 'w3'*2 w9*100$$::genie_document_query), 7,
          'a term adds its weight where the document holds it in an allowed class');
SET LOCAL genie.document_weights = '{1, 2, 4, 10}';
SELECT is(genie_match_count('w1:1A w2:2 w3'::tsvector, $$w1*5 w2:A*7 'w3'*2$$::genie_document_query), 52,
          'times the weight of its class');
RESET genie.document_weights;
SELECT is($$ b  'it''s':ca*3 'x\\y' 'a b'$$::genie_document_query::text, $$'a b'*1 'b'*1 'it''s':AC*3 'x\\y'*1$$,
          'genie_document_query text is canonical: quoted, sorted, classes and weights written out');
SELECT is($$'a b'*1 'b'*1 'it''s':AC*3 'x\\y'*1$$::genie_document_query::text::genie_document_query::text,
          $$'a b'*1 'b'*1 'it''s':AC*3 'x\\y'*1$$, 'its output reads back as itself');
CREATE TEMP TABLE gdq (q genie_document_query);
INSERT INTO gdq SELECT genie_document_query('idf_d', q) FROM vq
  UNION ALL SELECT $$'it''s':ca*3 'x\\y' 'é'*9$$ UNION ALL SELECT '';
CREATE TEMP TABLE gdq_back (q genie_document_query);
DO $$ BEGIN
  EXECUTE format('COPY gdq TO %L (FORMAT binary)', current_setting('data_directory') || '/genie_090_gdq.bin');
  EXECUTE format('COPY gdq_back FROM %L (FORMAT binary)', current_setting('data_directory') || '/genie_090_gdq.bin');
END $$;
SELECT is((SELECT array_agg(q::text ORDER BY q::text) FROM gdq_back), (SELECT array_agg(q::text ORDER BY q::text) FROM gdq),
          'binary COPY out and in gives the same queries');
SELECT throws_ok($$SELECT 'w1 w1:A'::genie_document_query$$, '22023', NULL, 'a lexeme given twice is refused');
SELECT throws_ok($$SELECT 'w1*0'::genie_document_query$$, '22023', NULL, 'a weight of 0 is refused');
SELECT throws_ok($$SELECT 'w1*1000001'::genie_document_query$$, '22023', NULL, 'a weight over 1,000,000 is refused');
SELECT throws_ok($$SELECT 'w1:E'::genie_document_query$$, '22P02', NULL, 'a class that is not A to D is refused');
SELECT throws_ok($$SELECT $q$'w1$q$::genie_document_query$$, '22P02', NULL, 'an unclosed quote is refused');
SELECT throws_ok($$SELECT genie_document_query('docs', 'w1'::tsquery)$$, '42809', NULL,
                 'genie_document_query of a table that is not an index is an error');
SET genie.document_weights = '{1, 1, 1, 1000}';
SET enable_seqscan = off;
SELECT throws_ok($$SELECT id FROM idf_docs ORDER BY doc <~> 'w1*1000000 w2*1000000 w3*1000000'::genie_document_query LIMIT 1$$,
                 '54000', NULL, 'a query that could score past int4 is refused before it is searched');
RESET enable_seqscan;
SELECT throws_ok($$SELECT genie_match_count('w1:1A w2:1A w3:1A'::tsvector, 'w1*1000000 w2*1000000 w3*1000000'::genie_document_query)$$,
                 '22003', NULL, 'and the oracle refuses a score past int4');
RESET genie.document_weights;

-- a scan under LIMIT asks for a margin over it when rows are pending: 10% of
-- the rows updated leave their old versions invisible in the main postings,
-- and one search still finds ten visible rows (it took two before)
CREATE TABLE same (id int, doc tsvector);
INSERT INTO same SELECT i, to_tsvector('simple', 'w1 x' || i) FROM generate_series(1, 1000) i;
CREATE INDEX same_d ON same USING genie (doc);
UPDATE same SET doc = doc || 'updated'::tsvector WHERE id % 10 = 0;
SET genie.profile = on;
SET enable_seqscan = off;
SELECT genie_profile_reset();
SELECT is((SELECT array_agg(id ORDER BY id) FROM (SELECT id FROM same ORDER BY doc <~> 'w1'::tsquery LIMIT 10) x),
          '{1,2,3,4,5,6,7,8,9,11}'::int[], 'ties come in row order, past the updated row');
SELECT is((SELECT sum(calls) FROM genie_profile() WHERE phase = 'engine'), 1::numeric,
          'one engine call: the first search asked for a margin over the LIMIT');
RESET enable_seqscan;
RESET genie.profile;

-- errors
SELECT throws_ok($$SELECT 'w1'::tsvector <~> 'w1:*'::tsquery$$, '0A000', NULL, 'a prefix cannot be ranked');
SELECT throws_ok($$SET genie.document_weights = '{1, 2}'$$, '22023', NULL, 'two weights are refused');
SELECT throws_ok($$SET genie.document_weights = '{0, 0, 0, 0}'$$, '22023', NULL, 'all-zero weights are refused');
SELECT throws_ok($$SET genie.document_weights = '{1, 1, 1, 1'$$, '22023', NULL, 'an unclosed brace is refused');
SELECT throws_ok($$SET genie.document_weights = '{1, 1, 1, 1001}'$$, '22023', NULL, 'a weight over 1000 is refused');
SELECT throws_ok($$SELECT * FROM genie_document_topk('docs_g', ARRAY['w1'::tsquery], 0)$$, '22023', NULL, 'k = 0 is refused');

SELECT * FROM finish();
ROLLBACK;
