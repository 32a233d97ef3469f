# Edit-distance scans through the genie service (genie preloaded): the
# service holds the main objects' stored strings, the backend scans its
# pending ones and merges.  ORDER BY <%> and genie_similar equal
# levenshtein() over the table with pending rows, deletes and NULLs, after
# a VACUUM merge (a new version, handed over again), with many sessions
# handing over the same version at once, while the service restarts, and
# when a long scan is cancelled.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('service_strings');
$node->init(extra => ['--encoding=UTF8', '--locale=C']);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'genie'
max_connections = 40
genie.pending_list_limit = '1MB'
genie.cpu_threads = 2
});
$node->start;

sub service_pid
{
	my $deadline = time + 30;
	while (time < $deadline)
	{
		my ($running, $pid) = split /\|/, $node->safe_psql('postgres',
			'SELECT running, coalesce(pid, 0) FROM genie_service_status()');
		return $pid if $running eq 't';
		usleep(100_000);
	}
	return 0;
}

# words of 3 to 14 letters, some with non-ASCII letters, a few NULLs
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE EXTENSION fuzzystrmatch;
	SELECT setseed(0.11);
	CREATE TABLE words (id serial PRIMARY KEY, w text);
	INSERT INTO words (w)
	SELECT CASE WHEN i % 997 = 0 THEN NULL
	            ELSE translate(substr(md5(i::text) || md5((i * 7)::text), 1 + i % 5, 3 + (i * 13) % 12),
	                           '0123456789', CASE WHEN i % 5 = 0 THEN 'ghijklmñéü' ELSE 'ghijklmnop' END) END
	FROM generate_series(1, 20000) i;
	CREATE INDEX words_w ON words USING genie (w genie_ngram_ops);
	CREATE TABLE queries AS
	SELECT g, overlay(w placing chr(97 + g % 26) || chr(97 + (g * 7) % 26) from 1 + g % 3 for 1) AS q
	FROM (SELECT (row_number() OVER (ORDER BY id))::int AS g, w FROM words WHERE w IS NOT NULL AND id % 500 = 1) x;
});
ok(service_pid() > 0, 'the genie service runs');

# Queries whose genie answers differ from levenshtein() over the table.
sub mismatches
{
	my ($k) = @_;
	my $order_by = $node->safe_psql('postgres', qq{
		SET enable_seqscan = off;
		SELECT count(*) FROM queries qq
		WHERE (SELECT array_agg(levenshtein(x, qq.q) ORDER BY n)
		       FROM unnest(array(SELECT w FROM words ORDER BY w <%> qq.q LIMIT $k)) WITH ORDINALITY u(x, n))
		   IS DISTINCT FROM
		      (SELECT array_agg(d ORDER BY d) FROM
		        (SELECT levenshtein(w, qq.q) d FROM words WHERE w IS NOT NULL ORDER BY 1 LIMIT $k) t)
	});
	my $similar = $node->safe_psql('postgres', qq{
		WITH s AS (SELECT query_no, array_agg(distance ORDER BY distance) AS d, bool_and(exact) AS e
		           FROM genie_similar('words_w', ARRAY(SELECT q FROM queries ORDER BY g), $k)
		           GROUP BY query_no)
		SELECT count(*) FROM queries qq LEFT JOIN s ON s.query_no = qq.g
		WHERE s.e IS NOT TRUE OR s.d IS DISTINCT FROM
		      (SELECT array_agg(d ORDER BY d) FROM
		        (SELECT levenshtein(w, qq.q) d FROM words WHERE w IS NOT NULL ORDER BY 1 LIMIT $k) t)
	});
	return "$order_by|$similar";
}

# the versions of the strings held, and the scan requests answered
sub strings_stats
{
	return $node->safe_psql('postgres', q{
		SELECT count(DISTINCT objects), coalesce(sum(requests), 0) FROM genie_service_stats()
		WHERE content = 'strings' AND index = 'words_w'::regclass});
}

is(mismatches(5), '0|0', 'ORDER BY <%> and genie_similar through the service equal levenshtein()');
is(mismatches(1), '0|0', 'the same for k = 1');
my ($loads, $requests) = split /\|/, strings_stats();
is($loads, 1, 'the service holds one version of the strings');
cmp_ok($requests, '>=', 2 * 41, 'the service answered the edit-distance scans');

