-- Range-tuple scoring benchmark (issue 5), after the GENIE paper's relational
-- workload (section V-C): the Debian package index duplicated with noise to
-- at least 1M rows, as the paper duplicated Adult 20 times; 1024 queries made
-- from random rows, each numeric attribute [v - 50, v + 50] buckets around
-- the row's value and each categorical attribute the row's value; top k = 100.
--   genie_ranges_topk (one batch), ORDER BY t <~> q LIMIT k through the index (query
--   by query), and a sequential scan ORDER BY <the score as an SQL expression>
--   DESC LIMIT k, side by side in one session.
-- psql variables: packages (TSV of bench/packages-tsv), copies, devices
-- (genie.device values for the index, e.g. 'cpu,gpu'), seq_queries (queries
-- timed for the sequential scan), orderby_queries (for ORDER BY via the index).
\set ON_ERROR_STOP 1
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION genie;

CREATE TABLE base (package text, version text, section text, priority text, installed_size int,
                   size bigint, depends int, maintainer text, architecture text, source text);
COPY base FROM :'packages';
SELECT setseed(0.1999);
-- copy c of a row: sizes within +-10 %, one dependency more or less now and then
CREATE TABLE packages AS
SELECT b.package, b.version, b.section, b.priority,
       CASE WHEN c = 0 THEN installed_size ELSE round(installed_size * (0.9 + 0.2 * random()))::int END AS installed_size,
       CASE WHEN c = 0 THEN size ELSE round(size * (0.9 + 0.2 * random()))::bigint END AS size,
       CASE WHEN c = 0 OR random() < 0.8 THEN depends ELSE greatest(depends + (random() < 0.5)::int * 2 - 1, 0) END AS depends,
       b.maintainer, b.architecture, b.source
FROM base b, generate_series(0, :copies - 1) AS c;
DROP TABLE base;
\timing on
CREATE INDEX packages_rows ON packages USING genie ((packages))
  WITH (attributes = 'section, priority, installed_size, size, depends, maintainer, architecture, source',
        buckets = 1024);
\timing off
VACUUM ANALYZE packages;
SELECT count(*) AS rows, pg_size_pretty(pg_relation_size('packages')) AS table_size,
       pg_size_pretty(pg_relation_size('packages_rows')) AS index_size FROM packages;
SELECT * FROM genie_index_attributes('packages_rows');

-- 1024 queries: each attribute of a random row, numeric ones +- 50 buckets
CREATE TABLE queries AS
SELECT q, jsonb_strip_nulls(jsonb_build_object(
         'section', p.section, 'priority', p.priority, 'maintainer', p.maintainer,
         'architecture', p.architecture, 'source', p.source,
         'installed_size', jsonb_build_array(p.installed_size - 50 * w.installed_size, p.installed_size + 50 * w.installed_size),
         'size', jsonb_build_array(p.size - 50 * w.size, p.size + 50 * w.size),
         'depends', jsonb_build_array(p.depends - 50 * w.depends, p.depends + 50 * w.depends))) AS spec
FROM (SELECT row_number() OVER () AS q, * FROM packages TABLESAMPLE BERNOULLI (1) REPEATABLE (7) LIMIT 1024) p,
     (SELECT max((upper - lower) / buckets) FILTER (WHERE attribute = 'installed_size') AS installed_size,
             max((upper - lower) / buckets) FILTER (WHERE attribute = 'size') AS size,
             -- depends keeps exact values: 50 "buckets" are 50 values
             coalesce(max((upper - lower) / buckets) FILTER (WHERE attribute = 'depends'), 1) AS depends
      FROM genie_index_attributes('packages_rows')) w;

