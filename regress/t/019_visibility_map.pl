# Batch functions answer a row on a page the visibility map marks
# all-visible from its line pointer, as an index-only scan does, without
# reading its tuple.  Checked against a plain SQL oracle (the distance in
# SQL over the table's current rows, their current ctids):
#   - a vacuumed table: every row answered by the map, none fetched;
#   - rows updated in place (HOT) and vacuumed: their index entries lead to
#     redirects, and the ctid returned is the row's current version;
#   - a table changed by the caller's own open transaction (deleted,
#     updated, inserted rows), and one changed by a transaction committed
#     after a REPEATABLE READ snapshot was taken: the map's bits are
#     cleared there, and the rows are fetched and checked as before;
#   - a session's next batches answer rows from the earlier ones' while the
#     map's page keeps its LSN, also across other sessions' HOT updates and
#     VACUUMs and its own changes; unlogged tables keep nothing;
#   - SERIALIZABLE: a row answered by the map is predicate-locked;
#   - old_snapshot_threshold on: the map is not used.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Spec;

my $node = PostgreSQL::Test::Cluster->new('visibility_map');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE EXTENSION pg_visibility;
	SELECT setseed(0.4242);
	-- room on each page for HOT updates
	CREATE TABLE vm (id int PRIMARY KEY, v real[], tags int4[], note text) WITH (fillfactor = 50);
	INSERT INTO vm SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 8) d WHERE i > 0),
	                      ARRAY[i % 17, i % 23, 100 + i % 5], 'n'
	FROM generate_series(1, 3000) i;
	CREATE TABLE vq (qid int PRIMARY KEY, q real[]);
	INSERT INTO vq SELECT j, (SELECT array_agg(random()::real) FROM generate_series(1, 8) d WHERE j > 0)
	FROM generate_series(1, 40) j;
	CREATE INDEX vm_v ON vm USING genie (v) WITH (m = 0);
	CREATE INDEX vm_tags ON vm USING genie (tags);
	-- the oracle: the distance in plain SQL, float8
	CREATE FUNCTION l2(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
	  SELECT sqrt(sum((x::float8 - y::float8) * (x::float8 - y::float8))) FROM unnest(a, b) AS t(x, y)
	$$;
	-- rows genie_knn returns (with the row's id, through its ctid) that the oracle's
	-- top k by distance over the current rows does not, and the other way
	CREATE FUNCTION knn_mismatches(k int) RETURNS bigint LANGUAGE sql AS $$
	  WITH got AS (
	    SELECT g.query_no, vm.id, g.distance
	    FROM genie_knn('vm_v', (SELECT array_agg(q ORDER BY qid) FROM vq), k) g
	    LEFT JOIN vm ON vm.ctid = g.ctid),
	  want AS (
	    SELECT vq.qid AS query_no, o.id, o.d AS distance
	    FROM vq, LATERAL (SELECT id, l2(v, vq.q) d FROM vm ORDER BY 2 LIMIT k) o)
	  SELECT (SELECT count(*) FROM (TABLE got EXCEPT TABLE want) a)
	       + (SELECT count(*) FROM (TABLE want EXCEPT TABLE got) b)
	       + (SELECT count(*) FROM got WHERE id IS NULL)
	$$;
	-- genie_topk's rows whose ctid is not a current row with that score, and
	-- the queries short of k rows
	CREATE FUNCTION topk_mismatches(k int) RETURNS bigint LANGUAGE sql AS $$
	  WITH q AS (SELECT ARRAY[j % 17, 100 + j % 5]::genie_query AS gq, ARRAY[j % 17, 100 + j % 5] AS a, j
	             FROM generate_series(1, 30) j),
	  got AS (SELECT g.*, vm.tags FROM genie_topk('vm_tags', (SELECT array_agg(gq ORDER BY j) FROM q), k) g
	          LEFT JOIN vm ON vm.ctid = g.ctid)
	  SELECT (SELECT count(*) FROM got JOIN q ON q.j = got.query_no
	          WHERE got.tags IS NULL OR genie_match_count(got.tags, q.a) <> got.score)
	       + (SELECT count(*) FROM (SELECT query_no FROM got GROUP BY 1 HAVING count(*) <> k) s)
	       + 30 - (SELECT count(DISTINCT query_no) FROM got)
	$$;
});
$node->safe_psql('postgres', 'VACUUM vm');

