# A long engine search stops soon after a cancel: statement_timeout and
# pg_cancel_backend both end a genie_topk batch whose engine work runs for
# seconds, well before the engine would have finished, and the session can
# search again afterwards.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# How late a cancel may take effect here.  The engines poll every few
# milliseconds; the margin is for a loaded 2-core CI machine.
my $max_latency = 0.5;

my $node = PostgreSQL::Test::Cluster->new('cancel');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\ngenie.cpu_threads = 2\n");
$node->start;

# 150,000 rows of 40 keywords out of 600: long postings lists (10,000 rows a
# keyword), so a query of 200 keywords counts 2 million postings and a
# batch of 6,000 runs for seconds (3,500 ran 1.3 s on this 2-core machine, under
# the 1.5 s the test needs to mean something).
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	SELECT setseed(0.5);
	CREATE TABLE t (id int, tags int4[]);
	INSERT INTO t SELECT i, ARRAY(SELECT (random() * 599)::int + 0 * i FROM generate_series(1, 40))
	FROM generate_series(1, 150000) i;
	CREATE INDEX t_idx ON t USING genie (tags);
});

sub batch
{
	my ($n) = @_;
	return "SELECT count(*) FROM genie_topk('t_idx', ARRAY(SELECT ARRAY(SELECT (q * 31 + j * 17) % 600 "
	  . "FROM generate_series(1, 200) j)::genie_query FROM generate_series(1, $n) q), 10)";
}

# One session: a warm-up search loads the index into its cache, so that
# what is timed afterwards is the engine's work.
my ($in, $out, $err) = ('', '', '');
my $psql = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres') ],
	\$in, \$out, \$err, IPC::Run::timeout(300));

sub run_statement
{
	my ($sql, $on_start) = @_;
	($out, $err) = ('', '');
	$in .= "$sql;\n\\echo done\n";
	my $start = time;
	my $started = 0;
	while ($out !~ /done/)
	{
		IPC::Run::pump_nb($psql);
		if ($on_start && !$started && time - $start >= $on_start->[0])
		{
			$on_start->[1]->();
			$started = time;
		}
		usleep(2000);
	}
	return (time - $start, $started);
}

run_statement("SET application_name = 'genie_cancel'; " . batch(1));
like($out, qr/^10$/m, 'warm-up search answers');

my ($full) = run_statement(batch(6000));
like($out, qr/^60000$/m, 'the uninterrupted batch answers every query');
diag(sprintf('uninterrupted batch: %.2f s', $full));
cmp_ok($full, '>', 3 * $max_latency, 'the batch runs long enough for the test to mean something');

my ($timed_out) = run_statement("SET statement_timeout = '300ms'; " . batch(6000));
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels the batch');
diag(sprintf('statement_timeout 300 ms: the batch ended after %.0f ms', 1000 * $timed_out));
cmp_ok($timed_out, '<', 0.3 + $max_latency, 'statement_timeout takes effect in time');

my $cancelled_at;
my ($ended, $cancel_sent) = run_statement(
	"SET statement_timeout = 0; " . batch(6000),
	[
		0.5,
		sub {
			$node->safe_psql('postgres',
				"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'genie_cancel'");
			$cancelled_at = time;
		}
	]);
my $latency = time - $cancelled_at;
like($err, qr/canceling statement due to user request/, 'pg_cancel_backend cancels the batch');
diag(sprintf('pg_cancel_backend: the batch ended %.0f ms after the cancel', 1000 * $latency));
cmp_ok($latency, '<', $max_latency, 'the cancel takes effect in time');

run_statement(batch(2));
like($out, qr/^20$/m, 'the session searches again after the cancels');

# Building an index: a CREATE INDEX of the 150,000 rows (6M pairs, sorted
# in runs on tapes at maintenance_work_mem = 1MB) stops at a timeout of a
# quarter of its uninterrupted time (builds got faster than a fixed 200 ms).
my ($build_full) = run_statement("SET statement_timeout = 0; SET maintenance_work_mem = '1MB'; "
	  . "CREATE INDEX t_idx2 ON t USING genie (tags); DROP INDEX t_idx2");
