#!/bin/bash
# Runs on the GPU host (device tool), from the repository root, with the
# binaries built here carried in .device/.  Stages (any subset, in order):
#   tests      genie_gpu_tests (all)
#   sanitize   compute-sanitizer memcheck + racecheck on small cases
#   bench1m    engine_bench at n = 1M   (generates /tmp/lsh first if missing)
#   bench45m   engine_bench at n = 4.5M (ENGINES, REF_QUERIES override the defaults;
#              BUDGET_MB adds multiple-loading rows, packed and 4-byte parts;
#              GPU_FIRST=1 runs the GPU engines before the CPU rows)
#   torchcount the PyTorch count-table baseline (shared/bench/torch_count_baseline.py,
#              carried as .device/torch_count_baseline.py) at 1M and 4.5M
#   vectors-fmnist  vector_bench on Fashion-MNIST (.bundle/fmnist/*.idx.xz) and the
#              PyTorch baseline (bench/torch_knn_baseline.py); the binaries and the
#              libraries FAISS needs come in .device/devbin.tar.xz
#   vectors-gauss   the same at 1M and 4.5M x 128 of the LSH workload's mixture
#              (bench/gen_lsh_workload.py --vectors)
#              (FMNIST_METHODS, GAUSS_N, GAUSS_METHODS, GAUSS_1M_METHODS narrow the vector runs)
#   range      range_bench (issue 30: range search, brute force and the List of
#              Superclusters, CPU and GPU) on Fashion-MNIST (.bundle/fmnist), the
#              LSH workload's mixture (RANGE_N objects, default 200000, generated)
#              and wamerican-insane by edit distance (.bundle/dict); RANGE_DATA
#              (default fmnist,gauss,words) picks them, RANGE_RUNS runs each
#   permutation  permutation_bench (the permutation index against the exact scans)
#              on wamerican-insane (.bundle/dict), Fashion-MNIST (.bundle/fmnist) and
#              the package descriptions (.bundle/packages.tsv.xz); PERM_RUNS runs each
#   multigpu   every GPU of the host (issue 29): engine_bench's tiled engine over
#              1, 2 and 4 GPUs, replicated and sharded, on the 4.5M LSH workload
#              (1,024 queries, k = 100; checked hit for hit against the CPU engine),
#              the same index sharded under a device budget a third of its size
#              (MULTI_BUDGET_MB, default 700) against one GPU streaming it, and
#              vector_bench's exact scan of 4.5M x 128 (1,024 queries, k = 10) on
#              1, 2 and 4 GPUs, each checked against one GPU's rows; MULTI_RUNS
#              runs each (default 1)
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
if [[ " $stages " == *" bench"* || " $stages " == *" torchcount"* ]] && [ ! -f /tmp/lsh/meta.json ]; then
  ( gen_data ) &
  GEN_PID=$!
fi

# vector_bench and its libraries (FAISS's BLAS), unpacked once per machine
devbin() {
  if [ ! -x /tmp/devbin/vector_bench ]; then
    mkdir -p /tmp/devbin && tar -C /tmp/devbin -xJf .device/devbin.tar.xz
  fi
}
fmnist() {
  mkdir -p /tmp/fm
  for p in train t10k; do
    [ -f /tmp/fm/$p-images-idx3-ubyte ] || xz -dc .bundle/fmnist/$p.idx.xz > /tmp/fm/$p-images-idx3-ubyte
  done
  chmod -R a+rX /tmp/fm
}

# Everything may travel in devbin.tar.xz alone (the 64 MiB carry limit, beside
# the PostgreSQL bundle): take the binaries from there when .device has none.
if [ ! -x "$BIN/engine_bench" ] && [ -f .device/devbin.tar.xz ]; then
  devbin
  BIN=/tmp/devbin
fi

