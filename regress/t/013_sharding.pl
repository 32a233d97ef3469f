# Sharding over postgres_fdw: a table hash-partitioned into foreign tables
# on two servers (servers with extensions 'genie'), each shard with its own
# genie index.  ORDER BY tags <~> q LIMIT k and ORDER BY w <%> q LIMIT k on
# the parent go to the shards as ordered remote queries (genie index scans
# there), which a Merge Append merges; the answers equal one server holding
# all rows, after inserts and deletes through the parent too.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @shards;
for my $i (1 .. 2)
{
	my $shard = PostgreSQL::Test::Cluster->new("shard$i");
	$shard->init(extra => ['--encoding=UTF8', '--locale=C']);
	$shard->start;
	$shard->safe_psql('postgres', q{
		CREATE EXTENSION genie;
		CREATE TABLE docs_shard (id int PRIMARY KEY, tags int4[]);
		CREATE INDEX docs_shard_tags ON docs_shard USING genie (tags);
		CREATE TABLE names_shard (id int PRIMARY KEY, w text);
		CREATE INDEX names_shard_w ON names_shard USING genie (w genie_ngram_ops);
	});
	push @shards, $shard;
}

my $coord = PostgreSQL::Test::Cluster->new('coordinator');
$coord->init(extra => ['--encoding=UTF8', '--locale=C']);
$coord->start;
my $setup = q{
	CREATE EXTENSION genie;
	CREATE EXTENSION postgres_fdw;
	CREATE TABLE docs (id int, tags int4[]) PARTITION BY HASH (id);
	CREATE TABLE names (id int, w text) PARTITION BY HASH (id);
};
for my $i (0 .. 1)
{
	my ($host, $port) = ($shards[$i]->host, $shards[$i]->port);
	$setup .= qq{
		CREATE SERVER shard$i FOREIGN DATA WRAPPER postgres_fdw
		  OPTIONS (host '$host', port '$port', dbname 'postgres', extensions 'genie', fetch_size '50');
		CREATE USER MAPPING FOR CURRENT_USER SERVER shard$i;
		CREATE FOREIGN TABLE docs_$i PARTITION OF docs FOR VALUES WITH (MODULUS 2, REMAINDER $i)
		  SERVER shard$i OPTIONS (table_name 'docs_shard');
		CREATE FOREIGN TABLE names_$i PARTITION OF names FOR VALUES WITH (MODULUS 2, REMAINDER $i)
		  SERVER shard$i OPTIONS (table_name 'names_shard');
	};
}
$coord->safe_psql('postgres', $setup);

# the rows go in through the parent; the reference tables hold them all on one server
$coord->safe_psql('postgres', q{
	SELECT setseed(0.17);
	CREATE TABLE docs_all (id int PRIMARY KEY, tags int4[]);
	INSERT INTO docs_all SELECT i, ARRAY(SELECT floor(power(random(), 2) * 300)::int
	                                     FROM generate_series(1, 1 + (random() * 8)::int + 0 * i))
	FROM generate_series(1, 6000) AS i;
	CREATE INDEX docs_all_tags ON docs_all USING genie (tags);
	INSERT INTO docs SELECT * FROM docs_all;
	CREATE TABLE names_all (id int PRIMARY KEY, w text);
	INSERT INTO names_all SELECT i, translate(substr(md5(i::text), 1, 4 + i % 9), '0123456789', 'ghijklmñéü')
	FROM generate_series(1, 6000) AS i;
	CREATE INDEX names_all_w ON names_all USING genie (w genie_ngram_ops);
	INSERT INTO names SELECT * FROM names_all;
	ANALYZE docs_all, names_all;
});
$_->safe_psql('postgres', 'ANALYZE') for @shards;
my ($n1, $n2) = map { $_->safe_psql('postgres', 'SELECT count(*) FROM docs_shard') } @shards;
ok($n1 > 2500 && $n2 > 2500 && $n1 + $n2 == 6000, "the rows are split over the shards ($n1, $n2)");

my $plan = $coord->safe_psql('postgres',
	"EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM docs ORDER BY tags <~> '{3,5,8}' LIMIT 10");
