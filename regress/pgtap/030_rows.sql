-- genie_row_ops: ORDER BY t <~> genie_ranges(...) LIMIT k and genie_ranges_topk equal
-- a sequential scan ranked by a plain SQL expression over the bucketized
-- values, on a random table of every supported type and on the Debian
-- package index of this machine.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
-- enable_seqscan = off below would make every plan JIT-compiled
SET LOCAL jit = off;
SELECT plan(55);

-- ---- the oracle: the documented score as plain SQL ------------------------

-- A column's value as the float8 the index compares.
CREATE FUNCTION pg_temp.num(col text, typ regtype) RETURNS text LANGUAGE sql AS $$
  SELECT CASE typ
    WHEN 'date'::regtype THEN format('((%s) - date ''2000-01-01'')::float8', col)
    WHEN 'timestamp'::regtype THEN
      format('(extract(epoch from (%s) - timestamp ''2000-01-01'') * 1000000)::float8', col)
    WHEN 'timestamptz'::regtype THEN
      format('(extract(epoch from (%s) - timestamptz ''2000-01-01 00:00:00+00'') * 1000000)::float8', col)
    ELSE format('(%s)::float8', col) END
$$;

-- A query bound (JSON number, string of the column's type, or null) as float8 SQL.
CREATE FUNCTION pg_temp.bound(b jsonb, typ regtype, upper bool) RETURNS text LANGUAGE sql AS $$
  SELECT CASE jsonb_typeof(b)
    WHEN 'null' THEN CASE WHEN upper THEN '''infinity''::float8' ELSE '''-infinity''::float8' END
    WHEN 'string' THEN pg_temp.num(format('%L::%s', b #>> '{}', typ), typ)
    ELSE format('(%s)::float8', b #>> '{}') END
$$;

-- sum over the query's attributes of weight * (the row's value falls in a covered bucket)
CREATE FUNCTION pg_temp.oracle(idx regclass, spec jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  a record; item jsonb; w int; lo text; hi text; cond text; terms text[] := '{}';
  bucket text;
BEGIN
  FOR a IN SELECT * FROM genie_index_attributes(idx) LOOP
    item := spec -> a.attribute;
    CONTINUE WHEN item IS NULL;
    w := 1;
    IF jsonb_typeof(item) = 'object' THEN
      w := coalesce((item ->> 'weight')::int, 1);
      item := coalesce(item -> 'range', item -> 'values');
    END IF;
    IF a.type IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype, 'bool'::regtype)
       OR (SELECT typtype FROM pg_type WHERE oid = a.type) = 'e' THEN
      IF jsonb_typeof(item) <> 'array' THEN item := jsonb_build_array(item); END IF;
      SELECT format('%I IN (%s)', a.attribute,
                    coalesce(string_agg(format('%L::%s', v, CASE WHEN a.type = 'bpchar'::regtype
                                                           THEN 'bpchar' ELSE a.type::text END), ', '), 'NULL'))
        INTO cond FROM jsonb_array_elements_text(item) v;
    ELSE
      IF jsonb_typeof(item) <> 'array' THEN item := jsonb_build_array(item, item); END IF;
      lo := pg_temp.bound(item -> 0, a.type, false);
      hi := pg_temp.bound(item -> 1, a.type, true);
      IF a.mode = 'buckets' THEN
        bucket := format('least(greatest(floor((%%s - %s::float8) / ((%s::float8 - %s::float8) / %s)), 0), %s - 1)',
                         a.lower, a.upper, a.lower, a.buckets, a.buckets);
        cond := format(bucket, pg_temp.num(quote_ident(a.attribute), a.type)) || ' BETWEEN ' ||
                format(bucket, lo) || ' AND ' || format(bucket, hi);
      ELSE
        cond := format('%s BETWEEN %s AND %s', pg_temp.num(quote_ident(a.attribute), a.type), lo, hi);
      END IF;
    END IF;
    -- greatest() and least() skip NULLs: a NULL attribute must not reach them
    terms := terms || format('(CASE WHEN %I IS NOT NULL AND %s THEN %s ELSE 0 END)', a.attribute, cond, w);
  END LOOP;
  RETURN CASE WHEN cardinality(terms) = 0 THEN '0' ELSE array_to_string(terms, ' + ') END;
END $$;

-- A random query around a random row: each attribute with probability 0.6, a
-- numeric range of up to `spread` of the column's 10-90% percentile span
-- (sometimes open at one end), one to three categorical values; some weighted.
CREATE FUNCTION pg_temp.random_spec(idx regclass, tbl regclass, spread float8) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  a record; spec jsonb := '{}'; item jsonb; rid tid; span float8; v text; lo jsonb; hi jsonb;
BEGIN
  EXECUTE format('SELECT ctid FROM %s OFFSET floor(random() * (SELECT count(*) FROM %s)) LIMIT 1',
                 tbl, tbl) INTO rid;
  FOR a IN SELECT * FROM genie_index_attributes(idx) LOOP
    CONTINUE WHEN random() < 0.4;
    IF a.type IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype, 'bool'::regtype)
       OR (SELECT typtype FROM pg_type WHERE oid = a.type) = 'e' THEN
      EXECUTE format('SELECT coalesce(jsonb_agg(DISTINCT v), ''[]'') FROM (SELECT %I::text AS v FROM %s
                      WHERE %I IS NOT NULL ORDER BY random() LIMIT %s) s',
                     a.attribute, tbl, a.attribute, 1 + floor(random() * 3)) INTO item;
    ELSE
      EXECUTE format('SELECT %I::text FROM %s WHERE ctid = $1', a.attribute, tbl) INTO v USING rid;
      IF v IS NULL OR v IN ('infinity', '-infinity') THEN
        EXECUTE format('SELECT %I::text FROM %s WHERE %I::text NOT IN (''infinity'', ''-infinity'')
                        ORDER BY random() LIMIT 1', a.attribute, tbl, a.attribute) INTO v;
      END IF;
      IF a.type IN ('date'::regtype, 'timestamp'::regtype, 'timestamptz'::regtype) THEN
        EXECUTE format('SELECT to_jsonb($1::%s - $2 * interval ''1 day''), to_jsonb($1::%s + $3 * interval ''1 day'')',
                       a.type, a.type)
          INTO lo, hi USING v, floor(random() * 300 * spread), floor(random() * 300 * spread);
        IF a.type = 'date'::regtype THEN
          lo := to_jsonb((lo #>> '{}')::date); hi := to_jsonb((hi #>> '{}')::date);
        END IF;
      ELSE
        EXECUTE format('SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY %I::float8)
                               - percentile_cont(0.1) WITHIN GROUP (ORDER BY %I::float8) FROM %s
                        WHERE %I::float8 > ''-infinity'' AND %I::float8 < ''infinity''',
                       a.attribute, a.attribute, tbl, a.attribute, a.attribute) INTO span;
        lo := to_jsonb(round(v::numeric - (random() * spread * span)::numeric, 2));
        hi := to_jsonb(round(v::numeric + (random() * spread * span)::numeric, 2));
      END IF;
      IF random() < 0.1 THEN lo := 'null'; ELSIF random() < 0.1 THEN hi := 'null'; END IF;
      item := jsonb_build_array(lo, hi);
      IF random() < 0.1 THEN item := hi; IF item = 'null' THEN item := lo; END IF; END IF;
      IF item = 'null' THEN item := jsonb_build_array(lo, hi); END IF;
    END IF;
    IF random() < 0.2 THEN
      item := jsonb_build_object(CASE WHEN a.type IN ('text'::regtype, 'varchar'::regtype, 'bpchar'::regtype,
                                                      'bool'::regtype)
                                        OR (SELECT typtype FROM pg_type WHERE oid = a.type) = 'e'
                                      THEN 'values' ELSE 'range' END,
                                 item, 'weight', 1 + floor(random() * 3));
    END IF;
    spec := spec || jsonb_build_object(a.attribute, item);
  END LOOP;
  RETURN spec;
END $$;

-- For each query and k: the oracle's scores of the rows the index scan returns,
-- in its order, against the oracle's own top k.  Counts the mismatches.
CREATE FUNCTION pg_temp.topk_mismatches(idx regclass, tbl regclass, specs jsonb[], ks int[])
RETURNS int LANGUAGE plpgsql AS $$
DECLARE
  spec jsonb; k int; expr text; got int[]; want int[]; bad int := 0;
BEGIN
  FOREACH spec IN ARRAY specs LOOP
    expr := pg_temp.oracle(idx, spec);
    FOREACH k IN ARRAY ks LOOP
      SET LOCAL enable_seqscan = off;
      SET LOCAL enable_sort = off;
      EXECUTE format('SELECT array_agg(s) FROM (SELECT %s AS s FROM %s t ORDER BY t <~> genie_ranges(%L, %L) LIMIT %s) x',
                     expr, tbl, idx, spec, k) INTO got;
      RESET enable_seqscan;
      RESET enable_sort;
      EXECUTE format('SELECT array_agg(s ORDER BY s DESC) FROM (SELECT %s AS s FROM %s ORDER BY 1 DESC LIMIT %s) x',
                     expr, tbl, k) INTO want;
      IF got IS DISTINCT FROM want THEN
        RAISE NOTICE 'spec % k %: got % want %', spec, k, got, want;
        bad := bad + 1;
      END IF;
    END LOOP;
  END LOOP;
  RETURN bad;
END $$;

-- genie_match_count(row, q), which <~> negates, against the oracle on every row.
CREATE FUNCTION pg_temp.score_mismatches(idx regclass, tbl regclass, specs jsonb[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE spec jsonb; n bigint; bad bigint := 0;
BEGIN
  FOREACH spec IN ARRAY specs LOOP
    EXECUTE format('SELECT count(*) FROM %s t WHERE genie_match_count(t, genie_ranges(%L, %L)) <> %s',
                   tbl, idx, spec, pg_temp.oracle(idx, spec)) INTO n;
    bad := bad + n;
  END LOOP;
  RETURN bad;
END $$;

CREATE FUNCTION pg_temp.plan_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; plan text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP plan := plan || line || E'\n'; END LOOP;
  RETURN plan;
END $$;

-- ---- a random table of every supported type (fixed seed) ------------------
DO $$ BEGIN PERFORM setseed(0.305); END $$;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'ecstatic');
CREATE TABLE mix (id int PRIMARY KEY, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8,
                  nu numeric(12, 2), d date, ts timestamp, tz timestamptz, tx text,
                  vc varchar(20), ch char(6), b bool, m mood, note text);
INSERT INTO mix
SELECT i,
       CASE WHEN random() < 0.05 THEN NULL ELSE floor(random() * 40) END,
       CASE WHEN random() < 0.05 THEN NULL ELSE floor(power(random(), 2) * 100000) END,
       CASE WHEN random() < 0.05 THEN NULL WHEN i % 500 = 0 THEN 9000000000000000 * sign(random() - 0.5)
            ELSE floor(random() * 1e12) END,
       CASE WHEN random() < 0.05 THEN NULL ELSE floor(random() * 21) / 2 END,
       CASE WHEN random() < 0.05 THEN NULL WHEN i % 700 = 0 THEN 'infinity' WHEN i % 701 = 0 THEN '-infinity'
            ELSE (random() - 0.5) * 2000 END,
       CASE WHEN random() < 0.05 THEN NULL ELSE round((random() * 50000)::numeric, 2) END,
       CASE WHEN random() < 0.05 THEN NULL ELSE date '2005-01-01' + floor(random() * 7000)::int END,
       CASE WHEN random() < 0.05 THEN NULL ELSE timestamp '2020-01-01' + random() * interval '900 days' END,
       CASE WHEN random() < 0.05 THEN NULL ELSE timestamptz '2021-06-01 00:00+00' + random() * interval '300 days' END,
       CASE WHEN random() < 0.05 THEN NULL ELSE 'word' || floor(random() * 30) END,
       CASE WHEN random() < 0.05 THEN NULL ELSE (ARRAY['α', 'β', 'γ', 'Δ', ''])[1 + floor(random() * 5)] END,
       CASE WHEN random() < 0.05 THEN NULL ELSE 'c' || floor(random() * 8) END,
       CASE WHEN random() < 0.05 THEN NULL ELSE random() < 0.3 END,
       CASE WHEN random() < 0.05 THEN NULL ELSE (enum_range(NULL::mood))[1 + floor(random() * 4)] END,
       'not indexed'
FROM generate_series(1, 4000) AS i;
INSERT INTO mix (id) VALUES (0);		-- every attribute NULL
CREATE INDEX mix_rows ON mix USING genie ((mix))
  WITH (attributes = 'i2, i4, i8, f4, f8, nu, d, ts, tz, tx, vc, ch, b, m', buckets = 64);
CREATE INDEX mix_bounded ON mix USING genie ((mix))
  WITH (attributes = 'i4 0..50000, f8 -100..100, d 2010-01-01..2015-01-01, tx', buckets = 16);
ANALYZE mix;

SELECT is((SELECT array_agg(mode ORDER BY attribute) FROM genie_index_attributes('mix_rows')),
          -- b, ch, d, f4, f8, i2, i4, i8, m, nu, ts, tx, tz, vc
          ARRAY['values', 'values', 'buckets', 'values', 'buckets', 'values', 'buckets', 'buckets', 'values',
                'buckets', 'buckets', 'values', 'buckets', 'values'],
          'few distinct values keep exact values; wide numeric attributes get buckets; categorical are exact');
SELECT is((SELECT array[lower, upper] FROM genie_index_attributes('mix_rows') WHERE attribute = 'f8'),
          (SELECT array[min(f8), max(f8)] FROM mix WHERE f8 > '-infinity' AND f8 < 'infinity'),
          'bounds are the smallest and largest finite values of the build');
SELECT is((SELECT array[lower, upper, buckets] FROM genie_index_attributes('mix_bounded') WHERE attribute = 'd'),
          ARRAY[(date '2010-01-01' - date '2000-01-01')::float8, (date '2015-01-01' - date '2000-01-01')::float8, 16],
          'bounds given in the attribute list are read as the column''s type');
SELECT is((SELECT distinct_values FROM genie_index_attributes('mix_rows') WHERE attribute = 'm'), 4,
          'an enum has one code per label');
SELECT alike(pg_temp.plan_of($$SELECT id FROM mix ORDER BY mix <~> genie_ranges('mix_rows', '{"i4": [10, 20]}') LIMIT 5$$),
             '%Index Scan using mix_rows%', 'the planner orders by <~> through the row index');

CREATE TABLE mix_specs AS
SELECT q, pg_temp.random_spec('mix_rows', 'mix', CASE WHEN q % 3 = 0 THEN 0.02 ELSE 0.3 END) AS spec
FROM generate_series(1, 40) AS q;
CREATE TABLE mix_bounded_specs AS
SELECT q, pg_temp.random_spec('mix_bounded', 'mix', 0.5) AS spec FROM generate_series(1, 20) AS q;

SELECT is(pg_temp.score_mismatches('mix_rows', 'mix', (SELECT array_agg(spec) FROM mix_specs)), 0::bigint,
          'genie_match_count(row, q) equals the SQL expression on every row, 40 random queries');
SELECT is(pg_temp.topk_mismatches('mix_rows', 'mix', (SELECT array_agg(spec) FROM mix_specs), '{1, 10, 100}'), 0,
          'ORDER BY mix <~> q LIMIT k equals the SQL expression''s top k, 40 random queries, k in 1, 10, 100');
SELECT is(pg_temp.topk_mismatches('mix_rows', 'mix', (SELECT array_agg(spec) FROM mix_specs WHERE q <= 5), '{5000}'), 0,
          'a LIMIT beyond the table returns every row in score order');
SELECT is(pg_temp.score_mismatches('mix_bounded', 'mix', (SELECT array_agg(spec) FROM mix_bounded_specs)), 0::bigint,
          'given bounds: out-of-range values fall into the edge buckets, as the SQL expression says');
SELECT is(pg_temp.topk_mismatches('mix_bounded', 'mix', (SELECT array_agg(spec) FROM mix_bounded_specs), '{1, 25, 300}'), 0,
          'given bounds: index top k equals the SQL expression''s, 20 random queries');

-- ---- edge cases -------------------------------------------------------------
SELECT is(genie_match_count(r, genie_ranges('mix_rows', '{"i2": [null, null], "tx": ["word1"], "b": [true, false]}')), 0,
          'a row whose attributes are all NULL matches nothing')
FROM mix r WHERE id = 0;
SELECT is((SELECT count(*) FROM (SELECT id FROM mix ORDER BY mix <~> genie_ranges('mix_rows', '{}') LIMIT 7) s), 7::bigint,
          'a query with no attributes returns k rows');
SELECT is((SELECT max(genie_match_count(mix, genie_ranges('mix_rows', '{}'))) FROM mix), 0,
          'a query with no attributes scores 0');
SELECT is((SELECT array_agg(genie_match_count(mix, q)) FROM mix, genie_ranges('mix_rows', '{"i2": [3, 3], "f4": 2.5}') q
           WHERE id IN (SELECT id FROM mix WHERE i2 = 3 AND f4 = 2.5 LIMIT 1)), ARRAY[2],
          'a single value is the range [v, v]');
SELECT is(genie_match_count(r, genie_ranges('mix_rows', jsonb_build_object('f8', jsonb_build_array(1e300, null)))), 1,
          '+infinity falls into the top bucket, which an open range reaches')
FROM mix r WHERE f8 = 'infinity' LIMIT 1;
SELECT is((SELECT min(genie_match_count(mix, genie_ranges('mix_rows', '{"vc": ["α", ""], "ch": "c3    "}'))) FROM mix
           WHERE vc IN ('α', '') AND ch = 'c3'), 2,
          'varchar values match exactly, the empty string too; char ignores trailing blanks');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '{"note": ["x"]}')$$, '42703', NULL,
                 'a query naming an attribute the index does not have is an error');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '{"i4": [20, 10]}')$$, '22023', NULL, 'an empty range is an error');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '{"i4": {"range": [1, 2], "weight": 0}}')$$, '22023', NULL,
                 'weights are at least 1');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '{"m": ["furious"]}')$$, '22P02', NULL,
                 'categorical values are read as the column''s type');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '[1, 2]')$$, '22023', NULL, 'the query is a JSON object');
SELECT throws_ok($$CREATE INDEX ON mix USING genie ((mix)) WITH (attributes = 'i4, nope')$$, '42703', NULL,
                 'an unknown column in the attribute list is an error');
SELECT throws_ok($$CREATE INDEX ON mix USING genie ((mix)) WITH (attributes = 'tx 1..2')$$, '22023', NULL,
                 'a categorical attribute cannot have bounds');
SELECT throws_ok($$CREATE INDEX ON mix USING genie ((mix)) WITH (attributes = 'i4 5..5')$$, '22023', NULL,
                 'bounds need lo < hi');
SELECT throws_ok($$CREATE INDEX ON mix USING genie ((mix)) WITH (attributes = 'i4 5')$$, '22023', NULL,
                 'bounds are written lo..hi');
SELECT throws_ok($$SELECT genie_ranges('mix_rows', '{"d": [7000, 7100]}')$$, '22023', NULL,
                 'dates are given as strings, not day numbers');
SELECT is((r <~> genie_ranges('mix_rows', '{"i4": [-5, -1]}'))::text, '0', 'a score of 0 orders as 0, not -0')
FROM mix r WHERE id = 1;
-- numerics beyond float8's range are infinities, not errors
CREATE TABLE huge (id int, n numeric);
INSERT INTO huge VALUES (1, 1e400), (2, -1e400), (3, 5), (4, 5.5);
CREATE INDEX huge_rows ON huge USING genie ((huge)) WITH (buckets = 2);
SELECT is((SELECT array_agg(id) FROM (SELECT id FROM huge ORDER BY huge <~> genie_ranges('huge_rows', '{"n": [100, null]}'), id LIMIT 2) s),
          ARRAY[1, 4], 'a numeric beyond float8 falls into an edge bucket: 1e400 and the largest value match [100, null]');

-- two row indexes on one table: the planner takes the one the query was made for
SELECT alike(pg_temp.plan_of($$SELECT id FROM mix ORDER BY mix <~> genie_ranges('mix_bounded', '{"i4": [1, 2]}') LIMIT 5$$),
             '%Index Scan using mix_bounded%', 'a query made for mix_bounded is served by mix_bounded');
SELECT alike(pg_temp.plan_of($$SELECT id FROM mix ORDER BY mix <~> genie_ranges('mix_rows', '{"i4": [1, 2]}') LIMIT 5$$),
             '%Index Scan using mix_rows%', 'a query made for mix_rows is served by mix_rows');

-- ---- inserts after the build keep the stored bounds ----------------------
CREATE TABLE bounds_before AS SELECT * FROM genie_index_attributes('mix_rows');
INSERT INTO mix (id, i2, i4, i8, f4, f8, nu, d, ts, tz, tx, vc, ch, b, m)
SELECT 10000 + i, 1000 + i % 3, 10000000 * (i % 2 * 2 - 1), i, 0.25, 1e9, -5, date '1900-01-01', timestamp '2030-01-01',
       NULL, 'fresh' || i % 4, 'ω', 'new', NULL, 'ecstatic'
FROM generate_series(1, 300) AS i;
DELETE FROM mix WHERE id % 13 = 0;
SELECT is((SELECT count(*) FROM (SELECT * FROM genie_index_attributes('mix_rows') EXCEPT
                                 SELECT * FROM bounds_before) s), 5::bigint,
          'inserts add dictionary values (i2, f4, tx, vc, ch) but leave every bound as built');
SELECT is(pg_temp.score_mismatches('mix_rows', 'mix', (SELECT array_agg(spec) FROM mix_specs WHERE q <= 20)), 0::bigint,
          'after inserts and deletes: genie_match_count equals the SQL expression');
SELECT is(pg_temp.topk_mismatches('mix_rows', 'mix',
            (SELECT array_agg(spec) FROM mix_specs WHERE q <= 20) ||
            ARRAY['{"tx": ["fresh1", "word3"], "i2": [999, 1001], "i4": [null, -1]}'::jsonb,
                  '{"f4": [0.2, 0.3], "vc": "ω", "d": ["1800-01-01", "1950-01-01"]}'::jsonb],
            '{1, 10, 400}'), 0,
          'after inserts and deletes: index top k equals the SQL expression''s, new values included');
SELECT is((SELECT array_agg(DISTINCT id >= 10000) FROM (SELECT id FROM mix
             ORDER BY mix <~> genie_ranges('mix_rows', '{"tx": "fresh2", "i2": 1002}') LIMIT 50) s), ARRAY[true],
          'a value first seen after the build is found through the index');
SELECT is((SELECT count(*) FROM genie_ranges_topk('mix_rows',
             (SELECT array_agg(genie_ranges('mix_rows', spec) ORDER BY q) FROM mix_specs), 15) g
           JOIN mix_specs s ON s.q = g.query_no JOIN mix t ON t.ctid = g.ctid
           WHERE g.score <> genie_match_count(t, genie_ranges('mix_rows', s.spec))), 0::bigint,
          'genie_ranges_topk: every score is the row''s match count');
SELECT is((SELECT array_agg(score ORDER BY query_no, score DESC) FROM genie_ranges_topk('mix_rows',
             (SELECT array_agg(genie_ranges('mix_rows', spec) ORDER BY q) FROM mix_specs), 15)),
          (SELECT array_agg(s ORDER BY q, s DESC) FROM mix_specs,
             LATERAL (SELECT genie_match_count(t, genie_ranges('mix_rows', spec)) s FROM mix t
                      ORDER BY 1 DESC LIMIT 15) x),
          'genie_ranges_topk equals each query''s top 15 by a sequential scan');
SELECT is(genie_ranges('mix_rows', '{"tx": ["a\"b"], "i4": [1, null], "d": {"range": ["2010-01-01", "2010-02-01"], "weight": 2}}')::text::genie_ranges::text,
          genie_ranges('mix_rows', '{"tx": ["a\"b"], "i4": [1, null], "d": {"range": ["2010-01-01", "2010-02-01"], "weight": 2}}')::text,
          'the text form reads back to the same query');
SELECT throws_ok($$SELECT * FROM genie_topk('mix_rows', ARRAY['{1}'::genie_query], 5)$$, '42809',
                 'genie_topk cannot search genie index "mix_rows", which is of operator class genie_row_ops',
                 'genie_topk refuses a row index (the hint names genie_ranges_topk)');
CREATE TABLE int4_sets (a int4[]);
CREATE INDEX int4_sets_a ON int4_sets USING genie (a);
SELECT throws_ok($$SELECT * FROM genie_ranges_topk('int4_sets_a', ARRAY[genie_ranges('mix_rows', '{"i4": [1, 5]}')], 5)$$,
                 '42809', NULL, 'genie_ranges_topk refuses an index that is not a row index');
-- equality and hashing of genie_ranges: DISTINCT, GROUP BY, IN (the text form is the oracle)
CREATE TEMP TABLE rvals AS SELECT genie_ranges('mix_rows', spec) AS r FROM mix_specs, generate_series(1, 3);
SELECT is((SELECT count(DISTINCT r) FROM rvals), (SELECT count(DISTINCT r::text) FROM rvals),
          'count(DISTINCT genie_ranges) equals count(DISTINCT its text)');
SELECT is((SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM rvals GROUP BY r) g),
          (SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM rvals GROUP BY r::text) g),
          'GROUP BY genie_ranges gives the groups of its text');
SELECT is((SELECT count(*) FROM rvals WHERE r IN (SELECT genie_ranges('mix_rows', spec) FROM mix_specs WHERE q <= 2)),
          (SELECT count(*) FROM rvals WHERE r::text IN (SELECT genie_ranges('mix_rows', spec)::text FROM mix_specs WHERE q <= 2)),
          'genie_ranges IN (subquery)');
-- a query's value does not depend on the dictionary's size at the time it was made
CREATE TEMP TABLE before_insert AS SELECT genie_ranges('mix_rows', '{"tx": ["word3"], "i4": [1, 50]}') AS q;
INSERT INTO mix (id, tx) VALUES (99999, 'a brand new value for the dictionary');
SELECT ok((SELECT q FROM before_insert) = genie_ranges('mix_rows', '{"tx": ["word3"], "i4": [1, 50]}'),
          'the same query made before and after the dictionary grew is equal');
CREATE ROLE genie_test_owner_check;
SET LOCAL ROLE genie_test_owner_check;
SELECT throws_ok($$SELECT genie_index_check('mix_rows')$$, '42501', NULL,
                 'genie_index_check is for superusers and whom they grant it to, as amcheck');
RESET ROLE;
-- a value read before its index exists (pg_restore loads data first) waits unbound
CREATE TABLE kept AS SELECT '{"index": "public.later_r", "ranges": {"n": [2, 4], "t": ["b"]}}'::genie_ranges AS q;
SELECT is((SELECT q::text FROM kept), '{"index": "public.later_r", "ranges": {"n": [2, 4], "t": ["b"]}}',
          'a genie_ranges value for an index that does not exist yet keeps its text');
CREATE TABLE later (n int, t text);
INSERT INTO later SELECT i, chr(97 + i % 3) FROM generate_series(1, 30) i;
SELECT throws_ok($$SELECT genie_match_count(l, (SELECT q FROM kept)) FROM later l$$, '42P01', NULL,
                 'using it before the index exists names the missing index');
CREATE INDEX later_r ON later USING genie ((later));
SELECT is((SELECT array_agg(genie_match_count(l, (SELECT q FROM kept)) ORDER BY n) FROM later l),
          (SELECT array_agg(((n BETWEEN 2 AND 4)::int + (t = 'b')::int) ORDER BY n) FROM later),
          'once the index exists the value is made against it and scores rows');
SELECT is((SELECT array_agg(n) FROM (SELECT n FROM later ORDER BY later <~> (SELECT q FROM kept), n LIMIT 3) x),
          ARRAY[4, 1, 2], 'and orders rows by it (4 matches both attributes, then the ties by n)');
CREATE ROLE genie_rows_reader;
GRANT SELECT ON mix TO genie_rows_reader;
SET LOCAL ROLE genie_rows_reader;
SELECT throws_ok($$SELECT * FROM genie_index_attributes('mix_rows')$$, '42501', NULL,
                 'genie_index_attributes (bounds and counts of every row) needs ownership or pg_stat_scan_tables');
RESET ROLE;
CREATE TABLE saved AS SELECT genie_ranges('mix_rows', '{"i4": [1, 5000]}') AS q;
REINDEX INDEX mix_rows;
SELECT throws_ok($$SELECT id FROM mix ORDER BY mix <~> (SELECT q FROM saved) LIMIT 1$$, '22023', NULL,
                 'a query made before REINDEX is refused by the rebuilt index')
FROM (SELECT set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)) s;
RESET enable_seqscan;
RESET enable_sort;

-- ---- the Debian package index of this machine ------------------------------
CREATE TABLE packages (package text, version text, section text, priority text, installed_size int,
                       maintainer text, architecture text, source text);
COPY packages FROM PROGRAM $$
  for f in /var/lib/apt/lists/*_Packages*; do /usr/lib/apt/apt-helper cat-file "$f"; done |
  awk -F': ' 'BEGIN { OFS = "\t" }
    /^Package: / { p = $2 } /^Version: / { v = $2 } /^Section: / { s = $2 } /^Priority: / { pr = $2 }
    /^Installed-Size: / { is = $2 } /^Maintainer: / { m = $2 } /^Architecture: / { a = $2 }
    /^Source: / { src = $2; sub(/ .*/, "", src) }
    /^$/ { if (p != "") { gsub(/\\/, "", m);
             print p, v, (s == "" ? "\\N" : s), (pr == "" ? "\\N" : pr), (is == "" ? "\\N" : is), m, a,
                   (src == "" ? p : src) }
           p = v = s = pr = is = m = a = src = "" }'
$$;
SELECT cmp_ok((SELECT count(*) FROM packages), '>', 10000::bigint, 'the package index is loaded');
CREATE INDEX packages_rows ON packages USING genie ((packages))
  WITH (attributes = 'section, priority, installed_size, maintainer, architecture, source', buckets = 1024);
SELECT is((SELECT array_agg(mode ORDER BY attribute) FROM genie_index_attributes('packages_rows')),
          ARRAY['values', 'buckets', 'values', 'values', 'values', 'values'],
          'packages: installed size in buckets, the categorical attributes exact');
-- the paper's workload: each numeric attribute [v - 50, v + 50] buckets around a random row's value
CREATE TABLE package_specs AS
SELECT q, jsonb_strip_nulls(jsonb_build_object(
         'installed_size', jsonb_build_array(p.installed_size - 50 * w, p.installed_size + 50 * w),
         'section', p.section, 'priority', p.priority, 'maintainer', p.maintainer,
         'architecture', CASE WHEN q % 2 = 0 THEN to_jsonb(p.architecture) END,
         'source', CASE WHEN q % 3 = 0 THEN to_jsonb(p.source) END)) AS spec
FROM (SELECT row_number() OVER () AS q, * FROM (SELECT * FROM packages WHERE installed_size IS NOT NULL
      ORDER BY md5(package || version || architecture) LIMIT 30) r) p,
     (SELECT (upper - lower) / buckets AS w FROM genie_index_attributes('packages_rows')
      WHERE attribute = 'installed_size') b;
SELECT is(pg_temp.score_mismatches('packages_rows', 'packages', (SELECT array_agg(spec) FROM package_specs WHERE q <= 10)),
          0::bigint, 'packages: genie_match_count equals the SQL expression on every row');
SELECT is(pg_temp.topk_mismatches('packages_rows', 'packages', (SELECT array_agg(spec) FROM package_specs), '{1, 10, 100}'),
          0, 'packages: index top k equals the SQL expression''s, 30 queries, k in 1, 10, 100');
SELECT is((SELECT array_agg(score ORDER BY query_no, score DESC) FROM genie_ranges_topk('packages_rows',
             (SELECT array_agg(genie_ranges('packages_rows', spec) ORDER BY q) FROM package_specs), 100)),
          (SELECT array_agg(s ORDER BY q, s DESC) FROM package_specs,
             LATERAL (SELECT genie_match_count(t, genie_ranges('packages_rows', spec)) s FROM packages t
                      ORDER BY 1 DESC LIMIT 100) x),
          'packages: genie_ranges_topk of the 30 queries equals the sequential scans');

SELECT * FROM finish();
ROLLBACK;