diag(sprintf('uninterrupted CREATE INDEX (and DROP): %.2f s', $build_full));
cmp_ok($build_full, '>', 0.1, 'the build runs long enough for the test to mean something');
my $build_limit_ms = int(250 * $build_full);
my ($build_timeout) = run_statement("SET statement_timeout = '${build_limit_ms}ms'; SET maintenance_work_mem = '1MB'; "
	  . "CREATE INDEX t_idx3 ON t USING genie (tags)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels CREATE INDEX');
diag(sprintf('statement_timeout %d ms: CREATE INDEX ended after %.0f ms', $build_limit_ms, 1000 * $build_timeout));
cmp_ok($build_timeout, '<', $build_limit_ms / 1000 + $max_latency, 'CREATE INDEX stops in time');

# Edit distances of long strings: one genie_edit_distance call (banded
# dynamic programming over about 10^9 cells), and genie_similar verifying
# 300 rows of 9,600 characters (300 pairs of about 10^8 cells each).
$node->safe_psql('postgres', q{
	CREATE TABLE long_a AS SELECT string_agg(md5(i::text), '') AS s FROM generate_series(1, 1000) i;
	CREATE TABLE long_b AS SELECT string_agg(md5((i * 7)::text), '') AS s FROM generate_series(1, 1000) i;
	CREATE TABLE pages (id int, body text);
	INSERT INTO pages SELECT p, (SELECT string_agg(md5((p * 1000 + i)::text), '') FROM generate_series(1, 300) i)
	FROM generate_series(1, 300) p;
	CREATE INDEX pages_body ON pages USING genie (body genie_ngram_ops);
});
my $distance = "SELECT genie_edit_distance(a.s, b.s) FROM long_a a, long_b b";
my ($full_distance) = run_statement("SET statement_timeout = 0; $distance");
like($out, qr/^\d+$/m, 'the long edit distance answers');
diag(sprintf('uninterrupted edit distance of two 32,000-character strings: %.2f s', $full_distance));
cmp_ok($full_distance, '>', 2 * $max_latency, 'the edit distance runs long enough for the test to mean something');
my ($distance_timeout) = run_statement("SET statement_timeout = '200ms'; $distance");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels genie_edit_distance');
diag(sprintf('statement_timeout 200 ms: genie_edit_distance ended after %.0f ms', 1000 * $distance_timeout));
cmp_ok($distance_timeout, '<', 0.2 + $max_latency, 'inside one edit distance, the timeout takes effect in time');

my ($similar_timeout) = run_statement("SET statement_timeout = '200ms'; "
	  . "SELECT count(*) FROM genie_similar('pages_body', ARRAY[(SELECT s FROM long_b)], 5, 300)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels genie_similar\'s verification');
diag(sprintf('statement_timeout 200 ms: genie_similar ended after %.0f ms', 1000 * $similar_timeout));
cmp_ok($similar_timeout, '<', 0.2 + $max_latency, 'genie_similar stops in time');

# Strings of 1,024 characters: each distance is about 10^6 cells, below one
# poll inside the distance, so the scan itself must poll by work done
# rather than every 1,024 strings (seconds here).
$node->safe_psql('postgres', q{
	CREATE TABLE mids (id int, t text);
	INSERT INTO mids SELECT i, (SELECT string_agg(md5((i * 100 + j)::text), '') FROM generate_series(1, 32) j)
	FROM generate_series(1, 1000) i;
	CREATE INDEX mids_t ON mids USING genie (t genie_ngram_ops);
});
my ($scan_timeout) = run_statement("SET statement_timeout = '200ms'; "
	  . "SELECT count(*) FROM genie_similar('mids_t', ARRAY(SELECT t FROM mids WHERE id <= 40), 5)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels a scan of 1,024-character strings');
diag(sprintf('statement_timeout 200 ms: the scan ended after %.0f ms', 1000 * $scan_timeout));
cmp_ok($scan_timeout, '<', 0.2 + $max_latency, 'the scan stops in time');

# Vector indexes: the width estimate of CREATE INDEX (nearest neighbours in
# a 1,000-row sample: 10^6 pairs of 4,000 dimensions) and the draws of the
# LSH functions at their bound (m x dimensions = 2^24, RBH: two numbers a
# draw) both stop at a cancel.
$node->safe_psql('postgres', q{
	SELECT setseed(0.25);
	CREATE TABLE wide (id int, v real[]);
	INSERT INTO wide SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 4000) j WHERE j > 0 * i)
	FROM generate_series(1, 1000) i;
	CREATE TABLE drawn (id int, v real[]);
	CREATE INDEX drawn_v ON drawn USING genie (v) WITH (family = rbh, m = 4096, width = 1);
	CREATE TABLE huge (id int, v real[]);
	CREATE INDEX huge_v ON huge USING genie (v);
});
my ($width_timeout) = run_statement("SET statement_timeout = '200ms'; CREATE INDEX wide_v ON wide USING genie (v) WITH (m = 1)");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels the LSH width estimate');
diag(sprintf('statement_timeout 200 ms: CREATE INDEX with the width estimate ended after %.0f ms', 1000 * $width_timeout));
cmp_ok($width_timeout, '<', 0.2 + $max_latency, 'the width estimate stops in time');
my ($width_full) = run_statement("SET statement_timeout = 0; CREATE INDEX wide_v ON wide USING genie (v) WITH (m = 1)");
is($err, '', 'the uncancelled width estimate builds the index');
diag(sprintf('uninterrupted CREATE INDEX with the width estimate: %.2f s', $width_full));
cmp_ok($width_full, '>', 2 * $max_latency, 'the width estimate runs long enough for the test to mean something');

# Exact kNN through the List of Clusters (genie.cluster_list_knn = on): 1,000
# queries of 4,000 dimensions for their 1,000 nearest read every row at its
# exact distance through the list (seconds) and stop at a timeout.
$node->safe_psql('postgres', q{
	CREATE INDEX wide_lc ON wide USING genie (v) WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4);
	CREATE TABLE wide_q AS SELECT array_agg(v ORDER BY id) a FROM wide;
});
my $knn = "SET genie.cluster_list_knn = on; SELECT count(*) FROM genie_knn('wide_lc', (SELECT a FROM wide_q), 1000)";
my ($knn_timeout) = run_statement("SET statement_timeout = '200ms'; $knn");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels kNN through the list');
diag(sprintf('statement_timeout 200 ms: genie_knn through the list ended after %.0f ms', 1000 * $knn_timeout));
cmp_ok($knn_timeout, '<', 0.2 + $max_latency, 'kNN through the list stops in time');
my ($knn_full) = run_statement("SET statement_timeout = 0; $knn");
like($out, qr/^1000000$/m, 'the uncancelled kNN through the list answers every query');
diag(sprintf('uninterrupted genie_knn through the list: %.2f s', $knn_full));
cmp_ok($knn_full, '>', 0.2 + $max_latency, 'kNN through the list runs long enough for the test to mean something');

