-- Nearest vectors through SQL on Fashion-MNIST (issue 16), run by bench/run-vector-bench in one
-- session: psql variables copydir (fm_train.copy, fm_test.copy), devices ('{cpu,gpu}'),
-- sample (queries checked against a sequential scan), candidates ('{100,300,1000}').
-- Prints the index's size and build time, then one row per method: genie_knn of all
-- 10,000 test queries (k = 10) per genie.device, exact and LSH; single ORDER BY v <-> q
-- LIMIT 10 statements; the sequential scan (real[] <-> real[] on every row, what a
-- PostgreSQL user without an index gets); exactness on the sample and GPU = CPU on all.
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS genie;
CREATE TABLE fm (id int PRIMARY KEY, v real[]);
CREATE TABLE fq (id int PRIMARY KEY, q real[]);
\set train_copy :copydir '/fm_train.copy'
\set test_copy :copydir '/fm_test.copy'
COPY fm FROM :'train_copy' WITH (FORMAT binary);
COPY fq FROM :'test_copy' WITH (FORMAT binary);
VACUUM ANALYZE fm;
-- every test query as one real[][] (10000 x 784)
CREATE TABLE fq_batch AS SELECT array_agg(q ORDER BY id) AS a FROM fq;

CREATE TABLE results (method text, device text, params text, queries int, ms float8,
                      ms_per_query float8, queries_per_s float8, recall float8, note text);

-- build: the default index (m = 238 E2LSH keywords, width from a sample)
DO $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
  CREATE INDEX fm_v ON fm USING genie (v);
  INSERT INTO results VALUES ('build', NULL, 'm=238', NULL, extract(epoch FROM clock_timestamp() - t0) * 1000,
                              NULL, NULL, NULL,
                              format('index %s pages (%s MB), table %s MB', pg_relation_size('fm_v') / 8192,
                                     round(pg_relation_size('fm_v') / 1048576.0, 1),
                                     round(pg_total_relation_size('fm') / 1048576.0, 1)));
  t0 := clock_timestamp();
  CREATE INDEX fm_exact ON fm USING genie (v) WITH (m = 0);
  INSERT INTO results VALUES ('build', NULL, 'm=0', NULL, extract(epoch FROM clock_timestamp() - t0) * 1000,
                              NULL, NULL, NULL,
                              format('index %s pages (%s MB)', pg_relation_size('fm_exact') / 8192,
                                     round(pg_relation_size('fm_exact') / 1048576.0, 1)));
END $$;
-- the scans below use fm_v; fm_exact only shows the size of vectors alone
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'fm_exact'::regclass;

