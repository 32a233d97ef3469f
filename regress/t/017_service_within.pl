# Range searches through the genie service (issue 30): with genie
# preloaded, genie_within and the ball predicates search the main objects'
# stored values in the service (on its engine; CPU here) and the pending
# ones in the backend, and answer
# exactly what the sequential scan does: edit distances (levenshtein()) and
# Euclidean distances, ties at the radius included, pending rows, deleted
# rows, an answer larger than the room a first ask leaves (4,096 rows:
# kept by the worker for the second ask, not searched twice), one past
# what the service hands back (64 MB: searched in-process), and the
# service's stats counting the requests.  An index with a List of Clusters
# (vectors and strings) is searched in the service through its list, which
# the backend hands over with the values: the same rows, fewer distances
# (EXPLAIN (ANALYZE) through the service); the exact kNN reads it as
# genie.cluster_list_knn says.  A long range search runs on the service's
# range runner: other sessions' requests are answered meanwhile, a cancel
# stops it, and killing the service during one is a clean exit; a long kNN
# scan runs on a runner thread, other requests answered meanwhile.  Stopping
# the service sends the searches back in-process, with the same answers.
# A damaged list handed to the service is an index_corrupted error.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('service_within');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'genie'
max_connections = 20
genie.cpu_threads = 2
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE EXTENSION fuzzystrmatch;
	CREATE TABLE words (id int PRIMARY KEY, w text);
	INSERT INTO words SELECT i, substr(md5(i::text), 1, 3 + i % 6) FROM generate_series(1, 3000) i;
	CREATE INDEX words_w ON words USING genie (w genie_ngram_ops);
	CREATE INDEX words_lsc ON words USING genie (w genie_ngram_ops) WITH (cluster_list = on, cluster_size = 32);
	CREATE TABLE pts (id int PRIMARY KEY, v real[]);
	INSERT INTO pts SELECT i, ARRAY[(i % 37)::real, (i * 7 % 23)::real, (i * 13 % 11)::real]
	FROM generate_series(1, 4000) i;
	CREATE INDEX pts_v ON pts USING genie (v genie_vector_ops) WITH (m = 0);
	CREATE INDEX pts_lsc ON pts USING genie (v genie_vector_ops) WITH (m = 0, cluster_list = on, cluster_size = 32);
	CREATE FUNCTION l2(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
	  SELECT sqrt(sum((x::float8 - y::float8) * (x::float8 - y::float8))) FROM unnest(a, b) AS t(x, y)
	$$;
	CREATE TABLE wq (n int, q text);
	INSERT INTO wq SELECT n, substr(md5((n * 11)::text), 2, 3 + n % 5) FROM generate_series(1, 12) n;
	CREATE TABLE vq (n int, q real[]);
	INSERT INTO vq SELECT n, ARRAY[(n * 3 % 37)::real, (n % 23)::real, (n * 5 % 11)::real] FROM generate_series(1, 12) n;
});

# rows of genie_within that differ from the sequential scan's (as sets,
# with distances), plus rows out of (query_no, distance, ctid) order
sub words_diff
{
	my ($r, $idx) = @_;
	$idx //= 'words_w';
	return $node->safe_psql('postgres', qq{
		SET enable_seqscan = off;
		WITH got AS (SELECT g.query_no AS n, t.id, g.distance AS d, g.ctid
		             FROM genie_within('$idx', (SELECT array_agg(q ORDER BY n) FROM wq), $r) g
		             JOIN words t ON t.ctid = g.ctid),
		     want AS (SELECT n, id, levenshtein(w, q)::float8 AS d FROM wq, words WHERE levenshtein(w, q) <= $r),
		     ordered AS (SELECT (n, d, ctid) >= lag((n, d, ctid)) OVER (ORDER BY n, d, ctid) AS ok FROM got)
		SELECT (SELECT count(*) FROM ((SELECT n, id, d FROM got EXCEPT ALL SELECT * FROM want)
		                              UNION ALL (SELECT * FROM want EXCEPT ALL SELECT n, id, d FROM got)) x)
		       + (SELECT count(*) FROM ordered WHERE ok = false)});
}

sub points_diff
{
	my ($r, $idx) = @_;
	return $node->safe_psql('postgres', qq{
		SET enable_seqscan = off;
		WITH got AS (SELECT g.query_no AS n, t.id, g.distance AS d
		             FROM genie_within('$idx', (SELECT array_agg(q ORDER BY n) FROM vq), $r) g
		             JOIN pts t ON t.ctid = g.ctid),
		     want AS (SELECT n, id, l2(v, q) AS d FROM vq, pts WHERE l2(v, q) <= $r)
		SELECT count(*) FROM ((SELECT * FROM got EXCEPT ALL SELECT * FROM want)
		                      UNION ALL (SELECT * FROM want EXCEPT ALL SELECT * FROM got)) x});
}

