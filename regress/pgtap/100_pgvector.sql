-- genie beside pgvector in one database (issue 34): both extensions create
-- in either order; no operator or function of one has another's name and
-- argument types; genie's real[] and bit operators and pgvector's vector
-- operators each plan their own index on one table and answer as a
-- sequential scan does; an untyped literal beside a real[] column still
-- means genie's operator (pgvector's real[] -> vector cast is not
-- implicit); and the two Hamming distances (genie's bit <-> bit,
-- pgvector's bit <~> bit) agree, each the other's oracle.  Skipped where
-- the server has no pgvector (Debian 12's archive has none for
-- PostgreSQL 15; scripts/test-pg17 runs it on PostgreSQL 17).
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') AS have_pgvector \gset
\if :have_pgvector
BEGIN;
SELECT plan(15);

-- pgvector first, then genie; and the other order below
SELECT lives_ok('CREATE EXTENSION vector', 'pgvector creates');
SELECT lives_ok('CREATE EXTENSION genie', 'genie creates beside it');

-- the members of each extension, by kind
CREATE TEMP VIEW members AS
SELECT e.extname, o.oprname AS name, o.oprleft AS left_type, o.oprright AS right_type, 'operator' AS kind
FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid JOIN pg_operator o ON o.oid = d.objid
WHERE d.classid = 'pg_operator'::regclass AND d.deptype = 'e'
UNION ALL
SELECT e.extname, p.proname, 0, 0, 'function ' || p.proargtypes::text
FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid JOIN pg_proc p ON p.oid = d.objid
WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e';
SELECT is((SELECT count(*) FROM members g JOIN members v USING (name, left_type, right_type, kind)
           WHERE g.extname = 'genie' AND v.extname = 'vector'), 0::bigint,
          'no operator or function of genie has the name and argument types of one of pgvector''s');
SELECT ok((SELECT count(*) FROM members WHERE extname = 'vector' AND kind = 'operator') >= 20
          AND (SELECT count(*) FROM members WHERE extname = 'genie' AND kind = 'operator') >= 10,
          'both extensions'' operators are there');

-- one table, a real[] column under genie and the same values as a vector under HNSW
DO $$ BEGIN PERFORM setseed(0.34); END $$;
CREATE TABLE items (id int PRIMARY KEY, v real[], e vector(8), code bit(64));
INSERT INTO items
SELECT i, a, a::vector(8), c
FROM generate_series(1, 2000) i,
     LATERAL (SELECT array_agg((random() * 10)::real) AS a FROM generate_series(1, 8) j WHERE i > 0) x,
     LATERAL (SELECT (floor(random() * 4294967296)::bigint::bit(32) || floor(random() * 4294967296)::bigint::bit(32))::bit(64) AS c
              WHERE i > 0) y;
CREATE INDEX items_v ON items USING genie (v);
CREATE INDEX items_code ON items USING genie (code);
CREATE INDEX items_e ON items USING hnsw (e vector_l2_ops);
ANALYZE items;
SET LOCAL enable_seqscan = off;

CREATE FUNCTION pg_temp.plan_of(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; out text := '';
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP out := out || line || E'\n'; END LOOP;
  RETURN out;
END $$;
SELECT matches(pg_temp.plan_of($$SELECT id FROM items ORDER BY v <-> '{1,2,3,4,5,6,7,8}' LIMIT 5$$),
               'Index Scan using items_v', 'real[] <-> an untyped literal plans genie''s index');
SELECT matches(pg_temp.plan_of($$SELECT id FROM items ORDER BY e <-> '[1,2,3,4,5,6,7,8]' LIMIT 5$$),
               'Index Scan using items_e', 'vector <-> an untyped literal plans pgvector''s HNSW index');
SELECT matches(pg_temp.plan_of($$SELECT id FROM items ORDER BY code <-> B'1010101010101010101010101010101010101010101010101010101010101010' LIMIT 5$$),
               'Index Scan using items_code', 'bit <-> bit plans genie''s code index');
SELECT is((SELECT oprcode::text FROM pg_operator
           WHERE oid = to_regoperator('<->(real[], real[])')), 'genie_l2_distance',
          'real[] <-> real[] is genie''s');

-- each index answers as the sequential scan of its own operator
SELECT results_eq(
  $$ SELECT id FROM items ORDER BY v <-> '{1,2,3,4,5,6,7,8}', id LIMIT 10 $$,
  $$ SELECT id FROM (SELECT id, v <-> '{1,2,3,4,5,6,7,8}' AS d FROM items) s ORDER BY d, id LIMIT 10 $$,
  'genie''s ORDER BY on real[] beside pgvector: the sequential scan''s rows');
SELECT cmp_ok((SELECT count(*) FROM (SELECT id FROM items ORDER BY e <-> '[1,2,3,4,5,6,7,8]' LIMIT 10) s
               WHERE id IN (SELECT id FROM items ORDER BY v <-> '{1,2,3,4,5,6,7,8}' LIMIT 10)), '>=', 8::bigint,
          'pgvector''s HNSW beside genie finds at least 8 of genie''s exact 10');
SELECT is((SELECT max(abs((v <-> '{1,2,3,4,5,6,7,8}') - (e <-> '[1,2,3,4,5,6,7,8]'))) < 1e-4 FROM items), true,
          'the two L2 distances agree on every row');
-- the two Hamming distances are one another's oracle
SELECT is((SELECT count(*) FROM items a JOIN items b ON b.id = a.id % 2000 + 1
           WHERE (a.code <-> b.code) <> (a.code <~> b.code)), 0::bigint,
          'genie''s bit <-> bit equals pgvector''s bit <~> bit on 2,000 pairs');
SELECT results_eq(
  $$ SELECT id FROM items ORDER BY code <-> (SELECT code FROM items WHERE id = 7), id LIMIT 10 $$,
  $$ SELECT id FROM items ORDER BY (code <~> (SELECT code FROM items WHERE id = 7)), id LIMIT 10 $$,
  'genie''s Hamming ORDER BY equals a sequential scan by pgvector''s distance');

-- the other order: genie first, then pgvector
SELECT lives_ok('DROP TABLE items; DROP EXTENSION genie; DROP EXTENSION vector', 'both drop');
SELECT lives_ok('CREATE EXTENSION genie; CREATE EXTENSION vector', 'genie first, then pgvector');

SELECT * FROM finish();
ROLLBACK;
\else
SELECT plan(1);
SELECT skip('pgvector is not available on this server', 1);
SELECT * FROM finish();
\endif
