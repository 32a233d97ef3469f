-- The table of bench/service-bench: :rows rows of 5 to 45 tag draws each
-- (fewer distinct) from a 50,000-tag vocabulary, skewed towards small tag
-- numbers (tag = 50000 * u^3), a genie index, and 1,000 stored queries of
-- query_draws (default 8) draws from the same distribution; prints the
-- postings a query reads (the rows holding each of its tags), on average.
\set ON_ERROR_STOP on
\if :{?query_draws} \else \set query_draws 8 \endif
SELECT setseed(0.42);
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE svc_docs (id int, tags int4[]);
INSERT INTO svc_docs
SELECT i, ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int
                FROM generate_series(1, 5 + (i::int8 * 7919 % 41)::int))
FROM generate_series(1, :rows) i;
CREATE TABLE svc_queries (id int PRIMARY KEY, q int4[]);
INSERT INTO svc_queries
SELECT g, ARRAY(SELECT DISTINCT floor(50000 * power(random(), 3))::int
                FROM generate_series(1, :query_draws + 0 * g))
FROM generate_series(1, 1000) g;
\timing on
CREATE INDEX svc_docs_idx ON svc_docs USING genie (tags);
\timing off
VACUUM ANALYZE svc_docs;
VACUUM ANALYZE svc_queries;
SELECT count(*) AS rows, avg(cardinality(tags))::numeric(6,1) AS mean_tags FROM svc_docs;
WITH counts AS (SELECT tag, count(*) AS n FROM svc_docs, unnest(tags) tag GROUP BY tag)
SELECT avg(cardinality(q))::numeric(6,1) AS mean_query_tags, avg(p)::numeric(10,1) AS mean_postings_per_query
FROM (SELECT q.id, q.q, coalesce(sum(c.n), 0) AS p FROM svc_queries q CROSS JOIN unnest(q.q) tag
      LEFT JOIN counts c USING (tag) GROUP BY q.id, q.q) s;
