# pg_dump and pg_restore, custom and plain format, of a database with every
# kind of genie index (int4[] sets, n-grams, rows, vectors, codes, documents), a genie_query column and
# a genie_ranges column (whose index the restore creates only after the
# data: the values wait unbound and are made against it when used): every
# row and every index comes back, the indexes pass genie_index_check, and
# the answers are the same.  Before the dump, RENAME COLUMN and DROP COLUMN
# of indexed attributes, REINDEX and VACUUM FULL.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE DATABASE src;
});
$node->safe_psql('src', q{
	CREATE EXTENSION genie;
	SELECT setseed(0.9);
	CREATE TABLE docs (id int PRIMARY KEY, tags int4[], q genie_query);
	INSERT INTO docs SELECT i, ARRAY(SELECT (random() * 200)::int FROM generate_series(1, (random() * 9)::int + 0 * i)),
	                        genie_query_add(genie_query(ARRAY[i % 17]), ARRAY[int4range(i % 5, i % 5 + 3)], 1 + i % 3)
	FROM generate_series(1, 3000) i;
	INSERT INTO docs VALUES (0, NULL, NULL), (-1, '{}', '{}');
	CREATE INDEX docs_tags ON docs USING genie (tags) WITH (split_length = 64);
	CREATE TABLE words (id int, w text);
	INSERT INTO words SELECT i, md5(i::text) FROM generate_series(1, 2000) i;
	CREATE INDEX words_w ON words USING genie (w genie_ngram_ops) WITH (n = 2);
	CREATE TABLE people (id int, age int, city text, born date);
	INSERT INTO people SELECT i, 20 + i % 50, (ARRAY['Oslo', 'Lima', 'Pune'])[1 + i % 3], date '1990-01-01' + i
	FROM generate_series(1, 2000) i;
	CREATE INDEX people_r ON people USING genie ((people)) WITH (attributes = 'age 0..100, city, born', buckets = 64);
	-- after the build: the pending list, a new dictionary value, deletes
	INSERT INTO docs SELECT i, ARRAY[i % 7, 3], '{1,2}' FROM generate_series(5001, 5100) i;
	INSERT INTO people VALUES (9999, 33, 'Quito', '2001-02-03');
	DELETE FROM words WHERE id % 10 = 0;
	CREATE TABLE vecs (id int, v real[]);
	INSERT INTO vecs SELECT i, CASE WHEN i % 50 = 0 THEN NULL ELSE
	  ARRAY(SELECT round((random() * 10)::numeric, 2)::real FROM generate_series(1, 16) g WHERE i > 0) END
	FROM generate_series(1, 2000) i;
	CREATE INDEX vecs_v ON vecs USING genie (v) WITH (m = 32, width = 2.5, seed = 11);
	CREATE INDEX vecs_lsc ON vecs USING genie (v) WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4);
	INSERT INTO vecs SELECT i, ARRAY(SELECT (i % 7)::real FROM generate_series(1, 16)) FROM generate_series(3001, 3050) i;
	DELETE FROM vecs WHERE id % 9 = 0;
	CREATE TABLE codes (id int, code bit(64));
	INSERT INTO codes SELECT i, CASE WHEN i % 40 = 0 THEN NULL ELSE ('x' || substr(md5(i::text), 1, 16))::bit(64) END
	FROM generate_series(1, 2000) i;
	CREATE INDEX codes_c ON codes USING genie (code);
	CREATE INDEX codes_ewh ON codes USING genie (code) WITH (m = 6, sample_bits = 12, seed = 5, errors = 1, weights = '3,1');
	INSERT INTO codes SELECT i, ('x' || substr(md5((i % 9)::text), 1, 16))::bit(64) FROM generate_series(3001, 3040) i;
	DELETE FROM codes WHERE id % 11 = 0;
	CREATE TABLE notes (id int, body text);
	INSERT INTO notes SELECT i, CASE WHEN i % 30 = 0 THEN NULL ELSE 'w' || i % 13 || ' w' || i % 29 || ' note' || i % 7 END
	FROM generate_series(1, 1500) i;
	CREATE INDEX notes_d ON notes USING genie (to_tsvector('simple', body));
	INSERT INTO notes SELECT i, 'later' || i % 5 || ' w3' FROM generate_series(1501, 1550) i;
	DELETE FROM notes WHERE id % 8 = 0;
	CREATE TABLE saved (id int, r genie_ranges);
	INSERT INTO saved SELECT a, genie_ranges('people_r', format('{"age": [%s, %s], "city": "Oslo"}', a, a + 3)::jsonb)
	FROM generate_series(20, 60, 10) a;
	-- ALTER TABLE on indexed attributes, then a rebuild from the rewritten list
	ALTER TABLE people RENAME COLUMN city TO "Town";
	ALTER TABLE people ADD COLUMN extra int;
	ALTER TABLE people DROP COLUMN extra;
});
is($node->safe_psql('src', "SELECT option_value FROM pg_class, pg_options_to_table(reloptions) WHERE relname = 'people_r' AND option_name = 'attributes'"),
	'age 0..100, "Town", born', 'a renamed attribute is renamed in the attributes parameter');
