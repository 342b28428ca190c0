#!/usr/bin/env bash
# Throughput of the mean/std stage on the full Fashion-MNIST (70,000 28x28 TIFFs from Debian's
# dataset-fashion-mnist), over the TIFF folder and its packed HDF5 form, 1 and 2 MPI ranks, warm and (where
# the kernel allows dropping caches) cold, against the workshop's Python logic as the baseline.
#
# usage: bench/meanstd.sh [BUILD_DIR]     (needs python3-torchvision for the baseline: scripts/install-deps bench)
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/meanstd"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self PCDINO_LOG_LEVEL=warn
mkdir -p "$W"

[ -d "$W/fmnist" ] || "$PCDINO" dataset import --out "$W/fmnist" --split all >/dev/null 2>&1
[ -f "$W/fmnist.packed/pack.json" ] || "$PCDINO" dataset pack --dataset-dir "$W/fmnist" --out "$W/fmnist.packed" >/dev/null 2>&1
images=$(find "$W/fmnist" -name '*.tif' | wc -l)
cat >"$W/pipeline.yaml" <<YAML
meta:
  name_of_run: bench
  output_dir: "$W/out"
  dataset_dir: "$W/fmnist"
train_scDINO:
  fraction_for_mean_std_calc: 1.0
YAML

# One timed run of the stage: wall seconds of the whole command (MPI start, listing, reading, writing).
stage() {  # stage LAYOUT RANKS THREADS CACHE
  local dir="$W/fmnist"
  [ "$1" = packed ] && dir="$W/fmnist.packed"
  [ "$4" = cold ] && drop_caches
  local t0 t1
  t0=$(date +%s.%N)
  # mpirun binds each rank to one core by default; a rank with two threads needs --bind-to none.
  local bind=()
  [ "$3" -gt 1 ] && bind=(--bind-to none)
  mpirun --oversubscribe "${bind[@]}" -np "$2" "$PCDINO" meanstd -c "$W/pipeline.yaml" --dataset-dir "$dir" --threads "$3" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}

echo "# bench/meanstd.sh on $(nproc) cores, $(date -u +%F), $("$PCDINO" --version | head -1)"
bench_header
if torch_py -c 'import torchvision, tifffile' 2>/dev/null; then
  "$PCDINO" meanstd -c "$W/pipeline.yaml" >/dev/null 2>&1  # page cache warm
  bench_row "python baseline" tiff 1 1 warm "$images" "$(BENCH_REPEAT=2 best_of torch_py "$ROOT/bench/baseline_meanstd.py" "$W/fmnist")" baseline
else
  echo "(no baseline: python3-torchvision missing; scripts/install-deps bench installs it)"
fi
for layout in tiff packed; do
  for ranks in 1 2; do
    threads=$((ranks == 1 ? 2 : 1))
    [ "$ranks" = 1 ] && bench_row "pcdino meanstd" "$layout" 1 1 warm "$images" "$(best_of stage "$layout" 1 1 warm)"
    bench_row "pcdino meanstd" "$layout" "$ranks" "$threads" warm "$images" "$(best_of stage "$layout" "$ranks" "$threads" warm)"
    if drop_caches; then
      bench_row "pcdino meanstd" "$layout" "$ranks" "$threads" cold "$images" "$(BENCH_REPEAT=1 best_of stage "$layout" "$ranks" "$threads" cold)"
    fi
  done
done
