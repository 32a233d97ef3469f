# Concurrent inserts and queries (pgbench) give no errors and leave a
# correct index.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('bench');
$node->init;
$node->append_conf('postgresql.conf', "genie.pending_list_limit = '128kB'\ngenie.device = 'cpu'\n");
$node->start;
create_docs($node, 4000);
$node->safe_psql('postgres', 'CREATE SEQUENCE doc_ids START 1000000');

$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --transactions=150',
	0,
	[qr{processed: 600/600}],
	[qr{^$}],
	'concurrent inserts, deletes and ordered queries',
	{
		'genie_insert' => q{
			\set a random(0, 499)
			\set b random(0, 499)
			INSERT INTO docs VALUES (nextval('doc_ids'), ARRAY[:a, :b, 7]);
		},
		'genie_query' => q{
			\set a random(0, 499)
			SELECT id FROM docs ORDER BY tags <~> ARRAY[:a, 7] LIMIT 10;
		},
		'genie_delete' => q{
			\set a random(1, 4000)
			DELETE FROM docs WHERE id = :a;
		},
	});

check_index_matches_seqscan($node, 'after concurrent load');
$node->safe_psql('postgres', 'VACUUM docs');
check_index_matches_seqscan($node, 'after vacuum');

$node->stop;
done_testing();
