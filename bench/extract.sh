#!/usr/bin/env bash
# CLS feature extraction throughput (`pcdino extract`, randomly initialised vit_tiny, patch 4 and 7) on the
# held-out 20% of Fashion-MNIST's test split, against the same work in Python PyTorch
# (bench/baseline_extract.py: tifffile + the reference ViT under no_grad, Debian's python3-torch) as the
# baseline. pcdino's seconds are the stage's own (reading, forward, gather, HDF5 write; not process start),
# the baseline's reading and forward. Best of BENCH_REPEAT runs.
#
# usage: bench/extract.sh [BUILD_DIR]
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/extract"
export PCDINO_LOG_LEVEL=info OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$W"
[ -d "$W/fmnist" ] || "$PCDINO" dataset import --out "$W/fmnist" --split test >/dev/null
for patch in 4 7; do
  cat >"$W/p$patch.yaml" <<YAML
meta:
  name_of_run: p$patch
  output_dir: "$W/out"
  dataset_dir: "$W/fmnist"
train_scDINO:
  fraction_for_mean_std_calc: 1.0
  hyperparameters:
    arch: vit_tiny
    patch_size: $patch
    global_crops_size: 28
downstream_analyses:
  compute_cls_features:
    batch_size_per_gpu: 256
    resize: false
YAML
  [ -f "$W/out/p$patch/mean_and_std_of_dataset.txt" ] || "$PCDINO" meanstd -c "$W/p$patch.yaml" 2>/dev/null
  "$PCDINO" labels -c "$W/p$patch.yaml" 2>/dev/null
done
read -r mean std < <(/usr/bin/python3 -c "import json; d = json.load(open('$W/out/p4/mean_and_std_of_dataset.txt')); print(d['mean'][0], d['std'][0])")

best() { sort -g | head -1; }
echo "# bench/extract.sh on $(nproc) cores, $(date -u +%F), $("$PCDINO" --version | head -1), OMP_WAIT_POLICY=$OMP_WAIT_POLICY"
bench_header
for patch in 4 7; do
  for threads in 1 2; do
    n=0
    s=$(for _ in $(seq "$BENCH_REPEAT"); do
      read -r n secs < <(torch_py "$ROOT/bench/baseline_extract.py" --paths "$W/out/p$patch/CLS_features/image_paths.csv" \
        --root "$W/fmnist" --mean "$mean" --std "$std" --patch "$patch" --threads "$threads")
      echo "$secs"; echo "$n" >"$W/n"
    done | best)
    n=$(cat "$W/n")
    base=""; [ "$threads" = 1 ] && base=baseline  # each patch size against its own 1-thread Python row
    bench_row "python p$patch" tiff 1 "$threads" warm "$n" "$s" $base
  done
  for threads in 1 2; do
    s=$(for _ in $(seq "$BENCH_REPEAT"); do
      "$PCDINO" extract -c "$W/p$patch.yaml" --random-init --threads "$threads" --no-csv 2>&1 |
        sed -n 's/.* \([0-9]*\) held-out images embedded.*: \([0-9.]*\) images\/s.*/\1 \2/p' |
        awk '{ printf "%.3f\n", $1 / $2 }'
    done | best)
    bench_row "pcdino extract p$patch" tiff 1 "$threads" warm "$n" "$s"
  done
done