# pending rows (near every query), deletes of main rows, another NULL
$node->safe_psql('postgres', q{
	INSERT INTO words (w) SELECT q || 'x' FROM queries WHERE g % 2 = 0;
	INSERT INTO words (w) SELECT q FROM queries WHERE g % 3 = 0;
	INSERT INTO words (w) VALUES (NULL);
	DELETE FROM words WHERE id IN (SELECT id FROM words WHERE id % 37 = 0 OR id % 500 = 1);
});
is(mismatches(5), '0|0', 'with pending rows, deletes and NULLs: still equal to levenshtein()');
($loads, $requests) = split /\|/, strings_stats();
is($loads, 1, 'inserts and deletes keep the version the service holds');
is($node->safe_psql('postgres', q{
	SELECT bool_and(loads = 1) FROM genie_service_stats() WHERE content = 'strings'}), 't',
	'it was handed over once');

$node->safe_psql('postgres', 'VACUUM words');
is(mismatches(5), '0|0', 'after the VACUUM merge (a new version): still equal');

# many sessions hand over the next version at once
$node->safe_psql('postgres', q{
	DELETE FROM words WHERE id % 41 = 0;
	VACUUM words;
});
my $script = $node->basedir . '/strings_query.sql';
append_to_file($script,
	"\\set g random(1, 40)\nSELECT w FROM words ORDER BY w <%> (SELECT q FROM queries WHERE g = :g) LIMIT 5;\n");
$node->pgbench('--no-vacuum --client=12 --jobs=2 --transactions=30 -f ' . $script,
	0, [qr{processed: 360/360}], [qr{\A(?:(?!ERROR|abort).)*\z}s],
	'12 sessions scan a new version at once');
# every version held (older ones stay until evicted) was handed over once
is($node->safe_psql('postgres', q{
	SELECT bool_and(loads = 1) AND count(*) = count(DISTINCT (objects, engine)) FROM genie_service_stats()
	WHERE content = 'strings' AND index = 'words_w'::regclass}), 't',
	'the racing sessions handed the new version over once');
is(mismatches(5), '0|0', 'and its answers equal levenshtein()');

# the service terminated: scans go on in-process, then through the new service
my $pid = service_pid();
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"), 't', 'the service is terminated');
is(mismatches(5), '0|0', 'answers while the service restarts equal levenshtein()');
my $deadline = time + 30;
usleep(100_000) while time < $deadline && (service_pid() == $pid || service_pid() == 0);
isnt(service_pid(), $pid, 'the postmaster started the service again');
is(mismatches(5), '0|0', 'answers through the new service equal levenshtein()');
($loads, $requests) = split /\|/, strings_stats();
is($loads, 1, 'the new service was handed the strings of the current version');

# a long scan in the service, cancelled: the backend returns in time and the
# service drops the scan (queries of 300+ characters take the banded DP)
$node->safe_psql('postgres', q{
	CREATE TABLE longs (id int, t text);
	INSERT INTO longs SELECT i, (SELECT string_agg(md5((i * 100 + j)::text), '') FROM generate_series(1, 32) j)
	FROM generate_series(1, 1000) i;
	CREATE INDEX longs_t ON longs USING genie (t genie_ngram_ops);
});
my $long = q{SELECT count(*) FROM genie_similar('longs_t',
	ARRAY(SELECT t FROM longs WHERE id <= 40), 5)};
$pid = service_pid();
my $start = time;
is(mismatches(1), '0|0', 'scans before the cancel');
my $baseline = time - $start;
$start = time;
my ($ret, $stdout, $stderr) = $node->psql('postgres', "SET statement_timeout = '300ms'; $long");
my $took = time - $start;
like($stderr, qr/canceling statement due to statement timeout/, 'statement_timeout ends a long scan');
diag(sprintf('statement_timeout 300 ms: the statement ended after %.0f ms', 1000 * $took));
cmp_ok($took, '<', 0.3 + 0.5, 'the cancelled backend returns in time');
$start = time;
is(mismatches(1), '0|0', 'the next scans are answered, and equal');
my $after = time - $start;
diag(sprintf('the same scans took %.0f ms before the cancel, %.0f ms after', 1000 * $baseline, 1000 * $after));
# (finishing the cancelled scan would delay these by its seconds; the margin
# allows for a loaded machine)
cmp_ok($after, '<', 1.5 * $baseline + 0.5, 'the service dropped the cancelled scan instead of finishing it');
is(service_pid(), $pid, 'the service still runs, the same process');

$node->stop;
done_testing();
