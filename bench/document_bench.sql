-- Short documents: genie_tsvector_ops against GIN and RUM, in one session
-- (bench/run-document-bench):
--   psql -v file=corpus.tsv -v queries=1000 -v sample=100 -v rum=1 [-v baselines=0] [-v neardup=N]
--        -f bench/document_bench.sql
-- The corpus (bench/document_corpus.py, one document a line) becomes
-- to_tsvector('english', body), three times: docs with a genie index,
-- docs_gin with GIN and docs_rum with RUM (rum_tsvector_ops), so that each
-- method runs with its own index.  :queries documents drawn at random are
-- held out as query documents (5 to 60 lexemes); tsqueries of 1, 2-3 and 8-12 lexemes OR-ed
-- are drawn from the corpus's document frequencies (:queries of each).
-- Methods, each the top 10 of one query a statement:
--   genie          ORDER BY doc <~> q LIMIT 10 (q the tsquery, or the query
--                  document itself)
--   genie, idf     ORDER BY doc <~> genie_document_query(index, q) LIMIT 10
--                  (idf-weighted; the query made in the statement)
--   gin + count    WHERE doc @@ q ORDER BY genie_match_count(doc, q) DESC:
--                  GIN finds the rows sharing a word, the sort ranks them
--                  by the same score as genie (the same answer)
--   gin + ts_rank  WHERE doc @@ q ORDER BY ts_rank(doc, q) DESC (another
--                  ranking: what a GIN user writes)
--   rum            WHERE doc @@ q ORDER BY doc <=> q (RUM's ranking)
--   seqscan        ORDER BY genie_match_count(doc, q) DESC (the oracle)
--   genie batch    genie_document_topk of all queries of a kind, k = 10
--                  (and with idf => true)
-- then near duplicates: for each of the first :neardup documents, its 5
-- most similar (genie_document_topk, k = 6: itself and five others).
-- For query documents, q is the OR of the document's lexemes for GIN and
-- RUM.  The slow methods run the first :sample queries of each kind
-- (baselines=0 leaves GIN and RUM out: a second mode of the same build).  Each
-- method runs three rounds; a figure is the median of the rounds' means
-- (execution in the server, EXECUTE's planning included, no client).
-- genie's and gin + count's score lists are compared with the oracle's.
\set ON_ERROR_STOP 1
\if :{?queries} \else \set queries 1000 \endif
\if :{?sample} \else \set sample 100 \endif
\if :{?rum} \else \set rum 1 \endif
\if :{?updates} \else \set updates 10000 \endif
\if :{?baselines} \else \set baselines 1 \endif
\if :{?neardup} \else \set neardup 10000 \endif
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
\if :rum
CREATE EXTENSION IF NOT EXISTS rum;
\endif
DROP TABLE IF EXISTS corpus, docs, docs_gin, docs_rum, lex, qdocs, tsq, doc_queries, doc_results, doc_rounds;

CREATE TABLE corpus (body text);
COPY corpus FROM :'file';
SELECT setseed(0.77);
CREATE TABLE docs AS SELECT row_number() OVER () AS id, body, to_tsvector('english', body) AS doc FROM corpus;
DROP TABLE corpus;
-- query documents of 5 to 60 lexemes (a tsquery cannot be TOASTed: their OR must fit a row)
CREATE TABLE held AS SELECT id FROM docs WHERE length(doc) BETWEEN 5 AND 60 ORDER BY random() LIMIT :queries;

-- a lexeme as a tsquery operand
CREATE FUNCTION pg_temp.lexq(w text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '''' || replace(replace(w, '\', '\\'), '''', '''''') || ''''
$$;
CREATE FUNCTION pg_temp.or_query(v tsvector) RETURNS tsquery LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(string_agg(pg_temp.lexq(l), ' | '), '')::tsquery FROM unnest(tsvector_to_array(v)) l
$$;

CREATE TABLE doc_queries (qid serial PRIMARY KEY, kind text, qdoc tsvector, q tsquery);
INSERT INTO doc_queries (kind, qdoc, q)
SELECT 'query document', d.doc, pg_temp.or_query(d.doc) FROM held h JOIN docs d USING (id) ORDER BY h.id;
DELETE FROM docs WHERE id IN (SELECT id FROM held);
DROP TABLE held;

CREATE TABLE lex AS SELECT word, sum(ndoc) OVER (ORDER BY word) AS upto FROM ts_stat('SELECT doc FROM docs');
CREATE INDEX ON lex (upto);
SELECT max(upto) AS total FROM lex \gset
INSERT INTO doc_queries (kind, q)
SELECT kind, (SELECT string_agg(pg_temp.lexq(w), ' | ')
              FROM (SELECT (SELECT word FROM lex WHERE upto >= r ORDER BY upto LIMIT 1) w
                    FROM (SELECT 1 + floor(random() * :total) AS r
                          FROM generate_series(1, CASE kind WHEN '1 lexeme' THEN 1
                                                            WHEN '2-3 lexemes' THEN 2 + g % 2
                                                            ELSE 8 + g % 5 END) x) y) z)::tsquery
FROM (VALUES ('1 lexeme'), ('2-3 lexemes'), ('8-12 lexemes')) k(kind), generate_series(1, :queries) g
ORDER BY kind, g;
DROP TABLE lex;

CREATE TABLE docs_gin AS SELECT * FROM docs;
CREATE TABLE docs_rum AS SELECT * FROM docs;
\echo == corpus: documents, distinct lexemes, lexemes a document (mean)
SELECT count(*) AS documents, (SELECT count(*) FROM ts_stat('SELECT doc FROM docs')) AS lexemes,
       round(avg(length(doc)), 1) AS lexemes_a_document FROM docs;
SELECT kind, count(*) AS queries, round(avg(numnode(q) / 2.0 + 0.5), 1) AS lexemes FROM doc_queries GROUP BY kind ORDER BY kind;

\echo == index builds (ms) and sizes
\timing on
CREATE INDEX docs_genie ON docs USING genie (doc);
CREATE INDEX docs_gin_idx ON docs_gin USING gin (doc);
\if :rum
CREATE INDEX docs_rum_idx ON docs_rum USING rum (doc rum_tsvector_ops);
\endif
\timing off
VACUUM ANALYZE docs;
VACUUM ANALYZE docs_gin;
VACUUM ANALYZE docs_rum;
SELECT c.relname, pg_size_pretty(pg_relation_size(c.oid)) AS size, pg_relation_size(c.oid) / 8192 AS pages
FROM pg_class c WHERE relname IN ('docs', 'docs_genie', 'docs_gin_idx', 'docs_rum_idx') ORDER BY 3 DESC;

CREATE TABLE doc_results (method text, kind text, round int, qid int, queries int, ms float8, scores int[]);

-- One statement a query, every query (or the first per_kind of each kind) of kinds.
CREATE FUNCTION doc_run(method text, round int, per_kind int, kinds text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  r record; t0 timestamptz; s int[]; sql text;
BEGIN
  SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = on;
  IF method LIKE 'genie%' OR method = 'rum' THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
  ELSIF method LIKE 'gin%' THEN
    SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;
  ELSE
    SET LOCAL enable_bitmapscan = off; SET LOCAL enable_indexscan = off;
  END IF;
  FOR r IN SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY kind ORDER BY qid) rn FROM doc_queries
                          WHERE kind = ANY (kinds)) x WHERE rn <= per_kind ORDER BY qid LOOP
    sql := CASE method
      WHEN 'genie' THEN 'SELECT array_agg(genie_match_count(doc, $1)) FROM (SELECT doc FROM docs ORDER BY doc <~> $1 LIMIT 10) t'
      -- the query made in the statement, once (an InitPlan): what a user's statement pays
      WHEN 'genie, idf' THEN 'WITH w AS MATERIALIZED (SELECT genie_document_query(''docs_genie'', $1) AS w)
        SELECT array_agg(genie_match_count(doc, (SELECT w FROM w))) FROM (SELECT doc FROM docs ORDER BY doc <~> (SELECT w FROM w) LIMIT 10) t'
      WHEN 'gin + count' THEN 'SELECT array_agg(c) FROM (SELECT genie_match_count(doc, $1) c FROM docs_gin WHERE doc @@ $2 ORDER BY 1 DESC LIMIT 10) t'
      WHEN 'gin + ts_rank' THEN 'SELECT array_agg(c) FROM (SELECT genie_match_count(doc, $1) c FROM docs_gin WHERE doc @@ $2 ORDER BY ts_rank(doc, $2) DESC LIMIT 10) t'
      WHEN 'rum' THEN 'SELECT array_agg(c) FROM (SELECT genie_match_count(doc, $1) c FROM docs_rum WHERE doc @@ $2 ORDER BY doc <=> $2 LIMIT 10) t'
      ELSE 'SELECT array_agg(c) FROM (SELECT genie_match_count(doc, $1) c FROM docs ORDER BY 1 DESC LIMIT 10) t' END;
    t0 := clock_timestamp();
    IF r.qdoc IS NOT NULL THEN
      EXECUTE sql INTO s USING r.qdoc, r.q;
    ELSE
      EXECUTE sql INTO s USING r.q, r.q;
    END IF;
    INSERT INTO doc_results VALUES (method, r.kind, round, r.qid, 1, extract(epoch FROM clock_timestamp() - t0) * 1000,
                                    array_remove(s, 0));
  END LOOP;
END $$;

-- genie_document_topk of all queries of a kind, k = 10 (with idf or not): ms a query.
CREATE FUNCTION doc_batch(round int, kind text, idf bool DEFAULT false) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n int; qs tsquery[]; vs tsvector[];
BEGIN
  SELECT array_agg(q ORDER BY qid), array_agg(qdoc ORDER BY qid), count(*) INTO qs, vs, n
  FROM doc_queries WHERE doc_queries.kind = doc_batch.kind;
  t0 := clock_timestamp();
  IF kind = 'query document' THEN
    PERFORM count(*) FROM genie_document_topk('docs_genie', vs, 10, idf);
  ELSE
    PERFORM count(*) FROM genie_document_topk('docs_genie', qs, 10, idf);
  END IF;
  INSERT INTO doc_results VALUES (CASE WHEN idf THEN 'genie batch, idf' ELSE 'genie batch' END, kind, round, NULL, n,
                                  extract(epoch FROM clock_timestamp() - t0) * 1000 / n, NULL);
END $$;

-- warm: the tables in shared buffers, each index read once
SELECT count(*) FROM docs WHERE doc @@ 'zzz'::tsquery;
SELECT doc_run('genie', 0, 5, ARRAY['1 lexeme']);
SELECT doc_run('gin + count', 0, 5, ARRAY['1 lexeme']);
\if :rum
SELECT doc_run('rum', 0, 5, ARRAY['1 lexeme']);
\endif
DELETE FROM doc_results;

SELECT doc_run('genie', g, :queries, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(1, 3) g;
SELECT doc_run('genie, idf', g, :queries, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(1, 3) g;
SELECT doc_batch(g, k, idf) FROM generate_series(1, 3) g,
  unnest(ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) k, unnest(ARRAY[false, true]) idf;
\if :baselines
SELECT doc_run('gin + count', g, :sample, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(1, 3) g;
SELECT doc_run('gin + ts_rank', g, :sample, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(1, 3) g;
\if :rum
SELECT doc_run('rum', g, :sample, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(1, 3) g;
\endif
\endif
SELECT doc_run('seqscan', 1, least(:sample, 20), ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']);

\echo == ms a query: the median over 3 rounds of the mean of each round, and of its p50 and p95 (batch: the ms of the call over its queries)
CREATE TABLE doc_rounds AS
SELECT method, kind, round, sum(queries) AS queries, avg(ms) AS mean_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY ms) AS p95_ms
FROM doc_results WHERE method NOT LIKE 'genie batch%' GROUP BY 1, 2, 3
UNION ALL
SELECT method, kind, round, queries, ms, NULL, NULL FROM doc_results WHERE method LIKE 'genie batch%';
SELECT kind, method, max(queries) AS queries,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY mean_ms)::numeric, 3) AS ms,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY p50_ms)::numeric, 3) AS p50_ms,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY p95_ms)::numeric, 3) AS p95_ms,
       round(min(mean_ms)::numeric, 3) AS min_ms, round(max(mean_ms)::numeric, 3) AS max_ms,
       round((1000 / percentile_cont(0.5) WITHIN GROUP (ORDER BY mean_ms))::numeric, 0) AS queries_per_s
FROM doc_rounds GROUP BY 1, 2 ORDER BY 1, 4;

\echo == how many times genie: the methods summed ms over genie summed ms (per query the median of 3 rounds, same queries)
WITH m AS (
  SELECT method, kind, qid, percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS ms
  FROM doc_results WHERE method NOT LIKE 'genie batch%' GROUP BY 1, 2, 3)
SELECT o.kind, o.method, count(*) AS queries,
       round((sum(o.ms) / sum(g.ms))::numeric, 1) AS over_genie
FROM m o JOIN m g ON g.qid = o.qid AND g.method = 'genie' WHERE o.method <> 'genie'
GROUP BY 1, 2 ORDER BY 1, 2;

\echo == exactness: queries whose positive scores differ from those of the sequential scan (genie: 0 expected)
SELECT r.method, count(*) AS compared,
       count(*) FILTER (WHERE r.scores IS DISTINCT FROM o.scores) AS differing
FROM doc_results r JOIN doc_results o ON o.qid = r.qid AND o.method = 'seqscan'
WHERE r.method IN ('genie', 'gin + count', 'gin + ts_rank', 'rum') AND r.round = 1
GROUP BY 1 ORDER BY 1;

\echo == near duplicates: for each of the first :neardup documents its 5 most similar (genie_document_topk, k = 6 with itself), 3 rounds
CREATE FUNCTION doc_neardup(n int, rnd int) RETURNS TABLE (round int, documents int, ms float8, found_itself bigint)
LANGUAGE plpgsql AS $$
DECLARE vs tsvector[]; lens int[]; t0 timestamptz; t float8;
BEGIN
  SELECT array_agg(doc ORDER BY id), array_agg(length(doc) ORDER BY id) INTO vs, lens
  FROM (SELECT id, doc FROM docs WHERE length(doc) > 0 ORDER BY id LIMIT n) x;
  t0 := clock_timestamp();
  DROP TABLE IF EXISTS nd;
  CREATE TEMP TABLE nd AS SELECT query_no, score FROM genie_document_topk('docs_genie', vs, 6);
  t := extract(epoch FROM clock_timestamp() - t0) * 1000;
  -- each document's best row shares all its words: itself, or an identical document
  RETURN QUERY SELECT rnd, cardinality(vs), t,
    (SELECT count(*) FROM (SELECT query_no, max(score) AS best FROM nd GROUP BY 1) b WHERE b.best = lens[b.query_no]);
END $$;
SELECT n.round, n.documents, round(n.ms::numeric, 1) AS ms, round((n.ms / n.documents)::numeric, 4) AS ms_a_document,
       n.found_itself
FROM generate_series(1, 3) g, LATERAL doc_neardup(:neardup, g) n;

\echo == :updates updates (pending rows), then VACUUM: genie ms a query (the median of 3 rounds, each a mean)
\echo == each state measured right after the one before, each after a round to warm up (round 0, not counted)
-- The state before the updates is measured again here, not taken from the
-- figures above: the baselines and the near duplicates ran in between, and
-- single statements on a GPU host drift by a third over minutes.
DELETE FROM doc_results WHERE method IN ('genie', 'genie, idf');
SELECT doc_run('genie', g, :queries, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(0, 3) g;
UPDATE doc_results SET method = 'genie, before the updates' WHERE method = 'genie';
SELECT setseed(0.5);
SELECT max(id) AS max_id FROM docs_gin \gset
-- each of :updates random rows takes the words of another random document
UPDATE docs d SET doc = g.doc
FROM (SELECT id, 1 + floor(random() * :max_id)::int AS src FROM docs ORDER BY random() LIMIT :updates) pick
JOIN docs_gin g ON g.id = pick.src
WHERE d.id = pick.id;
SELECT pending_rows, dead_rows FROM genie_index_info('docs_genie');
SELECT doc_run('genie', g, :queries, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(0, 3) g;
UPDATE doc_results SET method = 'genie, pending' WHERE method = 'genie';
VACUUM docs;
SELECT pending_rows, dead_rows FROM genie_index_info('docs_genie');
SELECT doc_run('genie', g, :queries, ARRAY['1 lexeme', '2-3 lexemes', '8-12 lexemes', 'query document']) FROM generate_series(0, 3) g;
UPDATE doc_results SET method = 'genie, vacuumed' WHERE method = 'genie';
DELETE FROM doc_results WHERE method LIKE 'genie, %' AND round = 0;
SELECT kind, method, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY mean_ms)::numeric, 3) AS ms
FROM (SELECT method, kind, round, avg(ms) AS mean_ms FROM doc_results
      WHERE method LIKE 'genie, %' GROUP BY 1, 2, 3) x GROUP BY 1, 2 ORDER BY 1, 3;
