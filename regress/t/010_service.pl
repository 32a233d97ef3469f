# The genie service (genie in shared_preload_libraries): concurrent
# sessions' searches, inserts and deletes through it leave a correct index
# and answers equal to sequential scans; it batches the queries of
# concurrent sessions; terminating it mid-run loses no query (auto mode
# searches in-process meanwhile) and the postmaster starts it again; a
# backend cancelled while it waits leaves the service healthy.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('service');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'genie'
max_connections = 60
genie.pending_list_limit = '128kB'
genie.cpu_threads = 2
# every search sent to the service, also without a GPU (TAP 018 tests the
# shared postings that backends search themselves)
genie.shared_postings = off
});
$node->start;

sub service_status
{
	return $node->safe_psql('postgres',
		"SELECT running, coalesce(pid, 0) FROM genie_service_status()");
}

sub wait_for_service
{
	my ($not_pid) = @_;
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my ($running, $pid) = split /\|/, service_status();
		return $pid if $running eq 't' && $pid != $not_pid;
		usleep(100_000);
	}
	return 0;
}

create_docs($node, 20000);
$node->safe_psql('postgres', 'CREATE SEQUENCE doc_ids START 1000000');
my $pid = wait_for_service(0);
ok($pid > 0, 'the genie service runs');
is($node->safe_psql('postgres',
		"SELECT backend_type FROM pg_stat_activity WHERE pid = $pid"),
	'genie service', 'pg_stat_activity shows it as backend_type genie service');
is($node->safe_psql('postgres', 'SELECT configured FROM genie_service_status()'),
	't', 'genie_service_status() says it is configured');

# ---- many sessions at once ----
docs_sessions($node, 16, 150, '16 sessions: ordered queries, inserts and deletes through the service');
check_index_matches_seqscan($node, 'after 16 sessions through the service');

my ($batches, $queries, $requests) = split /\|/, $node->safe_psql('postgres',
	'SELECT sum(batches), sum(queries), sum(requests) FROM genie_service_stats()');
cmp_ok($requests, '>=', 2400 * 6 / 8 * 0.8, 'the service answered the sessions\' searches');
my $mean = $batches > 0 ? $queries / $batches : 0;
diag(sprintf('service: %d engine calls for %d queries (%.2f queries per call)', $batches, $queries, $mean));
cmp_ok($mean, '>', 1.0, 'concurrent sessions\' queries share engine calls');

# The sessions a shared engine call answered are woken at once (the futex
# in each one's slot, service/genie_slot_wake.h): the mean statement here
# takes under 3 ms on the 2-core machine, and one whose wake-up was lost
# would sit out its 20 ms sleep, so a mean under 15 ms says few were.
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=100',
	0,
	[ qr{processed: 800/800}, qr{latency average = (?:\d|1[0-4])\.\d+ ms} ],
	[qr{\A(?:(?!ERROR|abort).)*\z}s],
	'8 sessions through the service: a mean latency under 15 ms (no session left to its sleep)',
	{
		'genie_wake' => q{
			\set a random(0, 499)
			SELECT id FROM docs ORDER BY tags <~> ARRAY[:a, 7] LIMIT 10;
		},
	});

# Answers under load: 8 sessions whose every statement compares the scores
# of the rows the index scan returned (through the service, batched with
# the others') with a sequential scan's top scores for the same query, and
# writes its query into a table when they differ (bench/service-check does
# this on a GPU host).
$node->safe_psql('postgres', 'CREATE TABLE load_mismatches (a int, b int)');
my ($requests_before) = $node->safe_psql('postgres', 'SELECT sum(requests) FROM genie_service_stats()');
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=60',
	0,
	[ qr{processed: 480/480} ],
	[qr{\A(?:(?!ERROR|abort).)*\z}s],
	'8 sessions check their answers through the service against sequential scans',
	{
		'genie_load_check' => q{
			\set a random(0, 499)
			\set b random(0, 499)
			INSERT INTO load_mismatches SELECT :a, :b WHERE
			  (SELECT array_agg(s) FROM (SELECT tags <~> ARRAY[:a, :b, 7] AS s FROM docs
			                             ORDER BY tags <~> ARRAY[:a, :b, 7] LIMIT 12) x)
			  IS DISTINCT FROM
			  (SELECT array_agg(s) FROM (SELECT -genie_match_count(tags, ARRAY[:a, :b, 7])::float8 AS s
			                             FROM docs ORDER BY 1 LIMIT 12) y);
		},
	});
is($node->safe_psql('postgres', 'SELECT count(*) FROM load_mismatches'), '0',
	'every answer under load equals the sequential scan\'s');
cmp_ok($node->safe_psql('postgres', 'SELECT sum(requests) FROM genie_service_stats()') - $requests_before,
	'>=', 480, 'the service answered each of those statements');

# The same answers through genie_topk, by index and by the service.
my $topk_mismatch = $node->safe_psql('postgres', q{
	SET genie.device = 'cpu';
	WITH q AS (SELECT g, ARRAY[g, g * 3 % 500, 7] AS query FROM generate_series(1, 40) g),
	t AS (SELECT t.query_no, array_agg(t.score ORDER BY t.score DESC) AS s
	      FROM genie_topk('docs_tags_idx', ARRAY(SELECT query::genie_query FROM q ORDER BY g), 15) t
	      GROUP BY t.query_no),
	o AS (SELECT q.g, (SELECT array_agg(c ORDER BY c DESC) FROM (
	          SELECT genie_match_count(tags, q.query) AS c FROM docs
	          ORDER BY 1 DESC LIMIT 15) x WHERE c > 0) AS s FROM q)
	SELECT count(*) FROM o LEFT JOIN t ON t.query_no = o.g WHERE t.s IS DISTINCT FROM o.s
});
is($topk_mismatch, '0', 'genie_topk through the service equals the sequential scans');

