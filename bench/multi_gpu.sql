-- genie_knn batches through SQL over one, two and every GPU (issue 29,
-- bench/multi-gpu-sql): a table of random 128-dimensional vectors (psql
-- variable scale_copy, a binary COPY of (id, real[]) rows), 1,024 queries
-- (stored vectors plus a little noise, kept in a table as one real[][]),
-- and per setting of genie.devices and genie.placement: a warm-up batch
-- (the GPU copies made), then RUNS timed batches (the statement builds no
-- array: the queries are read from the table) and 100 single ORDER BY
-- v <-> q LIMIT 10 statements; every batch's rows must equal those of
-- genie.devices = '0' (the first GPU alone).
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE mg (id int PRIMARY KEY, v real[]);
COPY mg FROM :'scale_copy' WITH (FORMAT binary);
CREATE TABLE mg_q AS
SELECT array_agg(q ORDER BY id) AS qs FROM (
  SELECT id, (SELECT array_agg(x + (random() * 0.01)::real ORDER BY o) FROM unnest(v) WITH ORDINALITY u(x, o)) AS q
  FROM mg WHERE id % 1901 = 1 ORDER BY id LIMIT 1024) s;
CREATE TABLE mg_single AS SELECT id, v AS q FROM mg WHERE id % 20011 = 7 LIMIT 100;
CREATE INDEX mg_v ON mg USING genie (v) WITH (m = 0);
SET genie.device = :'device';
CREATE TABLE mg_results (label text, devices text, placement text, run int, batch_ms float8, single_ms float8, differing bigint);
CREATE TABLE mg_reference (query_no int4, row_ctid tid, distance float8);
CREATE FUNCTION pg_temp.measure(label text, devices text, placement text, runs int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; b float8; s float8; bad bigint; r record; ids int[];
BEGIN
  PERFORM set_config('genie.devices', devices, true);
  PERFORM set_config('genie.placement', placement, true);
  PERFORM count(*) FROM genie_knn('mg_v', (SELECT qs FROM mg_q), 10);  -- warm: the GPU copies
  FOR i IN 1..runs LOOP
    t0 := clock_timestamp();
    CREATE TEMP TABLE mg_got AS SELECT query_no, ctid AS row_ctid, distance FROM genie_knn('mg_v', (SELECT qs FROM mg_q), 10);
    b := extract(epoch FROM clock_timestamp() - t0) * 1000;
    IF NOT EXISTS (SELECT 1 FROM mg_reference) THEN
      INSERT INTO mg_reference SELECT * FROM mg_got;  -- the first GPU's first batch
    END IF;
    SELECT count(*) INTO bad FROM (
      (SELECT * FROM mg_got EXCEPT ALL SELECT * FROM mg_reference)
      UNION ALL
      (SELECT * FROM mg_reference EXCEPT ALL SELECT * FROM mg_got)) d;
    DROP TABLE mg_got;
    t0 := clock_timestamp();
    FOR r IN SELECT q FROM mg_single ORDER BY id LOOP
      SELECT array_agg(id) INTO ids FROM (SELECT id FROM mg ORDER BY v <-> r.q LIMIT 10) x;
    END LOOP;
    s := extract(epoch FROM clock_timestamp() - t0) * 1000 / 100;
    INSERT INTO mg_results VALUES (label, devices, placement, i, b, s, bad);
  END LOOP;
END $$;
SET enable_seqscan = off;
SELECT FROM pg_temp.measure('first GPU', '0', 'auto', :runs);
SELECT count(pg_temp.measure(d || ', ' || p, d, p, :runs)) AS settings
FROM unnest(string_to_array(:'devices', ' ')) d, unnest(ARRAY['replicate', 'shard']) p WHERE d <> '0';
SELECT FROM pg_temp.measure('first GPU again', '0', 'auto', :runs);  -- for drift
SELECT count(*) AS rows, pg_size_pretty(pg_relation_size('mg_v')) AS index_size FROM mg;
SELECT label, count(*) AS runs,
       round(percentile_disc(0.5) WITHIN GROUP (ORDER BY batch_ms)::numeric, 1) AS batch_ms_median,
       round(min(batch_ms)::numeric, 1) AS batch_ms_min, round(max(batch_ms)::numeric, 1) AS batch_ms_max,
       round((1024 / (percentile_disc(0.5) WITHIN GROUP (ORDER BY batch_ms) / 1000))::numeric) AS queries_per_s,
       round(percentile_disc(0.5) WITHIN GROUP (ORDER BY single_ms)::numeric, 3) AS single_ms_median,
       sum(differing) AS rows_differing_from_gpu0
FROM mg_results GROUP BY label ORDER BY min(ctid);