for stage in $stages; do
  case $stage in
    vectors-fmnist)
      devbin; fmnist
      log "vector_bench Fashion-MNIST"
      LD_LIBRARY_PATH=/tmp/devbin/lib /tmp/devbin/vector_bench --fmnist /tmp/fm --candidates 100,300,1000 \
        --methods "${FMNIST_METHODS:-genie-gpu,genie-cpu,genie-lsh,faiss-flat,faiss-hnsw,hnswlib}" --ef 16,64 --single 100 \
        > "$OUT/vectors-fmnist.txt" 2>&1
      log "vector_bench rc=$?"
      python3 bench/torch_knn_baseline.py --fmnist /tmp/fm >> "$OUT/vectors-fmnist.txt" 2>&1
      log "torch rc=$?"
      grep -E "^(RESULT|CHECK|DATA)" "$OUT/vectors-fmnist.txt" | cut -c1-400 | tee -a "$OUT/summary.txt"
      ;;
    vectors-gauss)
      devbin
      if [ ! -f /tmp/lshv/queries.f32 ]; then
        log "generating /tmp/lshv (4.5M x 128 with vectors)"
        PYTHONUNBUFFERED=1 python3 bench/gen_lsh_workload.py --n 4500000 --out /tmp/lshv --vectors > "$OUT/genv.log" 2>&1
      fi
      for n in ${GAUSS_N:-1000000 4500000}; do
        methods=${GAUSS_METHODS:-genie-gpu,genie-cpu,faiss-flat}
        [ $n = 1000000 ] && methods=${GAUSS_1M_METHODS:-$methods,genie-lsh}
        log "vector_bench gaussian n=$n"
        LD_LIBRARY_PATH=/tmp/devbin/lib /tmp/devbin/vector_bench --data /tmp/lshv/data.f32 --queries /tmp/lshv/queries.f32 \
          --dim 128 --n $n --methods $methods --candidates 1000,3000 --ef 32,128 --single 100 > "$OUT/vectors-$n.txt" 2>&1
        log "vector_bench rc=$?"
        python3 bench/torch_knn_baseline.py --data /tmp/lshv/data.f32 --queries /tmp/lshv/queries.f32 --dim 128 --n $n \
          --single 100 >> "$OUT/vectors-$n.txt" 2>&1
        log "torch rc=$?"
        grep -E "^(RESULT|CHECK|DATA)" "$OUT/vectors-$n.txt" | cut -c1-400 | tee -a "$OUT/summary.txt"
      done
      ;;
    range)
      rb=$BIN/range_bench
      [ -x "$rb" ] || { devbin; rb=/tmp/devbin/range_bench; }
      runs=${RANGE_RUNS:-3}
      rn=${RANGE_N:-200000}
      data=,${RANGE_DATA:-fmnist,gauss,words},
      # Fashion-MNIST when it was carried
      fm_lists=
      [[ $data == *,fmnist,* ]] && [ -f .bundle/fmnist/train.idx.xz ] && fmnist && fm_lists="256 16,32 4"
      IFS=, read -ra fm_kn <<< "$fm_lists"
      for kn in "${fm_kn[@]}"; do
        log "range_bench fmnist K N = $kn"
        $rb fmnist /tmp/fm 0 $runs $kn > "$OUT/range-fmnist-${kn// /-}.txt" 2>&1
        log "rc=$?"
      done
      if [[ $data == *,gauss,* ]] && [ ! -f /tmp/lshr$rn/queries.f32 ]; then
        log "generating /tmp/lshr$rn ($rn x 128 with vectors)"
        PYTHONUNBUFFERED=1 python3 bench/gen_lsh_workload.py --n $rn --query_pool $rn --out /tmp/lshr$rn --vectors \
          > "$OUT/genr.log" 2>&1
      fi
      if [[ $data == *,gauss,* ]]; then
        log "range_bench gauss n=$rn K N = 32 4"
        $rb gauss /tmp/lshr$rn/data.f32,/tmp/lshr$rn/queries.f32 $rn $runs 32 4 > "$OUT/range-gauss-$rn.txt" 2>&1
        log "rc=$?"
      fi
      words=/usr/share/dict/american-english-insane
      [ -f $words ] || [ ! -f .bundle/dict/american-english-insane.xz ] ||
        { xz -dc .bundle/dict/american-english-insane.xz > /tmp/words; words=/tmp/words; }
      if [[ $data == *,words,* ]] && [ -f $words ]; then
        log "range_bench words K N = 256 16"
        $rb words $words 0 $runs 256 16 > "$OUT/range-words.txt" 2>&1
        log "rc=$?"
      fi
      grep -hE "MISMATCH|^BUILD|^DATA" "$OUT"/range-*.txt | tee -a "$OUT/summary.txt"
      ;;
    permutation)
      fmnist
      words=/usr/share/dict/american-english-insane
      [ -f $words ] || { xz -dc .bundle/dict/american-english-insane.xz > /tmp/words; words=/tmp/words; }
      [ -f /tmp/packages.tsv ] || [ ! -f .bundle/packages.tsv.xz ] || xz -dc .bundle/packages.tsv.xz > /tmp/packages.tsv
      pb=$BIN/permutation_bench
      [ -x "$pb" ] || { devbin; pb=/tmp/devbin/permutation_bench; }
      runs=${PERM_RUNS:-3}
      log "permutation_bench words"
      $pb words $words 1024 0 $runs 16,32,64 0.002,0.005,0.01,0.02 > "$OUT/permutation-words.txt" 2>&1
      log "rc=$?"
      log "permutation_bench fmnist"
      $pb fmnist /tmp/fm 1000 0 $runs 16,32,64 0.005,0.01,0.02,0.05,0.1 > "$OUT/permutation-fmnist.txt" 2>&1
      log "rc=$?"
      if [ -f /tmp/packages.tsv ]; then
        log "permutation_bench packages"
        $pb packages /tmp/packages.tsv 256 0 $runs 16,64 0.02,0.05,0.1,0.2 > "$OUT/permutation-packages.txt" 2>&1
        log "rc=$?"
      fi
      grep -hE "MISMATCH|^exact|rows of" "$OUT"/permutation-*.txt | tee -a "$OUT/summary.txt"
      ;;
    tests)
      log "tests"
      tests=$BIN/genie_gpu_tests
      [ -x "$tests" ] || { devbin; tests=/tmp/devbin/genie_gpu_tests; }
      $tests --gtest_brief=1 > "$OUT/tests.log" 2>&1
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
      $BIN/engine_bench --data /tmp/lsh --n $n --nq 1024 --k 100 --ref-queries "${REF_QUERIES:-32}" --repeat 3 \
        --engines "${ENGINES:-ref,cpu,count,faithful,faithful-paper,tiled-full,tiled}" \
        ${BUDGET_MB:+--budget-mb $BUDGET_MB} ${GPU_FIRST:+--gpu-first} > "$OUT/bench_$n.log" 2>&1
      log "bench rc=$?"
      grep -E "profile|on the device" "$OUT/bench_$n.log" | tee -a "$OUT/summary.txt"
      tail -12 "$OUT/bench_$n.log" | tee -a "$OUT/summary.txt"
      ;;
    multigpu)
      if [ ! -f /tmp/lshv/queries.f32 ]; then
        log "generating /tmp/lshv (4.5M x 128 with vectors)"
        PYTHONUNBUFFERED=1 python3 bench/gen_lsh_workload.py --n 4500000 --out /tmp/lshv --vectors > "$OUT/genv.log" 2>&1
        log "generated rc=$?"
      fi
      ngpu=$(nvidia-smi -L | wc -l)
      gpus=1; [ "$ngpu" -ge 2 ] && gpus=1,2; [ "$ngpu" -ge 4 ] && gpus=1,2,4
      for run in $(seq 1 "${MULTI_RUNS:-1}"); do
        log "multigpu run $run: engine_bench 4.5M over $gpus GPUs"
        $BIN/engine_bench --data /tmp/lshv --n 4500000 --nq 1024 --k 100 --ref-queries 0 --repeat 5 \
          --engines cpu,tiled,group --gpus $gpus --gpu-first > "$OUT/multigpu-engine-$run.txt" 2>&1
        log "engine_bench rc=$?"
        grep -E "^\|" "$OUT/multigpu-engine-$run.txt" | cut -c1-300 | tee -a "$OUT/summary.txt"
        log "multigpu run $run: 4.5M sharded over $ngpu GPUs, budget ${MULTI_BUDGET_MB:-700} MB each, against 1 GPU streaming"
        $BIN/engine_bench --data /tmp/lshv --n 4500000 --nq 1024 --k 100 --ref-queries 0 --repeat 5 \
          --engines cpu,tiled,group --gpus "$ngpu" --placements shard --budget-mb "${MULTI_BUDGET_MB:-700}" --gpu-first \
          > "$OUT/multigpu-budget-$run.txt" 2>&1
        log "engine_bench rc=$?"
        grep -E "^\|" "$OUT/multigpu-budget-$run.txt" | cut -c1-300 | tee -a "$OUT/summary.txt"
        log "multigpu run $run: vector_bench 4.5M x 128 over $gpus GPUs"
        $BIN/vector_bench --data /tmp/lshv/data.f32 --queries /tmp/lshv/queries.f32 --dim 128 --n 4500000 --nq 1024 \
          --k 10 --methods genie-gpu --single 20 --gpus $gpus > "$OUT/multigpu-vectors-$run.txt" 2>&1
        log "vector_bench rc=$?"
        grep -E "^(RESULT|CHECK|DATA)" "$OUT/multigpu-vectors-$run.txt" | cut -c1-400 | tee -a "$OUT/summary.txt"
      done
      ;;
    torchcount)
      if [ -n "${GEN_PID:-}" ]; then wait $GEN_PID; GEN_PID=; fi
      gen_data
      for n in 1000000 4500000; do
        log "torch count table n=$n"
        python3 $BIN/torch_count_baseline.py --dir /tmp/lsh --n $n --batches 8,64 --check 8 \
          > "$OUT/torch_$n.log" 2>&1
        log "torch rc=$? $(grep TORCH "$OUT/torch_$n.log" | cut -c1-400)"
      done
      ;;
  esac
done
log "done"
