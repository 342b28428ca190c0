# shellcheck shell=bash
# The bench harness: every benchmark prints rows of one table with defined columns, so runs on different
# machines compare. Sourced by the bench/*.sh scripts.
#
#   case       what was measured
#   layout     input layout (tiff = class folders of TIFF files, packed = HDF5 shards)
#   ranks      MPI ranks; threads = decoding threads per rank
#   cache      warm (files in page cache) or cold (caches dropped before the run)
#   images     images processed
#   seconds    wall time of the measured part (best of REPEAT runs)
#   images/s   images / seconds
#   vs base    images/s divided by the baseline row's images/s (same table)
set -euo pipefail
# torch_py: the Python with PyTorch (PCDINO_PYTHON, else python3 on PATH, else /usr/bin/python3), as the tests'.
source "$(dirname "${BASH_SOURCE[0]}")/../tests/lib/python.sh"

BENCH_REPEAT=${BENCH_REPEAT:-3}
BASELINE_RATE=""

bench_header() {
  printf '%-22s %-7s %5s %7s %5s %7s %8s %10s %8s\n' case layout ranks threads cache images seconds images/s "vs base"
}

# bench_row CASE LAYOUT RANKS THREADS CACHE IMAGES SECONDS [baseline]
bench_row() {
  local rate ratio
  rate=$(awk -v n="$6" -v s="$7" 'BEGIN { printf "%.0f", n / s }')
  if [ "${8:-}" = baseline ]; then BASELINE_RATE=$rate; fi
  ratio=$(awk -v r="$rate" -v b="${BASELINE_RATE:-0}" 'BEGIN { if (b > 0) printf "%.1fx", r / b; else print "-" }')
  printf '%-22s %-7s %5s %7s %5s %7s %8.2f %10s %8s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$rate" "$ratio"
}

drop_caches() {  # returns non-zero where the kernel does not let us
  sync && { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
}

# best_of CMD...: runs CMD BENCH_REPEAT times; prints the smallest value CMD printed on its last stdout line.
best_of() {
  local best="" v i
  for ((i = 0; i < BENCH_REPEAT; i++)); do
    v=$("$@" | tail -n 1)
    best=$(awk -v a="$best" -v b="$v" 'BEGIN { if (a == "" || b < a) print b; else print a }')
  done
  echo "$best"
}

# bench_dino_pipeline FILE DIR BATCH: the pipeline YAML of the training benchmarks: the demo's model
# (vit_tiny, patch 4, 28-px global and six 16-px local crops, out_dim 4096), 2 epochs, no warm-ups, the
# last layer trained from the first step as in bench/baseline_dino_step.py (so --cuda-graph captures its
# step in epoch 1 and the reported epoch 2 replays it), on the Fashion-MNIST import in DIR/fmnist with
# outputs in DIR/out (run name "bench").
bench_dino_pipeline() {
  cat >"$1" <<YAML
meta:
  name_of_run: bench
  output_dir: "$2/out"
  dataset_dir: "$2/fmnist"
train_scDINO:
  fraction_for_mean_std_calc: 1.0
  epochs: 2
  batch_size_per_gpu: $3
  num_workers: 1
  hyperparameters:
    arch: vit_tiny
    patch_size: 4
    out_dim: 4096
    global_crops_size: 28
    local_crops_size: 16
    local_crops_number: 6
    warmup_epochs: 0
    warmup_teacher_temp_epochs: 0
    freeze_last_layer: 0
YAML
}

# bench_fmnist_run PCDINO DIR BATCH: Fashion-MNIST's test split imported into DIR/fmnist (once), the
# benchmarks' pipeline in DIR/pipeline.yaml (bench_dino_pipeline) and its mean/std (once).
bench_fmnist_run() {
  mkdir -p "$2"
  [ -d "$2/fmnist" ] || "$1" dataset import --out "$2/fmnist" --split test >/dev/null
  bench_dino_pipeline "$2/pipeline.yaml" "$2" "$3"
  [ -f "$2/out/bench/mean_and_std_of_dataset.txt" ] || "$1" meanstd -c "$2/pipeline.yaml" >/dev/null
}

# bench_step_seconds MODEL_DIR [DECIMALS]: the last epoch's seconds per step, its phases summed
# (metrics.jsonl's last record), with DECIMALS (3) digits.
bench_step_seconds() {
  tail -n 1 "$1/metrics.jsonl" | /usr/bin/python3 -c 'import json, sys
m = json.load(sys.stdin)
print("%.*f" % (int(sys.argv[1]), sum(m["seconds_per_step"].values())))' "${2:-3}"
}

# bench_sets ARGUMENT ...: BENCH_SETS, the --set KEY=VALUE pairs among `pcdino train`'s ARGUMENTs (they may
# change the architecture, which the stages after training must then share; the other options are
# training's alone).
bench_sets() {
  BENCH_SETS=()
  while [ $# -gt 0 ]; do
    [ "$1" = --set ] && [ $# -gt 1 ] && BENCH_SETS+=(--set "$2") && shift
    shift
  done
}

# bench_knn_baselines PCDINO CONFIG RUN_DIR RUN [EXTRACT_OPTION ...]: the kNN stage on the same network
# untrained (with BENCH_SETS; RUN_DIR/untrained.h5, run RUN-untrained) and on the raw pixels
# (RUN_DIR/raw_pixels.h5, run RUN-raw-pixels), the yardsticks of a trained teacher on the same split.
bench_knn_baselines() {
  local pcdino=$1 config=$2 rundir=$3 run=$4
  shift 4
  "$pcdino" extract -c "$config" "${BENCH_SETS[@]}" --random-init "$@" --no-csv --output "$rundir/untrained.h5" >/dev/null
  "$pcdino" knn -c "$config" "${BENCH_SETS[@]}" --features "$rundir/untrained.h5" --name-of-run "$run-untrained" >/dev/null
  "$pcdino" extract -c "$config" --raw-pixels "$@" --no-csv --output "$rundir/raw_pixels.h5" >/dev/null
  "$pcdino" knn -c "$config" --features "$rundir/raw_pixels.h5" --name-of-run "$run-raw-pixels" >/dev/null
}