-- genie_knn of every test query into a table; the best of reps runs, in ms
CREATE FUNCTION knn_into(target text, k int, reps int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; best float8 := 1e300;
BEGIN
  FOR i IN 1..reps LOOP
    EXECUTE format('DROP TABLE IF EXISTS %I', target);
    t0 := clock_timestamp();
    EXECUTE format('CREATE UNLOGGED TABLE %I AS SELECT g.query_no, g.ctid AS row_ctid, g.distance FROM fq_batch b, genie_knn(''fm_v'', b.a, %s) g', target, k);
    best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
  RETURN best;
END $$;

-- the time of genie_knn alone (rows counted, not stored)
CREATE FUNCTION knn_ms(k int, reps int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; best float8 := 1e300; n bigint;
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    SELECT count(*) INTO n FROM fq_batch b, genie_knn('fm_v', b.a, k) g;
    best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1000);
  END LOOP;
  RETURN best;
END $$;

-- n single statements ORDER BY v <-> q LIMIT k, in ms per statement
CREATE FUNCTION single_ms(n int, k int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; r record; ids int[];
BEGIN
  t0 := clock_timestamp();
  FOR r IN SELECT q FROM fq ORDER BY id LIMIT n LOOP
    SELECT array_agg(id) INTO ids FROM (SELECT id FROM fm ORDER BY v <-> r.q LIMIT k) s;
  END LOOP;
  RETURN extract(epoch FROM clock_timestamp() - t0) * 1000 / n;
END $$;

-- recall@10 of a result table against the exact one (same query numbers)
CREATE FUNCTION recall_of(got text, exact text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE r float8;
BEGIN
  EXECUTE format('SELECT count(*)::float8 / (SELECT count(*) FROM %I) FROM %I g JOIN %I e USING (query_no, row_ctid)',
                 exact, got, exact) INTO r;
  RETURN r;
END $$;

-- queries whose distance lists differ between two result tables
CREATE FUNCTION lists_differ(a text, b text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM (SELECT query_no, array_agg(distance ORDER BY distance) d FROM %I GROUP BY 1) x
                  FULL JOIN (SELECT query_no, array_agg(distance ORDER BY distance) d FROM %I GROUP BY 1) y USING (query_no)
                  WHERE x.d IS DISTINCT FROM y.d', a, b) INTO r;
  RETURN r;
END $$;

SET max_parallel_workers_per_gather = 0;
DO $$
DECLARE
  dev text; c int; ms float8; nq int := 10000; sample int := current_setting('bench.sample')::int;
  bad bigint; t0 timestamptz; first_dev text;
BEGIN
  FOREACH dev IN ARRAY current_setting('bench.devices')::text[] LOOP
    PERFORM set_config('genie.device', dev, true);
    PERFORM set_config('genie.vector_search', 'exact', true);
    -- warm: the cache reads the vectors, the GPU copies them
    PERFORM knn_ms(10, 1);
    ms := knn_ms(10, 3);
    PERFORM knn_into('knn_' || dev, 10, 1);
    INSERT INTO results VALUES ('genie_knn exact', dev, 'k=10', nq, ms, ms / nq, nq / (ms / 1000), 1.0,
                                CASE WHEN first_dev IS NOT NULL THEN
                                  format('distance lists differing from %s: %s of %s', first_dev,
                                         lists_differ('knn_' || dev, 'knn_' || first_dev), nq) END);
    first_dev := coalesce(first_dev, dev);
    PERFORM single_ms(20, 10);
    ms := single_ms(500, 10);
    INSERT INTO results VALUES ('ORDER BY v <-> q LIMIT 10 exact', dev, 'one statement a query', 500, ms * 500, ms,
                                1000 / ms, 1.0, 'plpgsql loop in one session');
    PERFORM set_config('genie.vector_search', 'lsh', true);
    FOREACH c IN ARRAY current_setting('bench.candidates')::int[] LOOP
      PERFORM set_config('genie.lsh_candidates', c::text, true);
      PERFORM knn_ms(10, 1);
      ms := knn_into('knn_lsh', 10, 2);
      INSERT INTO results VALUES ('genie_knn lsh', dev, format('candidates=%s', c), nq, ms, ms / nq, nq / (ms / 1000),
                                  recall_of('knn_lsh', 'knn_' || first_dev), NULL);
    END LOOP;
    ms := single_ms(200, 10);
    INSERT INTO results VALUES ('ORDER BY v <-> q LIMIT 10 lsh', dev,
                                format('candidates=%s', current_setting('genie.lsh_candidates')), 200, ms * 200, ms,
                                1000 / ms, NULL, 'plpgsql loop in one session');
  END LOOP;
  PERFORM set_config('genie.vector_search', 'exact', true);

  -- the sequential scan (no index): the baseline, and the oracle of the sample
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  CREATE TEMP TABLE seq (query_no int, distance float8);
  t0 := clock_timestamp();
  INSERT INTO seq SELECT q.id, s.d FROM fq q,
    LATERAL (SELECT v <-> q.q AS d FROM fm ORDER BY v <-> q.q LIMIT 10) s
  WHERE q.id <= sample;
  ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
  INSERT INTO results VALUES ('sequential scan ORDER BY v <-> q LIMIT 10', NULL, 'no index', sample, ms, ms / sample,
                              1000 * sample / ms, 1.0, NULL);
  PERFORM set_config('enable_indexscan', 'on', true);
  PERFORM set_config('enable_bitmapscan', 'on', true);
  FOREACH dev IN ARRAY current_setting('bench.devices')::text[] LOOP
    EXECUTE format('SELECT count(*) FROM (SELECT query_no, array_agg(distance ORDER BY distance) d FROM knn_%s
                    WHERE query_no <= %s GROUP BY 1) x FULL JOIN (SELECT query_no, array_agg(distance ORDER BY distance) d
                    FROM seq GROUP BY 1) y USING (query_no) WHERE x.d IS DISTINCT FROM y.d', dev, sample) INTO bad;
    UPDATE results SET note = concat_ws('; ', note, format('exact against the sequential scan: %s of %s queries differ', bad, sample))
    WHERE method = 'genie_knn exact' AND device = dev;
  END LOOP;
END $$;

SELECT method, device, params, queries, round(ms::numeric, 1) AS ms, round(ms_per_query::numeric, 4) AS ms_per_query,
       round(queries_per_s::numeric) AS queries_per_s, round(recall::numeric, 4) AS recall, note
FROM results ORDER BY CASE method WHEN 'build' THEN 0 ELSE 1 END, device NULLS LAST, method, ms;