# genie's EXPLAIN (ANALYZE) counts of a batch statement: heap fetches and all-visible rows
sub counts
{
	my ($sql) = @_;
	my $plan = $node->safe_psql('postgres', "LOAD 'genie'; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $sql");
	my ($fetches) = $plan =~ /Genie Heap Fetches: (\d+)/;
	my ($by_map) = $plan =~ /Genie All-Visible Rows: (\d+)/;
	return ($fetches // -1, $by_map // -1);
}
my $knn = q{SELECT count(*) FROM genie_knn('vm_v', (SELECT array_agg(q ORDER BY qid) FROM vq), 10)};

is($node->safe_psql('postgres', q{SELECT all_visible = (SELECT relpages FROM pg_class WHERE relname = 'vm')
	FROM pg_visibility_map_summary('vm')}), 't', 'vacuumed: every page all-visible');
is($node->safe_psql('postgres', 'SELECT knn_mismatches(10) + knn_mismatches(1) + knn_mismatches(200)'), '0',
	'vacuumed: genie_knn equals the SQL oracle (k 1, 10, 200)');
my ($fetches, $by_map) = counts($knn);
is($fetches, 0, 'vacuumed: no row fetched from the heap');
cmp_ok($by_map, '>', 0, 'vacuumed: the rows answered by the visibility map');
is($node->safe_psql('postgres', 'SELECT topk_mismatches(10) + topk_mismatches(300)'), '0',
	'vacuumed: genie_topk\'s rows are current rows with their scores');

# HOT updates (a column no index covers), then VACUUM: the pages are all-visible
# again and the index's TIDs lead to redirects
$node->safe_psql('postgres', q{UPDATE vm SET note = 'hot' WHERE id % 3 = 0});
$node->safe_psql('postgres', 'VACUUM vm');
is($node->safe_psql('postgres', q{SELECT n_tup_hot_upd > 0 FROM pg_stat_user_tables WHERE relname = 'vm'}), 't',
	'the updates were HOT');
is($node->safe_psql('postgres', q{SELECT all_visible = (SELECT relpages FROM pg_class WHERE relname = 'vm')
	FROM pg_visibility_map_summary('vm')}), 't', 'HOT-updated and vacuumed: every page all-visible');
is($node->safe_psql('postgres', 'SELECT knn_mismatches(10) + knn_mismatches(200)'), '0',
	'HOT-updated: genie_knn returns each row\'s current ctid');
($fetches, $by_map) = counts($knn);
is($fetches, 0, 'HOT-updated: redirects answered by the map, no row fetched');
is($node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE vm.note = 'hot') > 0 AND count(*) = count(vm.id)
	FROM genie_knn('vm_v', (SELECT array_agg(q ORDER BY qid) FROM vq), 50) g LEFT JOIN vm ON vm.ctid = g.ctid}), 't',
	'HOT-updated rows are among the answers, each at a current ctid');
is($node->safe_psql('postgres', 'SELECT topk_mismatches(10) + topk_mismatches(300)'), '0',
	'HOT-updated: genie_topk\'s ctids are current');

# the caller's own open transaction: its deletes, updates and inserts clear the
# map's bits of their pages; those rows are fetched and checked
my $own = $node->safe_psql('postgres', qq{
	BEGIN;
	DELETE FROM vm WHERE id % 11 = 0;
	UPDATE vm SET v = array_fill((0.25 + id / 20000.0)::real, ARRAY[8]) WHERE id % 13 = 0;
	INSERT INTO vm SELECT 5000 + qid, q, ARRAY[1], 'new' FROM vq WHERE qid % 4 = 0;
	LOAD 'genie';
	EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn;
	SELECT 'mismatches ' || (knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10));
	ROLLBACK;});
like($own, qr/^mismatches 0$/m, 'the caller\'s own deletes, updates and inserts: genie_knn and genie_topk equal the oracle');
like($own, qr/Genie Heap Fetches: [1-9]/, 'the changed pages\' rows are fetched from the heap');

