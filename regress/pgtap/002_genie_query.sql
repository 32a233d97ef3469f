-- The genie_query type: text form, constructors, limits and weighted scores.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(38);

SELECT is('{3, 17, 10..20*2, (1..3, 7)*5}'::genie_query::text, '{3,17,10..20*2,(1..3,7)*5}',
          'text form is canonical');
SELECT is('{}'::genie_query::text, '{}', 'the empty query');
SELECT is('{(5..9, 1..6, 20)}'::genie_query::text, '{(1..9,20)}', 'ranges of an item are sorted and merged');
SELECT is('{(1..3, 4..5)}'::genie_query::text, '{1..5}', 'adjacent ranges merge');
SELECT is('{-5..-3, -2147483648..2147483647*3}'::genie_query::text, '{-5..-3,-2147483648..2147483647*3}',
          'negative and extreme keywords');
SELECT is('{1,1,1}'::genie_query::text, '{1,1,1}', 'repeated items stay items');
SELECT is('{()}'::genie_query::text, '{()}', 'an empty item');
SELECT is((SELECT count(*) FROM (SELECT q::text::genie_query::text = q::text AS same FROM (VALUES
          ('{1,2,3}'::genie_query), ('{1..4*7}'), ('{(1,3,5..9)*2,4}'), ('{}')) v(q)) x WHERE same), 4::bigint,
          'input(output(q)) = q');
SELECT is(genie_query('{5,3,3,1}'::int4[])::text, '{1,3,5}', 'genie_query(int4[]): each distinct keyword an item');
SELECT is(genie_query_add(genie_query('{3}'), ARRAY[int4range(10, 20), int4range(15, 30, '[]')], 2)::text,
          '{3,10..30*2}', 'genie_query_add with int4range[]');
SELECT is(genie_query_add('{}', ARRAY[int4range(NULL, 5)])::text, '{-2147483648..4}', 'unbounded ranges');
SELECT is(genie_query_add('{}', ARRAY['empty'::int4range])::text, '{()}', 'empty ranges add an empty item');
SELECT is(genie_query_add('{1}', '{9,8,8}'::int4[], 4)::text, '{1,8..9*4}', 'genie_query_add with keywords');
SELECT is((SELECT array_agg(ROW(item_no, weight, lo, hi)::text ORDER BY item_no, lo)
           FROM genie_query_items('{3, (1..2, 9)*5}')),
          ARRAY['(1,1,3,3)', '(2,5,1,2)', '(2,5,9,9)'], 'genie_query_items lists the ranges');

-- bad input
SELECT throws_ok($$SELECT '{1,'::genie_query$$, '22P02', NULL, 'unterminated list');
SELECT throws_ok($$SELECT '1,2'::genie_query$$, '22P02', NULL, 'missing braces');
SELECT throws_ok($$SELECT '{5..3}'::genie_query$$, '22P02', NULL, 'reversed range');
SELECT throws_ok($$SELECT '{1*0}'::genie_query$$, '22P02', NULL, 'weight 0');
SELECT throws_ok($$SELECT '{2147483648}'::genie_query$$, '22P02', NULL, 'keyword out of int4 range');
SELECT throws_ok($$SELECT '{1} x'::genie_query$$, '22P02', NULL, 'junk after the list');
SELECT throws_ok($$SELECT genie_query_add('{}', '{1}'::int4[], 0)$$, '22023', NULL, 'weight 0 in genie_query_add');
SELECT throws_ok($$SELECT genie_query_add('{}', ARRAY[NULL::int4range])$$, '22004', NULL, 'NULL range');
SELECT throws_ok($$SELECT genie_query('{1,NULL}'::int4[])$$, '22004', NULL, 'NULL keyword');
SELECT throws_ok($$SELECT ('{' || repeat('1,', 100000) || '1}')::genie_query$$, '54000', NULL,
                 'more than 100000 items');

