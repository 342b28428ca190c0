#!/usr/bin/env bash
# The cost of the Prometheus metrics (issue #40): `pcdino train` on 2 MPI ranks (one thread and one core
# each), DINO vit_tiny patch 4 at the demo's crop sizes, out_dim 4096, on Fashion-MNIST's test split, with
# monitoring.textfile_dir set (every step's counters and histogram, the phases every 10 steps, the file
# rewritten every second: five times the default rate) and "" (no metrics), alternating REPEAT times. Each
# run trains 2 epochs of STEPS steps; the second epoch's seconds per step is compared.
#
# usage: bench/train_metrics.sh [BUILD_DIR]      environment: STEPS (30), BATCH (32), REPEAT (3)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/train-metrics"
STEPS=${STEPS:-30} BATCH=${BATCH:-32} REPEAT=${REPEAT:-3}
export PCDINO_LOG_LEVEL=warn OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$W/textfile"
bench_fmnist_run "$PCDINO" "$W" "$BATCH"
run_once() {  # run_once DIR TEXTFILE_DIR: seconds per step
  rm -rf "$1"
  mpirun --oversubscribe --bind-to core -np 2 "$PCDINO" train -c "$W/pipeline.yaml" --threads 1 --device cpu \
    --limit-images $((STEPS * BATCH * 2)) --model-dir "$1" --no-resume \
    --set "monitoring.textfile_dir=$2" --set monitoring.interval_seconds=1
  bench_step_seconds "$1" 4
}
on=() off=()
for ((r = 0; r < REPEAT; r++)); do
  on+=("$(run_once "$W/on" "$W/textfile")")
  off+=("$(run_once "$W/off" "")")
done
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
echo "# bench/train_metrics.sh on $(nproc) cores, $(date -u +%F), $("$PCDINO" --version | head -1), 2 ranks x batch $BATCH, median of $REPEAT alternating runs"
printf '%-8s %10s %10s   %s\n' metrics s/step vs_off runs
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
printf '%-8s %10s %10s   %s\n' off "$m_off" 1.00 "${off[*]}"
printf '%-8s %10s %10s   %s\n' on "$m_on" "$(awk -v a="$m_on" -v b="$m_off" 'BEGIN { printf "%.3f", a / b }')" "${on[*]}"