# a REPEATABLE READ snapshot taken before another transaction commits changes:
# the changed pages' bits are cleared, and the snapshot does not see the changes
my $reader = $node->background_psql('postgres');
$reader->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
my $before = $reader->query_safe('SELECT knn_mismatches(10)');
$node->safe_psql('postgres', q{
	DELETE FROM vm WHERE id % 7 = 1;
	INSERT INTO vm SELECT 6000 + qid, q, ARRAY[2], 'late' FROM vq;});
$node->safe_psql('postgres', 'VACUUM vm');
is($reader->query_safe(q{SELECT count(*) FROM vm WHERE note = 'late'}), '0',
	'the older snapshot does not see the later rows');
is($reader->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), "0",
	'an older snapshot after later commits and a VACUUM: equal to the oracle in that snapshot');
is($before, '0', 'and before them');
like($reader->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn"), qr/Genie Heap Fetches: [1-9]/,
	'the older snapshot fetches the changed pages\' rows');
$reader->query_safe('COMMIT');
$reader->quit;
is($node->safe_psql('postgres', 'SELECT knn_mismatches(10) + topk_mismatches(10)'), '0',
	'a new snapshot sees the later rows, equal to the oracle');
$node->safe_psql('postgres', 'VACUUM vm');
is($node->safe_psql('postgres', 'SELECT knn_mismatches(10) + knn_mismatches(200)'), '0',
	'vacuumed again: equal to the oracle');
($fetches, $by_map) = counts($knn);
cmp_ok($by_map, '>', 0, 'vacuumed again: the map answers again');

# A backend remembers the rows the map answered for its next batches while
# the map's page keeps its LSN (GenieAllVisibleMemo): one session holds it
# while other sessions change rows and VACUUM sets the bits again
my $held = $node->background_psql('postgres');
$held->query_safe("LOAD 'genie'");
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: a first batch in a session, equal to the oracle');
my $again = $held->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn");
like($again, qr/Genie Heap Fetches: 0\n.*\n.*Genie All-Visible Rows: [1-9]\d*\n.*Genie All-Visible Rows Remembered: [1-9]/,
	'memo: the next batch answers its rows from the earlier ones, fetching none');
my ($all, $remembered) = $again =~ /Genie All-Visible Rows: (\d+)\n.*Genie All-Visible Rows Remembered: (\d+)/;
is($remembered, $all, 'memo: every row of the repeated batch remembered');
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: batches answered from it equal the oracle');
# HOT updates prune the earlier versions (their TIDs freed) once vacuumed: a
# remembered TID of such a row would lead nowhere (the oracle counts it)
$node->safe_psql('postgres', q{UPDATE vm SET note = 'hot2' WHERE id % 4 = 1});
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: rows HOT-updated by another session (bits cleared): equal to the oracle');
$node->safe_psql('postgres', 'VACUUM vm');
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: and vacuumed (bits set again, earlier versions pruned): equal to the oracle');
$node->safe_psql('postgres', q{UPDATE vm SET note = 'hot3' WHERE id % 4 = 1});
$node->safe_psql('postgres', 'VACUUM vm');
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: updated and vacuumed again between two of its batches: equal to the oracle');
# the session's own changes clear the bits of their pages
like($held->query_safe(qq{
	BEGIN;
	UPDATE vm SET note = 'own' WHERE id % 3 = 2;
	DELETE FROM vm WHERE id % 29 = 0;
	SELECT 'mismatches ' || (knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10));
	ROLLBACK;}), qr/^mismatches 0$/m, 'memo: the session\'s own updates and deletes: equal to the oracle');
is($held->query_safe('SELECT knn_mismatches(10) + topk_mismatches(10)'), '0', 'memo: after its rollback');
# the heap moved to another file, TIDs and all, the index kept: nothing
# remembered of the old file is used (under wal_level = minimal the copy keeps
# the map's LSNs; the memo also notes the heap's file)
$node->safe_psql('postgres', 'VACUUM vm');
is($held->query_safe('SELECT knn_mismatches(10)'), '0', 'memo: vacuumed after the rollback, equal to the oracle');
like($held->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn"), qr/Remembered: [1-9]/,
	'memo: remembered before the move');
