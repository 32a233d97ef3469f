# A streaming standby returns the same results as the primary after inserts,
# deletes and vacuum (the pattern of contrib/bloom's t/001_wal.pl).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use GenieTest;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->start;
create_docs($primary, 5000);

my $backup = 'genie_backup';
$primary->backup($backup);
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, $backup, has_streaming => 1);
$standby->start;

my $queries = q{
	SET genie.device = 'cpu'; SET enable_seqscan = off;
	SELECT string_agg(ids, ';') FROM (
		SELECT (SELECT string_agg(id::text || ':' || (tags <~> ARRAY[q, q + 1]), ',')
		        FROM (SELECT id, tags FROM docs ORDER BY tags <~> ARRAY[q, q + 1] LIMIT 15) x) AS ids
		FROM generate_series(1, 40) AS q) y
};

sub compare
{
	my ($label) = @_;
	$primary->wait_for_catchup($standby, 'replay');
	my $on_primary = $primary->safe_psql('postgres', $queries);
	my $on_standby = $standby->safe_psql('postgres', $queries);
	ok(length($on_primary) > 100, "$label: the primary answers");
	is($on_standby, $on_primary, "$label: the standby answers the same");
}

compare('after the build');

$primary->safe_psql('postgres',
	'INSERT INTO docs SELECT i, ARRAY[i % 50, i % 77, 3] FROM generate_series(5001, 6000) AS i');
compare('after inserts (pending list)');

$primary->safe_psql('postgres', 'DELETE FROM docs WHERE id % 4 = 0');
compare('after deletes');

$primary->safe_psql('postgres', 'VACUUM docs');
compare('after vacuum');
is($standby->safe_psql('postgres', "SELECT pending_rows || '/' || dead_rows FROM genie_index_info('docs_tags_idx')"),
	'0/0', 'vacuum merged the pending list and removed dead rows on the standby too');

$primary->safe_psql('postgres',
	'INSERT INTO docs SELECT i, ARRAY[i % 11, 7] FROM generate_series(6001, 6500) AS i; UPDATE docs SET tags = tags || 9 WHERE id % 9 = 0');
compare('after inserts and updates on top of vacuum');
check_index_matches_seqscan($standby, 'standby');

# A row index: dictionary entries appended by inserts of values first seen
# after the build replay on the standby, which then scores like the primary.
$primary->safe_psql('postgres', q{
	CREATE TABLE pkgs (id int, section text, size int, arch text);
	INSERT INTO pkgs SELECT i, 's' || (i % 40), (i * 7919) % 100000,
	       CASE WHEN i % 3 = 0 THEN 'all' ELSE 'amd64' END FROM generate_series(1, 3000) AS i;
	CREATE INDEX pkgs_rows ON pkgs USING genie ((pkgs)) WITH (attributes = 'section, size, arch', buckets = 128);
	INSERT INTO pkgs SELECT i, 'new' || (i % 500), i * 50 - 150000, 'arm64' FROM generate_series(3001, 4000) AS i;
	DELETE FROM pkgs WHERE id % 7 = 0;
});
# VACUUM merges and recycles unreachable pages: the dictionary must survive it
$primary->safe_psql('postgres', 'VACUUM pkgs');
$primary->safe_psql('postgres',
	"INSERT INTO pkgs SELECT i, 'late' || (i % 50), i, 'amd64' FROM generate_series(4001, 4500) AS i");
my $row_query = q{
	SELECT string_agg(scores, ';') FROM (
	  SELECT (SELECT string_agg(genie_match_count(p, q)::text, ',')
	          FROM (SELECT p FROM pkgs p ORDER BY p <~> q, id LIMIT 12) x) AS scores
	  FROM generate_series(1, 30) AS n,
	       LATERAL genie_ranges('pkgs_rows', jsonb_build_object('section', jsonb_build_array('new' || n, 's' || n),
	                            'size', jsonb_build_array(n * 50 - 1000, n * 50 + 1000), 'arch', 'arm64')) AS q) y
};
$primary->wait_for_catchup($standby, 'replay');
my $row_index = "SET enable_seqscan = off; SET enable_sort = off; $row_query";
my $row_seqscan = "SET enable_indexscan = off; $row_query";
my $primary_rows = $primary->safe_psql('postgres', $row_index);
like($primary_rows, qr/^3,/, 'row index: the primary finds rows matching all three attributes');
is($primary_rows, $primary->safe_psql('postgres', $row_seqscan), 'row index: the primary equals its sequential scan');
is($standby->safe_psql('postgres', $row_index), $primary_rows, 'row index: the standby answers the same');
is($standby->safe_psql('postgres', "SELECT distinct_values FROM genie_index_attributes('pkgs_rows') WHERE attribute = 'section'"),
	'590', 'row index: the standby has the dictionary values appended after the build and after VACUUM');
