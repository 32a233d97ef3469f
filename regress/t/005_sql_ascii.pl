# Text in a SQL_ASCII database: every byte is a character (bytes 0x80 to
# 0xFF are taken as Latin-1), as PostgreSQL's length() and fuzzystrmatch's
# levenshtein() count them there.  An n-gram index builds and takes inserts
# of bytes that are not UTF-8, and its answers equal levenshtein()'s.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('sql_ascii');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\n");
$node->start;
$node->safe_psql('postgres',
	"CREATE DATABASE bytes ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");

# Words with bytes of every range: ASCII, Latin-1 letters that are not UTF-8
# on their own (\xe9), broken UTF-8 sequences, and real UTF-8 (two bytes
# each, so two characters here).
$node->safe_psql('bytes', q{
	CREATE EXTENSION genie;
	CREATE EXTENSION fuzzystrmatch;
	SELECT setseed(0.25);
	CREATE TABLE w (id int, s text);
	INSERT INTO w SELECT i, (SELECT string_agg(chr(CASE WHEN random() < 0.3 THEN 128 + (random() * 127)::int
	                                                    ELSE 97 + (random() * 5)::int END), '')
	                         FROM generate_series(1, 2 + (random() * 8)::int + 0 * i))
	FROM generate_series(1, 1500) i;
	INSERT INTO w VALUES (0, E'caf\xe9'), (-1, E'\xc3\xa9t\xc3\xa9'), (-2, E'\xff\xfe'), (-3, '');
	CREATE INDEX w_s ON w USING genie (s genie_ngram_ops);
	INSERT INTO w SELECT 10000 + i, E'n\xe9w' || repeat(E'\xe9', i % 4) FROM generate_series(1, 50) i;
});
is($node->safe_psql('bytes', "SELECT count(*) FROM w WHERE s !~ '^[a-z]*\$'") > 0 ? 'ok' : 'no', 'ok',
	'the table holds bytes beyond ASCII');

# the oracle: levenshtein() counts bytes in SQL_ASCII (its strings are at most 255 bytes)
my $mismatches = $node->safe_psql('bytes', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM (SELECT s AS q FROM w WHERE id % 100 = 0 OR id <= 0) qs
	WHERE (SELECT array_agg(d) FROM (SELECT (s <%> qs.q)::int AS d FROM w ORDER BY s <%> qs.q LIMIT 7) x)
	      IS DISTINCT FROM
	      (SELECT array_agg(d) FROM (SELECT levenshtein(s, qs.q) AS d FROM w ORDER BY 1 LIMIT 7) y);
});
is($mismatches, '0', 'ORDER BY s <%> q LIMIT 7 through the index equals levenshtein() on bytes');
is($node->safe_psql('bytes', 'SELECT count(*) FROM w WHERE genie_edit_distance(s, E\'n\\xe9w\') <> levenshtein(s, E\'n\\xe9w\')'),
	'0', 'genie_edit_distance equals levenshtein() on every row');
is($node->safe_psql('bytes', q{SELECT genie_edit_distance(E'caf\xe9', 'cafe'), genie_edit_distance(E'\xc3\xa9', 'x')}),
	'1|2', 'a Latin-1 byte is one character, a UTF-8 sequence two');
is($node->safe_psql('bytes', q{
	SELECT count(*) FROM genie_similar('w_s', ARRAY[E'n\xe9w\xe9', E'caf\xe9'], 3) g JOIN w ON w.ctid = g.ctid
	WHERE g.distance <> levenshtein(w.s, CASE g.query_no WHEN 1 THEN E'n\xe9w\xe9' ELSE E'caf\xe9' END)}),
	'0', 'genie_similar distances equal levenshtein()');
is($node->safe_psql('bytes', q{
	SELECT array_agg(d ORDER BY query_no, d) FROM genie_similar('w_s', ARRAY[E'n\xe9w\xe9', E'caf\xe9'], 3)
	  g(query_no, ctid, d)}),
	$node->safe_psql('bytes', q{
	SELECT array_agg(d ORDER BY q, d) FROM (VALUES (1, E'n\xe9w\xe9'), (2, E'caf\xe9')) v(q, t),
	  LATERAL (SELECT levenshtein(s, t) AS d FROM w ORDER BY 1 LIMIT 3) x}),
	'genie_similar top 3 equals levenshtein()');
is($node->safe_psql('bytes', q{SELECT live_rows FROM genie_index_info('w_s')}), '1554',
	'every row is in the index, the inserts after the build too');

# Range queries on bytes: genie_within and w <@ genie_ball(q, r) through the
# index, with and without a List of Clusters, equal levenshtein()'s rows.
$node->safe_psql('bytes', q{CREATE INDEX w_lsc ON w USING genie (s genie_ngram_ops) WITH (cluster_list = on, cluster_size = 16)});
my $range_truth = $node->safe_psql('bytes', q{
	SELECT array_agg(id ORDER BY id) FROM w WHERE levenshtein(s, E'caf\xe9a') <= 2});
like($range_truth, qr/^\{\d+(,\d+)+\}$/, 'the words within 2 of the query are several');
for my $idx ('w_s', 'w_lsc')
{
	is($node->safe_psql('bytes', qq{
		SELECT array_agg(w.id ORDER BY w.id) FROM genie_within('$idx', ARRAY[E'caf\\xe9a'], 2) g JOIN w ON w.ctid = g.ctid}),
		$range_truth, "genie_within through $idx equals levenshtein() on bytes");
}
is($node->safe_psql('bytes', q{
	SET enable_seqscan = off;
	SELECT array_agg(id ORDER BY id) FROM w WHERE s <@ genie_ball(E'caf\xe9a', 2)}),
	$range_truth, 's <@ genie_ball(q, r) through an index equals levenshtein() on bytes');

$node->stop;
done_testing();