# (an absolute path: PostgreSQL 17's tempdir is relative to the test's folder)
my $tsdir = File::Spec->rel2abs(PostgreSQL::Test::Utils::tempdir());
$node->safe_psql('postgres', "CREATE TABLESPACE vm_space LOCATION '$tsdir'");
$node->safe_psql('postgres', 'ALTER TABLE vm SET TABLESPACE vm_space');
my $moved = $held->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn");
like($moved, qr/Genie Heap Fetches: 0\n.*\n.*Genie All-Visible Rows: [1-9]/, 'memo: after the heap moved, the map answers');
unlike($moved, qr/Remembered/, 'memo: after the heap moved, nothing remembered is used');
is($held->query_safe('SELECT knn_mismatches(10) + knn_mismatches(200) + topk_mismatches(10)'), '0',
	'memo: after the heap moved, equal to the oracle');
like($held->query_safe("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) $knn"), qr/Remembered: [1-9]/,
	'memo: remembered again after the move');
$held->quit;
# a table without WAL keeps no memo (its map pages get no LSN)
$node->safe_psql('postgres', q{
	CREATE UNLOGGED TABLE vmu AS SELECT id, v FROM vm;
	CREATE INDEX vmu_v ON vmu USING genie (v) WITH (m = 0);
	VACUUM vmu;});
my $unlogged = $node->safe_psql('postgres', qq{LOAD 'genie';
	SELECT count(*) FROM genie_knn('vmu_v', (SELECT array_agg(q ORDER BY qid) FROM vq), 10);
	EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	SELECT count(*) FROM genie_knn('vmu_v', (SELECT array_agg(q ORDER BY qid) FROM vq), 10);});
like($unlogged, qr/Genie All-Visible Rows: [1-9]/, 'unlogged: the map answers');
unlike($unlogged, qr/Remembered/, 'unlogged: no row remembered');

# SERIALIZABLE: a row answered by the map is predicate-locked as a fetched one
# is.  s1 reads row x through genie_knn; s2 reads row y, writes x and commits;
# s1 then writes y: a cycle of read/write dependencies, which PostgreSQL must
# break by failing s1.  Without a lock on x, s1 would commit.
my $x = $node->safe_psql('postgres', q{
	SELECT vm.id FROM genie_knn('vm_v', (SELECT q FROM vq WHERE qid = 1), 1) g JOIN vm ON vm.ctid = g.ctid});
my $y = $node->safe_psql('postgres', "SELECT min(id) FROM vm WHERE id <> $x");
$node->safe_psql('postgres', 'VACUUM vm');
my $s1 = $node->background_psql('postgres', on_error_stop => 0);
my $s2 = $node->background_psql('postgres');
$s1->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
# two queries: a batch, whose rows the map answers (a single query fetches its rows)
like($s1->query_safe(q{LOAD 'genie'; EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	SELECT count(*) FROM genie_knn('vm_v', (SELECT array_agg(q ORDER BY qid) FROM vq WHERE qid <= 2), 1)}),
	qr/Genie Heap Fetches: 0\n.*\n.*Genie All-Visible Rows: [12]/,
	'serializable: s1 reads x through genie_knn, answered by the map');
$s2->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
$s2->query_safe("SELECT note FROM vm WHERE id = $y");
$s2->query_safe("UPDATE vm SET note = 's2' WHERE id = $x");
$s2->query_safe('COMMIT');
$s1->query("UPDATE vm SET note = 's1' WHERE id = $y");
$s1->query('COMMIT');
like($s1->{stderr}, qr/could not serialize access/, 'serializable: the read/write cycle fails s1');
$s1->quit;
$s2->quit;

# old_snapshot_threshold on: VACUUM may mark pages all-visible that an old
# snapshot sees otherwise, so every row is fetched
# (PostgreSQL 17 has no such setting)
if ($node->safe_psql('postgres', 'SHOW server_version_num') < 170000)
{
	$node->append_conf('postgresql.conf', "old_snapshot_threshold = 0\n");
	$node->restart;
	$node->safe_psql('postgres', 'VACUUM vm');
	($fetches, $by_map) = counts($knn);
	ok($fetches > 0 && $by_map == 0, 'old_snapshot_threshold on: no row answered by the map');
	is($node->safe_psql('postgres', 'SELECT knn_mismatches(10)'), '0', 'old_snapshot_threshold on: equal to the oracle');
}

$node->stop;
done_testing();
