# ALTER EXTENSION genie UPDATE from 0.1.0: indexes of every kind built under
# 0.1.0 (keyword sets with pending rows and deletes, n-gram text with stored
# strings, a row index) answer as sequential scans after the update and pass
# genie_index_check; the updated extension has the same objects, function
# definitions and privileges as a fresh CREATE EXTENSION of the new version.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init(extra => ['--encoding=UTF8', '--locale=C']);
$node->start;

my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'genie'");
like($default, qr/^\d+\.\d+\.\d+$/, "the default version is $default");
isnt($default, '0.1.0', 'it is newer than 0.1.0');

$node->safe_psql('postgres', q{
	CREATE EXTENSION genie VERSION '0.1.0';
	CREATE EXTENSION fuzzystrmatch;
});
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'genie'"),
	'0.1.0', 'genie 0.1.0 is installed');

# indexes of every kind, under 0.1.0, in the on-disk format genie 0.3.0 and
# before wrote (4: int32 postings)
$node->safe_psql('postgres', 'ALTER DATABASE postgres SET genie.write_format = 4');
create_docs($node, 4000);
$node->safe_psql('postgres', q{
	INSERT INTO docs SELECT i, ARRAY[i % 500, (i * 7) % 500, 7] FROM generate_series(4001, 4300) i;
	DELETE FROM docs WHERE id % 13 = 0;
	CREATE TABLE names (id int, w text);
	INSERT INTO names SELECT i, translate(substr(md5(i::text), 1, 4 + i % 9), '0123456789', 'ghijklmñéü')
	FROM generate_series(1, 5000) AS i;
	CREATE INDEX names_w ON names USING genie (w genie_ngram_ops);
	INSERT INTO names SELECT i, 'late' || substr(md5(i::text), 1, 6) FROM generate_series(5001, 5200) AS i;
	CREATE TABLE pkgs (id int, section text, size int, arch text);
	INSERT INTO pkgs SELECT i, 's' || (i % 40), (i * 7919) % 100000,
	       CASE WHEN i % 3 = 0 THEN 'all' ELSE 'amd64' END FROM generate_series(1, 3000) AS i;
	CREATE INDEX pkgs_rows ON pkgs USING genie ((pkgs)) WITH (attributes = 'section, size, arch', buckets = 128);
});

$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET genie.write_format');
is($node->safe_psql('postgres', q{SELECT string_agg(format_version::text, ',' ORDER BY i)
	FROM unnest(ARRAY['docs_tags_idx', 'names_w', 'pkgs_rows']) WITH ORDINALITY AS x(i, o),
	     LATERAL genie_index_info(i::regclass)}), '4,4,4', 'the indexes are of on-disk format 4');

my $names_mismatch = q{
	SET enable_seqscan = off;
	SELECT count(*) FROM generate_series(1, 25) AS n,
	  LATERAL (SELECT CASE WHEN n % 2 = 0 THEN 'late' ELSE '' END || substr(md5((n * 31)::text), 1, 5) AS q) qq
	WHERE (SELECT array_agg(levenshtein(w, qq.q) ORDER BY levenshtein(w, qq.q))
	       FROM (SELECT w FROM names ORDER BY w <%> qq.q LIMIT 5) x)
	   IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
	       (SELECT levenshtein(w, qq.q) AS d FROM names ORDER BY 1 LIMIT 5) t)
};
my $row_query = q{
	SELECT string_agg(scores, ';') FROM (
	  SELECT (SELECT string_agg(genie_match_count(p, q)::text, ',')
	          FROM (SELECT p FROM pkgs p ORDER BY p <~> q, id LIMIT 12) x) AS scores
	  FROM generate_series(1, 20) AS n,
	       LATERAL genie_ranges('pkgs_rows', jsonb_build_object('section', jsonb_build_array('s' || n),
	                            'size', jsonb_build_array(n * 3000, n * 3000 + 20000), 'arch', 'all')) AS q) y
};
is($node->safe_psql('postgres', $names_mismatch), '0', '0.1.0: n-gram scans equal levenshtein()');
my $rows_before = $node->safe_psql('postgres', "SET enable_seqscan = off; SET enable_sort = off; $row_query");

$node->safe_psql('postgres', 'ALTER EXTENSION genie UPDATE');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'genie'"),
	$default, "ALTER EXTENSION genie UPDATE reaches $default");

