-- genie's index-free SQL functions: genie_match_count, genie_devices, genie_version.
CREATE EXTENSION IF NOT EXISTS pgtap;
BEGIN;
CREATE EXTENSION genie;
SELECT plan(28);

SELECT has_function('genie_match_count', ARRAY['integer[]', 'integer[]']);
SELECT has_function('genie_devices');
SELECT has_function('genie_version');

-- genie_match_count: the rules
SELECT is(genie_match_count('{1,2,3}'::int4[], '{2,3,4}'), 2, 'counts shared keywords');
SELECT is(genie_match_count('{1,2,3}'::int4[], '{4,5}'), 0, 'no shared keyword gives 0');
SELECT is(genie_match_count('{1,1,2,2}'::int4[], '{1,1,1}'), 1, 'duplicates count once on either side');
SELECT is(genie_match_count('{}'::int4[], '{1,2}'), 0, 'empty object gives 0');
SELECT is(genie_match_count('{1,2}'::int4[], '{}'), 0, 'empty query gives 0');
SELECT is(genie_match_count('{}'::int4[], '{}'), 0, 'both empty gives 0');
SELECT is(genie_match_count(NULL::int4[], '{1}'), NULL, 'NULL object gives NULL');
SELECT is(genie_match_count('{1}'::int4[], NULL::int4[]), NULL, 'NULL query gives NULL');
SELECT is(genie_match_count('{-2147483648,2147483647,0}'::int4[], '{2147483647,-2147483648}'), 2,
          'extreme int4 keywords');
SELECT is(genie_match_count('[5:7]={1,2,3}'::int4[], '{3}'), 1, 'non-default lower bound');
SELECT throws_ok($$SELECT genie_match_count('{1,NULL}'::int4[], '{1}')$$, '22004',
                 'object must not contain NULL elements', 'NULL element in object is an error');
SELECT throws_ok($$SELECT genie_match_count('{1}'::int4[], '{NULL}')$$, '22004',
                 'query must not contain NULL elements', 'NULL element in query is an error');
SELECT throws_ok($$SELECT genie_match_count('{{1,2},{3,4}}'::int4[], '{1}')$$, '2202E',
                 'object must be a one-dimensional array', 'multidimensional arrays are rejected');

SELECT throws_ok($$SELECT genie_match_count('{1}', '{1}')$$, '42725', NULL,
                 'two untyped literals need a cast (int4[] and genie_query read them differently)');
SELECT is(genie_match_count(tags, '{1,1,2}'), 2, 'a literal next to an int4[] column is an int4[]')
FROM (SELECT '{1,2,3}'::int4[] AS tags) t;

-- genie_match_count against a plain SQL oracle on random arrays (fixed seed)
DO $$ BEGIN PERFORM setseed(0.42); END $$;
CREATE TEMP TABLE pairs AS
SELECT i,
       ARRAY(SELECT (random() * 40)::int FROM generate_series(1, (random() * 30)::int + 0 * i)) AS o,
       ARRAY(SELECT (random() * 40)::int FROM generate_series(1, (random() * 30)::int + 0 * i)) AS q
FROM generate_series(1, 2000) AS i;
SELECT is((SELECT count(*) FROM pairs
           WHERE genie_match_count(o, q) IS DISTINCT FROM
                 (SELECT count(DISTINCT x)::int FROM unnest(q) AS x WHERE x = ANY (o))),
          0::bigint, 'genie_match_count equals the SQL oracle on 2000 random pairs');
SELECT ok((SELECT count(DISTINCT genie_match_count(o, q)) FROM pairs) > 5,
          'the random pairs cover many different counts');

-- genie_devices
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'cpu'), 1::bigint, 'exactly one CPU row');
SELECT is((SELECT usable FROM genie_devices() WHERE kind = 'cpu'), true, 'the CPU is usable');
SELECT ok((SELECT memory_bytes > 0 AND processors >= 1 FROM genie_devices() WHERE kind = 'cpu'),
          'the CPU row reports memory and cores');
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind NOT IN ('cpu', 'gpu')), 0::bigint,
          'only cpu and gpu kinds');
SELECT is((SELECT count(*) FROM genie_devices()
           WHERE kind = 'gpu' AND (compute_capability IS NULL OR memory_bytes <= 0)), 0::bigint,
          'every GPU row has a compute capability and memory');
SELECT is((SELECT count(*) FROM genie_devices() WHERE kind = 'gpu' AND NOT usable AND note IS NULL),
          0::bigint, 'an unusable GPU says why');

-- genie_version
SELECT is((SELECT version FROM genie_version()),
          (SELECT extversion FROM pg_extension WHERE extname = 'genie'), 'version matches the extension');
SELECT is((SELECT (cuda_version IS NOT NULL) = with_cuda FROM genie_version()), true,
          'a CUDA version is reported exactly when built with CUDA');

SELECT * FROM finish();
ROLLBACK;
