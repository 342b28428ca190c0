#!/usr/bin/env bash
# Training throughput of `pcdino train` (DINO, vit_tiny, patch 4, 28-px global and six 16-px local crops,
# batch 64, out_dim 4096: the demo's sizes) on Fashion-MNIST, with 1 and 2 LibTorch threads, against the
# same step in Python PyTorch (bench/baseline_dino_step.py, Debian's python3-torch) as the baseline.
#
# Each pcdino row trains 2 epochs of STEPS iterations and reports the second (warm) epoch: the first steps
# of a process are slow while the allocator and OpenBLAS warm up, in Python as well. The "pcdino train"
# rows include loading and augmenting the images on a loader thread; the "synthetic" rows train on random
# crops made once (--synthetic-crops), as the baseline does. Both have DINO's drop_path_rate 0.1.
#
# usage: bench/train.sh [BUILD_DIR]      environment: STEPS (default 10)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/train"
STEPS=${STEPS:-10}
BATCH=64
export PCDINO_LOG_LEVEL=warn OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$W"

[ -d "$W/fmnist" ] || "$PCDINO" dataset import --out "$W/fmnist" --split test >/dev/null
bench_dino_pipeline "$W/pipeline.yaml" "$W" "$BATCH"
[ -f "$W/out/bench/mean_and_std_of_dataset.txt" ] || "$PCDINO" meanstd -c "$W/pipeline.yaml" >/dev/null

blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 | sed 's|.*/\(openblas-[a-z]*\)/.*|\1|')
row() {  # row CASE THREADS SECONDS_PER_STEP [baseline]
  local rate ratio
  rate=$(awk -v s="$3" -v b="$BATCH" 'BEGIN { printf "%.1f", b / s }')
  [ "${4:-}" = baseline ] && BASE=$rate
  ratio=$(awk -v r="$rate" -v b="${BASE:-0}" 'BEGIN { if (b > 0) printf "%.2fx", r / b; else print "-" }')
  printf '%-24s %7s %-16s %8s %9s %8s\n' "$1" "$2" "$blas" "$3" "$rate" "$ratio"
}

echo "# bench/train.sh on $(nproc) cores, $(date -u +%F), $("$PCDINO" --version | head -1), OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
printf '%-24s %7s %-16s %8s %9s %8s\n' case threads BLAS s/step images/s "vs base"
for threads in 1 2; do
  s=$(/usr/bin/python3 "$ROOT/bench/baseline_dino_step.py" --threads "$threads" --steps "$STEPS")
  if [ "$threads" = 1 ]; then row "python step (baseline)" 1 "$s" baseline; else row "python step" 2 "$s"; fi
done
for threads in 1 2; do
  for data in real synthetic; do
    model="$W/model-$threads"
    rm -rf "$model"
    synthetic=(); [ "$data" = synthetic ] && synthetic=(--synthetic-crops)
    "$PCDINO" train -c "$W/pipeline.yaml" --threads "$threads" --limit-images $((STEPS * BATCH)) \
      --model-dir "$model" --no-resume "${synthetic[@]}"
    s=$(tail -n 1 "$model/metrics.jsonl" | /usr/bin/python3 -c 'import json,sys; print("%.3f" % ('"$BATCH"' / json.load(sys.stdin)["images_per_second"]))')
    if [ "$data" = real ]; then row "pcdino train" "$threads" "$s"; else row "pcdino train, synthetic" "$threads" "$s"; fi
    tail -n 1 "$model/metrics.jsonl" | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin)
print("  (epoch 2: %.1f s; per step: " % (m["images_per_second"] and '"$BATCH"' * '"$STEPS"' / m["images_per_second"]) +
        ", ".join("%s %.3f s" % kv for kv in m["seconds_per_step"].items()) + ")")'
  done
done