# the ball predicate in a plain WHERE clause, against the sequential scan
sub ball_diff
{
	return $node->safe_psql('postgres', q{
		SET enable_seqscan = off;
		SELECT count(*) FROM wq, LATERAL (
		  (SELECT id FROM words WHERE w <@ genie_ball(wq.q, 2) EXCEPT SELECT id FROM words WHERE levenshtein(w, wq.q) <= 2)
		  UNION ALL
		  (SELECT id FROM words WHERE levenshtein(w, wq.q) <= 2 EXCEPT SELECT id FROM words WHERE w <@ genie_ball(wq.q, 2))) x});
}

sub service_requests
{
	my ($content, $idx) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE content = '$content' AND index = '$idx'::regclass});
}

sub check_all
{
	my ($when) = @_;
	is(words_diff($_), '0', "$when: words within $_ equal the sequential scan") for (0, 1, 2, 3);
	is(points_diff($_, 'pts_v'), '0', "$when: points within $_ equal the sequential scan") for (0, 4, 10.5);
	is(points_diff($_, 'pts_lsc'), '0', "$when: points within $_ through the list equal the sequential scan")
	  for (0, 4, 10.5);
	is(words_diff($_, 'words_lsc'), '0', "$when: words within $_ through the list equal the sequential scan")
	  for (1, 2);
	is(ball_diff(), '0', "$when: w <@ genie_ball(q, 2) equals the sequential scan");
}

is($node->safe_psql('postgres', 'SELECT running FROM genie_service_status()'), 't', 'the service runs');
check_all('main rows');
cmp_ok(service_requests('strings', 'words_w'), '>', 0, 'the service answered the edit-distance range searches');
cmp_ok(service_requests('vectors', 'pts_v'), '>', 0, 'the service answered the Euclidean range searches');
cmp_ok(service_requests('vectors', 'pts_lsc'), '>', 0, 'the service answered the searches through a vector list');
my $before;
cmp_ok(service_requests('strings', 'words_lsc'), '>', 0, 'and through a string list');

$node->safe_psql('postgres', q{
	CREATE FUNCTION genie_explain_json(q text) RETURNS json LANGUAGE plpgsql AS $f$
	DECLARE j json;
	BEGIN
	  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || q INTO j;
	  RETURN j;
	END $f$;
});
# through the service, the list prunes as it does in-process: EXPLAIN
# (ANALYZE) counts the worker's distances and discarded clusters
my $lsc_before = service_requests('vectors', 'pts_lsc');
my $dist = $node->safe_psql('postgres', q{
	SELECT (genie_explain_json($q$SELECT * FROM genie_within('pts_lsc', ARRAY[ARRAY[5, 5, 5]::real[]], 1)$q$)::jsonb)->1->>'Genie Range Distances'});
my $discarded = $node->safe_psql('postgres', q{
	SELECT (genie_explain_json($q$SELECT * FROM genie_within('pts_lsc', ARRAY[ARRAY[5, 5, 5]::real[]], 1)$q$)::jsonb)->1->>'Genie Discarded Clusters'});
my $dist_all = $node->safe_psql('postgres', q{
	SELECT (genie_explain_json($q$SELECT * FROM genie_within('pts_v', ARRAY[ARRAY[5, 5, 5]::real[]], 1)$q$)::jsonb)->1->>'Genie Range Distances'});
cmp_ok(service_requests('vectors', 'pts_lsc') - $lsc_before, '>=', 2, 'the service answered the EXPLAINed searches');
cmp_ok($dist, '<', 4000 / 3, "through the service the list computes a third of the distances or fewer ($dist)");
cmp_ok($discarded, '>', 0, "and discards clusters ($discarded)");
is($dist_all, '4000', 'without a list the service reads every row');