-- weighted scores against a plain SQL oracle on random data
DO $$ BEGIN PERFORM setseed(0.77); END $$;
CREATE TEMP TABLE objs AS
SELECT i, ARRAY(SELECT (random() * 60)::int FROM generate_series(1, (random() * 20)::int + 0 * i)) AS o
FROM generate_series(1, 500) AS i;
CREATE TEMP TABLE qs AS
SELECT j, (random() * 50)::int AS lo, (random() * 10)::int AS len, 1 + (random() * 5)::int AS w,
       (random() * 60)::int AS single
FROM generate_series(1, 40) AS j;
SELECT is((SELECT count(*) FROM objs, qs
           WHERE genie_match_count(o, genie_query_add(genie_query(ARRAY[single]), ARRAY[int4range(lo, lo + len, '[]')], w))
                 IS DISTINCT FROM
                 ((SELECT count(DISTINCT x) FROM unnest(o) x WHERE x = single)
                  + w * (SELECT count(DISTINCT x) FROM unnest(o) x WHERE x BETWEEN lo AND lo + len))::int),
          0::bigint, 'weighted range scores equal the SQL oracle on 20000 pairs');
SELECT is(genie_match_count('{1,2,3}'::int4[], '{1,1,1}'::genie_query), 3,
          'the same keyword in three items counts three times');
SELECT is(genie_match_count('{1,2,3}'::int4[], '{(1..2, 2..3)}'::genie_query), 3,
          'overlapping ranges in one item count each keyword once');

-- equality, order and hashing: the same items in the same order are equal
SELECT ok('{1,2}'::genie_query = '{ 1 , 2 }'::genie_query, 'equal: the same items, other spacing');
SELECT ok('{(1,2,3)*2}'::genie_query = '{1..3*2}'::genie_query, 'equal: the same keywords of one item, written as a list or a range');
SELECT ok('{1,2}'::genie_query <> '{2,1}'::genie_query, 'not equal: the items in another order');
SELECT ok('{1*2}'::genie_query <> '{1}'::genie_query, 'not equal: another weight');
SELECT ok(genie_query('{3,1,2,3}'::int4[]) = '{1,2,3}'::genie_query, 'genie_query(int4[]) equals its text form');
CREATE TEMP TABLE qvals AS
SELECT i, genie_query(ARRAY(SELECT (random() * 4)::int FROM generate_series(1, 1 + (random() * 2)::int + 0 * i))) AS q
FROM generate_series(1, 300) i;
-- the oracle: the text form, which is one-to-one with the value
SELECT is((SELECT count(DISTINCT q) FROM qvals), (SELECT count(DISTINCT q::text) FROM qvals),
          'count(DISTINCT genie_query) equals count(DISTINCT its text)');
SET LOCAL enable_hashagg = off;
SELECT is((SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM qvals GROUP BY q) g),
          (SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM qvals GROUP BY q::text) g),
          'GROUP BY genie_query, sorted, gives the groups of its text');
RESET enable_hashagg;
SET LOCAL enable_sort = off;
SELECT is((SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM qvals GROUP BY q) g),
          (SELECT array_agg(n ORDER BY n) FROM (SELECT count(*) AS n FROM qvals GROUP BY q::text) g),
          'GROUP BY genie_query, hashed, gives the groups of its text');
RESET enable_sort;
SELECT is((SELECT count(*) FROM (SELECT q FROM qvals UNION SELECT q FROM qvals) u),
          (SELECT count(DISTINCT q::text) FROM qvals), 'UNION of genie_query columns');
SELECT is((SELECT count(*) FROM qvals WHERE q IN ('{1,2}'::genie_query, '{0}')),
          (SELECT count(*) FROM qvals WHERE q::text IN ('{1,2}', '{0}')), 'genie_query IN (...)');
SET LOCAL enable_mergejoin = off;
SET LOCAL enable_nestloop = off;
SELECT is((SELECT count(*) FROM qvals a JOIN qvals b ON a.q = b.q),
          (SELECT count(*) FROM qvals a JOIN qvals b ON a.q::text = b.q::text), 'hash join on genie_query');
RESET enable_mergejoin;
RESET enable_nestloop;

SELECT * FROM finish();
ROLLBACK;
