#!/usr/bin/env bash
# Training throughput of `pcdino train` against the same DINO step in Python PyTorch (bench/baseline_dino_step.py,
# Debian's python3-torch: the same LibTorch 1.13, OpenBLAS and oneDNN), side by side, at two shapes:
#   bench  vit_tiny (12 blocks), patch 4, 28-px global and six 16-px local crops, batch 64, out_dim 4096,
#          drop_path 0.1 (the benchmark's model since issue #5);
#   demo   the demo's exact step (sbatch/examples/demo.yaml): 4 blocks, patch 7, 28-px global and six 14-px
#          local crops, batch 8 per rank, out_dim 1024, no drop path.
# each in float32 and with bfloat16 autocast (--amp-dtype bfloat16; torch.autocast("cpu") in Python), with 1 and 2
# threads. "threads N" gives the whole process N cores (taskset -c 0..N-1), so OpenBLAS, LibTorch's OpenMP
# pool and pcdino's loader thread all share them, in both programs alike.
#
# pcdino trains 2 epochs of STEPS iterations on crops made once (--synthetic-crops, as the baseline's) and
# reports the second (warm) epoch; Python times STEPS steps after 5 warm-up steps. Each pair runs REPEAT times,
# alternating, and the median of each side is shown: this machine's speed drifts by 2x within minutes.
# "vs python" is the pcdino row's images/s over the Python row's of the same shape, precision and threads.
#
# usage: bench/train.sh [BUILD_DIR]
# environment: REPEAT (default 3), SHAPES (default "bench demo"), STEPS (default 8 for bench, 30 for demo)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/train"
TORCH_PY=$(torch_python)  # run under taskset: a path, not the function
REPEAT=${REPEAT:-3}
SHAPES=${SHAPES:-bench demo}
STEPS_OVERRIDE=${STEPS:-}
# OpenMP's wait policy: pcdino chooses its own when none is set (PASSIVE with a short spin, train/src/process.cpp);
# Python runs with libgomp's default and with PASSIVE and is given the faster of the two (its float32 GEMMs
# are OpenBLAS's, whose threads the default's spinning starves; its bfloat16 ones oneDNN's, which PASSIVE
# slows). OMP_WAIT_POLICY set here applies to both.
export PCDINO_LOG_LEVEL=warn
USER_OMP=${OMP_WAIT_POLICY:-}
mkdir -p "$W"
[ -d "$W/fmnist" ] || "$PCDINO" dataset import --out "$W/fmnist" --split test >/dev/null

# shape NAME: sets BATCH, PY (baseline arguments) and SETS (pcdino --set overrides) for that shape.
shape() {
  case "$1" in
    bench)
      BATCH=64 STEPS=${STEPS_OVERRIDE:-8}
      PY=(--depth 12 --patch 4 --global-size 28 --local-size 16 --locals 6 --out-dim 4096 --drop-path 0.1)
      SETS=(arch=vit_tiny depth=0 patch_size=4 out_dim=4096 global_crops_size=28 local_crops_size=16
        local_crops_number=6 drop_path_rate=0.1) ;;
    demo)
      BATCH=8 STEPS=${STEPS_OVERRIDE:-30}
      PY=(--depth 4 --patch 7 --global-size 28 --local-size 14 --locals 6 --out-dim 1024 --drop-path 0)
      SETS=(arch=vit_tiny depth=4 patch_size=7 out_dim=1024 global_crops_size=28 local_crops_size=14
        local_crops_number=6 drop_path_rate=0) ;;
    *) echo "unknown shape $1" >&2; exit 64 ;;
  esac
}

# The benchmarks' pipeline (bench/lib.sh); every row sets its shape's keys over it.
bench_dino_pipeline "$W/pipeline.yaml" "$W" 64
[ -f "$W/out/bench/mean_and_std_of_dataset.txt" ] || "$PCDINO" meanstd -c "$W/pipeline.yaml" >/dev/null

cores() { seq -s, 0 $(($1 - 1)); }

python_once() {  # python_once THREADS AMP [ENV...]: seconds per step
  env "${@:3}" taskset -c "$(cores "$1")" "$TORCH_PY" "$ROOT/bench/baseline_dino_step.py" "${PY[@]}" \
    --batch "$BATCH" --threads "$1" --steps "$STEPS" --warmup 5 --amp "$2"
}

python_step() {  # python_step THREADS AMP: seconds per step, the faster of libgomp's default and PASSIVE
  if [ -n "$USER_OMP" ]; then
    python_once "$1" "$2" OMP_WAIT_POLICY="$USER_OMP"
  else
    printf '%s\n' "$(python_once "$1" "$2" -u OMP_WAIT_POLICY)" "$(python_once "$1" "$2" OMP_WAIT_POLICY=PASSIVE)" |
      sort -g | head -n 1
  fi
}

pcdino_step() {  # pcdino_step THREADS FP16(true|false): seconds per step of the second epoch
  local model="$W/model" sets=() amp_dtype=()
  [ "$2" = true ] && amp_dtype=(--amp-dtype bfloat16)  # bfloat16 on any CPU, as Python's autocast runs it
  for s in "${SETS[@]}"; do sets+=(--set "train_scDINO.hyperparameters.$s"); done
  rm -rf "$model"
  taskset -c "$(cores "$1")" "$PCDINO" train -c "$W/pipeline.yaml" "${sets[@]}" \
    --set train_scDINO.batch_size_per_gpu="$BATCH" --set train_scDINO.hyperparameters.use_fp16="$2" \
    "${amp_dtype[@]}" --threads "$1" --limit-images $((STEPS * BATCH)) --model-dir "$model" --no-resume --synthetic-crops \
    2>/dev/null
  tail -n 1 "$model/metrics.jsonl" |
    /usr/bin/python3 -c 'import json,sys; print("%.4f" % ('"$BATCH"' / json.load(sys.stdin)["images_per_second"]))'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "# bench/train.sh on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(date -u +%F)," \
  "$("$PCDINO" --version | head -1), median of REPEAT=$REPEAT alternating runs," \
  "OpenMP: ${USER_OMP:-pcdino its own, Python the faster of the libgomp default and PASSIVE}"
printf '%-6s %5s %-9s %7s %14s %14s %10s %10s %9s\n' shape steps precision threads "python s/step" "pcdino s/step" \
  "python i/s" "pcdino i/s" "vs python"
for name in $SHAPES; do
  shape "$name"
  for precision in float32 bfloat16; do
    amp=none fp16=false
    [ "$precision" = bfloat16 ] && amp=bfloat16 fp16=true
    for threads in 1 2; do
      py=() ours=()
      for ((i = 0; i < REPEAT; i++)); do
        py+=("$(python_step "$threads" "$amp")")
        ours+=("$(pcdino_step "$threads" "$fp16")")
      done
      p=$(median "${py[@]}") o=$(median "${ours[@]}")
      awk -v n="$name" -v st="$STEPS" -v pr="$precision" -v t="$threads" -v p="$p" -v o="$o" -v b="$BATCH" -v all="${py[*]} | ${ours[*]}" \
        'BEGIN { printf "%-6s %5s %-9s %7s %14.4f %14.4f %10.1f %10.1f %8.2fx   (%s)\n", n, st, pr, t, p, o, b / p, b / o, p / o, all }'
    done
  done
done
