#!/usr/bin/env python3
"""The permutation index (seed 001, issue 32) through SQL, beside the exact
searches of the same index, in one server and one warm connection:

  words: wamerican-insane (663k words) in words(id, w text), an index of
    genie_ngram_ops WITH (permutants = M); queries: words of 6+ letters with
    10-40% of their letters replaced (seeded);
  vectors: Fashion-MNIST's 60,000 training images as real[] (vector_copy.py's
    COPY file), an index of genie_vector_ops WITH (permutants = M, m = 0);
    queries: the first NQ test images.

Reported per engine of --devices (genie.device, in-process):
  build: seconds for CREATE INDEX without permutants and with M of them;
  single: ORDER BY col <op> q LIMIT 10, one statement per query, the query a
    bound parameter (a vector as its array literal, made once), after one
    warm-up statement: ms a statement (median of RUNS passes), exact
    (genie.text_search / genie.vector_search = exact) and permutation at each
    fraction, with recall@10 against the exact rows (a row counts when it is no
    farther than the exact tenth);
  batch: every query in one statement (genie_similar, genie_knn).
  permutation_sql.py --words FILE --train COPY --test COPY [--nq 200] [--runs 3]
                     [--devices cpu] [--m 64] [--fractions 0.002,0.01,0.05]
"""
import argparse
import random
import statistics
import time

import psycopg
import psycopg.sql

K = 10


def timed(cur, sql, params=None):
    t0 = time.perf_counter()
    cur.execute(sql, params)
    rows = cur.fetchall() if cur.description else []
    return (time.perf_counter() - t0) * 1000.0, rows


def recall(found, truth):
    hits = 0
    for q, ds in truth.items():
        if not ds:
            continue
        kth = ds[min(K, len(ds)) - 1]
        hits += sum(1 for d in found.get(q, [])[:K] if d <= kth * (1 + 1e-9))
    return hits / (K * len(truth))


def word_queries(path, nq):
    rng = random.Random(1400)
    words = [w.rstrip("\n") for w in open(path, encoding="utf-8")]
    long_words = [w for w in words if len(w) >= 6 and w.isascii()]
    out = []
    for q in range(nq):
        w = list(rng.choice(long_words))
        for _ in range(max(1, len(w) * 10 * (1 + q % 4) // 100)):
            w[rng.randrange(len(w))] = chr(ord("a") + rng.randrange(26))
        out.append("".join(w))
    return out


def search_runs(cur, single_sql, batch_sql, batch_param, queries, runs, setting, value):
    """(single ms a statement, batch ms, {q: distances} of the single statements)."""
    cur.execute(f"SET {setting} = {value}")
    # warm: the index's cache (values, permutation rows, the GPU's copies) loads outside the timing
    cur.execute(single_sql, (queries[0], queries[0]))
    cur.execute(batch_sql, (batch_param,))
    single, batch, found = [], [], {}
    for _ in range(runs):
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            cur.execute(single_sql, (q, q))
            found[i] = [r[1] for r in cur.fetchall()]
        single.append((time.perf_counter() - t0) * 1000.0 / len(queries))
        ms, _ = timed(cur, batch_sql, (batch_param,))
        batch.append(ms)
    return statistics.median(single), statistics.median(batch), found


def run_kind(cur, label, table, index, column, opclass, extra, single_sql, batch_sql, batch_param, queries, a, device):
    for m in (0, a.m):
        cur.execute(f"DROP INDEX IF EXISTS {index}")
        with_ = ", ".join(x for x in (extra, f"permutants = {m}" if m else "") if x)
        ms, _ = timed(cur, f"CREATE INDEX {index} ON {table} USING genie ({column} {opclass})"
                           + (f" WITH ({with_})" if with_ else ""))
        print(f"{label} {device} build permutants={m}: {ms / 1000:.2f} s", flush=True)
    setting = "genie.text_search" if column == "w" else "genie.vector_search"
    cur.execute("SET genie.permutation_fraction = 1")
    exact_single, exact_batch, truth = search_runs(cur, single_sql, batch_sql, batch_param, queries, a.runs,
                                                   setting, "exact")
    print(f"{label} {device} exact: single {exact_single:.3f} ms ({1000 / exact_single:.0f}/s), "
          f"batch of {len(queries)} {exact_batch:.1f} ms ({len(queries) * 1000 / exact_batch:.0f} queries/s)", flush=True)
    for f in a.fractions.split(","):
        cur.execute(f"SET genie.permutation_fraction = {f}")
        single, batch, found = search_runs(cur, single_sql, batch_sql, batch_param, queries, a.runs,
                                           setting, "permutation")
        print(f"{label} {device} permutation m={a.m} f={f}: recall@10 {recall(found, truth):.3f}, "
              f"single {single:.3f} ms ({exact_single / single:.2f}x exact), "
              f"batch {batch:.1f} ms ({len(queries) * 1000 / batch:.0f} queries/s, {exact_batch / batch:.2f}x exact)",
              flush=True)
    cur.execute(f"RESET {setting}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--nq", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--fractions", default="0.002,0.01,0.05")
    a = ap.parse_args()
    conn = psycopg.connect(autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS genie")
    cur.execute("DROP TABLE IF EXISTS pw, pv")
    cur.execute("CREATE TABLE pw (id int, w text)")
    with cur.copy("COPY pw (w) FROM STDIN") as copy:
        for line in open(a.words, encoding="utf-8"):
            copy.write_row((line.rstrip("\n"),))
    cur.execute("UPDATE pw SET id = s.n FROM (SELECT ctid, row_number() OVER () n FROM pw) s WHERE pw.ctid = s.ctid")
    # vector_copy.py's binary COPY files of (id int4, v real[]), read by the server
    cur.execute("CREATE TABLE pv (id int, v real[])")
    cur.execute("CREATE TEMP TABLE pq (id int, v real[])")
    cur.execute("COPY pv FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.train).as_string(conn))
    cur.execute("COPY pq FROM %s WITH (FORMAT binary)" % psycopg.sql.Literal(a.test).as_string(conn))
    cur.execute("VACUUM ANALYZE pw")
    cur.execute("VACUUM ANALYZE pv")
    words = word_queries(a.words, a.nq)
    # as array literals, made once: the statements then carry text, not a list of
    # 784 floats that pure-Python psycopg would adapt at every execution
    vectors = [r[0] for r in cur.execute("SELECT v::text FROM pq ORDER BY id LIMIT %s", (a.nq,)).fetchall()]
    vector_batch = "{" + ",".join(vectors) + "}"
    print(f"words: {cur.execute('SELECT count(*) FROM pw').fetchone()[0]} rows, vectors: "
          f"{cur.execute('SELECT count(*) FROM pv').fetchone()[0]} rows, {a.nq} queries, k {K}, {a.runs} runs", flush=True)
    for device in a.devices.split(","):
        cur.execute(f"SET genie.device = {device}")
        run_kind(cur, "words", "pw", "pw_idx", "w", "genie_ngram_ops", "",
                 "SELECT id, w <%%> %s FROM pw ORDER BY w <%%> %s LIMIT 10",
                 "SELECT count(*) FROM genie_similar('pw_idx', %s, 10)", words, words, a, device)
        run_kind(cur, "vectors", "pv", "pv_idx", "v", "genie_vector_ops", "m = 0",
                 "SELECT id, v <-> %s::real[] FROM pv ORDER BY v <-> %s::real[] LIMIT 10",
                 "SELECT count(*) FROM genie_knn('pv_idx', %s::real[], 10)", vector_batch, vectors, a, device)


if __name__ == "__main__":
    main()