check_index($primary, 'pkgs_rows', 'row index, primary');
check_index($standby, 'pkgs_rows', 'row index, standby');

# Stored strings (genie_ngram_ops): the strings chain of the build, pending
# rows' strings, and the chain VACUUM rewrites replay on the standby, whose
# edit-distance scans then give the primary's rows and true distances.
$primary->safe_psql('postgres', q{
	CREATE EXTENSION fuzzystrmatch;
	CREATE TABLE names (id int, w text);
	INSERT INTO names SELECT i, translate(substr(md5(i::text), 1, 4 + i % 9), '0123456789', 'ghijklmnop')
	FROM generate_series(1, 5000) AS i;
	CREATE INDEX names_w ON names USING genie (w genie_ngram_ops);
	INSERT INTO names SELECT i, 'late' || translate(md5(i::text), '0123456789', 'qrstuvwxyz')
	FROM generate_series(5001, 5300) AS i;
	DELETE FROM names WHERE id % 11 = 0;
});
$primary->safe_psql('postgres', 'VACUUM names');
$primary->safe_psql('postgres',
	"INSERT INTO names SELECT i, 'after' || substr(md5(i::text), 1, 6) FROM generate_series(5301, 5400) AS i");
my $names_query = q{
	SET enable_seqscan = off;
	SELECT string_agg(ids || ':' || ds, ';' ORDER BY n) FROM (
	  SELECT n, (SELECT string_agg(id::text, ',' ORDER BY d, id) FROM
	               (SELECT id, w <%> q AS d FROM names ORDER BY w <%> q LIMIT 6) x) AS ids,
	            (SELECT string_agg(levenshtein(w, q)::text, ',' ORDER BY w <%> q) FROM
	               (SELECT w FROM names ORDER BY w <%> q LIMIT 6) x) AS ds
	  FROM (SELECT n, CASE WHEN n % 3 = 0 THEN 'late' ELSE 'after' END || substr(md5(n::text), 1, 5) AS q
	        FROM generate_series(1, 20) AS n) qs) y
};
$primary->wait_for_catchup($standby, 'replay');
my $primary_names = $primary->safe_psql('postgres', $names_query);
like($primary_names, qr/^(?:\d+(?:,\d+){5}:\d+(?:,\d+){5};){19}\d+(?:,\d+){5}:\d+(?:,\d+){5}$/,
	'stored strings: the primary returns six rows and distances for each of 20 queries');
is($standby->safe_psql('postgres', $names_query), $primary_names,
	'stored strings: the standby returns the primary\'s rows and distances');
is($standby->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM generate_series(1, 20) AS n,
	  LATERAL (SELECT 'late' || substr(md5(n::text), 1, 5) AS q) qq
	WHERE (SELECT array_agg(levenshtein(w, qq.q) ORDER BY levenshtein(w, qq.q))
	       FROM (SELECT w FROM names ORDER BY w <%> qq.q LIMIT 6) x)
	   IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
	       (SELECT levenshtein(w, qq.q) AS d FROM names ORDER BY 1 LIMIT 6) t)}), '0',
	'stored strings: the standby\'s answers equal levenshtein() over the table');

# Stored vectors (genie_vector_ops): the values chain and LSH keywords of the
# build, an index built on an empty table whose first insert sets the
# dimension (a metapage record), pending rows, and the chain VACUUM rewrites
# replay on the standby, whose exact searches then equal the primary's and a
# sequential scan.
$primary->safe_psql('postgres', q{
	CREATE TABLE vecs (id int, v real[]);
	INSERT INTO vecs SELECT i, ARRAY(SELECT ((i * 7 + j * 13) % 23)::real FROM generate_series(1, 12) j)
	FROM generate_series(1, 3000) i;
	CREATE INDEX vecs_v ON vecs USING genie (v);
	CREATE TABLE late (id int, v real[]);
	CREATE INDEX late_v ON late USING genie (v) WITH (m = 16, width = 4);
	INSERT INTO late SELECT i, ARRAY[i % 10, i % 7, i % 3]::real[] FROM generate_series(1, 500) i;
	INSERT INTO vecs SELECT i, ARRAY(SELECT ((i + j) % 5)::real FROM generate_series(1, 12) j) FROM generate_series(3001, 3300) i;
	DELETE FROM vecs WHERE id % 7 = 0;
});
$primary->safe_psql('postgres', 'VACUUM vecs');
$primary->safe_psql('postgres',
	"INSERT INTO vecs SELECT i, array_fill((i % 4)::real, ARRAY[12]) FROM generate_series(3301, 3400) i");