# The draws happen once per backend and are cached: the cancelled one first.
# On one thread (the draws' logarithms spread over genie.cpu_threads), so
# that the uncancelled draws run well past the timeout on any machine.
my $insert_wide = "SET genie.cpu_threads = 1; INSERT INTO drawn SELECT 1, array_fill(0.5::real, ARRAY[4096])";
my ($draw_timeout) = run_statement("SET statement_timeout = '200ms'; $insert_wide");
like($err, qr/canceling statement due to statement timeout/, 'statement_timeout cancels the draws of the LSH functions');
diag(sprintf('statement_timeout 200 ms: the insert drawing 2^24 RBH functions ended after %.0f ms', 1000 * $draw_timeout));
cmp_ok($draw_timeout, '<', 0.2 + $max_latency, 'the draws stop in time');
my ($draw_full) = run_statement("SET statement_timeout = 0; $insert_wide");
is($err, '', 'the uncancelled draws let the insert through');
diag(sprintf('uninterrupted insert drawing 2^24 RBH functions: %.2f s', $draw_full));
cmp_ok($draw_full, '>', 0.2 + $max_latency, 'the draws run long enough for the test to mean something');
my ($draw_cached) = run_statement("SET statement_timeout = 0; $insert_wide");
cmp_ok($draw_cached, '<', $draw_full / 4, 'the next insert of the backend uses its drawn functions');

# Beyond the bound, the first vector is refused at once with what to do.
my ($refused) = run_statement("SET statement_timeout = 0; INSERT INTO huge SELECT 1, array_fill(1::real, ARRAY[2000000])");
like($err, qr/genie index "huge_v" would need 238 LSH functions of 2000000 dimensions/, 'a vector beyond the draws bound is refused');
like($err, qr/HINT:  Create the index WITH \(m = 8\) or less, or WITH \(m = 0\)/, 'the refusal says which m fits');
cmp_ok($refused, '<', $max_latency, 'the refusal is immediate');
run_statement("INSERT INTO huge SELECT 1, array_fill(1::real, ARRAY[70492])");
is($err, '', 'the default m takes 70,492 dimensions');

$in .= "\\q\n";
IPC::Run::finish($psql);

# genie_knn_from's scan ahead: its thread scans pieces of 1,024 queries of
# 4,000 dimensions (8,000 queries: seconds on the CPU engine) when the
# backend is terminated.  The backend's exit skips the statement's clean-up, so its
# proc_exit callback stops and joins the thread: the server does not
# restart, and the next session searches.
$node->safe_psql('postgres', q{
	CREATE INDEX wide_plain ON wide USING genie (v) WITH (m = 0);
	CREATE TABLE wide_rows AS SELECT v FROM wide, generate_series(1, 8) g;
});
my $started_at = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my ($tin, $tout, $terr) = ("SET application_name = 'genie_terminate'; SET log_min_messages = debug1; "
	  . "SELECT count(*) FROM genie_knn_from('wide_plain', 'SELECT v FROM wide_rows', 10);\n", '', '');
my $victim = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	\$tin, \$tout, \$terr, IPC::Run::timeout(300));
my $terminated = 0;
for (my $waited = 0; $waited < 30 && !$terminated; $waited += 0.05)
{
	usleep(50_000);
	IPC::Run::pump_nb($victim);
	# once the first piece is with the scans (its rows read: the query is well past 1,024 rows)
	$terminated = $node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'genie_terminate' "
		  . "AND state = 'active' AND now() - query_start > interval '300 ms'") eq 't';
}
ok($terminated, 'a backend scanning ahead is terminated');
diag("the terminated session: out '$tout'");
IPC::Run::finish($victim);
like($terr, qr/terminating connection due to administrator command/, 'the terminated session says why');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started_at,
	'the server did not restart: the scans stopped before the backend exited');
is($node->safe_psql('postgres', "SELECT count(*) FROM genie_knn_from('wide_plain', 'SELECT v FROM wide LIMIT 2', 3)"),
	'6', 'the next session searches');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no backend died of a signal');
like($log, qr/genie: a scan ahead started.*genie: a scan ahead stopped at the backend's exit/s,
	'the scans were running when the backend was terminated, and its exit stopped them');

$node->stop;
done_testing();
