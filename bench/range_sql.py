#!/usr/bin/env python3
"""Range queries (issue 30) through SQL, in one server and one warm connection:
genie_within against the sequential scan a PostgreSQL user writes
(SELECT ... WHERE v <-> q <= r), on Fashion-MNIST's 60,000 training images
as real[] (vector_copy.py's COPY files), queries: the first NQ test images.

Indexes: genie_vector_ops WITH (m = 0) (every row read: brute force) and
WITH (m = 0, cluster_list = on, cluster_size = K, supercluster_clusters = N)
(the List of Superclusters), their build times; --cluster-centres farthest
builds the list with each centre the farthest from the centres before it,
--cluster-centres both builds a second list index by that rule (rv_far)
beside the paper's (rv_lsc).  Radii: the 60th, 600th
nearest distances of each query averaged (0.1% and 1% of the rows), and the
6th (0.01%), for 60,000 rows (in proportion for other sizes).  Per radius, on the engine of --device (genie.device,
in-process):
  single: one statement per query (the query a bound parameter, its array
    literal made once), ms a statement, median of RUNS passes: the
    sequential scan (count of rows within r), genie_within over each index;
  batch: every query in one statement (genie_within of a real[][], the
    query array sent as one parameter), against the single sequential
    scans' total;
every method's rows checked against the sequential scan's (single
statements: the same rows per query; batches: as many rows).
--variant NAME:SETTING=VALUE,... (repeatable) runs every genie_within
method once per variant, its settings SET first (for example one GPU
against every GPU: 'one:genie.devices=0' 'all:genie.devices=all', with
genie.device_memory_limit or genie.placement beside them); each variant's
figures carry "vs_first_variant" (the first variant's ms / this one's) and
a cold batch: the first batch statement in a new connection (the index
read into the backend and copied to the devices included), one per run.
  range_sql.py --train COPY --test COPY [--nq 50] [--runs 3] [--device cpu]
               [--cluster-size 32] [--supercluster-clusters 4] [--cluster-centres sum|farthest|both]
               [--variant NAME:SETTING=VALUE,...]...
"""
import argparse
import statistics
import time

import psycopg
import psycopg.sql


