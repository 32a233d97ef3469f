# The index is intact after kill -9 of the server during inserts and a
# restart (crash recovery replays the GenericXLog records).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# small pending limit: merges (full rewrites) happen during the inserts too
$node->append_conf('postgresql.conf', "genie.pending_list_limit = '64kB'\n");
$node->start;
create_docs($node, 3000);
$node->safe_psql('postgres', q{
	CREATE UNLOGGED TABLE udocs AS SELECT * FROM docs;
	CREATE INDEX udocs_idx ON udocs USING genie (tags);
	CREATE EXTENSION fuzzystrmatch;
	CREATE TABLE words (id int, w text);
	INSERT INTO words SELECT i, left(md5(i::text), 3 + i % 9) FROM generate_series(1, 3000) AS i;
	CREATE INDEX words_w_idx ON words USING genie (w genie_ngram_ops) WITH (n = 2);
	-- a List of Clusters, built again by every merge during the inserts
	CREATE INDEX words_lsc_idx ON words USING genie (w genie_ngram_ops)
	  WITH (cluster_list = on, cluster_size = 64, supercluster_clusters = 8);
});

# inserts in the background, each its own transaction
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_until(qr/started/, q{
\echo started
DO $$ BEGIN
  FOR i IN 100001..400000 LOOP
    INSERT INTO docs VALUES (i, ARRAY[i % 97, i % 89, 5]);
    INSERT INTO words VALUES (i, left(md5(i::text), 3 + i % 9));
    COMMIT;
  END LOOP;
END $$;
});

# let inserts (and pending-list merges) run, then SIGKILL the whole server
ok($node->poll_query_until('postgres', 'SELECT count(*) > 6000 FROM docs'), 'inserts are running');
# a process that runs: not gone, and not a zombie that no one reaps (a
# container's first process may never reap the killed server's processes)
sub alive
{
	my ($pid) = @_;
	my $stat = eval { PostgreSQL::Test::Utils::slurp_file("/proc/$pid/stat") } // return 0;
	return $stat !~ /^\d+ \(.*\) Z /;
}

my ($postmaster) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
my @children;
for my $stat (glob '/proc/[0-9]*/stat')
{
	my $line = eval { PostgreSQL::Test::Utils::slurp_file($stat) } // next;
	push @children, $1 if $line =~ /^(\d+) \(.*\) \S (\d+) / && $2 == $postmaster;
}
kill 'KILL', @children;
$node->kill9;
eval { $bg->quit; };
# wait until every killed process is gone, so the new server can start
for (1 .. 100) { last unless grep { alive($_) } @children; select(undef, undef, undef, 0.1); }

# a killed process can take a moment to release the old shared memory
my $restarted = 0;
for (1 .. 10)
{
	last if ($restarted = $node->start(fail_ok => 1));
	# a failed start leaves the pid it read from a stale postmaster.pid; with
	# it, the next start would bail out as "already running"
	# pg_ctl gave up, but the server it started runs (recovery took long): wait for it
	if (defined $node->{_pid} && alive($node->{_pid}))
	{
		last if ($restarted = $node->poll_query_until('postgres', 'SELECT 1'));
	}
	$node->{_pid} = undef unless defined $node->{_pid} && alive($node->{_pid});
	sleep 1;
}
ok($restarted, 'the server restarts after kill -9');
# crash recovery resets an unlogged table and its index to their init forks
is($node->safe_psql('postgres', q{SET enable_seqscan = off; SET genie.device = 'cpu';
	INSERT INTO udocs VALUES (1, '{1,2}'), (2, '{2}');
	SELECT string_agg(id::text, ',') FROM (SELECT id FROM udocs ORDER BY tags <~> '{1,2}') x}),
	'1,2', 'the unlogged index starts empty after the crash and works');
my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM docs');
ok($rows > 3000, "rows survived the crash ($rows)");
check_index_matches_seqscan($node, 'after kill -9 and restart');

# the list of clusters answers range queries as the sequential scan does
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  (SELECT query_no, ctid, distance FROM genie_within('words_lsc_idx', ARRAY['a1b2c', 'ffff0', '9e3d'], 2)
	   EXCEPT ALL
	   SELECT n::int, ctid, levenshtein(w, q)::float8 FROM unnest(ARRAY['a1b2c', 'ffff0', '9e3d']) WITH ORDINALITY p(q, n), words
	   WHERE levenshtein(w, q) <= 2)
	  UNION ALL
	  (SELECT n::int, ctid, levenshtein(w, q)::float8 FROM unnest(ARRAY['a1b2c', 'ffff0', '9e3d']) WITH ORDINALITY p(q, n), words
	   WHERE levenshtein(w, q) <= 2
	   EXCEPT ALL
	   SELECT query_no, ctid, distance FROM genie_within('words_lsc_idx', ARRAY['a1b2c', 'ffff0', '9e3d'], 2))) d}),
	'0', 'the list of clusters answers range queries as the sequential scan after the crash');
check_index($node, 'words_lsc_idx', 'list of clusters after the crash');

# the n-gram index keeps its encoding (n = 2) and answers exactly
is($node->safe_psql('postgres', q{SELECT encoding || ' ' || ngram_length FROM genie_index_info('words_w_idx')}),
	'ordered n-grams 2', 'the n-gram index keeps its encoding through crash recovery');
is($node->safe_psql('postgres', q{SET enable_seqscan = off; SET genie.device = 'cpu';
	SELECT count(*) FROM (VALUES ('a1b2c'), ('ffff0'), ('9e3d')) q(q)
	WHERE (SELECT array_agg(levenshtein(w, q.q)) FROM (SELECT w FROM words ORDER BY w <%> q.q LIMIT 10) x)
	      IS DISTINCT FROM
	      (SELECT array_agg(d ORDER BY d) FROM (SELECT levenshtein(w, q.q) d FROM words ORDER BY 1 LIMIT 10) y)}),
	'0', 'after the crash, ORDER BY w <%> q LIMIT 10 equals levenshtein()');
check_index($node, 'words_w_idx', 'n-gram index after the crash');
check_index($node, 'udocs_idx', 'unlogged index after the crash');

# the index keeps working for writes after recovery
$node->safe_psql('postgres', 'INSERT INTO docs SELECT i, ARRAY[1, 2] FROM generate_series(200001, 200100) AS i; VACUUM docs');
check_index_matches_seqscan($node, 'after more inserts and vacuum');

$node->stop;
done_testing();
