# A genie service without a GPU shares its copy of an index's postings
# (genie.shared_postings, issue 28): the service keeps each version's main
# postings in one segment of shared memory, and every backend maps it and
# searches it on its own CPU engine instead of sending the search to the
# service.  Answers equal the sequential scan (pgbench sessions with
# inserts, deletes and merges, weighted queries, genie_topk); the service
# answers no search, yet holds the one copy, which the backends map (their
# memory maps name the service's segment); genie.shared_postings = off sends
# searches to the service again; terminating the service mid-run loses no
# query; a statement_timeout stops a long batch over the shared copy.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('shared');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'genie'
max_connections = 40
genie.pending_list_limit = '128kB'
genie.cpu_threads = 2
# a service without a GPU also on a GPU host; its copies in /dev/shm
genie.devices = 'none'
dynamic_shared_memory_type = posix
min_dynamic_shared_memory = 0
# room for the small index, not for the big one beside it (the service evicts)
genie.cache_size = '8MB'
});
$node->start;

sub service_pid
{
	my ($not_pid) = @_;
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my ($running, $pid) = split /\|/, $node->safe_psql('postgres',
			"SELECT running, coalesce(pid, 0) FROM genie_service_status()");
		return $pid if $running eq 't' && $pid != $not_pid;
		usleep(100_000);
	}
	return 0;
}

# The shared-memory files a process maps (/dev/shm/PostgreSQL.N), by name
# (a segment's file is its exact size: the postings' is the service's host_bytes).
sub mapped_segments
{
	my ($pid) = @_;
	my %files;
	open(my $maps, '<', "/proc/$pid/maps") or return {};
	while (<$maps>)
	{
		$files{$1} = 1 if m{(/dev/shm/PostgreSQL\.\d+)};
	}
	close($maps);
	return \%files;
}

# The service's search requests and the postings it holds, summed.
sub service_counts
{
	return split /\|/, $node->safe_psql('postgres', q{
		SELECT coalesce(sum(requests), 0), coalesce(sum(host_bytes), 0), count(*)
		FROM genie_service_stats() WHERE content = 'postings'});
}

# The sizes of the service's copies of an index's versions (a set).
sub postings_sizes
{
	my ($index) = @_;
	return { map { $_ => 1 } split /\n/, $node->safe_psql('postgres',
		"SELECT host_bytes FROM genie_service_stats() WHERE index = '$index'::regclass") };
}

create_docs($node, 20000);
$node->safe_psql('postgres', 'CREATE SEQUENCE doc_ids START 1000000');
my $pid = service_pid(0);
ok($pid > 0, 'the genie service runs');
is($node->safe_psql('postgres', 'SELECT gpu FROM genie_service_status()'), 'f',
	'the service has no GPU (genie.devices = none)');

like($node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10}),
	qr/Genie Engines: cpu, this backend, the genie service's shared postings/,
	'EXPLAIN (ANALYZE): the backend searched the service\'s shared postings');
my ($requests, $bytes, $versions) = service_counts();
is($requests, 0, 'the service answered no search');
ok($bytes > 20000 * 4 && $versions == 1, "the service holds the version's postings ($bytes bytes)");

# ---- many sessions at once: the answers, and one copy ----
my $run = start_docs_queries($node, 6, 4, 'shared_bench');
sleep 2;
my @backends = split /\n/, $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'shared_bench'");
my $service_files = mapped_segments($pid);
my $sharing = 0;
for my $backend (@backends)
{
	my $files = mapped_segments($backend);
	# a segment of the service's that the backend maps: its own request segment is not
	$sharing++ if grep { $service_files->{$_} && -s $_ == $bytes } keys %$files;
}
finish_docs_queries($run, '6 sessions');
diag(sprintf('%d of %d pgbench backends map the service\'s postings segment', $sharing, scalar @backends));
ok(@backends >= 4 && $sharing == @backends,
	'every pgbench backend maps the one segment of postings the service holds');
($requests) = service_counts();
is($requests, 0, 'the service answered none of their searches');

docs_sessions($node, 8, 150, '8 sessions: ordered queries, inserts and deletes over the shared postings');
check_index_matches_seqscan($node, 'after 8 sessions over the shared postings');
$node->safe_psql('postgres', 'VACUUM docs');
check_index_matches_seqscan($node, 'after VACUUM merged the pending rows (a new version shared)');

# weighted queries and genie_topk, against the sequential scan
my $mismatch = $node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM generate_series(1, 25) q
	CROSS JOIN LATERAL (SELECT genie_query_add(genie_query_add(genie_query(ARRAY[q % 500]),
	                                                           ARRAY[q * 11 % 500], 3), ARRAY[3], 2) AS query) qq
	WHERE (SELECT array_agg(s) FROM (SELECT tags <~> qq.query AS s FROM docs ORDER BY tags <~> qq.query LIMIT 20) x)
	      IS DISTINCT FROM
	      -- + 0: an expression no index orders by, so the operator is computed row by row
	      (SELECT array_agg(s) FROM (SELECT (tags <~> qq.query) + 0 AS s FROM docs ORDER BY 1 LIMIT 20) y)});
is($mismatch, '0', 'weighted queries over the shared postings equal the sequential scan');
$mismatch = $node->safe_psql('postgres', q{
	WITH q AS (SELECT g, ARRAY[g, g * 3 % 500, 7] AS query FROM generate_series(1, 40) g),
	t AS (SELECT t.query_no, array_agg(t.score ORDER BY t.score DESC) AS s
	      FROM genie_topk('docs_tags_idx', ARRAY(SELECT query::genie_query FROM q ORDER BY g), 15) t
	      GROUP BY t.query_no),
	o AS (SELECT q.g, (SELECT array_agg(c ORDER BY c DESC) FROM (
	          SELECT genie_match_count(tags, q.query) AS c FROM docs
	          ORDER BY 1 DESC LIMIT 15) x WHERE c > 0) AS s FROM q)
	SELECT count(*) FROM o LEFT JOIN t ON t.query_no = o.g WHERE t.s IS DISTINCT FROM o.s});
