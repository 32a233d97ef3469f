#!/usr/bin/python3
"""Fuzzes genie's inputs: its type input functions (text and binary) and its
query constructors, with random bytes and with mutations of valid values.

Every statement runs on its own (autocommit); each must either succeed or
fail with a clean SQL error.  A lost connection means a backend died: the
fuzzer reconnects, counts it, and prints the statement.  Usage:

    fuzz_inputs.py CONNSTR SEED ITERATIONS

Set predicates (tags @> / && / <@ an int4[] literal, often broken) run
through the genie index (sequential scans are off) and, when they succeed,
again with the index out of reach: "set predicate mismatches: N" counts the
answers that differ.

Prints one summary line per kind of input, then "set predicate mismatches:
N" and a last line "crashes: N".
"""
import random
import struct
import sys

import psycopg

from genie_client import Raw, register_raw

CONNSTR, SEED, ITERATIONS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(SEED)


def connect():
    global OIDS
    conn = psycopg.connect(CONNSTR, autocommit=True)
    OIDS = register_raw(conn)
    conn.execute("SET statement_timeout = '2s'")
    conn.execute("SET genie.device = 'cpu'")
    # every statement charges its phases, through errors too (genie_profile)
    conn.execute("SET genie.profile = on")
    # the set predicates must reach the genie index, as bitmap or index scans
    conn.execute("SET enable_seqscan = off")
    return conn


OIDS = {}
conn = connect()

QUERY_TEXTS = ["{1, 2..5*3, (7, 9)*2}", "{}", "{-2147483648..2147483647}", "{(1..3, 7)*5}",
               "{0*1000000}", "{1,1,1}", "{(1..2, 2..3)}"]
RANGES_SPECS = ['{"age": [30, 40], "city": ["Oslo", "Lima"]}', '{"age": 33}', '{}',
                '{"born": ["2000-01-01", null], "city": {"values": ["Oslo"], "weight": 3}}',
                '{"age": {"range": [null, 25], "weight": 2}}']
ALPHABET = "{}()[],.*-0123456789 \"'\\:abc" + "\x00\x7f\u00e9\u65e5"


def mutate(s):
    s = list(s)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        pos = rng.randint(0, len(s))
        if op < 0.4 and s:
            s[min(pos, len(s) - 1)] = rng.choice(ALPHABET)
        elif op < 0.7:
            s.insert(pos, rng.choice(ALPHABET) * rng.choice([1, 1, 2, 50]))
        elif s:
            del s[min(pos, len(s) - 1):min(pos + rng.randint(1, 3), len(s))]
    return "".join(s).replace("\x00", "")


def random_text(n):
    return "".join(rng.choice(ALPHABET) for _ in range(n)).replace("\x00", "")


