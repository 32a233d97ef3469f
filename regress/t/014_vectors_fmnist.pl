# Vectors on real data: Fashion-MNIST (Debian package dataset-fashion-mnist,
# 60,000 training images of 784 pixels, the test images as queries).  Exact
# ORDER BY v <-> q LIMIT 10 and genie_knn equal a sequential scan (distance
# lists) for 64 test queries; genie.vector_search = lsh with its default
# candidates keeps recall@10 at or above 0.9 (the default's promise).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IO::Uncompress::Gunzip qw(gunzip $GunzipError);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $data = '/usr/share/datasets/fashion-mnist';
-r "$data/train-images-idx3-ubyte.gz"
  or BAIL_OUT("Fashion-MNIST is missing: apt-get install dataset-fashion-mnist (scripts/install-deps does)");

# An idx3-ubyte file as COPY text rows (id, '{p1,...,p784}'), the first $limit images.
sub idx_to_copy
{
	my ($gz, $out, $limit) = @_;
	my $raw;
	gunzip($gz => \$raw) or die "gunzip $gz: $GunzipError";
	my ($magic, $count, $rows, $cols) = unpack('N4', substr($raw, 0, 16));
	my $dim = $rows * $cols;
	$count = $limit if $limit && $limit < $count;
	open(my $fh, '>', $out) or die "$out: $!";
	for my $i (0 .. $count - 1)
	{
		print $fh ($i + 1), "\t{", join(',', unpack("C$dim", substr($raw, 16 + $i * $dim, $dim))), "}\n";
	}
	close($fh);
	return $count;
}

my $dir = PostgreSQL::Test::Utils::tempdir;
is(idx_to_copy("$data/train-images-idx3-ubyte.gz", "$dir/train.txt", 0), 60000, 'the 60,000 training images');
is(idx_to_copy("$data/t10k-images-idx3-ubyte.gz", "$dir/test.txt", 64), 64, '64 test images as queries');

my $node = PostgreSQL::Test::Cluster->new('fmnist');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\nmaintenance_work_mem = '512MB'\n");
$node->start;
$node->safe_psql('postgres', qq{
	CREATE EXTENSION genie;
	CREATE TABLE fm (id int PRIMARY KEY, v real[]);
	CREATE TABLE fq (id int PRIMARY KEY, q real[]);
	COPY fm FROM '$dir/train.txt';
	COPY fq FROM '$dir/test.txt';
	CREATE INDEX fm_v ON fm USING genie (v);
	ANALYZE fm;
});
is($node->safe_psql('postgres', "SELECT dimensions || ' ' || functions FROM genie_vector_info('fm_v')"),
	'784 238', 'the index holds 784-dimensional vectors and 238 LSH functions');

# the oracle: a sequential scan ordered by an expression the index cannot serve
$node->safe_psql('postgres', q{
	SET enable_indexscan = off; SET enable_bitmapscan = off;
	CREATE TABLE truth AS
	SELECT q.id AS query_no, t.id, t.d FROM fq q,
	  LATERAL (SELECT id, (v <-> q.q) + 0 AS d FROM fm ORDER BY 2 LIMIT 10) t;
});
is($node->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM fq q
	WHERE (SELECT array_agg(d) FROM (SELECT v <-> q.q AS d FROM fm ORDER BY v <-> q.q LIMIT 10) s)
	   IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM truth WHERE query_no = q.id)}), '0',
	'ORDER BY v <-> q LIMIT 10 equals the sequential scan for 64 Fashion-MNIST queries');
is($node->safe_psql('postgres', q{
	WITH got AS (SELECT g.query_no, array_agg(g.distance ORDER BY g.distance) d
	             FROM (SELECT array_agg(q ORDER BY id) a FROM fq) b, genie_knn('fm_v', b.a, 10) g GROUP BY 1)
	SELECT count(*) FROM fq LEFT JOIN got ON got.query_no = fq.id
	WHERE got.d IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM truth WHERE query_no = fq.id)}), '0',
	'genie_knn of the 64 queries equals the sequential scan');
my $recall = $node->safe_psql('postgres', q{
	SET genie.vector_search = lsh;
	SELECT round(count(*) / 640.0, 4) FROM (SELECT array_agg(q ORDER BY id) a FROM fq) b,
	  genie_knn('fm_v', b.a, 10) g JOIN fm ON fm.ctid = g.ctid
	  JOIN truth t ON t.query_no = g.query_no AND t.id = fm.id});
cmp_ok($recall, '>=', 0.9, "LSH with the default genie.lsh_candidates: recall\@10 $recall >= 0.9");

$node->stop;
done_testing();
