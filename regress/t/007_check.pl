# genie_index_check finds what is wrong: a damaged page (unknown object
# flags, a broken chain) and an index whose keywords no longer match the rows
# (an expression index over a function redefined after the build), and
# passes on healthy indexes of every kind.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $node = PostgreSQL::Test::Cluster->new('check');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\n");
$node->start;
create_docs($node, 3000);
$node->safe_psql('postgres', q{
	CREATE FUNCTION tags_of(int4[]) RETURNS int4[] IMMUTABLE LANGUAGE sql AS 'SELECT $1';
	CREATE TABLE f (id int, tags int4[]);
	INSERT INTO f SELECT i, ARRAY[i % 50, i % 7] FROM generate_series(1, 500) i;
	CREATE INDEX f_idx ON f USING genie (tags_of(tags));
	CREATE TABLE w (s text);
	INSERT INTO w SELECT md5(i::text) FROM generate_series(1, 500) i;
	CREATE INDEX w_idx ON w USING genie (s genie_ngram_ops);
	CREATE TABLE p (a int, c text);
	INSERT INTO p SELECT i, 'c' || i % 9 FROM generate_series(1, 500) i;
	CREATE INDEX p_idx ON p USING genie ((p)) WITH (attributes = 'a, c');
	INSERT INTO docs SELECT i, ARRAY[i % 11, 5, 5] FROM generate_series(5001, 5100) i;
	INSERT INTO p VALUES (7, 'a value after the build');
	DELETE FROM docs WHERE id % 9 = 0;
});
check_index($node, $_, 'healthy') for qw(docs_tags_idx f_idx w_idx p_idx);

