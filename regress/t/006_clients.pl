# genie's types through a real client library in binary: psycopg 3 (Debian's
# python3-psycopg) reads genie_query and genie_ranges values with a binary
# cursor, sends them back as binary parameters, and the server finds them
# equal to the originals; bad binary input is a clean error.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Debian's interpreter, which has python3-psycopg (another python3 may be first in PATH)
my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';

my $node = PostgreSQL::Test::Cluster->new('clients');
$node->init;
$node->append_conf('postgresql.conf', "genie.device = 'cpu'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION genie;
	CREATE TABLE people (id int, age int, city text);
	INSERT INTO people SELECT i, 20 + i % 50, (ARRAY['Oslo', 'Lima', 'Pune'])[1 + i % 3] FROM generate_series(1, 300) i;
	CREATE INDEX people_r ON people USING genie ((people)) WITH (attributes = 'age, city');
});

my $script = <<'PY';
import sys
import psycopg

sys.path.insert(0, sys.argv[2])
from genie_client import Raw, register_raw

conn = psycopg.connect(sys.argv[1], autocommit=True)
oids = register_raw(conn)
ranges = "genie_ranges('people_r', '{\"age\": [30, 40], \"city\": [\"Oslo\", \"Lima\"]}')"
query = "'{1, 2..5*3, (7, 9)*2}'::genie_query"
cur = conn.cursor(binary=True)
cur.execute(f"SELECT {query}, {ranges}")
q, r = cur.fetchone()
print("fetched", type(q).__name__, len(q), type(r).__name__, len(r))
cur.execute(f"SELECT %s = {query}, %s = {ranges}, %s::text",
            (Raw(q, oids["genie_query"]), Raw(r, oids["genie_ranges"]), Raw(r, oids["genie_ranges"])))
print("equal", *cur.fetchone()[:2])
cur.execute("SELECT count(*) FROM (SELECT id FROM people ORDER BY people <~> %s LIMIT 5) x",
            (Raw(r, oids["genie_ranges"]),))
print("rows", cur.fetchone()[0])
for bad in (b"", b"\x02{}", b"\x01{\"index\": \"nope\", \"ranges\": {}}"):
    try:
        cur.execute("SELECT genie_match_count(p, %s) FROM people p LIMIT 1", (Raw(bad, oids["genie_ranges"]),))
        print("accepted", bad)
    except psycopg.Error as e:
        print("refused", e.sqlstate)
PY

my ($stdout, $stderr);
IPC::Run::run([ $python, '-c', $script, $node->connstr('postgres'), $FindBin::RealBin ], '>', \$stdout, '2>', \$stderr);
diag($stderr) if $stderr;
like($stdout, qr/^fetched bytes \d+ bytes \d+$/m, 'psycopg reads genie_query and genie_ranges in binary');
like($stdout, qr/^equal True True$/m, 'sent back in binary, both equal the originals');
like($stdout, qr/^rows 5$/m, 'a genie_ranges value received in binary orders an index scan');
my @refused = $stdout =~ /^refused (\w+)$/mg;
is(join(',', @refused), '08P01,22P03,42P01',
	'bad binary input is a clean error: truncated, unknown version; a query for an unknown index is one where it is used');
ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is still up');

$node->stop;
done_testing();
