#!/usr/bin/env bash
# Data-parallel scaling of `pcdino train` on one host: step time of 2 MPI ranks against 1 rank at the same
# per-rank batch (one LibTorch thread and one core per rank), DINO vit_tiny patch 4 at the demo's crop
# sizes, out_dim 4096, on Fashion-MNIST's test split. Efficiency = 1-rank s/step / 2-rank s/step (1.0: the
# gradient allreduce and the per-step stop agreement cost nothing). Each run trains 2 epochs of STEPS
# steps and reports the second.
#
# usage: bench/train_ranks.sh [BUILD_DIR]      environment: STEPS (8), BATCH (32)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/train-ranks"
STEPS=${STEPS:-8} BATCH=${BATCH:-32}
export PCDINO_LOG_LEVEL=warn OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench_fmnist_run "$PCDINO" "$W" "$BATCH"
echo "# bench/train_ranks.sh on $(nproc) cores, $(date -u +%F), $("$PCDINO" --version | head -1), batch $BATCH per rank"
printf '%-8s %12s %8s %9s %11s\n' ranks global_batch s/step images/s efficiency
rm -rf "$W/one" "$W/two"
"$PCDINO" train -c "$W/pipeline.yaml" --threads 1 --device cpu --limit-images $((STEPS * BATCH)) \
  --model-dir "$W/one" --no-resume
one=$(bench_step_seconds "$W/one")
printf '%-8s %12s %8s %9.1f %11s\n' 1 "$BATCH" "$one" "$(awk -v b="$BATCH" -v s="$one" 'BEGIN { print b / s }')" 1.00
mpirun --oversubscribe --bind-to none -np 2 "$PCDINO" train -c "$W/pipeline.yaml" --threads 1 --device cpu \
  --limit-images $((STEPS * BATCH * 2)) --model-dir "$W/two" --no-resume
two=$(bench_step_seconds "$W/two")
printf '%-8s %12s %8s %9.1f %11.2f\n' 2 $((BATCH * 2)) "$two" \
  "$(awk -v b="$BATCH" -v s="$two" 'BEGIN { print 2 * b / s }')" "$(awk -v a="$one" -v b="$two" 'BEGIN { print a / b }')"
