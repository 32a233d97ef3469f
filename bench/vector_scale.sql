-- Single exact ORDER BY v <-> q LIMIT 10 statements on a larger table
-- (bench/run-vector-bench with VECTOR_SCALE): psql variables scale_copy (a
-- binary COPY of (id, real[]) rows, bench/vector_copy.py --random) and the
-- settings bench.devices.  The index keeps vectors only (m = 0); queries are
-- 200 stored vectors with a little noise.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE TABLE big (id int PRIMARY KEY, v real[]);
COPY big FROM :'scale_copy' WITH (FORMAT binary);
CREATE TABLE big_q AS
SELECT row_number() OVER () AS id, (SELECT array_agg(x + (random() * 0.01)::real ORDER BY o) FROM unnest(v) WITH ORDINALITY u(x, o)) AS q
FROM (SELECT v FROM big WHERE id % 5003 = 1 LIMIT 200) s;
CREATE TABLE scale_results (method text, device text, queries int, ms_per_query float8, note text);
DO $$
DECLARE t0 timestamptz := clock_timestamp(); dev text; r record; ids int[]; n int;
BEGIN
  CREATE INDEX big_v ON big USING genie (v) WITH (m = 0);
  INSERT INTO scale_results VALUES ('build (m = 0)', NULL, NULL, extract(epoch FROM clock_timestamp() - t0) * 1000,
                                    format('%s rows, index %s MB', (SELECT count(*) FROM big),
                                           round(pg_relation_size('big_v') / 1048576.0, 1)));
  FOREACH dev IN ARRAY current_setting('bench.devices')::text[] LOOP
    PERFORM set_config('genie.device', dev, true);
    -- warm: the cache reads the vectors, the GPU copies them
    SELECT array_agg(id) INTO ids FROM (SELECT id FROM big ORDER BY v <-> (SELECT q FROM big_q WHERE id = 1) LIMIT 10) s;
    n := 0;
    t0 := clock_timestamp();
    FOR r IN SELECT q FROM big_q ORDER BY id LOOP
      SELECT array_agg(id) INTO ids FROM (SELECT id FROM big ORDER BY v <-> r.q LIMIT 10) s;
      n := n + 1;
    END LOOP;
    INSERT INTO scale_results VALUES ('ORDER BY v <-> q LIMIT 10 exact', dev, n,
                                      extract(epoch FROM clock_timestamp() - t0) * 1000 / n, 'plpgsql loop in one session');
  END LOOP;
  PERFORM set_config('enable_indexscan', 'off', true);
  n := 0;
  t0 := clock_timestamp();
  FOR r IN SELECT q FROM big_q ORDER BY id LIMIT 4 LOOP
    SELECT array_agg(id) INTO ids FROM (SELECT id FROM big ORDER BY v <-> r.q LIMIT 10) s;
    n := n + 1;
  END LOOP;
  INSERT INTO scale_results VALUES ('sequential scan ORDER BY v <-> q LIMIT 10', NULL, n,
                                    extract(epoch FROM clock_timestamp() - t0) * 1000 / n, 'no index');
END $$;
SELECT method, device, queries, round(ms_per_query::numeric, 3) AS ms_per_query, note FROM scale_results;