# the k nearest through the service, with the list read as
# genie.cluster_list_knn says (on: the worker's CPU engine walks it): the
# sequential scan's distances
sub knn_diff
{
	my ($setting) = @_;
	return $node->safe_psql('postgres', qq{
		SET genie.cluster_list_knn = $setting;
		WITH s AS (SELECT query_no, array_agg(distance ORDER BY distance) AS d,
		                  bool_and(distance = (SELECT l2(v, q.q) FROM pts WHERE ctid = g.ctid)) AS true_distance
		           FROM genie_knn('pts_lsc', ARRAY(SELECT q FROM vq ORDER BY n), 7) g
		           JOIN vq q ON q.n = g.query_no
		           GROUP BY query_no)
		SELECT count(*) FROM vq LEFT JOIN s ON s.query_no = vq.n
		WHERE s.true_distance IS NOT TRUE OR s.d IS DISTINCT FROM
		      ARRAY(SELECT d FROM (SELECT l2(v, vq.q) d FROM pts ORDER BY 1 LIMIT 7) t)});
}
$before = service_requests('vectors', 'pts_lsc');
is(knn_diff($_), '0', "genie_knn through the service with genie.cluster_list_knn = $_: the sequential scan's distances")
  for ('on', 'auto', 'off');
cmp_ok(service_requests('vectors', 'pts_lsc') - $before, '>=', 3, 'the service answered them');
# EXPLAIN (ANALYZE) through the service: its scan is an engine call of its
# own, and the list's counts come back with it
my $listed_before = service_requests('vectors', 'pts_lsc');
my $listed = $node->safe_psql('postgres', q{
	SET genie.cluster_list_knn = on;
	SELECT (genie_explain_json($q$SELECT * FROM genie_knn('pts_lsc', ARRAY(SELECT q FROM vq ORDER BY n), 7)$q$)::jsonb)->1->>'Genie List Queries'});
is($listed, '12', 'EXPLAIN (ANALYZE) counts the 12 queries the service read through the list');
is(service_requests('vectors', 'pts_lsc') - $listed_before, 1, 'in one request of the service');

# an answer of 2 x 3,000 rows: more than a first ask's room (4,096 rows),
# so the backend asks again with room for all (two requests), and the
# worker hands over the answer it kept (one engine call)
sub service_batches
{
	my ($content, $idx) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(batches), 0) FROM genie_service_stats() WHERE content = '$content' AND index = '$idx'::regclass});
}
$before = service_requests('strings', 'words_w');
my $before_calls = service_batches('strings', 'words_w');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM genie_within('words_w', ARRAY['abc', 'de'], 100)}), '6000',
	'an answer larger than the first room comes back whole');
is(service_requests('strings', 'words_w') - $before, 2, 'asked again with room for it');
is(service_batches('strings', 'words_w') - $before_calls, 1, 'searched once: the worker kept the answer');
is($node->safe_psql('postgres', q{
	SELECT count(*) = 6000 AND count(DISTINCT (query_no, ctid)) = 6000
	  AND bool_and(distance = levenshtein((SELECT w FROM words t WHERE t.ctid = g.ctid), (ARRAY['abc', 'de'])[query_no]))
	FROM genie_within('words_w', ARRAY['abc', 'de'], 100) g}), 't',
	'the kept answer is the right one (distances by levenshtein())');

# an answer past what the service hands back (64 MB: 1,900 x 3,000 rows,
# 5.7M) is searched in-process instead, after one ask
$before = service_requests('strings', 'words_w');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM genie_within('words_w', (SELECT array_agg(substr(md5(i::text), 1, 4)) FROM generate_series(1, 1900) i), 100)}),
	'5700000', 'an answer past 64 MB comes back whole, searched in-process');
is(service_requests('strings', 'words_w') - $before, 1, 'after one ask of the service');

# a long range search runs on the service's range runner: meanwhile the
# worker answers other sessions' requests (a kNN of stored values here,
# which its own thread scans); before, it searched on the worker's thread
# and every other request waited for it
$node->safe_psql('postgres', q{
	CREATE TABLE big (id int PRIMARY KEY, v real[]);
	INSERT INTO big SELECT i, ARRAY(SELECT ((i * 7919 + j * 104729) % 1000)::real / 10 FROM generate_series(1, 32) j)
	FROM generate_series(1, 100000) i;
	CREATE INDEX big_v ON big USING genie (v genie_vector_ops) WITH (m = 0);
	CREATE TABLE bigq (n int, q real[]);
	INSERT INTO bigq SELECT n, ARRAY(SELECT ((n * 31 + j * 17) % 1000)::real / 10 FROM generate_series(1, 32) j)
	FROM generate_series(1, 20000) n;
	SELECT count(*) FROM genie_within('big_v', ARRAY[ARRAY(SELECT 1::real FROM generate_series(1, 32))], 1);
});
my $big_before = $node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'big_v'::regclass});
# a session running the 20,000 queries' range search on the service's CPU
# engine (3-4 s on 2 cores), once it waits for the service's answer (its
# latch: wait event type Extension), not while it builds its queries
sub start_long_range
{
	my ($what) = @_;
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	$session->query_until(qr/started/, q{
		SET genie.device = cpu;
		\echo started
		SELECT count(*) AS long_range FROM genie_within('big_v', (SELECT array_agg(q) FROM bigq), 5);
	});
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%long_range%' AND state = 'active'
		AND wait_event_type = 'Extension' AND pid <> pg_backend_pid()}), $what);
	return $session;
}
my $long = start_long_range('the long range search runs');
my $scans_before = $node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'pts_v'::regclass});
my $started = time();
for my $i (1 .. 5)
{
	$node->safe_psql('postgres', qq{SELECT count(*) FROM genie_knn('pts_v', ARRAY[ARRAY[$i, 2, 3]::real[]], 5)});
}
my $light_s = sprintf('%.3f', time() - $started);
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%long_range%' AND state = 'active' AND pid <> pg_backend_pid()}),
	'1', "five kNN statements through the service were answered while the long range search ran (${light_s} s)");
