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
  batch: every query in one statement (genie_similar, genie_knn);
  range: genie_within at the median query's exact 10th distance, exact and
    through the permutation index at each fraction (recall: the share of the
    exact search's rows found), single statements and the batch;
  baselines: pg_trgm's GiST index (its C nearest by trigram distance re-ranked
    by levenshtein(), single statements, on the first engine's pass) for
    words, genie's LSH (genie.vector_search = lsh) for vectors.
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
    return exact_single, exact_batch, truth


def run_range(cur, label, index, setting, cast, queries, batch_param, radius, a, device):
    """genie_within (range queries) at the median query's exact 10th distance: the
    exact search of the same index, then the permutation index's candidates at each
    fraction; recall = rows found / the exact search's rows (every row found is
    within the radius: its distance is true)."""
    single_sql = f"SELECT count(*) FROM genie_within('{index}', %s::{cast}, {radius})"
    batch_sql = f"SELECT count(*) FROM genie_within('{index}', %s::{cast}, {radius})"
    one = (lambda q: q) if cast == "real[]" else (lambda q: [q])
    rows = {}
    for mode, fractions in (("exact", ["1"]), ("permutation", a.fractions.split(","))):
        for f in fractions:
            cur.execute(f"SET {setting} = {mode}")
            cur.execute(f"SET genie.permutation_fraction = {f}")
            cur.execute(batch_sql, (batch_param,))
            single, batch = [], []
            for _ in range(a.runs):
                t0 = time.perf_counter()
                for q in queries:
                    cur.execute(single_sql, (one(q),))
                    cur.fetchall()
                single.append((time.perf_counter() - t0) * 1000.0 / len(queries))
                ms, got = timed(cur, batch_sql, (batch_param,))
                batch.append(ms)
            rows[(mode, f)] = got[0][0]
            s, b = statistics.median(single), statistics.median(batch)
            if mode == "exact":
                exact_s, exact_b = s, b
                print(f"{label} {device} genie_within radius {radius}, exact: {got[0][0]} rows, single {s:.3f} ms, "
                      f"batch of {len(queries)} {b:.1f} ms ({len(queries) * 1000 / b:.0f} queries/s)", flush=True)
            else:
                print(f"{label} {device} genie_within radius {radius}, permutation m={a.m} f={f}: recall "
                      f"{got[0][0] / max(rows[('exact', '1')], 1):.3f} ({got[0][0]} rows), single {s:.3f} ms "
                      f"({exact_s / s:.2f}x exact), batch {b:.1f} ms ({exact_b / b:.2f}x exact)", flush=True)
    cur.execute(f"RESET {setting}")


def baselines_words(cur, words, truth, exact_single, a, device):
    """pg_trgm's GiST index re-ranked by levenshtein(): the C nearest by trigram
    distance, the 10 nearest of those by edit distance (a user's exact-ish recipe)."""
    if device != a.devices.split(",")[0]:
        return
    cur.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    cur.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch")
    ms, _ = timed(cur, "CREATE INDEX pw_trgm ON pw USING gist (w gist_trgm_ops)")
    print(f"words pg_trgm build (GiST): {ms / 1000:.2f} s", flush=True)
    for c in (100, 1000):
        sql = ("SELECT id, levenshtein(w, %s) d FROM (SELECT id, w FROM pw ORDER BY w <-> %s LIMIT " + str(c) +
               ") s ORDER BY d, id LIMIT 10")
        cur.execute(sql, (words[0], words[0]))
        single, found = [], {}
        for _ in range(a.runs):
            t0 = time.perf_counter()
            for i, q in enumerate(words):
                cur.execute(sql, (q, q))
                found[i] = [r[1] for r in cur.fetchall()]
            single.append((time.perf_counter() - t0) * 1000.0 / len(words))
        ms = statistics.median(single)
        print(f"words pg_trgm GiST, {c} candidates re-ranked by levenshtein(): recall@10 {recall(found, truth):.3f}, "
              f"single {ms:.3f} ms ({exact_single / ms:.2f}x genie exact on {a.devices.split(',')[0]})", flush=True)
    cur.execute("DROP INDEX pw_trgm")


def baselines_vectors(cur, vectors, vector_batch, truth, exact_single, exact_batch, a, device):
    """genie's own LSH (genie.vector_search = lsh) on an index with LSH keywords."""
    cur.execute("DROP INDEX IF EXISTS pv_idx")
    ms, _ = timed(cur, "CREATE INDEX pv_idx ON pv USING genie (v genie_vector_ops)")
    print(f"vectors {device} build with LSH keywords (m from Equation 9): {ms / 1000:.2f} s", flush=True)
    for c in (1000, 3000):
        cur.execute(f"SET genie.lsh_candidates = {c}")
        single, batch, found = search_runs(cur, "SELECT id, v <-> %s::real[] FROM pv ORDER BY v <-> %s::real[] LIMIT 10",
                                           "SELECT count(*) FROM genie_knn('pv_idx', %s::real[], 10)", vector_batch,
                                           vectors, a.runs, "genie.vector_search", "lsh")
        print(f"vectors {device} LSH {c} candidates: recall@10 {recall(found, truth):.3f}, single {single:.3f} ms "
              f"({exact_single / single:.2f}x exact), batch {batch:.1f} ms ({len(vectors) * 1000 / batch:.0f} queries/s, "
              f"{exact_batch / batch:.2f}x exact)", flush=True)
    cur.execute("RESET genie.lsh_candidates")
    cur.execute("RESET genie.vector_search")


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
        single, _, truth = run_kind(cur, "words", "pw", "pw_idx", "w", "genie_ngram_ops", "",
                                    "SELECT id, w <%%> %s FROM pw ORDER BY w <%%> %s LIMIT 10",
                                    "SELECT count(*) FROM genie_similar('pw_idx', %s, 10)", words, words, a, device)
        run_range(cur, "words", "pw_idx", "genie.text_search", "text[]", words, words,
                  int(statistics.median(ds[K - 1] for ds in truth.values())), a, device)
        baselines_words(cur, words, truth, single, a, device)
        single, batch, truth = run_kind(cur, "vectors", "pv", "pv_idx", "v", "genie_vector_ops", "m = 0",
                                        "SELECT id, v <-> %s::real[] FROM pv ORDER BY v <-> %s::real[] LIMIT 10",
                                        "SELECT count(*) FROM genie_knn('pv_idx', %s::real[], 10)", vector_batch,
                                        vectors, a, device)
        run_range(cur, "vectors", "pv_idx", "genie.vector_search", "real[]", vectors, vector_batch,
                  round(statistics.median(ds[K - 1] for ds in truth.values()), 1), a, device)
        baselines_vectors(cur, vectors, vector_batch, truth, single, batch, a, device)


if __name__ == "__main__":
    main()
