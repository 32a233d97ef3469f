-- The tables of `WORKLOAD=documents bench/service-bench`: a corpus of short
-- documents (the psql variable file: one document a line, as
-- bench/document_corpus.py writes) as to_tsvector('english', body) with a
-- genie index, and 1,000 of them, of 5 to 60 lexemes, drawn with a fixed
-- seed and held out as stored query documents (the query documents of
-- bench/document_bench.sql).
\set ON_ERROR_STOP on
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE svc_corpus (body text);
COPY svc_corpus FROM :'file';
SELECT setseed(0.77);
CREATE TABLE svc_tsdocs AS
  SELECT row_number() OVER () AS id, to_tsvector('english', body) AS doc FROM svc_corpus;
DROP TABLE svc_corpus;
CREATE TABLE svc_tsqueries AS
  SELECT row_number() OVER (ORDER BY r)::int AS id, doc AS q
  FROM (SELECT doc, random() AS r FROM svc_tsdocs WHERE length(doc) BETWEEN 5 AND 60) s
  ORDER BY r LIMIT 1000;
ALTER TABLE svc_tsqueries ADD PRIMARY KEY (id);
\timing on
CREATE INDEX svc_tsdocs_idx ON svc_tsdocs USING genie (doc);
\timing off
VACUUM ANALYZE svc_tsdocs;
VACUUM ANALYZE svc_tsqueries;
SELECT count(*) AS documents, round(avg(length(doc)), 1) AS lexemes_a_document FROM svc_tsdocs;
