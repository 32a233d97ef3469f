-- CREATE INDEX times: the (keyword, object) pairs sorted in memory on every
-- core (while they take at most half of maintenance_work_mem) against
-- sorted runs on tapes (beyond it: here maintenance_work_mem = 64MB, the
-- default; tuplesort before genie_sorter.c, build-2core.txt), on
-- :rows random 512-bit codes (plain, and with 8 and 32 EWH keywords a code)
-- and :rows / 2 int4[] sets of 12 keywords.  The median of 3 builds each.
--   scripts/pg-sandbox psql -X -v rows=1000000 -f bench/build_bench.sql
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
DROP TABLE IF EXISTS build_codes, build_docs;
CREATE TABLE build_codes (id int, code bit(512));
INSERT INTO build_codes
SELECT g, substring(('x' || md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text) || md5((g + 3)::text))::bit(512)
       FROM 1 FOR 512)::bit(512)
FROM generate_series(1, :rows) g;
CREATE TABLE build_docs AS
SELECT g AS id, ARRAY(SELECT (g * 7 + i * 13) % 50000 FROM generate_series(1, 12) i) AS tags
FROM generate_series(1, :rows / 2) g;
CREATE FUNCTION pg_temp.build_ms(ddl text, mem text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t timestamptz; ms float8[] := '{}';
BEGIN
  PERFORM set_config('maintenance_work_mem', mem, true);
  FOR r IN 1..3 LOOP
    t := clock_timestamp();
    EXECUTE ddl;
    ms := ms || extract(epoch FROM clock_timestamp() - t)::float8 * 1000;
    EXECUTE 'DROP INDEX bench_build_index';
  END LOOP;
  RETURN (SELECT x FROM unnest(ms) x ORDER BY x OFFSET 1 LIMIT 1);
END $$;
SELECT what, mem, round(pg_temp.build_ms(ddl, mem)::numeric) AS ms
FROM (VALUES
  ('codes, no keywords', 'CREATE INDEX bench_build_index ON build_codes USING genie (code)'),
  ('codes, EWH m = 8', 'CREATE INDEX bench_build_index ON build_codes USING genie (code) WITH (m = 8)'),
  ('codes, EWH m = 32', 'CREATE INDEX bench_build_index ON build_codes USING genie (code) WITH (m = 32)'),
  ('int4[] sets', 'CREATE INDEX bench_build_index ON build_docs USING genie (tags)')) AS b(what, ddl),
  (VALUES ('64MB'), ('2GB')) AS m(mem)
ORDER BY what, mem DESC;
DROP TABLE build_codes, build_docs;