def random_bytes(n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def big_int():
    return rng.choice([0, 1, -1, 2**31 - 1, -2**31, 2**31, rng.randint(-10**6, 10**6)])


def maybe_mutate(valid):
    """Half valid values (to reach the code behind the parser), half broken."""
    r = rng.random()
    if r < 0.5:
        return valid
    return mutate(valid) if r < 0.9 else random_text(rng.randint(0, 30))


def query_text():
    return maybe_mutate(rng.choice(QUERY_TEXTS))


def ranges_spec():
    return maybe_mutate(rng.choice(RANGES_SPECS))


def small_k():
    return rng.choice([1, 2, 5, 100, 10**6, big_int()])


def binary_query():
    # valid binary forms, then mutated: n_items, (weight, n_ranges, (lo, hi)*)*
    items = [(rng.randint(-3, 5), [(big_int(), big_int()) for _ in range(rng.randint(0, 3))])
             for _ in range(rng.randint(0, 3))]
    data = len(items).to_bytes(4, "big", signed=True)
    for w, ranges in items:
        data += w.to_bytes(4, "big", signed=True) + len(ranges).to_bytes(4, "big", signed=True)
        for lo, hi in ranges:
            data += (lo % 2**32).to_bytes(4, "big") + (hi % 2**32).to_bytes(4, "big")
    if rng.random() < 0.5 and data:
        data = bytearray(data)
        data[rng.randrange(len(data))] = rng.getrandbits(8)
        data = bytes(data[:rng.randint(0, len(data))]) if rng.random() < 0.3 else bytes(data)
    return data


def int4_array_text():
    """An int4[] literal: NULLs, repeats, extremes, two dimensions, empty; maybe broken."""
    elems = [rng.choice(["NULL", str(big_int()), str(rng.randint(0, 60)), str(rng.randint(0, 60))])
             for _ in range(rng.randint(0, 6))]
    text = "{" + ",".join(elems) + "}"
    if rng.random() < 0.15:
        text = "{{1,2},{3,%d}}" % rng.randint(0, 60)
    return text if rng.random() < 0.8 else mutate(text)


KNN_FROM_QUERIES = ["SELECT v FROM vecs", "SELECT v FROM vecs WHERE id < 20 ORDER BY id",
                    "SELECT ARRAY[1, 2, 3, 4]::real[]", "SELECT NULL::real[]", "VALUES ('{1,2,3,4}'::real[])",
                    "SELECT id FROM vecs", "SELECT v, id FROM vecs", "DELETE FROM vecs RETURNING v",
                    "WITH d AS (DELETE FROM vecs RETURNING v) SELECT v FROM d", "SELECT '{1,2}'::real[]"]
# wideq's rows are pglz compressed (1,000 dimensions), row 77 NaN, row 88 of 999
WIDE_FROM_QUERIES = ["SELECT q FROM wideq ORDER BY id", "SELECT q FROM wideq WHERE id < 77 ORDER BY id",
                     "SELECT q FROM wideq WHERE id NOT IN (77, 88) ORDER BY id", "SELECT q FROM wideq WHERE id > 88",
                     "SELECT q[1:4] FROM wideq"]


def knn_bytes():
    """genie_knn_bytes: float32 bytes of whole vectors or not, NaN and infinity, odd widths and indexes."""
    dim = rng.choice([4, 4, 4, 1000, 3, 0, -1, big_int()])
    if rng.random() < 0.7:
        values = [rng.uniform(-10, 10) if rng.random() > 0.01 else rng.choice([float("nan"), float("inf")])
                  for _ in range(rng.choice([0, 1, 3, 100]) * max(min(dim, 1000), 0))]
        data = struct.pack("<%df" % len(values), *values)
    else:
        data = random_bytes(rng.randint(0, 64))
    return ("SELECT count(*) FROM genie_knn_bytes(%s, %s, %s, %s)",
            (rng.choice(["vecs_v", "vecs_v", "wide_v", "codes_c", "docs_tags"]), data, dim, small_k()))


CODE_FROM_QUERIES = ["SELECT code FROM codes", "SELECT code FROM codes WHERE id < 20 ORDER BY id",
                     "SELECT B'10101010101010101010'", "SELECT NULL::bit(20)", "SELECT B'101'",
                     "SELECT code, id FROM codes", "SELECT B'1'::bit(65521)", "SELECT ''::varbit"]


def bit_text():
    """A bit literal: 20 bits (the index's length) or not, empty, long, or not bits at all."""
    n = rng.choice([20, 20, 20, 0, 1, 19, 21, 64, 65520, 65521])
    text = "".join(rng.choice("01") for _ in range(n))
    return text if rng.random() < 0.85 else mutate(text)


def real_array_text():
    """A real[] literal: 4 elements (the index's dimension) or not, NaN, infinity, two dimensions."""
    elems = [rng.choice([str(rng.uniform(-10, 10)), "0", "NaN", "Infinity", "-1e39", "1e-45", "NULL"])
             if rng.random() < 0.2 else str(rng.uniform(-10, 10)) for _ in range(rng.choice([4, 4, 4, 0, 1, 5]))]
    text = "{" + ",".join(elems) + "}"
    if rng.random() < 0.15:
        text = "{" + ",".join(text for _ in range(rng.randint(1, 3))) + "}"
    return text if rng.random() < 0.8 else mutate(text)


mismatches = 0


def set_predicate():
    """WHERE tags OP q through the index; compared with the same without it."""
    global mismatches
    op = rng.choice(["@>", "&&", "<@"])
    q = int4_array_text()
    conn.execute("SELECT set_config('enable_bitmapscan', %s, false)", (rng.choice(["on", "off"]),))
    got = conn.execute(f"SELECT count(*), sum(id) FROM docs WHERE tags {op} %s::int4[]", (q,)).fetchone()
    # tags || '{}' keeps the index out of reach (and makes a NULL array '{}': hence IS NOT NULL)
    want = conn.execute(f"SELECT count(*), sum(id) FROM docs "
                        f"WHERE tags IS NOT NULL AND (tags || '{{}}'::int4[]) {op} %s::int4[]", (q,)).fetchone()
    if got != want:
        mismatches += 1
        print(f"MISMATCH tags {op} {q!r}: index {got}, scan {want}", flush=True)
    return ("SELECT 1", ())


EWH_WEIGHTS = ["'3,2,1'", "'1'", "'4,2,1,1'", "'0'", "'a,b'", "''", "'5,4,3,2,1'", "'1000001'", "' 2 , 1 '",
               "'2,'", "'-1'", "'99999999999999999999'"]


def ewh_search():
    """Error Weighted Hashing with random settings, on the EWH index and on one without keywords."""
    conn.execute("SELECT set_config('genie.bit_search', %s, false)", (rng.choice(["ewh", "ewh", "exact"]),))
    conn.execute("SELECT set_config('genie.ewh_candidates', %s, false)", (str(rng.choice([1, 3, 50, 100000])),))
    if rng.random() < 0.5:
        return ("SELECT id FROM codes ORDER BY code <-> %s::varbit LIMIT %s", (bit_text(), rng.choice([1, 5, 1000])))
    return ("SELECT count(*) FROM genie_hamming_knn(%s, ARRAY[%s::varbit, %s::varbit]::bit[], %s)",
            (rng.choice(["codes_ewh", "codes_ewh", "codes_c"]), bit_text(), bit_text(), small_k()))


TSQUERY_TEXTS = ["w1", "w1 & w2", "w1 | !w3", "!w1", "w1:AB | w2:D", "(w1 | w2) <-> w3", "w1 <2> w4", "w1:*",
                 "'it''s' | w7", "", "w1 & !(w2 | w3)", "nosuch"]
TSVECTOR_TEXTS = ["w1 w2", "w1:1A w2:2,3B", "'a b':1", "", "w3:1D w4", "x:16383A"]


def tsquery_text():
    if rng.random() < 0.2:
        return " | ".join(f"w{rng.randint(0, 20)}" for _ in range(rng.randint(1, 300)))
    return maybe_mutate(rng.choice(TSQUERY_TEXTS))


def tsvector_text():
    return maybe_mutate(rng.choice(TSVECTOR_TEXTS))


DOCUMENT_QUERY_TEXTS = ["'w1'*120 'w2':AB*35 w3", "w1", "'it''s':ca*3 'x\\\\y'", "", "w1*1000000 w2*1000000",
                        "w1:A*0", "'w1", "w1 w1"]


def document_query_text():
    if rng.random() < 0.2:
        return " ".join(f"w{i}*{rng.choice([1, 7, 10**6, big_int()])}" for i in range(rng.randint(1, 300)))
    return maybe_mutate(rng.choice(DOCUMENT_QUERY_TEXTS))


def binary_document_query():
    # valid binary forms, then mutated: n_terms, (weight, classes, length, lexeme)*
    terms = [(rng.choice([1, 5, 10**6, big_int()]), rng.choice([15, 8, 3, 0, 255]),
              rng.choice([b"w1", b"w2", "é".encode(), b"", b"x" * 3000])) for _ in range(rng.randint(0, 3))]
    data = len(terms).to_bytes(4, "big", signed=True)
    for w, classes, lexeme in terms:
        data += (w % 2**32).to_bytes(4, "big") + bytes([classes]) + len(lexeme).to_bytes(4, "big") + lexeme
    if rng.random() < 0.5 and data:
        data = bytearray(data)
        data[rng.randrange(len(data))] = rng.getrandbits(8)
        data = bytes(data[:rng.randint(0, len(data))]) if rng.random() < 0.3 else bytes(data)
    return data


def document_weights():
    choices = ["{1,1,1,1}", "{1,2,4,10}", "{0,0,0,1}", "{0,0,0,0}", "{1,2}", "{-1,1,1,1}", "{1,1,1,1001}",
               "1,1,1,1", "{2147483648,1,1,1}", "{1,1,1,1,1}", ""]
    return maybe_mutate(rng.choice(choices))


def devices_setting():
    choices = ["all", "none", "0", "0,1", " 1 , 2 ", "63", "64", "-1", "0,,1", "1 2", "", "ALL", "0," * 40 + "0",
               "1," * 70 + "1", str(2 ** 40), "3,none"]
    return maybe_mutate(rng.choice(choices))


STATEMENTS = {
    "set predicates": set_predicate,
    "genie_query text": lambda: ("SELECT %s::genie_query::text", (query_text(),)),
    "genie_query_add": lambda: ("SELECT genie_query_add(%s::genie_query, ARRAY[int4range(%s, %s)], %s)::text",
                                (rng.choice(QUERY_TEXTS), big_int(), big_int(), big_int())),
    "genie_query(int4[])": lambda: ("SELECT genie_query(%s::int4[])::text",
                                    ("{" + ",".join(str(big_int()) for _ in range(rng.randint(0, 5))) + "}",)),
    "genie_query binary": lambda: ("SELECT %s::text", (Raw(binary_query(), OIDS["genie_query"]),)),
    "genie_ranges text": lambda: ("SELECT %s::genie_ranges::text",
                                  ('{"index": "people_r", "ranges": ' + ranges_spec() + "}"
                                   if rng.random() < 0.7 else random_text(rng.randint(0, 40)),)),
    "genie_ranges()": lambda: ("SELECT genie_ranges('people_r', %s::jsonb)::text", (ranges_spec(),)),
    "genie_ranges binary": lambda: ("SELECT %s::text", (Raw(
        b"\x01" + ('{"index": "people_r", "ranges": ' + ranges_spec() + "}").encode()
        if rng.random() < 0.7 else random_bytes(rng.randint(0, 40)), OIDS["genie_ranges"]),)),
    "ORDER BY int4[]": lambda: ("SELECT id FROM docs ORDER BY tags <~> %s::genie_query LIMIT %s",
                                (query_text(), rng.choice([1, 5, 1000]))),
    "ORDER BY text": lambda: ("SELECT w FROM words ORDER BY w <%%> %s LIMIT 5", (random_text(rng.randint(0, 20)),)),
    "ORDER BY row": lambda: ("SELECT id FROM people ORDER BY people <~> genie_ranges('people_r', %s::jsonb) LIMIT 5",
                             (ranges_spec(),)),
    "genie_topk": lambda: ("SELECT count(*) FROM genie_topk('docs_tags', ARRAY[%s::genie_query, %s], %s)",
                           (query_text(), query_text(), small_k())),
    "genie_similar": lambda: ("SELECT count(*) FROM genie_similar('words_w', ARRAY[%s, %s], %s, %s, %s)",
                              (random_text(rng.randint(0, 20)), mutate("abc"), small_k(), small_k(),
                               rng.choice([None, 1, 0, -1, 3]))),
    "text functions": lambda: ("SELECT genie_ngrams(%s, %s), genie_ngram_count(%s, %s, %s), genie_edit_distance(%s, %s)",
                               (random_text(rng.randint(0, 30)), rng.randint(-1, 10), random_text(9),
                                random_text(9), rng.randint(1, 9), random_text(40), random_text(40))),
    "ORDER BY real[]": lambda: ("SELECT id FROM vecs ORDER BY v <-> %s::real[] LIMIT %s",
                                (real_array_text(), rng.choice([1, 5, 1000]))),
    "genie_knn": lambda: ("SELECT count(*) FROM genie_knn('vecs_v', %s::real[], %s)", (real_array_text(), small_k())),
    "genie_knn_from": lambda: ("SELECT count(*) FROM genie_knn_from('vecs_v', %s, %s)",
                               (maybe_mutate(rng.choice(KNN_FROM_QUERIES)), small_k())),
    "genie_knn_from compressed": lambda: ("SELECT count(*) FROM genie_knn_from(%s, %s, %s)",
                                          (rng.choice(["wide_v", "wide_v", "vecs_v"]),
                                           maybe_mutate(rng.choice(WIDE_FROM_QUERIES)), small_k())),
    "genie_knn_bytes": lambda: knn_bytes(),
    "ORDER BY bit": lambda: ("SELECT id FROM codes ORDER BY code <-> %s::varbit LIMIT %s",
                             (bit_text(), rng.choice([1, 5, 1000]))),
    "bit <-> bit": lambda: ("SELECT %s::varbit <-> %s::varbit", (bit_text(), bit_text())),
    "genie_hamming_knn": lambda: ("SELECT count(*) FROM genie_hamming_knn(%s, ARRAY[%s::varbit, %s::varbit]::bit[], %s)",
                                  (rng.choice(["codes_c", "vecs_v", "docs_tags"]), bit_text(), bit_text(), small_k())),
    "genie_knn_from bit": lambda: ("SELECT count(*) FROM genie_knn_from(%s, %s, %s)",
                                   (rng.choice(["codes_c", "vecs_v"]), maybe_mutate(rng.choice(CODE_FROM_QUERIES)),
                                    small_k())),
    "EWH": lambda: ewh_search(),
    "ALTER INDEX EWH": lambda: (f"ALTER INDEX codes_ewh SET (errors = {rng.choice([-1, 0, 1, 2, 3, 4, big_int()])}, "
                                f"weights = {rng.choice(EWH_WEIGHTS)})", ()),
    "ORDER BY tsquery": lambda: ("SELECT id FROM notes ORDER BY doc <~> %s::tsquery LIMIT %s",
                                 (tsquery_text(), rng.choice([1, 5, 1000]))),
    "ORDER BY tsvector": lambda: ("SELECT id FROM notes ORDER BY doc <~> %s::tsvector LIMIT %s",
                                  (tsvector_text(), rng.choice([1, 5, 1000]))),
    "genie_document_topk": lambda: ("SELECT count(*) FROM genie_document_topk(%s, ARRAY[%s::tsquery, %s::tsquery], %s)",
                                    (rng.choice(["notes_d", "notes_d", "docs_tags", "people_r"]), tsquery_text(),
                                     tsquery_text(), small_k())),
    "genie_document_topk idf": lambda: ("SELECT count(*) FROM genie_document_topk(%s, ARRAY[%s::tsvector, %s::tsvector], %s, idf => %s)",
                                        (rng.choice(["notes_d", "notes_d", "docs_tags"]), tsvector_text(),
                                         tsvector_text(), small_k(), rng.choice([True, False]))),
    "genie_document_weights": lambda: ("SELECT count(*), sum(weight) FROM genie_document_weights(%s, %s::tsquery)",
                                       (rng.choice(["notes_d", "notes_d", "docs_tags", "people_r", "0"]),
                                        tsquery_text())),
    "genie_match_count tsvector": lambda: ("SELECT genie_match_count(%s::tsvector, %s::tsquery)",
                                           (tsvector_text(), tsquery_text())),
    "genie_document_query text": lambda: ("SELECT %s::genie_document_query::text", (document_query_text(),)),
    "genie_document_query binary": lambda: ("SELECT %s::text", (Raw(binary_document_query(),
                                                                    OIDS["genie_document_query"]),)),
    "genie_document_query(index)": lambda: ("SELECT genie_document_query(%s, %s::tsquery, %s)::text",
                                            (rng.choice(["notes_d", "notes_d", "docs_tags", "people_r", "0"]),
                                             tsquery_text(), rng.choice([True, False]))),
    "ORDER BY genie_document_query": lambda: (
        "SELECT id FROM notes ORDER BY doc <~> " +
        rng.choice(["%s::genie_document_query", "genie_document_query('notes_d', %s::tsvector)"]) + " LIMIT %s",
        (rng.choice([document_query_text(), tsvector_text()]), rng.choice([1, 5, 1000]))),
    "genie_document_topk genie_document_query": lambda: (
        "SELECT count(*) FROM genie_document_topk(%s, ARRAY[%s::genie_document_query], %s)",
        (rng.choice(["notes_d", "notes_d", "docs_tags"]), document_query_text(), small_k())),
    "genie_match_count genie_document_query": lambda: ("SELECT genie_match_count(%s::tsvector, %s::genie_document_query)",
                                                       (tsvector_text(), document_query_text())),
    "genie.document_weights": lambda: ("SELECT set_config('genie.document_weights', %s, false)",
                                       (document_weights(),)),
    # genie.device stays cpu: the settings parse, genie_devices() reads them
    "genie.devices": lambda: ("SELECT set_config('genie.devices', %s, false), count(*) FROM genie_devices() WHERE in_use",
                              (devices_setting(),)),
    "genie.placement": lambda: ("SELECT set_config('genie.placement', %s, false)",
                                (maybe_mutate(rng.choice(["auto", "replicate", "shard", "spread", ""])),)),
    "genie_profile": lambda: (rng.choice(["SELECT count(*) FROM genie_profile()", "SELECT genie_profile_reset()",
                                          "SET genie.profile = on", "SET genie.profile = off"]), ()),
    "genie_match_count": lambda: ("SELECT genie_match_count(%s::int4[], %s::genie_query)",
                                  ("{" + ",".join(str(big_int()) for _ in range(rng.randint(0, 5))) + "}", query_text())),
}

counts = {name: [0, 0] for name in STATEMENTS}  # ok, clean error
crashes = 0
for i in range(ITERATIONS):
    name = rng.choice(list(STATEMENTS))
    try:
        # inside the try: the set predicates run their statements here
        sql, params = STATEMENTS[name]()
        conn.execute(sql, params)
        counts[name][0] += 1
    except psycopg.OperationalError as e:
        if conn.closed or conn.broken:
            crashes += 1
            print(f"CRASH {name}: {sql} {params!r}: {e}", flush=True)
            conn = connect()
        else:
            counts[name][1] += 1
    except (psycopg.Error, ValueError) as e:
        counts[name][1] += 1
for name, (ok, err) in counts.items():
    print(f"{name}: {ok} ok, {err} clean errors")
print(f"set predicate mismatches: {mismatches}")
print(f"crashes: {crashes}")