check_index_matches_seqscan($node, 'keyword sets built under 0.1.0, after the update');
is($node->safe_psql('postgres', q{SET enable_seqscan = off; SELECT count(*) FROM docs WHERE tags && '{7}'}),
	$node->safe_psql('postgres', q{SELECT count(*) FROM docs WHERE (tags || '{}') && '{7}'}),
	'format 4: set predicates of 0.4.0 through an index built before');
is($node->safe_psql('postgres', $names_mismatch), '0',
	'n-gram text built under 0.1.0: scans equal levenshtein() after the update');
is($node->safe_psql('postgres', "SET enable_seqscan = off; SET enable_sort = off; $row_query"),
	$rows_before, 'the row index answers as before the update');
is($node->safe_psql('postgres', "SET enable_indexscan = off; SET enable_bitmapscan = off; $row_query"),
	$rows_before, 'and as its sequential scan');
check_index($node, $_, "$_ after the update") for qw(names_w pkgs_rows);

# inserts, a merge and a rebuild under the new version
$node->safe_psql('postgres', q{
	INSERT INTO names SELECT i, 'new' || substr(md5(i::text), 1, 5) FROM generate_series(5201, 5400) AS i;
	VACUUM names;
	REINDEX INDEX docs_tags_idx;
});
is($node->safe_psql('postgres', $names_mismatch), '0', 'after inserts and a merge: still equal');
check_index_matches_seqscan($node, 'after REINDEX under the new version');
is($node->safe_psql('postgres', q{SELECT string_agg(format_version::text, ',' ORDER BY i)
	FROM unnest(ARRAY['docs_tags_idx', 'names_w', 'pkgs_rows']) WITH ORDINALITY AS x(i, o),
	     LATERAL genie_index_info(i::regclass)}), '5,5,4',
	'REINDEX and a merge pack the postings (format 5); the untouched row index stays format 4');
check_index($node, $_, "$_ after the merge and REINDEX") for qw(docs_tags_idx names_w);
is($node->safe_psql('postgres', 'SELECT count(*) FROM (SELECT content FROM genie_service_stats()) s'),
	'0', 'genie_service_stats() has its new column (no service here: no rows)');

# the same objects, definitions and privileges as a fresh install
my $catalog = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
	  SELECT pg_describe_object(d.classid, d.objid, 0)
	         || CASE WHEN d.classid = 'pg_proc'::regclass
	                 THEN ' ' || md5(pg_get_functiondef(d.objid)) || ' ' || coalesce(p.proacl::text, '')
	                 ELSE '' END AS x
	  FROM pg_depend d LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
	  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'genie')
	  -- the operators and support functions of its operator families, which
	  -- are not members of the extension themselves (an update adds them with
	  -- ALTER OPERATOR FAMILY)
	  UNION ALL
	  SELECT pg_describe_object(m.classid, m.objid, 0)
	  FROM (SELECT 'pg_amop'::regclass AS classid, oid AS objid, amopfamily AS family FROM pg_amop
	        UNION ALL SELECT 'pg_amproc'::regclass, oid, amprocfamily FROM pg_amproc) m
	  JOIN pg_depend d ON d.classid = 'pg_opfamily'::regclass AND d.objid = m.family
	  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
	    AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'genie')) s
};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION genie');
my $fresh = $node->safe_psql('fresh', $catalog);
cmp_ok(scalar(split /\n/, $fresh), '>', 50, 'a fresh install has the extension\'s objects');
is($node->safe_psql('postgres', $catalog), $fresh,
	'the updated extension equals a fresh install: objects, function definitions, privileges');

# The intermediate versions have no full script of their own (only 0.1.0 and
# the current one do): CREATE EXTENSION of one goes through 0.1.0 and the
# update scripts, and updating it from there gives the same extension.
for my $mid ('0.2.0', '0.3.0', '0.4.0', '0.5.0', '0.6.0', '0.7.0', '0.8.0', '0.9.0', '0.10.0')
{
	(my $db = "mid_$mid") =~ s/\./_/g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION genie VERSION '$mid'");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'genie'"), $mid,
		"CREATE EXTENSION genie VERSION '$mid' installs through the update scripts");
	$node->safe_psql($db, 'ALTER EXTENSION genie UPDATE');
	is($node->safe_psql($db, $catalog), $fresh, "$mid updated equals a fresh install");
}

$node->stop;
done_testing();