my $vec_query = q{
	SET enable_seqscan = off;
	SELECT string_agg(r, ';' ORDER BY n) FROM (
	  SELECT n, (SELECT string_agg(round(d::numeric, 6)::text, ',') FROM
	               (SELECT v <-> q AS d FROM vecs ORDER BY v <-> q LIMIT 8) x) AS r
	  FROM (SELECT n, ARRAY(SELECT ((n * 3 + j) % 11)::real FROM generate_series(1, 12) j) AS q
	        FROM generate_series(1, 20) AS n) qs) y
	UNION ALL
	SELECT string_agg(round(distance::numeric, 6)::text, ',' ORDER BY query_no, distance)
	FROM genie_knn('late_v', ARRAY[ARRAY[1, 2, 0], ARRAY[9, 9, 2]]::real[], 5)
};
$primary->wait_for_catchup($standby, 'replay');
my $primary_vecs = $primary->safe_psql('postgres', $vec_query);
like($primary_vecs, qr/^(?:[\d.]+(?:,[\d.]+){7};){19}[\d.]+(?:,[\d.]+){7}\n[\d.]+(?:,[\d.]+){9}$/,
	'stored vectors: the primary returns eight distances for each of 20 queries, and a batch');
is($standby->safe_psql('postgres', $vec_query), $primary_vecs,
	'stored vectors: the standby returns the primary\'s distances');
is($standby->safe_psql('postgres', "SELECT dimensions FROM genie_vector_info('late_v')"), '3',
	'the dimension set by the first insert into an empty index replays');
is($standby->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM generate_series(1, 20) AS n,
	  LATERAL (SELECT ARRAY(SELECT ((n * 3 + j) % 11)::real FROM generate_series(1, 12) j) AS q) qq
	WHERE (SELECT array_agg(d) FROM (SELECT v <-> qq.q AS d FROM vecs ORDER BY v <-> qq.q LIMIT 8) x)
	   IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
	       (SELECT (v <-> qq.q) + 0 AS d FROM vecs WHERE v IS NOT NULL ORDER BY 1 LIMIT 8) t)}), '0',
	'stored vectors: the standby\'s answers equal a sequential scan');

# Stored codes (genie_bit_ops): the build's values chain, an index built on
# an empty table whose first insert sets the length (a metapage record),
# pending rows and the chain VACUUM rewrites replay; the standby's Hamming
# searches equal the primary's and a sequential scan by bit_count.
$primary->safe_psql('postgres', q{
	CREATE TABLE codes (id int, code bit(96));
	INSERT INTO codes SELECT i, ('x' || substr(md5(i::text), 1, 24))::bit(96) FROM generate_series(1, 3000) i;
	CREATE INDEX codes_c ON codes USING genie (code);
	CREATE INDEX codes_ewh ON codes USING genie (code) WITH (m = 8, sample_bits = 12);
	CREATE TABLE late_codes (id int, code varbit);
	CREATE INDEX late_codes_c ON late_codes USING genie (code);
	INSERT INTO late_codes SELECT i, ('x' || substr(md5(i::text), 1, 5))::bit(20)::varbit FROM generate_series(1, 400) i;
	INSERT INTO codes SELECT i, ('x' || substr(md5((i % 50)::text), 1, 24))::bit(96) FROM generate_series(3001, 3300) i;
	DELETE FROM codes WHERE id % 7 = 0;
});
$primary->safe_psql('postgres', 'VACUUM codes');
$primary->safe_psql('postgres',
	"INSERT INTO codes SELECT i, ('x' || substr(md5((i * 3)::text), 1, 24))::bit(96) FROM generate_series(3301, 3400) i");
my $code_query = q{
	SET enable_seqscan = off;
	SELECT string_agg(r, ';' ORDER BY n) FROM (
	  SELECT n, (SELECT string_agg(d::text, ',') FROM
	               (SELECT code <-> q AS d FROM codes ORDER BY code <-> q LIMIT 8) x) AS r
	  FROM (SELECT n, ('x' || substr(md5((n * 11)::text), 1, 24))::bit(96) AS q
	        FROM generate_series(1, 20) AS n) qs) y
	UNION ALL
	SELECT string_agg(distance::text, ',' ORDER BY query_no, distance)
	FROM genie_hamming_knn('late_codes_c', ARRAY[B'10101010101010101010', B'00000000001111111111'], 5)
};
$primary->wait_for_catchup($standby, 'replay');
my $primary_codes = $primary->safe_psql('postgres', $code_query);
like($primary_codes, qr/^(?:\d+(?:,\d+){7};){19}\d+(?:,\d+){7}\n\d+(?:,\d+){9}$/,
	'stored codes: the primary returns eight distances for each of 20 queries, and a batch');
