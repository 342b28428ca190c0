#!/usr/bin/env bash
# Every stage of the workshop's pipeline (sbatch/examples/workshop.yaml) on N synthetic workshop cells
# (tests/pipelines/make_workshop_cells.py: 5-channel 50x50 uint16 TIFFs in 8 class folders), one after the
# other on this machine, as a job's steps run them: each stage's wall seconds and peak resident memory
# (GNU time's maximum RSS of the stage's processes). The training is bounded
# (TRAIN_STEPS steps of vit_small/16 at 224/96 px: on CPUs a step takes many seconds; its share of a real
# run is the GPU's); extraction embeds the held-out fifth at the cells' 50 px (resize: false; the workshop
# resizes to 224 px on its GPUs).
#
# usage: bench/stages.sh N [BUILD_DIR]    env: TRAIN_STEPS (2), BATCH (16), KEEP=1 keeps the data
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N=${1:?usage: bench/stages.sh N [BUILD_DIR]}
BUILD="${2:-$ROOT/build}"
W="$BUILD/bench-work/stages-$N"
PCDINO="$BUILD/cli/pcdino"
TRAIN_STEPS=${TRAIN_STEPS:-2}
BATCH=${BATCH:-16}
mkdir -p "$W"
per_class=$(((N + 7) / 8))
if [ ! -f "$W/data.done" ]; then
  rm -rf "$W/data"
  torch_py "$ROOT/tests/pipelines/make_workshop_cells.py" "$W/data" 8 "$per_class" 50
  touch "$W/data.done"
fi
rm -rf "$W/out"
common=(-c "$ROOT/sbatch/examples/workshop.yaml" --dataset-dir "$W/data" --output-dir "$W/out"
  --set "train_scDINO.batch_size_per_gpu=$BATCH" --set "downstream_analyses.compute_cls_features.batch_size_per_gpu=64"
  --set train_scDINO.hyperparameters.use_fp16=false)  # no precision probe: on CPUs it alone takes minutes

stage() {  # stage NAME CMD...: one row. The training's bounded stop is exit 75 (resumable), not a failure.
  local name=$1 t rc=0
  shift
  /usr/bin/time -o "$W/$name.time" -f '%e %M' "$@" >"$W/$name.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] && ! { [ "$name" = train ] && [ "$rc" = 75 ]; }; then
    echo "bench/stages.sh: stage $name failed (exit $rc); its output:" >&2
    tail -n 20 "$W/$name.log" >&2
    exit 1
  fi
  t=$(tail -n 1 "$W/$name.time")
  printf '%-10s %8s %10s\n' "$name" "${t% *}" "$(awk -v k="${t#* }" 'BEGIN { printf "%.0f", k / 1024 }')"
}

echo "$(find "$W/data" -name '*.tif' | wc -l) cells, $(nproc) cores"
printf '%-10s %8s %10s\n' stage seconds "peak MiB"
stage check "$PCDINO" dataset check "${common[@]}"
stage meanstd "$PCDINO" meanstd "${common[@]}"
stage train "$PCDINO" train "${common[@]}" --stop-after-iterations "$TRAIN_STEPS"
stage extract "$PCDINO" extract "${common[@]}" --set downstream_analyses.compute_cls_features.resize=false
stage labels "$PCDINO" labels "${common[@]}"
stage knn "$PCDINO" knn "${common[@]}"
stage plots "$PCDINO" plots "${common[@]}"
[ "${KEEP:-0}" = 1 ] || rm -rf "$W/out"
