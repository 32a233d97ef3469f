#!/usr/bin/env bash
# diagnostic (not a benchmark): the genie service's own time per piece of a stored array read in pieces (genie_service_stats: requests, engine_ms), beside genie_profile()'s phases and EXPLAIN ANALYZE; run inside scripts/pg-sandbox with genie preloaded, FMNIST set (bench/scan-ahead-tail-h200.txt)
set -e
. bench/sandbox-lib.sh
work=$(mktemp -d); chmod 755 "$work"
KEEP_QUERIES=10000 setup_vectors > /dev/null
psql -Xq -c "CREATE TABLE ab_vecs AS SELECT array_agg(q ORDER BY id) a FROM svc_vec_queries"
stmt="SELECT count(*) FROM genie_knn('svc_vecs_idx', (SELECT a FROM ab_vecs), 10);"
stats="SELECT requests, queries, round(engine_ms::numeric, 2) engine_ms, round(mean_queue_wait_ms::numeric, 3) queue_ms, mean_batch, max_batch FROM genie_service_stats() WHERE index = 'svc_vecs_idx'::regclass;"
psql -X <<SQL
SET genie.device = gpu;
SET genie.profile = on;
$stmt
$stmt
$stats
SELECT genie_profile_reset();
\timing on
$stmt
$stmt
$stmt
$stmt
$stmt
\timing off
$stats
SELECT phase, round(total_ms::numeric / 5, 2) AS ms_per_statement FROM genie_profile() ORDER BY 1;
EXPLAIN (ANALYZE, COSTS OFF) $stmt
SQL
