-- Device memory stays flat over 10,000 queries in one session (GPU host,
-- genie.device = gpu): index scans, genie_topk batches, genie_similar, and
-- inserts that make new index versions (each a new cache entry and device
-- copy, the old one freed).  genie_devices() reports the GPU's free memory
-- after every 1,000 queries; the report at the end says whether it moved.
\set ON_ERROR_STOP 1
CREATE EXTENSION IF NOT EXISTS genie;
SET genie.device = 'gpu';
SELECT setseed(0.5);
CREATE TABLE docs (id int, tags int4[]);
INSERT INTO docs SELECT i, ARRAY(SELECT floor(power(random(), 2) * 500)::int
                                 FROM generate_series(1, 1 + (random() * 12)::int + 0 * i))
FROM generate_series(1, 200000) i;
CREATE INDEX docs_idx ON docs USING genie (tags);
CREATE TABLE words (w text);
INSERT INTO words SELECT md5(i::text) FROM generate_series(1, 20000) i;
CREATE INDEX words_w ON words USING genie (w genie_ngram_ops);
CREATE TEMP TABLE free_mib (queries int, mib bigint);
DO $$
DECLARE
  f bigint;
BEGIN
  FOR i IN 1..10000 LOOP
    PERFORM id FROM docs ORDER BY tags <~> ARRAY[i % 500, (i * 7) % 500, 3] LIMIT 10;
    IF i % 100 = 0 THEN
      PERFORM count(*) FROM genie_topk('docs_idx', ARRAY(SELECT ARRAY[j, i % 300]::genie_query
                                                         FROM generate_series(1, 256) j), 10);
    END IF;
    IF i % 200 = 0 THEN
      PERFORM count(*) FROM genie_similar('words_w', ARRAY['abcd' || i, md5(i::text)], 5);
    END IF;
    IF i % 500 = 0 THEN
      INSERT INTO docs VALUES (-i, ARRAY[i % 500]);  -- a new index version
    END IF;
    IF i % 1000 = 0 THEN
      SELECT free_memory_bytes INTO f FROM genie_devices() WHERE kind = 'gpu' AND ordinal = 0;
      INSERT INTO free_mib VALUES (i, f / 1048576);
    END IF;
  END LOOP;
END $$;
SELECT queries, mib AS free_mib FROM free_mib ORDER BY queries;
SELECT max(mib) - min(mib) AS spread_mib,
       (max(mib) - min(mib)) <= 8 AS flat
FROM free_mib;