is($mismatch, '0', 'genie_topk over the shared postings equals the sequential scans');
($requests) = service_counts();
is($requests, 0, 'still no search sent to the service');

# ---- genie.shared_postings = off: the service searches again ----
like($node->safe_psql('postgres', q{
	SET enable_seqscan = off; SET genie.shared_postings = off;
	EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10}),
	qr/Genie Engines: cpu, genie service/, 'genie.shared_postings = off sends the search to the service');
($requests) = service_counts();
ok($requests >= 1, 'the service answered it');

# ---- two entries of one version share one mapping ----
# A cursor keeps its entry while an insert makes a new one (the pending list
# changed, the main postings did not): both read the one mapping (dsm_attach
# cannot map a segment twice in a backend).
my $cursor = $node->background_psql('postgres');
$cursor->query_safe('SET enable_seqscan = off');
$cursor->query_safe('BEGIN');
$cursor->query_safe("DECLARE c CURSOR FOR SELECT tags <~> '{1,2,3}' FROM docs ORDER BY tags <~> '{1,2,3}'");
my $first = $cursor->query_safe('FETCH 3 FROM c');
$cursor->query_safe("INSERT INTO docs VALUES (nextval('doc_ids'), '{1,2,3}')");
is($cursor->query_safe(q{
	SELECT (SELECT array_agg(s) FROM (SELECT tags <~> '{1,2,3}' AS s FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 25) x)
	       IS NOT DISTINCT FROM
	       (SELECT array_agg(s) FROM (SELECT (tags <~> '{1,2,3}') + 0 AS s FROM docs ORDER BY 1 LIMIT 25) y)}), 't',
	'a search beside an open cursor after an insert equals the sequential scan');
my $cursor_pid = $cursor->query_safe('SELECT pg_backend_pid()');
my $docs_sizes = postings_sizes('docs_tags_idx');
my @postings_maps = grep { $docs_sizes->{-s $_} } keys %{ mapped_segments($cursor_pid) };
is(scalar @postings_maps, 1, 'the session maps the version once for both entries');
like($cursor->query_safe('FETCH 3 FROM c'), qr/^-\d/, 'the cursor reads on');
$cursor->query_safe('COMMIT');

# ---- the service terminated while sessions search its shared postings ----
$run = start_docs_queries($node, 6, 5, 'shared_bench');
sleep 2;
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"), 't',
	'the service is terminated mid-run');
finish_docs_queries($run, 'while the service restarts');
my $new_pid = service_pid($pid);
ok($new_pid > 0, 'the postmaster started the service again');
like($node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	EXPLAIN (ANALYZE, COSTS OFF) SELECT id FROM docs ORDER BY tags <~> '{1,2,3}' LIMIT 10}),
	qr/the genie service's shared postings/, 'a new session maps the new service\'s copy');
check_index_matches_seqscan($node, 'after the restart');
# the session that mapped the old service's copy lets go of it at its next
# genie statement (the new service holds another), and it is gone
my ($before_restart) = @postings_maps;
is($cursor->query_safe(q{
	SELECT (SELECT array_agg(s) FROM (SELECT tags <~> '{2,5}' AS s FROM docs ORDER BY tags <~> '{2,5}' LIMIT 25) x)
	       IS NOT DISTINCT FROM
	       (SELECT array_agg(s) FROM (SELECT (tags <~> '{2,5}') + 0 AS s FROM docs ORDER BY 1 LIMIT 25) y)}), 't',
	'the session that mapped the old copy answers as the sequential scan');
ok(!exists mapped_segments($cursor_pid)->{$before_restart},
	'and let go of the old service\'s copy');
ok(!-e $before_restart, 'which is gone from /dev/shm');
$cursor->quit;

# ---- a cancel stops a long batch over the shared postings ----
create_big($node);
check_long_batch_cancel($node, 'over the shared postings');
($requests) = service_counts();
is($requests, 0, 'neither batch was sent to the (restarted) service');

# ---- a version the service drops is let go by the backends that mapped it ----
# The big index (above genie.cache_size on its own) pushed the small one
# out of the service; a session that still maps the small one's segment
# lets go of it at its next genie statement, and the segment is gone.
my $holder = $node->background_psql('postgres');
$holder->query_safe('SET enable_seqscan = off');
$holder->query_safe("SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{4,5}' LIMIT 5) x");
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
$docs_sizes = postings_sizes('docs_tags_idx');
my ($old_file) = grep { $docs_sizes->{-s $_} } keys %{ mapped_segments($holder_pid) };
ok(defined $old_file, 'a session maps the small index\'s segment');
$node->safe_psql('postgres', big_batch(50));
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM genie_service_stats() WHERE index = 'docs_tags_idx'::regclass"),
	'the service dropped the small index\'s version');
is($holder->query_safe(q{
	SELECT (SELECT array_agg(s) FROM (SELECT tags <~> '{4,5}' AS s FROM docs ORDER BY tags <~> '{4,5}' LIMIT 25) x)
	       IS NOT DISTINCT FROM
	       (SELECT array_agg(s) FROM (SELECT (tags <~> '{4,5}') + 0 AS s FROM docs ORDER BY 1 LIMIT 25) y)}), 't',
	'the session searches on, as the sequential scan');
ok(!exists mapped_segments($holder_pid)->{$old_file}, 'it let go of the dropped version\'s segment');
ok(!-e $old_file, 'which is gone from /dev/shm');
$holder->quit;

$node->stop;
done_testing();