# ---- the service terminated while sessions search ----
my $run = start_docs_queries($node, 8, 6, 'service_bench');
sleep 2;
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"), 't',
	'the service is terminated mid-run');
finish_docs_queries($run, 'while the service restarts');
my $new_pid = wait_for_service($pid);
ok($new_pid > 0 && $new_pid != $pid, 'the postmaster started the service again');
like($node->safe_psql('postgres', 'SELECT count(*) FROM docs'), qr/^\d+$/, 'the cluster runs on');
check_index_matches_seqscan($node, 'after the restart');

# ---- a backend cancelled while the service works for it ----
create_big($node);
$node->safe_psql('postgres', big_batch(1));
my $full = check_long_batch_cancel($node, 'through the service');
my $start = time;
is($node->safe_psql('postgres', big_batch(2)), '20', 'the next search is answered');
my $after = time - $start;
diag(sprintf('the next search took %.0f ms', 1000 * $after));
cmp_ok($after, '<', $full / 2 + 0.5,
	'the service dropped the withdrawn batch instead of finishing it');
is((split /\|/, service_status())[1], $new_pid, 'the service still runs, the same process');

# ---- merges that keep every count: each version is its own ----
# A non-HOT update (a B-tree on another column) leaves a dead object and a
# pending one with the same keywords; VACUUM merges and renumbers, so the
# main postings keep their counts, and the chains can come back to blocks
# an earlier version used.  The service must never answer from an earlier
# version: every row returned has the score the query gives it.
$node->safe_psql('postgres', q{
	CREATE TABLE kc (id int, other int, tags int4[]);
	INSERT INTO kc SELECT i, i, ARRAY[i % 7, i % 11, 100 + i % 5] FROM generate_series(1, 300) i;
	CREATE INDEX kc_other ON kc (other);
	CREATE INDEX kc_tags ON kc USING genie (tags);
});
my $wrong = 0;
for my $round (1 .. 8)
{
	$wrong += $node->safe_psql('postgres', qq{
		UPDATE kc SET other = other + 1000 WHERE id = $round;
		VACUUM kc;
		SET enable_seqscan = off;
		SELECT count(*) FROM (
		  (SELECT tags <~> '{1,2,3,101}' AS s FROM kc ORDER BY tags <~> '{1,2,3,101}' LIMIT 40)
		  EXCEPT ALL
		  (SELECT -genie_match_count(tags, '{1,2,3,101}')::float8 FROM kc ORDER BY 1 LIMIT 40)) d;
	});
}
is($wrong, 0, 'after 8 merges that keep every count, answers come from the current version');
like($node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	EXPLAIN (COSTS OFF) SELECT id FROM kc ORDER BY tags <~> '{1,2,3,101}' LIMIT 40}),
	qr/Index Scan using kc_tags/, 'those answers came from the index');

# ---- what gpu asks of a service without a GPU ----
SKIP:
{
	skip 'the service found a GPU', 1
	  if $node->safe_psql('postgres', 'SELECT gpu FROM genie_service_status()') eq 't';
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET genie.device = 'gpu'; SELECT id FROM docs ORDER BY tags <~> '{1,2}' LIMIT 1");
	like($stderr, qr/no usable GPU/, 'genie.device = gpu is a clear error without a GPU');
}


# ---- the service lets go of what nobody can use ----
# A dropped table's index copy goes within a few seconds (its relation file
# is gone or empty), not at the next eviction; and a version larger than
# genie.cache_size goes once the search that needed it is done.
$node->safe_psql('postgres', q{
	CREATE TABLE gone (id int, tags int4[]);
	INSERT INTO gone SELECT i, ARRAY[i % 13, i % 17] FROM generate_series(1, 20000) i;
	CREATE INDEX gone_tags ON gone USING genie (tags);
	SET enable_seqscan = off;
	SELECT count(*) FROM (SELECT id FROM gone ORDER BY tags <~> '{1,2}' LIMIT 5) s;
});
my $gone_oid = $node->safe_psql('postgres', "SELECT 'gone_tags'::regclass::oid");
my $resident = "FROM genie_service_stats() WHERE index = $gone_oid AND resident";
ok($node->poll_query_until('postgres', "SELECT count(*) > 0 $resident"), 'the service holds the index it searched');
$node->safe_psql('postgres', 'DROP TABLE gone');
my $dropped_at = time;
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 $resident"), 'a dropped table\'s index copy is released');
cmp_ok(time - $dropped_at, '<', 5, 'within a few seconds of the DROP');

$node->safe_psql('postgres', q{
	CREATE TABLE oversized (id int, tags int4[]);
	INSERT INTO oversized SELECT i, ARRAY(SELECT (i * 7 + j * 13) % 5000 FROM generate_series(1, 20) j)
	FROM generate_series(1, 60000) i;
	CREATE INDEX oversized_tags ON oversized USING genie (tags);
	ALTER SYSTEM SET genie.cache_size = '1MB';
	SELECT pg_reload_conf();
});
sleep 1;
is($node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM (SELECT id FROM oversized ORDER BY tags <~> '{7,20,33}' LIMIT 5) s}), '5',
	'a version larger than genie.cache_size is still searched through the service');
ok($node->poll_query_until('postgres', q{SELECT coalesce(host_bytes, 0) <= 1024 * 1024 FROM genie_service_status()}),
	'and released afterwards: the service keeps within genie.cache_size');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET genie.cache_size; SELECT pg_reload_conf()');

$node->stop;
done_testing();
