# Fuzzing, bounded in time and with fixed seeds (about 3 minutes on 2
# cores: make test keeps within CI's 35 minutes; longer runs are the same
# scripts with more statements): genie's input functions and
# query constructors (regress/t/fuzz_inputs.py: random bytes and mutations of
# valid texts, JSON and binary forms; vectors, codes, documents, genie_knn_from's
# queries (compressed rows too), genie_knn_bytes' bytes, the profile), then SQLsmith's random queries as an
# ordinary role that may write the tables, against a database holding every
# kind of genie index and columns of genie's types.  No backend may die, and
# every index must still pass genie_index_check afterwards.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\ngenie.pending_list_limit = '64kB'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE EXTENSION fuzzystrmatch;
	SELECT setseed(0.11);
	CREATE TABLE docs (id int, tags int4[], q genie_query);
	INSERT INTO docs SELECT i, ARRAY(SELECT (random() * 50)::int FROM generate_series(1, (random() * 6)::int + 0 * i)),
	                        genie_query(ARRAY[i % 9, i % 5]) FROM generate_series(1, 300) i;
	INSERT INTO docs VALUES (0, NULL, NULL), (-1, '{}', '{}');
	CREATE INDEX docs_tags ON docs USING genie (tags);
	CREATE TABLE words (w text);
	INSERT INTO words SELECT md5(i::text) FROM generate_series(1, 300) i;
	INSERT INTO words VALUES (NULL), (''), ('日本語');
	CREATE INDEX words_w ON words USING genie (w genie_ngram_ops) WITH (n = 2);
	CREATE TABLE people (id int, age int, city text, born date);
	INSERT INTO people SELECT i, 20 + i % 50, (ARRAY['Oslo', 'Lima', NULL])[1 + i % 3], date '1990-01-01' + i
	FROM generate_series(1, 300) i;
	CREATE INDEX people_r ON people USING genie ((people)) WITH (attributes = 'age, city, born');
	CREATE TABLE vecs (id int, v real[]);
	INSERT INTO vecs SELECT i, CASE WHEN i % 50 = 0 THEN NULL
	                                ELSE ARRAY[random() * 10, random() * 10, random(), i % 7]::real[] END
	FROM generate_series(1, 300) i;
	CREATE INDEX vecs_v ON vecs USING genie (v) WITH (m = 8);
	-- 1,000 dimensions: query rows pglz compresses, which genie_knn_from reads on threads
	CREATE TABLE wide (id int, v real[]);
	INSERT INTO wide SELECT i, array_fill((i % 5)::real, ARRAY[1000]) FROM generate_series(1, 40) i;
	CREATE INDEX wide_v ON wide USING genie (v) WITH (m = 0);
	CREATE TABLE wideq (id int, q real[]);
	INSERT INTO wideq SELECT i, CASE WHEN i = 77 THEN array_fill('NaN'::real, ARRAY[1000])
	                                 WHEN i = 88 THEN array_fill(1::real, ARRAY[999])
	                                 ELSE array_fill((i % 7)::real, ARRAY[1000]) END
	FROM generate_series(1, 100) i;
	CREATE TABLE codes (id int, code varbit);
	INSERT INTO codes SELECT i, CASE WHEN i % 40 = 0 THEN NULL ELSE ('x' || substr(md5(i::text), 1, 5))::bit(20)::varbit END
	FROM generate_series(1, 300) i;
	CREATE INDEX codes_c ON codes USING genie (code);
	CREATE INDEX codes_ewh ON codes USING genie (code) WITH (m = 4, sample_bits = 8);
	CREATE TABLE notes (id int, doc tsvector);
	INSERT INTO notes SELECT i, CASE WHEN i % 60 = 0 THEN NULL
	                                 ELSE setweight(to_tsvector('simple', 'w' || i % 17 || ' w' || i % 5 || ' ' || left(md5(i::text), 3)),
	                                                (ARRAY['A', 'B', 'C', 'D'])[1 + i % 4]::"char") END
	FROM generate_series(1, 300) i;
	CREATE INDEX notes_d ON notes USING genie (doc);
	CREATE TABLE saved (r genie_ranges);
	INSERT INTO saved SELECT genie_ranges('people_r', '{"age": [30, 40], "city": "Oslo"}');
	CREATE TABLE saved_documents (q genie_document_query);
	INSERT INTO saved_documents SELECT genie_document_query('notes_d', 'w1 | w3:AB'::tsquery) UNION ALL SELECT 'w2*7 w4:A*1000000';
	CREATE ROLE smith LOGIN;
	GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO smith;
});

for my $seed (1 .. 3)
{
	my ($out, $err);
	IPC::Run::run([ $python, "$FindBin::RealBin/fuzz_inputs.py", $node->connstr('postgres'), $seed, 10000 ],
		'>', \$out, '2>', \$err);
	diag("input fuzzer, seed $seed:\n$out$err");
	like($out, qr/^crashes: 0$/m, "input fuzzer (seed $seed, 10,000 statements): only clean errors");
	like($out, qr/^set predicate mismatches: 0$/m,
		"input fuzzer (seed $seed): set predicates through the index equal them without it");
}

for my $seed (1 .. 2)
{
	my ($out, $err);
	my $ran = IPC::Run::run([ 'sqlsmith', '--target=' . $node->connstr('postgres') . ' user=smith', "--seed=$seed",
			'--max-queries=5000', '--exclude-catalog', '--verbose' ], '>', \$out, '2>', \$err,
		IPC::Run::timeout(600));
	# --verbose prints running totals "node: bad/ok (bad/ok)" per kind of syntax
	# node; the last ones count, and query_spec is a SELECT
	my $all = "$out$err";
	my %last;
	while ($all =~ /(\w+): (\d+)\/(\d+) \(bad\/ok\)/g) { $last{$1} = [ $2, $3 ]; }
	my ($bad, $good) = @{ $last{query_spec} || [ 0, 0 ] };
	diag("SQLsmith, seed $seed: $good SELECTs ran, $bad failed cleanly");
	ok($ran && $good > 500, "SQLsmith (seed $seed, 5,000 queries) ran to the end, over 500 SELECTs without error");
}

my $log = slurp_file($node->logfile);
my @died = $log =~ /(server process .* was terminated by signal .*)/g;
is(scalar(@died), 0, 'no backend died') or diag(join("\n", @died));
my @genie = $log =~ /(genie_\w+)\(/g;
diag('genie functions in the statements of failed queries: ' . scalar(@genie));
check_index($node, $_, 'after fuzzing') for qw(docs_tags words_w people_r notes_d);

$node->stop;
done_testing();
