-- genie_knn_bytes: a batch of query vectors as raw bytes (float32,
-- little-endian, one vector of dim values after another, dim the index's)
-- answers what genie_knn answers for the same vectors as real[][], and the
-- sequential scan's rows; bytes that are not whole vectors, vectors of
-- another width, NaN and the wrong kind of index get clear errors; no bytes, and an index without
-- vectors yet, answer no rows.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(14);
SELECT setseed(0.53);

CREATE TABLE kb_items (id int PRIMARY KEY, v real[]);
INSERT INTO kb_items SELECT i, (SELECT array_agg((random() * 100)::real) FROM generate_series(1, 12 + i - i))
  FROM generate_series(1, 400) i;
CREATE INDEX kb_items_v ON kb_items USING genie (v) WITH (m = 0);
CREATE TABLE kb_queries (qid int PRIMARY KEY, q real[]);
INSERT INTO kb_queries SELECT g, (SELECT array_agg((random() * 100)::real) FROM generate_series(1, 12 + g - g))
  FROM generate_series(1, 300) g;

-- a vector's bytes as a client sends them: float4send gives each value
-- big-endian, so its four bytes are reversed
CREATE FUNCTION pg_temp.le_bytes(v real[]) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(string_agg(substr(b, 4, 1) || substr(b, 3, 1) || substr(b, 2, 1) || substr(b, 1, 1), ''::bytea ORDER BY i), ''::bytea)
  FROM unnest(v) WITH ORDINALITY AS u(x, i), LATERAL float4send(x) AS b $$;
CREATE TABLE kb_batch AS
  SELECT string_agg(pg_temp.le_bytes(q), ''::bytea ORDER BY qid) AS bytes, array_agg(q ORDER BY qid) AS a FROM kb_queries;

SELECT is((SELECT length(bytes) FROM kb_batch), 300 * 12 * 4, 'the batch is 300 vectors of 12 float32 values');
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT results_eq(
  $$ SELECT query_no, ctid::text, distance FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 12, 7)
     ORDER BY query_no, distance, ctid $$,
  $$ SELECT q.qid, n.ctid::text, n.d FROM kb_queries q CROSS JOIN LATERAL
       (SELECT i.ctid, i.v <-> q.q AS d FROM kb_items i ORDER BY i.v <-> q.q, i.ctid LIMIT 7) n
     ORDER BY 1, 3, 2 $$,
  'genie_knn_bytes of 300 vectors equals the sequential scan');
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT results_eq(
  $$ SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 12, 7) $$,
  $$ SELECT * FROM genie_knn('kb_items_v', (SELECT a FROM kb_batch), 7) $$,
  'genie_knn_bytes returns the rows of genie_knn over the same vectors, in its order');
-- bytes cut out of a longer value (a new value of their own) are read as well
SELECT results_eq(
  $$ SELECT * FROM genie_knn_bytes('kb_items_v', substr('\x00'::bytea || (SELECT bytes FROM kb_batch), 2), 12, 7) $$,
  $$ SELECT * FROM genie_knn('kb_items_v', (SELECT a FROM kb_batch), 7) $$,
  'bytes cut out of a longer value answer the same');
SELECT is((SELECT count(*) FROM genie_knn_bytes('kb_items_v', ''::bytea, 12, 7)), 0::bigint,
          'no bytes: no queries, no rows');

SELECT throws_ok($$SELECT * FROM genie_knn_bytes('kb_items_v', substr((SELECT bytes FROM kb_batch), 1, 50), 12, 7)$$,
                 '22023', 'the query bytes are not whole vectors of 12 dimensions',
                 'bytes that are not whole vectors are an error');
SELECT throws_ok($$SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch) || pg_temp.le_bytes(array_fill('NaN'::real, ARRAY[12])), 12, 7)$$,
                 '22000', 'queries must not contain NaN',
                 'a NaN in the bytes is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 12, 0)$$,
                 '22023', 'k must be at least 1', 'k 0 is an error');
SELECT throws_ok($$SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 0, 7)$$,
                 '22023', 'dim must be at least 1', 'dim 0 is an error');
-- the same bytes read as vectors of 6: whole vectors, but not the index's width
SELECT throws_like($$SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 6, 7)$$,
                   '%6%12%', 'bytes of vectors of another width than the index''s are an error, not other queries');
CREATE TABLE kb_tags (id int, tags int4[]);
INSERT INTO kb_tags VALUES (1, '{1,2}');
CREATE INDEX kb_tags_i ON kb_tags USING genie (tags);
SELECT throws_like($$SELECT * FROM genie_knn_bytes('kb_tags_i', (SELECT bytes FROM kb_batch), 12, 7)$$,
                   '%cannot search genie index "kb_tags_i"%', 'a tag index is the wrong kind');

-- an index without vectors yet answers no rows; after the first insert, its width
CREATE TABLE kb_empty (id int, v real[]);
CREATE INDEX kb_empty_v ON kb_empty USING genie (v) WITH (m = 0);
SELECT is((SELECT count(*) FROM genie_knn_bytes('kb_empty_v', (SELECT bytes FROM kb_batch), 12, 3)), 0::bigint,
          'an index without vectors answers no rows');
INSERT INTO kb_empty SELECT id, v FROM kb_items WHERE id <= 5;
SELECT is((SELECT count(*) FROM genie_knn_bytes('kb_empty_v', (SELECT bytes FROM kb_batch), 12, 3)), 900::bigint,
          'after its first rows, 3 of them for each of the 300 queries');
-- the row-level security refusal of genie_knn holds too (for a role the policies bind)
ALTER TABLE kb_items ENABLE ROW LEVEL SECURITY;
CREATE POLICY kb_some ON kb_items USING (id % 2 = 0);
CREATE ROLE kb_reader;
GRANT SELECT ON kb_items, kb_batch TO kb_reader;
SET LOCAL ROLE kb_reader;
SELECT throws_ok($$SELECT * FROM genie_knn_bytes('kb_items_v', (SELECT bytes FROM kb_batch), 12, 7)$$,
                 '42501', 'genie_knn cannot be used on table "kb_items", which has row-level security enabled',
                 'a table with row-level security is refused');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