-- the score as a plain SQL expression over the bucketized values
CREATE FUNCTION score_sql(spec jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a record; item jsonb; cond text; b text; terms text[] := '{}';
BEGIN
  FOR a IN SELECT * FROM genie_index_attributes('packages_rows') LOOP
    item := spec -> a.attribute;
    CONTINUE WHEN item IS NULL;
    IF a.type = 'text'::regtype THEN
      cond := format('%I = %L', a.attribute, item #>> '{}');
    ELSIF a.mode = 'buckets' THEN
      b := format('least(greatest(floor((%%s - %s::float8) / ((%s::float8 - %s::float8) / %s)), 0), %s - 1)',
                  a.lower, a.upper, a.lower, a.buckets, a.buckets);
      cond := format('%I IS NOT NULL AND ', a.attribute) || format(b, quote_ident(a.attribute) || '::float8') ||
              ' BETWEEN ' || format(b, (item ->> 0) || '::float8') || ' AND ' || format(b, (item ->> 1) || '::float8');
    ELSE
      cond := format('%I::float8 BETWEEN %s AND %s', a.attribute, item ->> 0, item ->> 1);
    END IF;
    terms := terms || format('(%s)::int', cond);
  END LOOP;
  RETURN array_to_string(terms, ' + ');
END $$;

CREATE TABLE results (method text, device text, queries int, batch_ms numeric, agree text);
CREATE TABLE truth (q int, scores int[]);

-- genie_ranges_topk: the whole batch in one call, per device
CREATE FUNCTION run_topk(device text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ms numeric; qs genie_ranges[];
BEGIN
  PERFORM set_config('genie.device', device, false);
  SELECT array_agg(genie_ranges('packages_rows', spec) ORDER BY q) INTO qs FROM queries;
  PERFORM count(*) FROM genie_ranges_topk('packages_rows', qs[1:8], 100);	-- load the index on the device
  t0 := clock_timestamp();
  CREATE TEMP TABLE topk_out AS SELECT query_no, score FROM genie_ranges_topk('packages_rows', qs, 100);
  ms := extract(epoch from clock_timestamp() - t0) * 1000;
  IF NOT EXISTS (SELECT 1 FROM truth) THEN
    INSERT INTO truth SELECT query_no, array_agg(score ORDER BY score DESC) FROM topk_out GROUP BY 1;
    INSERT INTO results VALUES ('genie_ranges_topk (batch)', device, 1024, round(ms, 1), 'reference');
  ELSE
    INSERT INTO results SELECT 'genie_ranges_topk (batch)', device, 1024, round(ms, 1),
      (SELECT count(*) FILTER (WHERE t.scores = o.s) || '/' || count(*)
       FROM truth t JOIN (SELECT query_no, array_agg(score ORDER BY score DESC) s FROM topk_out GROUP BY 1) o
         ON o.query_no = t.q);
  END IF;
  DROP TABLE topk_out;
END $$;

-- ORDER BY t <~> q LIMIT 100 through the index, one query at a time
CREATE FUNCTION run_orderby(device text, n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ms numeric; s int[]; good int := 0; r record;
BEGIN
  PERFORM set_config('genie.device', device, false);
  SET LOCAL enable_seqscan = off;
  -- the disabled sequential scan's cost would make every plan JIT-compiled
  SET LOCAL jit = off;
  t0 := clock_timestamp();
  FOR r IN SELECT q, genie_ranges('packages_rows', spec) AS qr FROM queries WHERE q <= n ORDER BY q LOOP
    SELECT array_agg(genie_match_count(x, r.qr) ORDER BY genie_match_count(x, r.qr) DESC) INTO s
    FROM (SELECT p AS x FROM packages p ORDER BY p <~> r.qr LIMIT 100) y;
    good := good + (s = (SELECT scores FROM truth WHERE q = r.q))::int;
  END LOOP;
  ms := extract(epoch from clock_timestamp() - t0) * 1000;
  INSERT INTO results VALUES (format('ORDER BY <~> LIMIT 100 (%s queries, scaled)', n), device, 1024,
                              round(ms * 1024 / n, 1), good || '/' || n);
END $$;

-- the sequential scan ranked by the SQL expression
CREATE FUNCTION run_seqscan(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ms numeric; s int[]; good int := 0; r record;
BEGIN
  t0 := clock_timestamp();
  FOR r IN SELECT q, spec FROM queries WHERE q <= n ORDER BY q LOOP
    EXECUTE format('SELECT array_agg(s ORDER BY s DESC) FROM (SELECT %s AS s FROM packages ORDER BY 1 DESC LIMIT 100) x',
                   score_sql(r.spec)) INTO s;
    good := good + (s = (SELECT scores FROM truth WHERE q = r.q))::int;
  END LOOP;
  ms := extract(epoch from clock_timestamp() - t0) * 1000;
  INSERT INTO results VALUES (format('seq scan ORDER BY score expr (%s queries, scaled)', n), 'cpu', 1024,
                              round(ms * 1024 / n, 1), good || '/' || n);
END $$;

SELECT run_topk(d) FROM unnest(string_to_array(:'devices', ',')) AS d;
SELECT run_orderby(d, :orderby_queries) FROM unnest(string_to_array(:'devices', ',')) AS d;
SELECT run_seqscan(:seq_queries);

SELECT method, device, queries, batch_ms, round(1000 * queries / batch_ms, 1) AS queries_per_s,
       round(batch_ms / (SELECT min(batch_ms) FROM results), 1) AS x_slower_than_best, agree
FROM results ORDER BY batch_ms;