def timed(cur, sql, params=None):
    t0 = time.perf_counter()
    cur.execute(sql, params)
    rows = cur.fetchall() if cur.description else []
    return (time.perf_counter() - t0) * 1000.0, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--nq", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cluster-size", type=int, default=32)
    ap.add_argument("--supercluster-clusters", type=int, default=4)
    ap.add_argument("--cluster-centres", choices=("sum", "farthest", "both"), default="sum")
    ap.add_argument("--variant", action="append", default=[])
    a = ap.parse_args()
    variants = []
    for v in a.variant or ["default:"]:
        name, _, settings = v.partition(":")
        variants.append((name, [kv.split("=", 1) for kv in settings.split(",") if kv]))

    def apply(cursor, settings):
        cursor.execute("RESET ALL")
        cursor.execute(f"SET genie.device = {a.device}")
        for key, value in settings:
            cursor.execute(psycopg.sql.SQL("SELECT set_config({}, {}, false)").format(
                psycopg.sql.Literal(key), psycopg.sql.Literal(value)))
    conn = psycopg.connect(autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS genie")
    cur.execute("DROP TABLE IF EXISTS rv, rq")
    cur.execute("CREATE TABLE rv (id int4 PRIMARY KEY, v real[])")
    cur.execute("CREATE TABLE rq (id int4 PRIMARY KEY, v real[])")
    cur.execute("COPY rv FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.train).as_string(conn))
    cur.execute("COPY rq FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.test).as_string(conn))
    cur.execute("VACUUM ANALYZE rv")
    cur.execute(f"SET genie.device = {a.device}")
    ms, _ = timed(cur, "CREATE INDEX rv_all ON rv USING genie (v genie_vector_ops) WITH (m = 0)")
    print(f"BUILD brute force index: {ms / 1000:.2f} s")
    indexes = ["rv_all"]
    rules = {"sum": ["sum"], "farthest": ["farthest"], "both": ["sum", "farthest"]}[a.cluster_centres]
    for rule in rules:
        name = "rv_lsc" if rule == "sum" else "rv_far"
        ms, _ = timed(cur, f"CREATE INDEX {name} ON rv USING genie (v genie_vector_ops) WITH (m = 0, cluster_list = on, "
                      f"cluster_size = {a.cluster_size}, supercluster_clusters = {a.supercluster_clusters}, "
                      f"cluster_centres = {rule})")
        print(f"BUILD list of superclusters {name} K={a.cluster_size} N={a.supercluster_clusters} "
              f"centres={rule}: {ms / 1000:.2f} s")
        indexes.append(name)
    cur.execute("SELECT v FROM rq WHERE id <= %s ORDER BY id", (a.nq,))
    queries = ["{" + ",".join(repr(float(x)) for x in r[0]) + "}" for r in cur.fetchall()]
    batch = "{" + ",".join(queries) + "}"
    radii = {}
    cur.execute("SELECT count(*) FROM rv")
    n_rows = cur.fetchone()[0]
    for label, share in (("0.01%", 0.0001), ("0.1%", 0.001), ("1%", 0.01)):
        nth = max(1, round(share * n_rows))  # 6, 60, 600 of Fashion-MNIST's 60,000
        ds = []
        for q in queries[:10]:
            cur.execute("SELECT v <-> %s::real[] FROM rv ORDER BY v <-> %s::real[] OFFSET %s LIMIT 1", (q, q, nth - 1))
            ds.append(cur.fetchone()[0])
        radii[label] = statistics.mean(ds)
    seq_single = "SELECT id, v <-> %s::real[] FROM rv WHERE v <-> %s::real[] <= %s"
    within_single = "SELECT t.id, g.distance FROM genie_within(%s::regclass, %s::real[], %s) g JOIN rv t ON t.ctid = g.ctid"
    for label, r in radii.items():
        # the sequential scan's rows per query: the oracle
        truth = {}
        seq_ms = []
        for run in range(a.runs):
            t0 = time.perf_counter()
            for i, q in enumerate(queries):
                cur.execute(seq_single, (q, q, r))
                truth[i] = sorted(row[0] for row in cur.fetchall())
            seq_ms.append((time.perf_counter() - t0) * 1000.0 / len(queries))
        answers = sum(len(v) for v in truth.values()) / len(queries)
        seq = statistics.median(seq_ms)
        print(f"RESULT {{\"radius\": \"{label}\", \"r\": {r:.4f}, \"method\": \"sequential scan\", \"mode\": \"single\", "
              f"\"ms\": {seq:.3f}, \"qps\": {1000.0 / seq:.1f}, \"answers_per_query\": {answers:.1f}, \"vs_seqscan\": 1.00}}")
        first_ms = {}
        for index in indexes:
            for variant, settings in variants:
                apply(cur, settings)
                method = f"genie_within {index}" + ("" if len(variants) == 1 else f" {variant}")
                cur.execute(within_single, (index, queries[0], r))  # warm: the cache and the list's rows
                times, same = [], True
                for run in range(a.runs):
                    t0 = time.perf_counter()
                    for i, q in enumerate(queries):
                        cur.execute(within_single, (index, q, r))
                        same = same and sorted(row[0] for row in cur.fetchall()) == truth[i]
                    times.append((time.perf_counter() - t0) * 1000.0 / len(queries))
                ms = statistics.median(times)
                first = first_ms.setdefault((index, "single"), ms)
                print(f"RESULT {{\"radius\": \"{label}\", \"r\": {r:.4f}, \"method\": \"{method}\", "
                      f"\"mode\": \"single\", \"ms\": {ms:.3f}, \"qps\": {1000.0 / ms:.1f}, "
                      f"\"answers_per_query\": {answers:.1f}, \"vs_seqscan\": {seq / ms:.2f}, "
                      f"\"vs_first_variant\": {first / ms:.2f}}}")
                if not same:
                    print(f"MISMATCH {method} radius {label}: rows differ from the sequential scan")
                # the batch: every query in one statement
                cur.execute("SELECT count(*) FROM genie_within(%s::regclass, %s::real[], %s)", (index, batch, r))
                times = []
                for run in range(a.runs):
                    ms_b, rows = timed(cur, "SELECT query_no, ctid FROM genie_within(%s::regclass, %s::real[], %s)",
                                       (index, batch, r))
                    times.append(ms_b)
                total = sum(len(v) for v in truth.values())
                if len(rows) != total:
                    print(f"MISMATCH batch {method} radius {label}: {len(rows)} rows, the scan {total}")
                ms_b = statistics.median(times)
                first = first_ms.setdefault((index, "batch"), ms_b)
                # cold: the same batch as a new connection's first genie statement
                cold = []
                for run in range(a.runs if label == "0.01%" else 0):
                    with psycopg.connect(autocommit=True) as fresh:
                        fc = fresh.cursor()
                        apply(fc, settings)
                        ms_c, rows_c = timed(fc, "SELECT query_no, ctid FROM genie_within(%s::regclass, %s::real[], %s)",
                                             (index, batch, r))
                        cold.append(ms_c)
                        if len(rows_c) != total:
                            print(f"MISMATCH cold batch {method} radius {label}: {len(rows_c)} rows, the scan {total}")
                cold_part = f", \"cold_ms\": {statistics.median(cold):.1f}" if cold else ""
                print(f"RESULT {{\"radius\": \"{label}\", \"r\": {r:.4f}, \"method\": \"{method}\", "
                      f"\"mode\": \"batch of {len(queries)}\", \"ms\": {ms_b:.3f}, "
                      f"\"qps\": {1000.0 * len(queries) / ms_b:.1f}, \"vs_seqscan\": {seq * len(queries) / ms_b:.2f}, "
                      f"\"vs_first_variant\": {first / ms_b:.2f}{cold_part}}}")
        apply(cur, [])
    cur.execute("DROP TABLE rv, rq")


if __name__ == "__main__":
    main()
