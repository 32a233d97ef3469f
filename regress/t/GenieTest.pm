# Helpers shared by genie's TAP tests.
package GenieTest;

use strict;
use warnings;
use Exporter 'import';
use Test::More;

our @EXPORT = qw(create_docs check_index_matches_seqscan check_index);

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
