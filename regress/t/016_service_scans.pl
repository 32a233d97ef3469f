# Index scans and cursors through the genie service keep going when the
# index's version they started with goes under them (issue 27).  With
# genie.cache_size below the index's size the service lets a version go
# after each search, so a cursor's next, wider search hands its version
# over again; a VACUUM merge in between has renumbered the index's pages.
# The scan then goes on on the current version, which holds every row its
# snapshot sees, skipping the rows it already returned.  Before, the FETCH
# failed with SQLSTATE 40001 ("was merged while this statement searched
# it").  Checked for keyword sets (match counts), vectors (exact
# distances), and a pgbench of scans beside inserts and merging VACUUMs.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('service_scans');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'genie'
max_connections = 20
genie.cpu_threads = 2
genie.cache_size = '1MB'
# keyword sets searched by the service too (a backend that maps the shared
# postings keeps its version: it never needs to move)
genie.shared_postings = off
# a search that moves to the current version says so at DEBUG1
log_min_messages = debug1
});
$node->start;

# 40,000 keyword sets of 20 keywords (ties in plenty) and 20,000 vectors of
# 16 dimensions: each index is larger than genie.cache_size
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE TABLE kw (id int PRIMARY KEY, tags int4[]);
	INSERT INTO kw SELECT i, ARRAY(SELECT (i * 7 + j * 13) % 3000 FROM generate_series(1, 20) j)
	FROM generate_series(1, 40000) i;
	CREATE INDEX kw_tags ON kw USING genie (tags);
	CREATE TABLE vec (id int PRIMARY KEY, v real[]);
	INSERT INTO vec SELECT i, ARRAY(SELECT ((i * 31 + d * 17) % 101)::real FROM generate_series(1, 16) d)
	FROM generate_series(1, 20000) i;
	CREATE INDEX vec_v ON vec USING genie (v);
	CREATE FUNCTION l2(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
	  SELECT sqrt(sum((x::float8 - y::float8) * (x::float8 - y::float8))) FROM unnest(a, b) AS t(x, y)
	$$;
});
cmp_ok($node->safe_psql('postgres', q{SELECT pg_relation_size('kw_tags') > 1024 * 1024 AND pg_relation_size('vec_v') > 1024 * 1024}),
	'eq', 't', 'both indexes are larger than genie.cache_size');