# the rows change under the index: the function is redefined
$node->safe_psql('postgres', q{CREATE OR REPLACE FUNCTION tags_of(int4[]) RETURNS int4[] IMMUTABLE LANGUAGE sql AS 'SELECT $1 || 1000'});
my ($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('f_idx')");
is($ret, 0, 'without heapallindexed the pages of f_idx are sound');
($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('f_idx', true)");
like($err, qr/genie index "f_idx" is corrupted.*\n.*DETAIL:\s+the keywords of row \(\d+,\d+\) \(\d+\) differ from those of its object \d+/,
	'heapallindexed finds rows whose keywords differ from the index');

# a damaged page: the directory page (the first after the metapage) overwritten
my $file = $node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('docs_tags_idx')");
$node->stop;
open(my $fh, '+<', $file) or die "cannot open $file: $!";
binmode $fh;
seek($fh, 8192 + 64, 0);
print $fh "\xff" x 512;
close $fh;
$node->start;
($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('docs_tags_idx')");
like($err, qr/ERROR:\s+genie index "docs_tags_idx" is corrupted/, 'a damaged directory page is found');
diag($err =~ /DETAIL:\s+(.*)/ ? "it says: $1" : $err);
($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('w_idx', true)");
is($ret . $err, '0', 'the other indexes are still sound');

# a broken chain: the metapage's postings tail moved past the end
$file = $node->data_dir . '/' . $node->safe_psql('postgres', "SELECT pg_relation_filepath('w_idx')");
my $pages = $node->safe_psql('postgres', "SELECT pages FROM genie_index_info('w_idx')");
$node->stop;
open($fh, '+<', $file) or die "cannot open $file: $!";
binmode $fh;
# the last page of the chains is overwritten with an empty page of another kind
seek($fh, 8192 * ($pages - 1), 0);
print $fh "\0" x 8192;
close $fh;
$node->start;
($ret, $out, $err) = $node->psql('postgres', "SELECT genie_index_check('w_idx')");
like($err, qr/ERROR:\s+genie index "w_idx" is corrupted|ERROR:.*genie index "w_idx"/, 'a damaged chain page is found');
diag($err =~ /DETAIL:\s+(.*)/ ? "it says: $1" : $err);


# genie_index_check takes AccessShareLock only, as amcheck's bt_index_check:
# a check that took a stronger lock after it deadlocked with REINDEX
# CONCURRENTLY and VACUUM.
$node->safe_psql('postgres', q{
	CREATE TABLE cc (id serial, tags int4[]);
	INSERT INTO cc (tags) SELECT ARRAY[i % 40, i % 13] FROM generate_series(1, 3000) i;
	CREATE INDEX cc_idx ON cc USING genie (tags);
});
my $modes = $node->safe_psql('postgres', q{
	BEGIN;
	SELECT genie_index_check('cc_idx', true);
	SELECT 'modes:' || coalesce(string_agg(DISTINCT mode, ','), 'none') FROM pg_locks
	WHERE pid = pg_backend_pid() AND relation IN ('cc'::regclass, 'cc_idx'::regclass);
	COMMIT;
});
like($modes, qr/^modes:(none|AccessShareLock)$/m, 'genie_index_check keeps no lock stronger than AccessShareLock');

# 'cc_idx' becomes an OID with no lock, as for any regclass argument
# (amcheck's too): a REINDEX CONCURRENTLY may swap that index out, or drop
# it, before the check locks it.  Those errors, which say to run the
# statement again, are the only ones this check catches; any other fails.
my $raced_check = sub {
	my ($name) = @_;
	return qq{
		DO \$\$
		BEGIN
			PERFORM genie_index_check('$name', true);
		EXCEPTION WHEN object_not_in_prerequisite_state OR undefined_object THEN
			IF SQLERRM NOT LIKE 'genie index "cc\\_idx\\_ccold%" is being replaced by REINDEX CONCURRENTLY'
			   AND SQLERRM NOT LIKE 'genie index "cc\\_idx%" was dropped while the statement opened it'
			   AND SQLERRM NOT LIKE 'relation with OID % does not exist' THEN
				RAISE;
			END IF;
			RAISE NOTICE 'raced: %', SQLERRM;
		END \$\$;
	};
};

# One session REINDEXes CONCURRENTLY and VACUUMs in turn (two of those at
# once deadlock in PostgreSQL itself) while pgbench checks and writes.
my $maintenance = $node->background_psql('postgres');
$maintenance->query_until(qr/started/,
	"\\echo started\n" . ("REINDEX INDEX CONCURRENTLY cc_idx;\nVACUUM cc;\n" x 5));
$node->pgbench(
	'--no-vacuum --client=3 --jobs=2 --time=5',
	0,
	[qr{number of failed transactions: 0 }],
	# Only the check's own notice may come: when VACUUM or REINDEX
	# CONCURRENTLY holds the table for over 5 s (a slow CI machine) the check
	# says it left the dead count uncompared instead of waiting.  And the
	# notices of $raced_check: the errors of a check whose index a
	# REINDEX CONCURRENTLY swapped or dropped after the name was looked up.
	[qr{\A(?:NOTICE:  (?:genie index "cc_idx[^"]*": its dead count was not compared, |raced: )[^\n]*\n)*\z}],
	'genie_index_check beside writes, VACUUM and REINDEX CONCURRENTLY',
	{
		'genie_check_check' => $raced_check->('cc_idx'),
		'genie_check_write' => q{
			\set a random(0, 39)
			INSERT INTO cc (tags) VALUES (ARRAY[:a, 1]);
			DELETE FROM cc WHERE id = (SELECT min(id) FROM cc);
		},
	});
is($maintenance->query_safe('SELECT 1'), '1', 'every REINDEX CONCURRENTLY and VACUUM beside the checks succeeded');
$maintenance->quit;
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	WHERE i.indrelid = 'cc'::regclass AND NOT i.indisvalid}), '0', 'no invalid index left behind');
check_index($node, 'cc_idx', 'after the concurrent checks');

# An index dropped after a statement looked its name up and before the
# statement locked it: the error names it and says to run the statement
# again (it was "could not open relation with OID ...").
$node->safe_psql('postgres', 'CREATE INDEX dd_idx ON cc USING genie (tags)');
my $dropper = $node->background_psql('postgres');
$dropper->query_safe('BEGIN');
$dropper->query_safe('DROP INDEX dd_idx');
my $checker = $node->background_psql('postgres', on_error_stop => 0);
$checker->query_until(qr/started/, "\\echo started\nSELECT genie_index_check('dd_idx');\n");
$node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND relation = 'cc'::regclass})
  or die 'the check did not wait for the table';
$dropper->query_safe('COMMIT');
$dropper->quit;
$checker->query('SELECT 1');
like($checker->{stderr}, qr/ERROR:  genie index "dd_idx" was dropped while the statement opened it\s+HINT:  A DROP INDEX or REINDEX CONCURRENTLY ran beside the statement\. Run the statement again\./,
	'an index dropped before the check locked it is called dropped');
$checker->quit;

# A statement that holds the index REINDEX CONCURRENTLY is replacing (here
# named as what it is renamed to while the REINDEX waits for a reader):
# the error says so and to run the statement again, not to REINDEX it.
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN');
$reader->query_safe('SELECT count(*) FROM cc');
my $reindex = $node->background_psql('postgres');
$reindex->query_until(qr/started/, "\\echo started\nREINDEX INDEX CONCURRENTLY cc_idx;\n");
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_class WHERE relname = 'cc_idx_ccold'})
  or die 'REINDEX CONCURRENTLY did not reach its swap';
my ($r, $o, $e) = $node->psql('postgres', q{SELECT count(*) FROM genie_topk('cc_idx_ccold', ARRAY['{1,2}'::genie_query], 5)});
like($e, qr/genie index "cc_idx_ccold" is being replaced by REINDEX CONCURRENTLY/, 'the old index of a REINDEX CONCURRENTLY is called what it is');
like($e, qr/DETAIL:  Index "cc_idx" takes its place\.\s+HINT:  Run the statement again\./, 'the error names the new index and says to run the statement again');
unlike($e, qr/REINDEX INDEX cc_idx_ccold/, 'the hint does not ask to rebuild the dying index');
# the pgbench script above catches that error, and only errors of that kind
($r, $o, $e) = $node->psql('postgres', $raced_check->('cc_idx_ccold'));
like($e, qr/\A(?:psql:<stdin>:\d+: )?NOTICE:  raced: genie index "cc_idx_ccold" is being replaced by REINDEX CONCURRENTLY\z/,
	'the concurrent checks catch the error of an index being replaced');
($r, $o, $e) = $node->psql('postgres', $raced_check->('w_idx'));
like($e, qr/ERROR:  genie index "w_idx" is corrupted/, 'the concurrent checks let other errors through');
$reader->query_safe('COMMIT');
$reader->quit;
$reindex->quit;
is($node->safe_psql('postgres', q{SELECT count(*) FROM genie_topk('cc_idx', ARRAY['{1,2}'::genie_query], 5)}), '5',
	'the new index answers under the old name');

$node->stop;
done_testing();