is($standby->safe_psql('postgres', $code_query), $primary_codes,
	'stored codes: the standby returns the primary\'s distances');
is($standby->safe_psql('postgres', q{
	SET enable_seqscan = off;
	SELECT count(*) FROM generate_series(1, 20) AS n,
	  LATERAL (SELECT ('x' || substr(md5((n * 11)::text), 1, 24))::bit(96) AS q) qq
	WHERE (SELECT array_agg(d) FROM (SELECT code <-> qq.q AS d FROM codes ORDER BY code <-> qq.q LIMIT 8) x)
	   IS DISTINCT FROM (SELECT array_agg(d ORDER BY d) FROM
	       (SELECT bit_count(code # qq.q)::float8 AS d FROM codes WHERE code IS NOT NULL ORDER BY 1 LIMIT 8) t)}), '0',
	'stored codes: the standby\'s answers equal a sequential scan by bit_count');
# EWH keywords (built, pending, merged by VACUUM, pending again) replay like
# any postings: the standby's candidates, rows and distances are the primary's
my $ewh_query = q{
	SET genie.bit_search = ewh;
	SET genie.ewh_candidates = 40;
	SELECT string_agg(query_no || ':' || ctid || ':' || distance, ',' ORDER BY query_no, distance, ctid)
	FROM genie_hamming_knn('codes_ewh', ARRAY(SELECT ('x' || substr(md5((n * 11)::text), 1, 24))::bit(96)
	                                          FROM generate_series(1, 10) n), 6)
};
my $primary_ewh = $primary->safe_psql('postgres', $ewh_query);
like($primary_ewh, qr/^(?:\d+:\(\d+,\d+\):\d+,?){60}$/, 'EWH: the primary answers ten queries with six rows each');
is($standby->safe_psql('postgres', $ewh_query), $primary_ewh, 'EWH: the standby gives the primary\'s rows');

# Documents (genie_tsvector_ops): lexemes first seen after the build append
# to the dictionary (one WAL record each), and the standby ranks as the
# primary and as a sequential scan
$primary->safe_psql('postgres', q{
	CREATE TABLE notes (id int, doc tsvector);
	INSERT INTO notes SELECT i, to_tsvector('simple', 'w' || i % 13 || ' w' || i % 31 || ' x' || i % 5)
	FROM generate_series(1, 2000) i;
	CREATE INDEX notes_d ON notes USING genie (doc);
	INSERT INTO notes SELECT i, setweight(to_tsvector('simple', 'new' || i % 17 || ' w' || i % 13), 'A')
	FROM generate_series(2001, 2300) i;
	DELETE FROM notes WHERE id % 9 = 0;});
my $document_query = q{
	SET enable_seqscan = off;
	SELECT string_agg(s, ';') FROM (
	  SELECT (SELECT string_agg((-(doc <~> q))::text, ',') FROM (SELECT doc FROM notes ORDER BY doc <~> q LIMIT 8) x) AS s
	  FROM (SELECT ('new' || n || ' | w' || n || ' | x' || n % 5)::tsquery AS q FROM generate_series(1, 20) n) qq) y};
my $document_truth = q{
	SET enable_indexscan = off; SET enable_bitmapscan = off;
	SELECT string_agg(s, ';') FROM (
	  SELECT (SELECT string_agg(c::text, ',') FROM (SELECT genie_match_count(doc, q) AS c FROM notes ORDER BY 1 DESC LIMIT 8) x) AS s
	  FROM (SELECT ('new' || n || ' | w' || n || ' | x' || n % 5)::tsquery AS q FROM generate_series(1, 20) n) qq) y};
my $document_expected = $primary->safe_psql('postgres', $document_truth);
like($document_expected, qr/^(?:\d+(?:,\d+){7};){19}\d+(?:,\d+){7}$/, 'documents: eight scores for each of 20 queries');
$primary->wait_for_catchup($standby, 'replay');
is($primary->safe_psql('postgres', $document_query), $document_expected, 'documents: the primary ranks as a sequential scan');
is($standby->safe_psql('postgres', $document_query), $document_expected, 'documents: so does the standby, new lexemes included');
check_index($standby, 'notes_d', 'documents, standby');

# The permutation index (WITH (permutants = m)): its chains written at the
# build (logged page by page) and rewritten by the merge (GenericXLog),
# pending rows' rows computed at load; the standby's candidates, rows and
# distances are the primary's, for vectors and for strings.
$primary->safe_psql('postgres', q{
	CREATE TABLE perm_v (id int PRIMARY KEY, v real[]);
	INSERT INTO perm_v SELECT i, ARRAY[sin(i), cos(i * 0.7), sin(i * 0.13), cos(i * 0.31)]::real[]
	FROM generate_series(1, 3000) i;
	CREATE INDEX perm_v_idx ON perm_v USING genie (v genie_vector_ops) WITH (permutants = 12, m = 0, seed = 3);
	CREATE TABLE perm_w (id int PRIMARY KEY, w text);
	INSERT INTO perm_w SELECT i, substr(md5(i::text), 1, 5 + i % 6) FROM generate_series(1, 3000) i;
	CREATE INDEX perm_w_idx ON perm_w USING genie (w genie_ngram_ops) WITH (permutants = 16);
	INSERT INTO perm_v SELECT i, ARRAY[sin(i), cos(i * 0.7), sin(i * 0.13), cos(i * 0.31)]::real[]
	FROM generate_series(3001, 3400) i;
	INSERT INTO perm_w SELECT i, substr(md5(i::text), 1, 5 + i % 6) FROM generate_series(3001, 3400) i;
	DELETE FROM perm_v WHERE id % 10 = 0;
	DELETE FROM perm_w WHERE id % 10 = 0;
});
my $perm_query = q{
	SET genie.vector_search = permutation; SET genie.text_search = permutation;
	SET genie.permutation_fraction = 0.05;
	SELECT (SELECT string_agg(query_no || ':' || ctid || ':' || round(distance::numeric, 6), ',' ORDER BY query_no, distance, ctid)
	        FROM genie_knn('perm_v_idx', ARRAY(SELECT ARRAY[sin(n), cos(n), 0.5, 0.25]::real[] FROM generate_series(1, 8) n), 5))
	    || '|' ||
	       (SELECT string_agg(query_no || ':' || ctid || ':' || distance, ',' ORDER BY query_no, distance, ctid)
	        FROM genie_similar('perm_w_idx', ARRAY(SELECT substr(md5((n * 7)::text), 2, 7) FROM generate_series(1, 8) n), 5))
};
$primary->wait_for_catchup($standby, 'replay');
my $primary_perm = $primary->safe_psql('postgres', $perm_query);
like($primary_perm, qr/^(?:\d+:\(\d+,\d+\):[\d.]+,?){40}\|(?:\d+:\(\d+,\d+\):\d+,?){40}$/,
	'permutation index: the primary answers eight queries of each kind with five rows each');
is($standby->safe_psql('postgres', $perm_query), $primary_perm, 'permutation index: the standby gives the primary\'s rows (pending rows)');
$primary->safe_psql('postgres', 'VACUUM perm_v; VACUUM perm_w');
$primary->wait_for_catchup($standby, 'replay');
$primary_perm = $primary->safe_psql('postgres', $perm_query);
is($standby->safe_psql('postgres', $perm_query), $primary_perm, 'permutation index: and after the merge');

# An emptied index drops its permutants at the merge (an insert may then give
# it vectors of another dimension), and the next merge with m rows draws new
# ones of the new dimension; the standby follows.
$primary->safe_psql('postgres', q{
	CREATE TABLE perm_e (id int PRIMARY KEY, v real[]);
	INSERT INTO perm_e SELECT i, ARRAY[i, i * 2, 1]::real[] FROM generate_series(1, 40) i;
	CREATE INDEX perm_e_idx ON perm_e USING genie (v genie_vector_ops) WITH (permutants = 8, m = 0);
	DELETE FROM perm_e;
});
$primary->safe_psql('postgres', 'VACUUM perm_e');
$primary->safe_psql('postgres', 'INSERT INTO perm_e SELECT i, ARRAY[i, 0, 0, 0, 1]::real[] FROM generate_series(1, 40) i');
$primary->safe_psql('postgres', 'VACUUM perm_e');
my $perm_e_query = q{
	SET genie.vector_search = permutation; SET genie.permutation_fraction = 1;
	SELECT string_agg(id::text, ',' ORDER BY n) FROM (SELECT id, row_number() OVER () n FROM
	  (SELECT id FROM perm_e ORDER BY v <-> ARRAY[3.2, 0, 0, 0, 1]::real[] LIMIT 3) s) s2
};
$primary->wait_for_catchup($standby, 'replay');
is($primary->safe_psql('postgres', $perm_e_query), '3,4,2',
	'permutation index: emptied, given a new dimension and merged, it answers exactly at fraction 1');
is($standby->safe_psql('postgres', $perm_e_query), '3,4,2', 'permutation index: so does the standby');

# The List of Clusters (WITH (cluster_list = on)): its chain written at the
# build (logged page by page) and built again by the merge (GenericXLog);
# the standby's range answers are the primary's and the sequential scan's,
# with pending rows and after the merge; a list whose centres are each the
# farthest from those before (cluster_centres = farthest) keeps that rule
# through the merge.
$primary->safe_psql('postgres', q{
	CREATE TABLE lsc_v (id int PRIMARY KEY, v real[]);
	INSERT INTO lsc_v SELECT i, ARRAY[sin(i), cos(i * 0.7), sin(i * 0.13), cos(i * 0.31)]::real[]
	FROM generate_series(1, 3000) i;
	CREATE INDEX lsc_v_idx ON lsc_v USING genie (v genie_vector_ops)
	  WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4);
	CREATE INDEX lsc_v_far ON lsc_v USING genie (v genie_vector_ops)
	  WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4, cluster_centres = farthest);
	CREATE TABLE lsc_w (id int PRIMARY KEY, w text);
	INSERT INTO lsc_w SELECT i, substr(md5(i::text), 1, 5 + i % 6) FROM generate_series(1, 3000) i;
	CREATE INDEX lsc_w_idx ON lsc_w USING genie (w genie_ngram_ops) WITH (cluster_list = on, cluster_size = 32);
	INSERT INTO lsc_v SELECT i, ARRAY[sin(i), cos(i * 0.7), sin(i * 0.13), cos(i * 0.31)]::real[]
	FROM generate_series(3001, 3400) i;
	INSERT INTO lsc_w SELECT i, substr(md5(i::text), 1, 5 + i % 6) FROM generate_series(3001, 3400) i;
	DELETE FROM lsc_v WHERE id % 10 = 0;
	DELETE FROM lsc_w WHERE id % 10 = 0;
});
my $lsc_probe_v = q{ARRAY(SELECT ARRAY[sin(n), cos(n), 0.5, 0.25]::real[] FROM generate_series(1, 8) n)};
my $lsc_probe_w = q{ARRAY(SELECT substr(md5((n * 7)::text), 2, 7) FROM generate_series(1, 8) n)};
my $lsc_query = qq{
	SELECT (SELECT string_agg(query_no || ':' || ctid || ':' || distance, ',' ORDER BY query_no, distance, ctid)
	        FROM genie_within('lsc_v_idx', $lsc_probe_v, 0.5))
	    || '|' ||
	       (SELECT string_agg(query_no || ':' || ctid || ':' || distance, ',' ORDER BY query_no, distance, ctid)
	        FROM genie_within('lsc_w_idx', $lsc_probe_w, 4))
};
my $lsc_truth = qq{
	SELECT (SELECT string_agg(n || ':' || ctid || ':' || (v <-> q), ',' ORDER BY n, v <-> q, ctid)
	        FROM (SELECT n, ARRAY[sin(n), cos(n), 0.5, 0.25]::real[] AS q FROM generate_series(1, 8) n) p, lsc_v
	        WHERE v <-> q <= 0.5)
	    || '|' ||
	       (SELECT string_agg(n || ':' || ctid || ':' || genie_edit_distance(w, q), ',' ORDER BY n, genie_edit_distance(w, q), ctid)
	        FROM unnest($lsc_probe_w) WITH ORDINALITY p(q, n), lsc_w WHERE genie_edit_distance(w, q) <= 4)
};
$primary->wait_for_catchup($standby, 'replay');
my $lsc_want = $primary->safe_psql('postgres', $lsc_truth);
my ($lsc_v_rows, $lsc_w_rows) = map { scalar(() = /:\(/g) } split /\|/, $lsc_want;
ok(($lsc_v_rows // 0) >= 20 && ($lsc_w_rows // 0) >= 20,
	"list of clusters: the sequential scan finds rows of both kinds ($lsc_v_rows vectors, $lsc_w_rows strings)");
is($primary->safe_psql('postgres', $lsc_query), $lsc_want, 'list of clusters: the primary answers as the sequential scan (pending rows)');
is($standby->safe_psql('postgres', $lsc_query), $lsc_want, 'list of clusters: so does the standby');
$primary->safe_psql('postgres', 'VACUUM lsc_v; VACUUM lsc_w');
$primary->wait_for_catchup($standby, 'replay');
$lsc_want = $primary->safe_psql('postgres', $lsc_truth);
is($primary->safe_psql('postgres', $lsc_query), $lsc_want, 'list of clusters: after the merge, the primary');
is($standby->safe_psql('postgres', $lsc_query), $lsc_want, 'list of clusters: after the merge, the standby');
check_index($standby, 'lsc_v_idx', 'list of clusters, standby');
# the farthest rule's list: the vectors' answers, and the distances its
# walk computes equal to those of a list built afresh by that rule over the
# same rows (the merge numbered them in the table's order, as a build does)
(my $lsc_far_query = $lsc_query) =~ s/lsc_v_idx/lsc_v_far/;
my ($far_want) = split /\|/, $lsc_want;
my ($far_got) = split /\|/, $primary->safe_psql('postgres', $lsc_far_query);
is($far_got, $far_want, 'farthest centres: after the merge, the primary answers as the sequential scan');
($far_got) = split /\|/, $standby->safe_psql('postgres', $lsc_far_query);
is($far_got, $far_want, 'farthest centres: after the merge, the standby');
$primary->safe_psql('postgres', q{CREATE INDEX lsc_v_far_new ON lsc_v USING genie (v genie_vector_ops)
	WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4, cluster_centres = farthest);
	CREATE INDEX lsc_v_sum_new ON lsc_v USING genie (v genie_vector_ops)
	WITH (m = 0, cluster_list = on, cluster_size = 16, supercluster_clusters = 4)});
my $range_distances = sub {
	my ($node, $index) = @_;
	# (genie's EXPLAIN fields need the library loaded before EXPLAIN starts)
	my $plan = $node->safe_psql('postgres', "LOAD 'genie';
		EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM genie_within('$index', $lsc_probe_v, 0.5)");
	return $plan =~ /"Genie Range Distances": (\d+)/ ? $1 : 'none';
};
my $far_new = $range_distances->($primary, 'lsc_v_far_new');
isnt($far_new, $range_distances->($primary, 'lsc_v_sum_new'), 'the two rules build different lists here');
is($range_distances->($primary, 'lsc_v_far'), $far_new,
	'farthest centres: the merged list computes the distances of a new list by that rule');
is($range_distances->($standby, 'lsc_v_far'), $far_new, 'farthest centres: so does the standby\'s');
check_index($standby, 'lsc_v_far', 'farthest centres, standby');

# An index of on-disk format 4, as genie 0.3.0 wrote it (int32 postings, the
# shorter metapage; genie.write_format = 4 makes one): the primary and the
# standby read it, its set predicates and orderings equal a sequential scan,
# and its first merge packs it (format 5) with a metapage whose new fields
# reach the standby through WAL.
$primary->safe_psql('postgres', q{
	CREATE TABLE old_fmt (id int, tags int4[]);
	INSERT INTO old_fmt SELECT i, ARRAY[i % 13, i % 31, 100 + i % 7] FROM generate_series(1, 3000) i;
	SET genie.write_format = 4;
	CREATE INDEX old_fmt_idx ON old_fmt USING genie (tags);
	RESET genie.write_format;
	INSERT INTO old_fmt SELECT i, ARRAY[i % 5, 200] FROM generate_series(3001, 3300) i;
	DELETE FROM old_fmt WHERE id % 6 = 0;});
my $old_fmt_query = q{
	SET enable_seqscan = off;
	SELECT (SELECT format_version FROM genie_index_info('old_fmt_idx')),
	       (SELECT count(*) FROM old_fmt WHERE tags @> '{3,100}'),
	       (SELECT count(*) FROM old_fmt WHERE tags && '{4,200}'),
	       (SELECT string_agg(id::text, ',') FROM (SELECT id FROM old_fmt ORDER BY tags <~> '{1,2,101}', id LIMIT 12) x)};
my $old_fmt_truth = q{
	SET enable_indexscan = off; SET enable_bitmapscan = off;
	SELECT (SELECT count(*) FROM old_fmt WHERE tags @> '{3,100}'),
	       (SELECT count(*) FROM old_fmt WHERE tags && '{4,200}'),
	       (SELECT string_agg(id::text, ',') FROM (SELECT id FROM old_fmt ORDER BY -genie_match_count(tags, '{1,2,101}'::int4[]), id LIMIT 12) x)};
my $truth = $primary->safe_psql('postgres', $old_fmt_truth);
$primary->wait_for_catchup($standby, 'replay');
is($primary->safe_psql('postgres', $old_fmt_query), "4|$truth", 'format 4: the primary reads it and answers as a sequential scan');
is($standby->safe_psql('postgres', $old_fmt_query), "4|$truth", 'format 4: so does the standby');
$primary->safe_psql('postgres', 'VACUUM old_fmt');
$truth = $primary->safe_psql('postgres', $old_fmt_truth);
$primary->wait_for_catchup($standby, 'replay');
is($primary->safe_psql('postgres', $old_fmt_query), "5|$truth", 'format 4: VACUUM packs it (format 5) and it answers as before');
is($standby->safe_psql('postgres', $old_fmt_query), "5|$truth", 'format 4: the standby replays the packing');
check_index($standby, 'old_fmt_idx', 'format 4 packed, standby');

# A standby session remembers the rows the map answered for its next batches
# (genie_visibility.c): the primary's HOT updates and VACUUMs replay there
# (the map's bits cleared, set again with a newer LSN, the old versions
# pruned), and the session's batches stay equal to the SQL oracle.
$primary->safe_psql('postgres', q{
	SELECT setseed(0.77);
	CREATE TABLE memo (id int PRIMARY KEY, v real[], note text) WITH (fillfactor = 50);
	INSERT INTO memo SELECT i, (SELECT array_agg(random()::real) FROM generate_series(1, 4) d WHERE i > 0), 'n'
	FROM generate_series(1, 2000) i;
	CREATE TABLE memo_q (qid int PRIMARY KEY, q real[]);
	INSERT INTO memo_q SELECT j, (SELECT array_agg(random()::real) FROM generate_series(1, 4) d WHERE j > 0)
	FROM generate_series(1, 30) j;
	CREATE INDEX memo_v ON memo USING genie (v) WITH (m = 0);
	-- genie_knn's rows (by id, through the ctid) against the top k by float8 distance over the current rows
	CREATE FUNCTION memo_mismatches(k int) RETURNS bigint LANGUAGE sql AS $$
	  WITH got AS (
	    SELECT g.query_no, memo.id FROM genie_knn('memo_v', (SELECT array_agg(q ORDER BY qid) FROM memo_q), k) g
	    LEFT JOIN memo ON memo.ctid = g.ctid),
	  want AS (
	    SELECT memo_q.qid AS query_no, o.id FROM memo_q, LATERAL (
	      SELECT id FROM memo
	      ORDER BY (SELECT sum((x::float8 - y::float8) ^ 2) FROM unnest(v, memo_q.q) t(x, y)) LIMIT k) o)
	  SELECT (SELECT count(*) FROM (TABLE got EXCEPT TABLE want) a)
	       + (SELECT count(*) FROM (TABLE want EXCEPT TABLE got) b)
	       + (SELECT count(*) FROM got WHERE id IS NULL)
	$$;
	VACUUM memo;});
$primary->wait_for_catchup($standby, 'replay');
my $reader = $standby->background_psql('postgres');
$reader->query_safe("SET genie.device = 'cpu'; LOAD 'genie'");
is($reader->query_safe('SELECT memo_mismatches(10) + memo_mismatches(100)'), '0',
	'standby memo: a first batch equals the oracle');
like($reader->query_safe(q{EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
	SELECT count(*) FROM genie_knn('memo_v', (SELECT array_agg(q ORDER BY qid) FROM memo_q), 10)}),
	qr/Genie All-Visible Rows Remembered: [1-9]/, 'standby memo: the next batch answers rows from it');
for my $round (1 .. 3)
{
	$primary->safe_psql('postgres', "UPDATE memo SET note = 'r$round' WHERE id % 3 = $round % 3");
	$primary->wait_for_catchup($standby, 'replay');
	is($reader->query_safe('SELECT memo_mismatches(10) + memo_mismatches(100)'), '0',
		"standby memo, round $round: the primary's HOT updates replayed, equal to the oracle");
	$primary->safe_psql('postgres', 'VACUUM memo');
	$primary->wait_for_catchup($standby, 'replay');
	is($reader->query_safe('SELECT memo_mismatches(10) + memo_mismatches(100)'), '0',
		"standby memo, round $round: and the VACUUM replayed (bits set again, old versions pruned), equal to the oracle");
}
is($primary->safe_psql('postgres', q{SELECT n_tup_hot_upd > 0 FROM pg_stat_user_tables WHERE relname = 'memo'}), 't',
	'standby memo: the updates were HOT');
$reader->quit;

done_testing();