$node->safe_psql('src', q{ALTER TABLE people DROP COLUMN born; REINDEX INDEX people_r; VACUUM FULL people;
	-- queries kept in a table are made again for the rebuilt index
	UPDATE saved SET r = genie_ranges('people_r', format('{"age": [%s, %s], "Town": "Oslo"}', id, id + 3)::jsonb)});
is($node->safe_psql('src', "SELECT string_agg(attribute, ',') FROM genie_index_attributes('people_r')"),
	'age,Town', 'a dropped attribute leaves the list, and REINDEX and VACUUM FULL rebuild without it');
my ($drop_ret, $drop_out, $drop_err) = $node->psql('src', q{
	CREATE TABLE one (a int, b int); CREATE INDEX one_r ON one USING genie ((one)) WITH (attributes = 'a');
	ALTER TABLE one DROP COLUMN a});
like($drop_err, qr/cannot drop every attribute of genie index "one_r"/, 'dropping the last attribute is refused');
$node->safe_psql('src', q{
	CREATE TABLE two (a int, b int, c text, d int);
	INSERT INTO two SELECT i, i % 10, 'x' || i % 4, i FROM generate_series(1, 100) i;
	CREATE INDEX two_r ON two USING genie ((two)) WITH (attributes = 'a, b 0..9, c');
	ALTER TABLE two DROP COLUMN b;
	ALTER TABLE two RENAME COLUMN a TO "A2";
	ALTER TABLE two DROP COLUMN d;
});
is($node->safe_psql('src', "SELECT option_value FROM pg_class, pg_options_to_table(reloptions) WHERE relname = 'two_r' AND option_name = 'attributes'"),
	'"A2", c', 'a drop, then a rename, then a drop of an unindexed column: the list follows');
$node->safe_psql('src', 'REINDEX INDEX two_r');
is($node->safe_psql('src', "SELECT string_agg(attribute, ',') FROM genie_index_attributes('two_r')"), 'A2,c',
	'REINDEX after them builds the remaining attributes');

