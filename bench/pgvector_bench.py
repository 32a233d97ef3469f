#!/usr/bin/env python3
"""genie against pgvector on the same data, in the same server and run, through SQL
(issue 34): Fashion-MNIST's 60,000 training images (784 dimensions) as real[] under a
genie index and as vector(784) under pgvector's HNSW (m = 16, ef_construction = 64)
and IVFFlat (lists = 60, rows / 1000 as pgvector's README advises); the first NQ test
images as queries.  Run by bench/pgvector-bench inside the PostgreSQL 17 test image
(the server that pg-sandbox starts there; PGHOST etc. set).

Reported, one line per method and setting:
  build: seconds to CREATE INDEX and the index's size;
  single: ORDER BY col <-> q LIMIT 10, one statement per query from one warm
    connection, the query vector a bound parameter; ms a statement (median of
    RUNS passes over the NQ queries) and statements a second;
  batch: every query in one statement (genie_knn; for pgvector, a LATERAL
    join over the query table, since it has no batch function);
  recall@10: the fraction of returned rows whose distance is within the exact
    10th distance (ties at the 10th may be any rows), against genie's exact
    genie_knn, which is first checked against pgvector's own exact sequential
    scan (distances equal within 1e-3).
genie runs in-process on each engine of --devices in turn (genie.device; default cpu,
for machines without a GPU; on the GPU host gpu,cpu), its rows labelled with the engine;
pgvector runs on the same host's CPU, in the same server and process.
  pgvector_bench.py --train FILE.copy --test FILE.copy [--nq 200] [--runs 3] [--devices cpu]
"""
import argparse
import statistics
import time

import psycopg
import psycopg.sql

K = 10


def timed(cur, sql, params=None):
    t0 = time.perf_counter()
    cur.execute(sql, params)
    rows = cur.fetchall()
    return (time.perf_counter() - t0) * 1000.0, rows


