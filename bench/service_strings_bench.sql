-- The table of `WORKLOAD=strings bench/service-bench`: the word list (psql
-- variable words), a genie_ngram_ops index (strings stored), and 1,000
-- stored queries: random words of 6+ letters with 30% of their characters
-- replaced by random letters.
\set ON_ERROR_STOP on
SELECT setseed(0.42);
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE svc_words (id serial, w text);
COPY svc_words (w) FROM :'words';
CREATE TABLE svc_word_queries (id int PRIMARY KEY, q text);
INSERT INTO svc_word_queries
SELECT row_number() OVER (), string_agg(CASE WHEN random() < 0.3 THEN chr(97 + floor(random() * 26)::int)
                                              ELSE c END, '' ORDER BY n)
FROM (SELECT id, w FROM svc_words WHERE length(w) >= 6 ORDER BY random() LIMIT 1000) s,
     regexp_split_to_table(s.w, '') WITH ORDINALITY AS t(c, n)
GROUP BY s.id;
\timing on
CREATE INDEX svc_words_idx ON svc_words USING genie (w genie_ngram_ops);
\timing off
VACUUM ANALYZE svc_words;
VACUUM ANALYZE svc_word_queries;
SELECT count(*) AS rows, avg(length(w))::numeric(6,1) AS mean_length FROM svc_words;