# what a user would compare: index scans and batches, and the indexes' definitions
my $answers = q{
	SET enable_seqscan = off;
	SELECT string_agg(x, ';' ORDER BY x) FROM (
	  SELECT 'docs ' || string_agg(id::text, ',' ORDER BY s, id) AS x FROM
	    (SELECT id, tags <~> '{1, 2, 3, 50..60}'::genie_query AS s FROM docs ORDER BY 2 LIMIT 20) a
	  UNION ALL
	  SELECT 'words ' || string_agg(d::text, ',' ORDER BY d) FROM
	    (SELECT (w <%> 'a1b2c3d4') AS d FROM words ORDER BY w <%> 'a1b2c3d4' LIMIT 10) b
	  UNION ALL
	  SELECT 'people ' || string_agg(n::text, ',') FROM
	    (SELECT -(people <~> genie_ranges('people_r', '{"age": [30, 35], "Town": ["Oslo", "Quito"]}')) AS n FROM people
	     ORDER BY people <~> genie_ranges('people_r', '{"age": [30, 35], "Town": ["Oslo", "Quito"]}') LIMIT 10) c
	  UNION ALL
	  SELECT 'topk ' || count(*) FROM genie_topk('docs_tags', ARRAY(SELECT q FROM docs WHERE id BETWEEN 1 AND 20 ORDER BY id), 5)
	  UNION ALL
	  SELECT 'saved ' || string_agg(s.id || ':' || x.ids, ' ' ORDER BY s.id) FROM saved s,
	    LATERAL (SELECT string_agg(p.id::text, ',' ORDER BY p.id) AS ids FROM
	             (SELECT id FROM people ORDER BY people <~> s.r, id LIMIT 5) p) x
	  UNION ALL
	  SELECT 'saved batch ' || count(*) || ' ' || sum(score) FROM genie_ranges_topk('people_r', ARRAY(SELECT r FROM saved ORDER BY id), 7)

	  UNION ALL
	  SELECT 'vecs ' || string_agg(id || ':' || d, ',' ORDER BY d, id) FROM
	    (SELECT id, v <-> array_fill(5::real, ARRAY[16]) AS d FROM vecs ORDER BY v <-> array_fill(5::real, ARRAY[16]) LIMIT 12) e
	  UNION ALL
	  SELECT 'knn ' || count(*) || ' ' || sum(distance) FROM
	    genie_knn('vecs_v', ARRAY[array_fill(1::real, ARRAY[16]), array_fill(9::real, ARRAY[16])], 7)
	  UNION ALL
	  SELECT 'within ' || count(*) || ' ' || sum(distance) FROM
	    genie_within('vecs_lsc', ARRAY[array_fill(5::real, ARRAY[16])], 9.5)
	  UNION ALL
	  SELECT 'codes ' || string_agg(id || ':' || d, ',' ORDER BY d, id) FROM
	    (SELECT id, code <-> ('x' || md5('q'))::bit(64) AS d FROM codes ORDER BY code <-> ('x' || md5('q'))::bit(64) LIMIT 12) f
	  UNION ALL
	  SELECT 'hamming ' || count(*) || ' ' || sum(distance) FROM
	    genie_hamming_knn('codes_c', ARRAY[('x' || md5('a'))::bit(64), ('x' || md5('b'))::bit(64)], 7)
	  UNION ALL
	  SELECT 'documents ' || string_agg(id || ':' || s, ',' ORDER BY s, id) FROM
	    (SELECT id, to_tsvector('simple', body) <~> 'w3 | note2 | later1'::tsquery AS s FROM notes
	     ORDER BY to_tsvector('simple', body) <~> 'w3 | note2 | later1'::tsquery LIMIT 12) g
	  UNION ALL
	  SELECT 'document batch ' || count(*) || ' ' || sum(score) FROM
	    genie_document_topk('notes_d', ARRAY['w1 | later2'::tsquery, 'note1 & w5'::tsquery], 30)
	  UNION ALL
	  SELECT 'vector info ' || dimensions || ' ' || family || ' ' || functions || ' ' || width || ' ' || seed
	  FROM genie_vector_info('vecs_v')
	  UNION ALL
	  SELECT 'sets ' || (SELECT count(*) || ':' || coalesce(sum(id), 0) FROM docs WHERE tags @> '{3}')
	         || ' ' || (SELECT count(*) || ':' || coalesce(sum(id), 0) FROM docs WHERE tags && '{5, 150}')
	         || ' ' || (SELECT count(*) || ':' || coalesce(sum(id), 0) FROM docs WHERE tags <@ '{1, 2, 3, 4, 5, 6, 7}')
	  UNION ALL
	  SELECT 'queries ' || count(DISTINCT q) || ' ' || sum(genie_match_count(tags, q)) FROM docs
	  UNION ALL
	  SELECT 'indexes ' || string_agg(indexdef, ' | ' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public'
	) all_answers};
my $before = $node->safe_psql('src', $answers);
# the EWH index: its keywords come back with it (the options are in its
# definition).  Its object ids do not (the restored index numbers rows in
# heap order), and candidates tied in score are cut by object id, so the
# comparison takes every scored code as a candidate and compares distances
my $ewh_answers = q{SET genie.bit_search = ewh; SET genie.ewh_candidates = 5000;
	SELECT string_agg(query_no || ':' || distance, ',' ORDER BY query_no, distance)
	FROM genie_hamming_knn('codes_ewh', ARRAY[('x' || md5('a'))::bit(64), ('x' || md5('c'))::bit(64)], 9)};
my $ewh_before = $node->safe_psql('src', $ewh_answers);
like($ewh_before, qr/^(?:[12]:\d+,?){18}$/, 'the EWH index answers two queries with nine rows each');
my $counts = "SELECT (SELECT count(*) FROM docs) || '/' || (SELECT count(*) FROM words) || '/' || (SELECT count(*) FROM people) || '/' || (SELECT count(*) FROM saved) || '/' || (SELECT count(*) FROM vecs) || '/' || (SELECT count(*) FROM codes) || '/' || (SELECT count(*) FROM notes)";
my $rows_before = $node->safe_psql('src', $counts);

my $dir = PostgreSQL::Test::Utils::tempdir;
for my $format ('custom', 'plain')
{
	my $target = "restored_$format";
	my $file = "$dir/src.$format";
	$node->command_ok([ 'pg_dump', '--format=' . ($format eq 'custom' ? 'c' : 'p'), '-f', $file,
			'-d', $node->connstr('src') ], "pg_dump --format=$format");
	$node->safe_psql('postgres', "CREATE DATABASE $target");
	if ($format eq 'custom')
	{
		$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr($target), $file ],
			'pg_restore of the custom dump');
	}
	else
	{
		$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr($target), '-f', $file ],
			'psql restores the plain dump');
	}
	is($node->safe_psql($target, $counts), $rows_before, "$format: every row is back");
	is($node->safe_psql($target, $answers), $before, "$format: every index is back and answers the same");
	is($node->safe_psql($target, $ewh_answers), $ewh_before, "$format: the EWH index answers the same");
	# the restored set predicates go through the genie index (0.4.0's operator
	# family members come with CREATE EXTENSION) and equal the table's answer
	like($node->safe_psql($target, "SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT count(*) FROM docs WHERE tags @> '{3}'"),
		qr/docs_tags/, "$format: tags @> q is answered through the genie index");
	is($node->safe_psql($target, "SET enable_indexscan = off; SET enable_bitmapscan = off;
		SELECT count(*) || ':' || coalesce(sum(id), 0) FROM docs WHERE tags @> '{3}'"),
		$node->safe_psql($target, "SET enable_seqscan = off; SELECT count(*) || ':' || coalesce(sum(id), 0) FROM docs WHERE tags @> '{3}'"),
		"$format: tags @> q through the index equals the sequential scan");
	for my $index (qw(docs_tags words_w people_r vecs_v vecs_lsc codes_ewh notes_d))
	{
		my ($ret, $out, $err) = $node->psql($target, "SELECT genie_index_check('$index', true)");
		is($ret . $err, '0', "$format: $index passes genie_index_check");
	}
}

$node->stop;
done_testing();