# A cursor's scan fetches 50 rows (one search), a merge renumbers the
# index, then the rest of the scan (wider searches) is fetched.  The rows
# must be exactly those the cursor's snapshot sees, each once, in order.
# The session fetches them into a table in the server, numbered in the
# cursor's order, and the checks are SQL over it: 40,000 rows through psql
# took BackgroundPsql minutes to read.
sub cursor_across_a_merge
{
	my ($name, $declare, $merge, $expected, $oracle) = @_;
	$node->safe_psql('postgres', 'DROP TABLE IF EXISTS got; CREATE TABLE got (n int, id int, score float8)');
	# the cursor's next rows, up to n in all, numbered on
	my $fetch = q{DO $$DECLARE cur refcursor := 'c'; r record; n int := (SELECT count(*) FROM got);
		BEGIN LOOP EXIT WHEN n >= %d; FETCH cur INTO r; EXIT WHEN NOT FOUND; n := n + 1;
		INSERT INTO got VALUES (n, r.id, r.score); END LOOP; END$$};
	my $cursor = $node->background_psql('postgres');
	$cursor->query_safe('SET client_min_messages = warning');
	$cursor->query_safe('SET enable_seqscan = off');
	$cursor->query_safe('BEGIN');
	$cursor->query_safe("DECLARE c NO SCROLL CURSOR FOR $declare");
	$cursor->query_safe(sprintf($fetch, 50));
	my $log_at = -s $node->logfile;
	$node->safe_psql('postgres', $merge);
	# the service lets an oversized version go after its search, at its next round of housekeeping
	ok($node->poll_query_until('postgres', q{SELECT coalesce(host_bytes, 0) <= 1024 * 1024 FROM genie_service_status()}),
		"$name: the service let the cursor's version go");
	# (psql stops at an error: the session is then gone)
	my ($rest, $ret) = eval { $cursor->query(sprintf($fetch, 2_000_000_000)) };
	$ret = 1 unless defined $ret;
	is($ret, 0, "$name: the cursor goes on after the merge");
	ok($node->log_contains(qr/genie: a search moves to its index's current version after attempt 1: genie index "\w+" was merged/, $log_at),
		"$name: its search did move to the current version (the path under test ran)");
	# (after an error the session's stderr keeps it: nothing more is sent,
	# and its rows are not committed)
	$cursor->query_safe('COMMIT') if $ret == 0;
	eval { $cursor->quit };
	# the second column is a score: the best first, so never rising
	is($node->safe_psql('postgres', q{
			SELECT count(*) || ' rows, ' || (count(*) - count(DISTINCT id)) || ' repeated, '
				|| (SELECT count(*) FROM (SELECT score > lag(score) OVER (ORDER BY n) AS up FROM got) s WHERE up)
				|| ' out of order'
			FROM got}),
		"$expected rows, 0 repeated, 0 out of order",
		"$name: every row the snapshot sees, once, in order");
	is($node->safe_psql('postgres', qq{
			SELECT count(*) FROM got LEFT JOIN ($oracle) o(id, want) USING (id)
			WHERE o.want IS DISTINCT FROM got.score}),
		0, "$name: each row's score is the oracle's");
}

cursor_across_a_merge('keyword sets',
	q{SELECT id, -(tags <~> '{7,20,33,46}')::int AS score FROM kw ORDER BY tags <~> '{7,20,33,46}'},
	q{INSERT INTO kw SELECT i, ARRAY[7, 20, 33, 46] FROM generate_series(40001, 41000) i; VACUUM kw;},
	40000,
	q{SELECT id, genie_match_count(tags, '{7,20,33,46}'::genie_query) FROM kw WHERE id <= 40000});

# vectors of small integers: the squared distance is an exact integer,
# negated to be a score (the nearest first)
cursor_across_a_merge('vectors',
	q{SELECT id, -round((v <-> '{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}') ^ 2) AS score FROM vec
	  ORDER BY v <-> '{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}'},
	q{INSERT INTO vec SELECT i, '{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}' FROM generate_series(20001, 20500) i; VACUUM vec;},
	20000,
	q{SELECT id, -round(l2(v, '{1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}') ^ 2) FROM vec WHERE id <= 20000});

# Many statements' scans beside inserts and merges: none fails.
$node->safe_psql('postgres', q{
	ALTER TABLE kw SET (autovacuum_enabled = off);
	ALTER INDEX kw_tags SET (pending_list_limit = 64);
});
my $vacuums = $node->background_psql('postgres');
$vacuums->query_until(qr/started/, "\\echo started\n" . ("VACUUM kw;\nSELECT pg_sleep(0.1);\n" x 50));
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --time=5',
	0,
	[qr{number of transactions actually processed: [1-9]}, qr{^number of failed transactions: 0 }m],
	[qr{^(?:(?!ERROR).)*$}s],
	'ORDER BY scans past their first search beside inserts and merging VACUUMs: no read fails',
	{
		'genie_scan_read@3' => q{
			\set a random(0, 2999)
			SET enable_seqscan = off;
			SELECT count(*) FROM (SELECT id FROM kw ORDER BY tags <~> ARRAY[:a, (:a + 13) % 3000] LIMIT 2000) s;
		},
		'genie_scan_insert@2' => q{
			\set a random(41001, 100000000)
			INSERT INTO kw VALUES (:a, ARRAY[:a % 3000, (:a + 13) % 3000]) ON CONFLICT DO NOTHING;
		},
	});
$vacuums->quit;

$node->stop;
done_testing();