diag("the plan on the parent:\n$plan");
like($plan, qr/Merge Append/, 'the parent merges the shards in order (Merge Append)');
like($plan, qr/Remote SQL: SELECT .*ORDER BY \(tags OPERATOR\(public\.<~>\)/,
	'the ordering by <~> is sent to the shards');
my $shard_plan = $shards[0]->safe_psql('postgres',
	"EXPLAIN (COSTS OFF) SELECT id, tags FROM docs_shard ORDER BY tags <~> '{3,5,8}'");
like($shard_plan, qr/Index Scan using docs_shard_tags/, 'which a shard answers with its genie index');

# score lists of the sharded parent against one server with all rows
sub docs_mismatches
{
	my ($k) = @_;
	return $coord->safe_psql('postgres', qq{
		SELECT count(*) FROM generate_series(1, 25) AS n,
		  LATERAL (SELECT ARRAY[n * 7 % 300, n * 13 % 300, n % 17] AS q) qq
		WHERE (SELECT array_agg(genie_match_count(tags, qq.q) ORDER BY ord)
		       FROM (SELECT tags, row_number() OVER () AS ord
		             FROM (SELECT tags FROM docs ORDER BY tags <~> qq.q LIMIT $k) a) b)
		   IS DISTINCT FROM
		      (SELECT array_agg(genie_match_count(tags, qq.q) ORDER BY ord)
		       FROM (SELECT tags, row_number() OVER () AS ord
		             FROM (SELECT tags FROM docs_all ORDER BY tags <~> qq.q LIMIT $k) a) b)
	});
}
is(docs_mismatches(10), '0', 'ORDER BY <~> LIMIT 10 on the shards equals one server holding all rows');
is(docs_mismatches(120), '0', 'and LIMIT 120, beyond one fetch from each shard');

$plan = $coord->safe_psql('postgres',
	"EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM names ORDER BY w <%> 'kajhg' LIMIT 5");
like($plan, qr/Remote SQL: SELECT .*ORDER BY \(w OPERATOR\(public\.<%>\)/,
	'the ordering by <%> is sent to the shards');
sub names_mismatches
{
	return $coord->safe_psql('postgres', q{
		SELECT count(*) FROM generate_series(1, 25) AS n,
		  LATERAL (SELECT substr(translate(md5((n * 31)::text), '0123456789', 'ghijklmñéü'), 1, 3 + n % 7) AS q) qq
		WHERE (SELECT array_agg(d ORDER BY ord) FROM
		        (SELECT w <%> qq.q AS d, row_number() OVER () AS ord
		         FROM (SELECT w FROM names ORDER BY w <%> qq.q LIMIT 5) a) b)
		   IS DISTINCT FROM
		      (SELECT array_agg(d ORDER BY ord) FROM
		        (SELECT w <%> qq.q AS d, row_number() OVER () AS ord
		         FROM (SELECT w FROM names_all ORDER BY w <%> qq.q LIMIT 5) a) b)
	});
}
is(names_mismatches(), '0', 'ORDER BY <%> LIMIT 5 on the shards equals one server holding all rows');

# writes through the parent reach the shards' indexes
$coord->safe_psql('postgres', q{
	INSERT INTO docs SELECT i, ARRAY[i % 300, (i * 3) % 300] FROM generate_series(6001, 6400) i;
	INSERT INTO docs_all SELECT i, ARRAY[i % 300, (i * 3) % 300] FROM generate_series(6001, 6400) i;
	DELETE FROM docs WHERE id % 9 = 0;
	DELETE FROM docs_all WHERE id % 9 = 0;
	INSERT INTO names VALUES (7001, 'kajhgx'), (7002, 'kajh');
	INSERT INTO names_all VALUES (7001, 'kajhgx'), (7002, 'kajh');
});
is(docs_mismatches(10), '0', 'after inserts and deletes through the parent: still equal');
is(names_mismatches(), '0', 'the same for <%>');
is($coord->safe_psql('postgres', "SELECT string_agg(w, ',' ORDER BY w) FROM (SELECT w FROM names ORDER BY w <%> 'kajhg' LIMIT 2) s"),
	'kajh,kajhgx', 'new rows are found on their shards');

$_->stop for ($coord, @shards);
done_testing();