def recall(found, truth):
    """found, truth: {query: [distance, ...]} (truth sorted); a hit is a distance <= the 10th."""
    hits = 0
    for q, ds in truth.items():
        kth = ds[K - 1]
        hits += sum(1 for d in found.get(q, [])[:K] if d <= kth * (1 + 1e-9))
    return hits / (K * len(truth))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--nq", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--devices", default="cpu")
    a = ap.parse_args()
    devices = a.devices.split(",")
    conn = psycopg.connect(autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT version()")
    print("# " + cur.fetchone()[0])
    cur.execute("SET genie.device = %s" % devices[0])
    cur.execute("SET maintenance_work_mem = '1GB'")
    for sql in ("CREATE EXTENSION IF NOT EXISTS genie", "CREATE EXTENSION IF NOT EXISTS vector",
                "CREATE TABLE fm (id int PRIMARY KEY, v real[])", "CREATE TABLE fq (id int PRIMARY KEY, q real[])"):
        cur.execute(sql)
    cur.execute("COPY fm FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.train).as_string(conn))
    cur.execute("COPY fq FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.test).as_string(conn))
    cur.execute("DELETE FROM fq WHERE id > %s", (a.nq,))
    cur.execute("ALTER TABLE fm ADD e vector(784)")
    cur.execute("UPDATE fm SET e = v::vector(784)")
    cur.execute("ALTER TABLE fq ADD e vector(784)")
    cur.execute("UPDATE fq SET e = q::vector(784)")
    cur.execute("VACUUM ANALYZE fm")
    cur.execute("VACUUM ANALYZE fq")
    cur.execute("SELECT id, q::text, e::text FROM fq ORDER BY id")
    queries = cur.fetchall()
    print(f"# {a.nq} queries, k = {K}, {a.runs} passes each (median)")

    builds = [("genie (exact + LSH, m = 238)", "CREATE INDEX fm_v ON fm USING genie (v)", "fm_v"),
              ("pgvector HNSW (m = 16, ef_construction = 64)",
               "CREATE INDEX fm_hnsw ON fm USING hnsw (e vector_l2_ops) WITH (m = 16, ef_construction = 64)", "fm_hnsw"),
              ("pgvector IVFFlat (lists = 60)",
               "CREATE INDEX fm_ivf ON fm USING ivfflat (e vector_l2_ops) WITH (lists = 60)", "fm_ivf")]
    for name, sql, index in builds:
        t0 = time.perf_counter()
        cur.execute(sql)
        secs = time.perf_counter() - t0
        cur.execute("SELECT pg_relation_size(%s::regclass)", (index,))
        size = cur.fetchone()[0]
        print(f"build | {name} | {secs:.1f} s | {size / 1e6:.1f} MB")

    # the truth: genie's exact batch, checked against pgvector's exact scan on 10 queries
    cur.execute("SET genie.vector_search = exact")
    cur.execute("SELECT query_no, distance FROM genie_knn('fm_v', (SELECT array_agg(q ORDER BY id) FROM fq), %s) "
                "ORDER BY query_no, distance", (K,))
    truth = {}
    for qn, d in cur.fetchall():
        truth.setdefault(qn, []).append(d)
    cur.execute("SET enable_indexscan = off")
    cur.execute("SET enable_bitmapscan = off")
    worst = 0.0
    for qid, _, e in queries[:10]:
        cur.execute("SELECT e <-> %s::vector FROM fm ORDER BY e <-> %s::vector LIMIT %s", (e, e, K))
        ds = [r[0] for r in cur.fetchall()]
        worst = max(worst, max(abs(x - y) for x, y in zip(ds, truth[qid])))
    print(f"# genie_knn exact = pgvector's sequential scan on 10 queries: largest distance difference {worst:.2e}")
    assert worst < 1e-3, "the truth disagrees with pgvector's exact scan"

    def single(label, setting, sql, order_by_vector):
        passes = []
        found = {}
        for _ in range(a.runs):
            t0 = time.perf_counter()
            for qid, q, e in queries:
                # the select list's real[] query, then the ORDER BY's (real[] or vector)
                cur.execute(sql, (q, e if order_by_vector else q))
                found[qid] = [r[1] for r in cur.fetchall()]
            passes.append((time.perf_counter() - t0) * 1000.0 / len(queries))
        ms = statistics.median(passes)
        print(f"single | {label} | {setting} | {ms:.3f} ms | {1000 / ms:.1f} /s | recall {recall(found, truth):.3f}")

    def batch(label, setting, sql):
        passes = []
        for _ in range(a.runs):
            ms, rows = timed(cur, sql)
            passes.append(ms)
        found = {}
        for qn, d in sorted(rows):
            found.setdefault(qn, []).append(d)
        ms = statistics.median(passes)
        print(f"batch | {label} | {setting} | {ms:.1f} ms for {len(queries)} | {len(queries) * 1000 / ms:.1f} queries/s"
              f" | recall {recall(found, truth):.3f}")

    # every method's rows carry genie's exact distance (float8), so that recall
    # compares like with like (pgvector's own distance is summed in float4)
    genie_sql = "SELECT id, v <-> %s::real[] FROM fm ORDER BY v <-> %s::real[] LIMIT 10"
    pgv_sql = "SELECT id, v <-> %s::real[] FROM fm ORDER BY e <-> %s::vector LIMIT 10"
    knn_batch = ("SELECT query_no, distance FROM genie_knn('fm_v', (SELECT array_agg(q ORDER BY id) FROM fq), 10)")
    lateral = ("SELECT fq.id, n.d FROM fq, LATERAL (SELECT fm.v <-> fq.q AS d FROM fm ORDER BY fm.e <-> fq.e LIMIT 10) n")

    cur.execute("RESET enable_indexscan")
    cur.execute("RESET enable_bitmapscan")
    cur.execute("SET enable_seqscan = off")
    for dev in devices:
        cur.execute("SET genie.device = %s" % dev)
        cur.execute("SET genie.vector_search = exact")
        single("genie exact, " + dev, "-", genie_sql, False)
        batch("genie_knn exact, " + dev, "-", knn_batch)
        cur.execute("SET genie.vector_search = lsh")
        for c in (100, 300, 1000):
            cur.execute(f"SET genie.lsh_candidates = {c}")
            single("genie LSH, " + dev, f"candidates={c}", genie_sql, False)
            batch("genie_knn LSH, " + dev, f"candidates={c}", knn_batch)
    cur.execute("DROP INDEX fm_ivf")
    for ef in (10, 20, 40, 80, 160, 320):
        cur.execute(f"SET hnsw.ef_search = {ef}")
        single("pgvector HNSW", f"ef_search={ef}", pgv_sql, True)
        batch("pgvector HNSW, LATERAL", f"ef_search={ef}", lateral)
    cur.execute("DROP INDEX fm_hnsw")
    cur.execute("CREATE INDEX fm_ivf ON fm USING ivfflat (e vector_l2_ops) WITH (lists = 60)")
    for p in (1, 2, 4, 8, 16, 32):
        cur.execute(f"SET ivfflat.probes = {p}")
        single("pgvector IVFFlat", f"probes={p}", pgv_sql, True)
        batch("pgvector IVFFlat, LATERAL", f"probes={p}", lateral)


if __name__ == "__main__":
    main()