cmp_ok($node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'pts_v'::regclass}) - $scans_before,
	'>=', 5, 'by the service');
$long->quit;
cmp_ok($node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'big_v'::regclass}) - $big_before,
	'>=', 1, 'the long range search was the service\'s too');

# a long kNN scan of stored values runs on a runner thread too: meanwhile
# the worker answers other sessions' scans; before, its own thread scanned
# and every other request waited for it; and a cancel stops it.  The scan
# is of all 20,000 queries (3-5 s on 2 cores), so that the five light
# statements (about 0.1 s each while it runs) end well before it does; it
# says when it ended (its rows' latest clock_timestamp(): they are made
# after the search), and the light statements' end is compared with that,
# not with whether it still shows as active afterwards
sub start_long_knn
{
	my ($what) = @_;
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	$session->query_until(qr/started/, q{
		SET genie.device = cpu;
		\echo started
		SELECT count(*) AS long_knn, extract(epoch FROM max(clock_timestamp())) AS ended
		FROM genie_knn('big_v', (SELECT array_agg(q) FROM bigq), 10);
	});
	ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%long_knn%' AND state = 'active'
		AND wait_event_type = 'Extension' AND pid <> pg_backend_pid()}), $what);
	return $session;
}
$long = start_long_knn('a long kNN scan of 20,000 queries runs');
$scans_before = $node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'pts_v'::regclass});
$started = time();
my $light_ended;
for my $i (1 .. 5)
{
	$light_ended = $node->safe_psql('postgres', qq{
		SELECT extract(epoch FROM clock_timestamp()) FROM genie_knn('pts_v', ARRAY[ARRAY[$i, 2, 3]::real[]], 5) LIMIT 1});
}
$light_s = sprintf('%.3f', time() - $started);
cmp_ok($node->safe_psql('postgres', q{
	SELECT coalesce(sum(requests), 0) FROM genie_service_stats() WHERE index = 'pts_v'::regclass}) - $scans_before,
	'>=', 5, 'five kNN statements were answered by the service');
