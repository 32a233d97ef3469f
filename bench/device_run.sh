#!/bin/bash
# Runs on the GPU host (device tool), from the repository root, with the
# binaries built here carried in .device/.  Stages (any subset, in order):
#   tests      genie_gpu_tests (all)
#   sanitize   compute-sanitizer memcheck + racecheck on small cases
#   bench1m    engine_bench at n = 1M   (generates /tmp/lsh first if missing)
#   bench45m   engine_bench at n = 4.5M
# Logs go to $OUT (or ./device-out).
set -u
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
BIN=.device
stages="$*"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/summary.txt"; }

gen_data() {
  if [ ! -f /tmp/lsh/meta.json ]; then
    log "generating /tmp/lsh (n=4.5M)"
    PYTHONUNBUFFERED=1 python3 bench/gen_lsh_workload.py --n 4500000 --out /tmp/lsh > "$OUT/gen.log" 2>&1
    log "generated: $(tail -c 300 "$OUT/gen.log")"
  fi
}

nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.mem --format=csv | tee -a "$OUT/summary.txt"

# Start the data generation early, in the background, when a bench stage follows.
if [[ " $stages " == *" bench"* ]] && [ ! -f /tmp/lsh/meta.json ]; then
  ( gen_data ) &
  GEN_PID=$!
fi

for stage in $stages; do
  case $stage in
    tests)
      log "tests"
      $BIN/genie_gpu_tests --gtest_brief=1 > "$OUT/tests.log" 2>&1
      log "tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
      grep -E "FAILED|Failure" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"
      ;;
    sanitize)
      filter='Variants/GpuEngineTest.EmptyListsQueriesAndObjects/*:Variants/GpuEngineTest.MaxScoreBoundaries/*:Variants/GpuEngineTest.WeightsAndWideRanges/*:Variants/GpuEngineTest.HashTableOverflowFallsBack/*:GpuEngineApi.*'
      log "memcheck"
      compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
        $BIN/genie_gpu_tests --gtest_brief=1 --gtest_filter="$filter" > "$OUT/memcheck.log" 2>&1
      log "memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
      log "racecheck"
      compute-sanitizer --tool racecheck --error-exitcode 9 \
        $BIN/genie_gpu_tests --gtest_brief=1 --gtest_filter='Variants/GpuEngineTest.EmptyListsQueriesAndObjects/*:Variants/GpuEngineTest.MaxScoreBoundaries/*:Variants/GpuEngineTest.HashTableOverflowFallsBack/tiled' > "$OUT/racecheck.log" 2>&1
      log "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED' "$OUT/racecheck.log" | tr '\n' ' ')"
      ;;
    sweep)
      if [ -n "${GEN_PID:-}" ]; then wait $GEN_PID; GEN_PID=; fi
      gen_data
      log "tile sweep + multiple loading, n=4.5M"
      $BIN/engine_bench --data /tmp/lsh --n 4500000 --nq 1024 --k 100 --ref-queries 0 --repeat 5 \
        --engines cpu,tiled --tile-words 8192,4096,2048 --budget-mb 3000 > "$OUT/sweep.log" 2>&1
      log "sweep rc=$?"
      tail -12 "$OUT/sweep.log" | tee -a "$OUT/summary.txt"
      ;;
    bench1m|bench45m)
      if [ -n "${GEN_PID:-}" ]; then wait $GEN_PID; GEN_PID=; fi
      gen_data
      n=1000000; [ $stage = bench45m ] && n=4500000
      log "engine_bench n=$n"
      $BIN/engine_bench --data /tmp/lsh --n $n --nq 1024 --k 100 --ref-queries 32 --repeat 3 \
        --engines "${ENGINES:-ref,cpu,count,faithful,faithful-paper,tiled}" > "$OUT/bench_$n.log" 2>&1
      log "bench rc=$?"
      tail -12 "$OUT/bench_$n.log" | tee -a "$OUT/summary.txt"
      ;;
  esac
done
log "done"
