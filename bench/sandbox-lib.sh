# Shared by the bench drivers that run inside scripts/pg-sandbox
# (bench/service-bench, bench/latency-profile, bench/service-ab,
# bench/service-check): restarting the sandbox's cluster with genie
# preloaded or not, device memory, the workloads' tables (tags, strings,
# vectors, documents), a median, the service's engine totals and the
# host's CPU time.  Source it after `cd` to the repository root, with
# $work a temporary folder.
: "${GENIE_SANDBOX_DIR:?run inside scripts/pg-sandbox}"
pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
[ -x "$pgbin/pg_ctl" ] || pgbin=$(dirname "$(command -v pg_ctl)")

pg_ctl_as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u "${GENIE_SANDBOX_USER:-genie_sandbox}" -- "$pgbin/pg_ctl" "$@"
  else "$pgbin/pg_ctl" "$@"; fi
}

# Restarts the cluster with genie preloaded (yes) or not (no), or again as
# it is (restart); waits for the service.
preloaded=unknown
set_preload() {
  [ "$preloaded" = "$1" ] && return
  local want=$1
  [ "$want" = restart ] && want=$preloaded
  if [ "$want" = yes ]; then psql -Xqc "ALTER SYSTEM SET shared_preload_libraries = 'genie'"
  else psql -Xqc "ALTER SYSTEM RESET shared_preload_libraries"; fi
  pg_ctl_as_owner -D "$GENIE_SANDBOX_DIR/data" -l "$GENIE_SANDBOX_DIR/server.log" -w -t 120 -m fast restart >/dev/null \
    || { tail -20 "$GENIE_SANDBOX_DIR/server.log" >&2; exit 1; }
  preloaded=$want
  if [ "$want" = yes ]; then
    for _ in $(seq 1 100); do
      [ "$(psql -XAtc 'SELECT running FROM genie_service_status()')" = t ] && break
      sleep 0.2
    done
  fi
}

device_memory_mb() {
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1
  else echo 0; fi
}

# The tables: svc_docs/svc_queries (ROWS rows of skewed tag sets),
# svc_words/svc_word_queries (WORDS, default wamerican-insane),
# svc_vecs/svc_vec_queries (Fashion-MNIST from FMNIST, default the Debian
# package's), svc_tsdocs/svc_tsqueries (DOCS: a corpus file, .xz allowed,
# or a corpus name of bench/document_corpus.py; default gcide).
setup_tags() {
  psql -X -v rows="$1" ${QUERY_DRAWS:+-v query_draws="$QUERY_DRAWS"} -f bench/service_bench.sql
}
setup_strings() {
  psql -X -v words="${WORDS:-/usr/share/dict/american-english-insane}" -f bench/service_strings_bench.sql
}
setup_vectors() {
  local fm=${FMNIST:-/usr/share/datasets/fashion-mnist} py=python3 part f
  $py -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
  for part in train t10k; do
    f=$fm/$part-images-idx3-ubyte
    if [ -r "$f" ]; then cp "$f" "$work/$part.idx"; else gzip -dc "$f.gz" > "$work/$part.idx"; fi
  done
  $py bench/vector_copy.py --idx "$work/train.idx" "$work/fm_train.copy"
  $py bench/vector_copy.py --idx "$work/t10k.idx" "$work/fm_test.copy"
  chmod 755 "$work"; chmod 644 "$work"/*.copy
  psql -X -v copydir="$work" -v keep_queries="${KEEP_QUERIES:-1000}" -f bench/service_vectors_bench.sql
}
setup_documents() {
  python3 bench/document_corpus.py "${DOCS:-gcide}" > "$work/corpus.tsv"
  chmod 755 "$work"; chmod 644 "$work/corpus.tsv"
  psql -X -v file="$work/corpus.tsv" -f bench/service_documents_bench.sql
}

# The median of the numbers on standard input, one a line.
med() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# The genie service's engine time (ms, summed over its engines: two GPUs
# busy at once count twice), batches and queries so far ("0 0 0" when it
# does not run)
service_engine_totals() {
  psql -XAtF' ' -c "SELECT coalesce(sum(engine_ms), 0), coalesce(sum(batches), 0), coalesce(sum(queries), 0)
                     FROM genie_service_stats()" 2>/dev/null || echo "0 0 0"
}
# Busy and total jiffies of the whole host (/proc/stat): "busy total".
host_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
