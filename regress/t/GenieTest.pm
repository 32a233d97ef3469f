# Helpers shared by genie's TAP tests.
package GenieTest;

use strict;
use warnings;
use Exporter 'import';
use Test::More;
use Time::HiRes ();
use IPC::Run ();
use PostgreSQL::Test::Utils ();

our @EXPORT = qw(create_docs docs_sessions start_docs_queries finish_docs_queries create_big big_batch check_long_batch_cancel
  check_index_matches_seqscan check_index);

# A table of keyword sets with a skewed distribution and a genie index.
sub create_docs
{
	my ($node, $rows) = @_;
	$node->safe_psql('postgres', qq{
		CREATE EXTENSION IF NOT EXISTS genie;
		SELECT setseed(0.31);
		CREATE TABLE docs (id int PRIMARY KEY, tags int4[]);
		INSERT INTO docs SELECT i, ARRAY(SELECT floor(power(random(), 2) * 500)::int
		                                 FROM generate_series(1, 1 + (random() * 8)::int + 0 * i))
		FROM generate_series(1, $rows) AS i;
		CREATE INDEX docs_tags_idx ON docs USING genie (tags);
	});
}

# pgbench sessions on create_docs's table (and a sequence doc_ids past its
# ids): ordered queries, inserts and deletes, 6 : 1 : 1, transactions each;
# every transaction processed, no error.
sub docs_sessions
{
	my ($node, $clients, $transactions, $label) = @_;
	my $total = $clients * $transactions;
	$node->pgbench(
		"--no-vacuum --client=$clients --jobs=2 --transactions=$transactions",
		0,
		[qr{processed: $total/$total}],
		[qr{\A(?:(?!ERROR|abort).)*\z}s],
		$label,
		{
			'genie_query@6' => q{
				\set a random(0, 499)
				\set b random(0, 499)
				SELECT id FROM docs ORDER BY tags <~> ARRAY[:a, :b, 7] LIMIT 10;
			},
			'genie_insert@1' => q{
				\set a random(0, 499)
				\set b random(0, 499)
				INSERT INTO docs VALUES (nextval('doc_ids'), ARRAY[:a, :b, 7]);
			},
			'genie_delete@1' => q{
				\set a random(1, 20000)
				DELETE FROM docs WHERE id = :a;
			},
		});
}

# pgbench sessions of single ordered queries on create_docs's table, in
# the background for seconds (application_name $name); finish_docs_queries
# waits for them and checks that none failed.
sub start_docs_queries
{
	my ($node, $clients, $seconds, $name) = @_;
	my $script = $node->basedir . '/docs_query.sql';
	PostgreSQL::Test::Utils::append_to_file($script,
		"\\set a random(0, 499)\nSELECT id FROM docs ORDER BY tags <~> ARRAY[:a, 7] LIMIT 10;\n")
	  unless -e $script;
	my ($out, $err) = ('', '');
	my $harness = IPC::Run::start(
		[
			'pgbench', '--no-vacuum', "--client=$clients", '--jobs=2', "--time=$seconds", '-f', $script,
			$node->connstr('postgres') . " application_name=$name"
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return { harness => $harness, out => \$out, err => \$err };
}

sub finish_docs_queries
{
	my ($run, $label) = @_;
	IPC::Run::finish($run->{harness});
	is($?, 0, "$label: pgbench ends without an error");
	unlike(${ $run->{out} } . ${ $run->{err} }, qr/(aborted|ERROR)/, "$label: no client saw an error");
}

# A table of 60,000 rows of 40 tags of 600 (table big, index big_idx): a
# batch of heavy queries over it runs long enough to cancel.
sub create_big
{
	my ($node) = @_;
	$node->safe_psql('postgres', q{
		SELECT setseed(0.5);
		CREATE TABLE big (id int, tags int4[]);
		INSERT INTO big SELECT i, ARRAY(SELECT (random() * 599)::int + 0 * i FROM generate_series(1, 40))
		FROM generate_series(1, 60000) i;
		CREATE INDEX big_idx ON big USING genie (tags);
	});
}

# genie_topk of n queries of 200 keywords over big_idx, counting the rows (10 a query).
sub big_batch
{
	my ($n) = @_;
	return "SELECT count(*) FROM genie_topk('big_idx', ARRAY(SELECT ARRAY(SELECT (q * 31 + j * 17) % 600 "
	  . "FROM generate_series(1, 200) j)::genie_query FROM generate_series(1, $n) q), 10)";
}

# A batch of 6,000 heavy queries answers, runs over 0.6 s, and a 200 ms
# statement_timeout ends it within 0.7 s; its full time, in seconds.
sub check_long_batch_cancel
{
	my ($node, $where) = @_;
	my $start = Time::HiRes::time();
	is($node->safe_psql('postgres', big_batch(6000)), '60000', "a long batch answers ($where)");
	my $full = Time::HiRes::time() - $start;
	diag(sprintf('a batch of 6000 heavy queries %s: %.2f s', $where, $full));
	cmp_ok($full, '>', 0.6, 'the batch runs long enough for the test to mean something');
	$start = Time::HiRes::time();
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET statement_timeout = '200ms'; " . big_batch(6000));
	my $cancelled = Time::HiRes::time() - $start;
	like($stderr, qr/canceling statement due to statement timeout/, 'statement_timeout ends it');
	diag(sprintf('statement_timeout 200 ms: the statement ended after %.0f ms', 1000 * $cancelled));
	cmp_ok($cancelled, '<', 0.2 + 0.5, 'in time');
	return $full;
}

# The score lists of an index scan and a sequential scan agree for a few queries.
sub check_index_matches_seqscan
{
	my ($node, $label) = @_;
	my $sql = q{
		SELECT count(*) FROM generate_series(1, 30) AS q
		CROSS JOIN LATERAL (SELECT ARRAY[q, q * 7 % 500, q * 13 % 500] AS query) qq
		WHERE (SELECT array_agg(s) FROM (SELECT tags <~> qq.query AS s FROM docs
		                                 ORDER BY tags <~> qq.query LIMIT 25) x)
		      IS DISTINCT FROM %s
	};
	my $oracle = q{(SELECT array_agg(s) FROM (SELECT -genie_match_count(tags, qq.query)::float8 AS s
	                                          FROM docs ORDER BY 1 LIMIT 25) y)};
	my $mismatches = $node->safe_psql('postgres',
		"SET genie.device = 'cpu'; SET enable_seqscan = off; " . sprintf($sql, $oracle));
	is($mismatches, '0', "$label: index scan equals the sequential scan");
	my $via_index = $node->safe_psql('postgres',
		"SET genie.device = 'cpu'; SET enable_seqscan = off; SELECT count(*) FROM (SELECT id FROM docs ORDER BY tags <~> '{1}') x");
	my $rows = $node->safe_psql('postgres', 'SELECT count(*) FROM docs');
	is($via_index, $rows, "$label: the index reaches every row");
	check_index($node, 'docs_tags_idx', $label);
}

# genie_index_check with heapallindexed passes (an error names what is wrong).
sub check_index
{
	my ($node, $index, $label) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('$index', true)");
	is($ret . $err, '0', "$label: genie_index_check('$index', heapallindexed) passes");
}

1;