my $knn_answer = $long->query_until(qr/done/, "\\echo done\n");
my ($knn_rows, $knn_ended) = $knn_answer =~ /^\s*(\d+)\|([\d.]+)\s*$/m;
is($knn_rows, '200000', 'the long kNN scan answered its 20,000 queries, 10 rows each');
cmp_ok($light_ended, '<', $knn_ended // 0, sprintf(
	'the five (%s s) were answered while the long kNN scan ran: they ended %.3f s before it',
	$light_s, ($knn_ended // 0) - $light_ended));
$long->quit;
# cancels the running statement tagged $tag, checks it ended ($label); the seconds it took
sub cancel_long
{
	my ($tag, $label) = @_;
	my $from = time();
	$node->safe_psql('postgres', qq{
		SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%$tag%' AND pid <> pg_backend_pid()});
	ok($node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM pg_stat_activity WHERE query LIKE '%$tag%' AND state = 'active' AND pid <> pg_backend_pid()}),
		$label);
	return time() - $from;
}
$long = start_long_knn('another long kNN scan runs');
my $knn_cancel_s = cancel_long('long_knn', 'a cancel ends the long kNN scan');
diag(sprintf('the cancelled kNN scan ended after %.0f ms', 1000 * $knn_cancel_s));
$long->quit;
is($node->safe_psql('postgres', q{SELECT count(*) FROM genie_knn('pts_v', ARRAY[ARRAY[1, 2, 3]::real[]], 5)}),
	'5', 'and the service answers the next scan');

# a cancel stops it on the range runner (the job polls its request's
# withdrawal): the statement ends at once, and the next range search is
# answered without waiting for the rest of the cancelled one
$long = start_long_range('another long range search runs');
my $cancel_s = cancel_long('long_range', 'cancelled');
cmp_ok($cancel_s, '<', 1.0, sprintf('the statement ended %.3f s after the cancel', $cancel_s));
$long->quit;
# the range runner stopped the cancelled search: the next one does not wait
# the rest of it (3-4 s on 2 cores)
$started = time();
is(words_diff(2), '0', 'the next range search through the service: the sequential scan\'s rows');
my $next_s = time() - $started;
cmp_ok($next_s, '<', 1.5, sprintf('in %.3f s: the cancelled search stopped in the service', $next_s));

# pending rows (inserted since the build) and deleted ones
$node->safe_psql('postgres', q{
	INSERT INTO words SELECT 5000 + i, substr(md5((i * 13)::text), 2, 4 + i % 3) FROM generate_series(1, 300) i;
	DELETE FROM words WHERE id % 10 = 3;
	INSERT INTO pts SELECT 9000 + i, ARRAY[(i % 37)::real, (i % 23)::real, 1::real] FROM generate_series(1, 300) i;
	DELETE FROM pts WHERE id % 9 = 4;
});
check_all('with pending and deleted rows');
# merged: the main objects now exclude the dead ones
$node->safe_psql('postgres', 'VACUUM words; VACUUM pts');
my %vacuum_before = map { $_ => service_requests($_ eq 'words_lsc' ? 'strings' : 'vectors', $_) } ('words_lsc', 'pts_lsc');
check_all('after VACUUM');
cmp_ok(service_requests('strings', 'words_lsc') - $vacuum_before{words_lsc}, '>', 0,
	'after VACUUM the service answers through the merged string list');
cmp_ok(service_requests('vectors', 'pts_lsc') - $vacuum_before{pts_lsc}, '>', 0, 'and the vector list');

# the service killed while its range runner searches: it stops the search
# and exits cleanly (no crash restart of the cluster), the statement is
# answered in-process, and the service comes back
my $postmaster_started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
$long = start_long_range('a long range search runs when the service is killed');
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'genie service'});
my $answer = $long->query_until(qr/done/, "\\echo done\n");
like($answer, qr/^\s*\d+\s*$/m, 'the long statement was answered (in-process)');
unlike($answer, qr/ERROR/, 'without an error');
$long->quit;
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $postmaster_started,
	'no crash restart of the cluster');
ok($node->poll_query_until('postgres', 'SELECT running FROM genie_service_status()'), 'the service runs again');
is(words_diff(2), '0', 'and answers range searches: the sequential scan\'s rows');

# the service stopped: the same answers in-process
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'genie service'});
$node->safe_psql('postgres', q{SET client_min_messages = warning; SELECT count(*) FROM genie_within('words_w', ARRAY['abc'], 1)});
is(words_diff(2), '0', 'with the service restarting or away, the same rows');

# A damaged List of Clusters (the last pages of a fresh build hold it):
# the service finds it as the backend does, and says it the same way.
$node->safe_psql('postgres', q{
	CREATE TABLE pts_bad AS SELECT * FROM pts;
	CREATE INDEX pts_bad_lsc ON pts_bad USING genie (v genie_vector_ops) WITH (m = 0, cluster_list = on, cluster_size = 32);
});
my $bad_file = $node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('pts_bad_lsc')");
my $bad_pages = (-s $bad_file) / 8192;
$node->stop;
open(my $bad_fh, '+<', $bad_file) or die "cannot open $bad_file: $!";
binmode $bad_fh;
seek($bad_fh, 8192 * ($bad_pages - 1) + 64, 0);
print $bad_fh "\xff" x 4000;
close $bad_fh;
$node->start;
ok($node->poll_query_until('postgres', 'SELECT running FROM genie_service_status()'), 'the service runs');
my ($bad_ret, $bad_out, $bad_err) = $node->psql('postgres',
	"SELECT count(*) FROM genie_within('pts_bad_lsc', ARRAY['{1,2,3}'::real[]], 4)",
	extra_params => ['-v', 'VERBOSITY=verbose']);
like($bad_err, qr/ERROR:  XX002: genie index "pts_bad_lsc" has a corrupt list of clusters\n.*DETAIL:  .*member/,
	'a corrupt list handed to the service: index_corrupted, as in-process');
like($bad_err, qr/LOCATION:  genie_search_through_service/, 'said on the service\'s hand-over');

$node->stop;
done_testing();
