#!/usr/bin/env bash
# Training throughput of `pcdino train` on one GPU (DINO, vit_tiny, patch 4, 28-px global and six 16-px
# local crops, out_dim 4096, batch BATCH) in float32 and under bfloat16 / float16 autocast (use_fp16),
# against the same step in the PyTorch installed there (bench/baseline_dino_step.py --device cuda, attention
# by F.scaled_dot_product_attention as pcdino's) as the baseline, and that step under torch.compile in each
# of COMPILE_MODES (forward pass and loss as one graph; the compile seconds apart, the steps timed after
# the warm-up steps). Each pcdino row trains 2 epochs of STEPS iterations and reports the second (warm) one;
# the "pcdino train" rows include loading and augmenting Fashion-MNIST on LOADER_THREADS threads, the
# "synthetic" rows train on random crops made once on the GPU (--synthetic-crops), as the baseline does,
# and the "graph" rows also replay each epoch's step as a CUDA graph (--cuda-graph; not float16).
# Student drop_path_rate 0.1 in both (DINO's default). The per-phase times of pcdino's rows are CUDA events
# on the device's timeline (metrics.jsonl says "phase_clock"). A last table gives each synthetic case's
# kernel-time floor: the GPU time of the kernels of a warm epoch's steps (`pcdino train --profile-kernels`,
# and torch.profiler in the baseline: CUPTI's records, what Nsight Systems' kernel summary adds up), per
# step; a step that launches its kernels back to back, the GPU never idle, runs at it.
#
# usage: bench/train_gpu.sh [BUILD_DIR]    environment: STEPS (40), BATCH (256), LOADER_THREADS (14),
#                                          PYTHON (the interpreter with the GPU PyTorch: tests/lib/python.sh),
#                                          FMNIST_SOURCE (the IDX files, default Debian's),
#                                          AMPS ("none bfloat16 float16": autocast types, none = float32),
#                                          CASES ("real synthetic graph"), FLOOR (1: the kernel-time table),
#                                          COMPILE_MODES ("default max-autotune-no-cudagraphs"; "" for none)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="$BUILD/bench-work/train-gpu"
STEPS=${STEPS:-40} BATCH=${BATCH:-256} LOADER_THREADS=${LOADER_THREADS:-14} PYTHON=${PYTHON:-$(torch_python)}
AMPS=${AMPS:-none bfloat16 float16} CASES=${CASES:-real synthetic graph} FLOOR=${FLOOR:-1}
COMPILE_MODES=${COMPILE_MODES-default max-autotune-no-cudagraphs}
export PCDINO_LOG_LEVEL=warn
mkdir -p "$W"

[ -d "$W/fmnist" ] || "$PCDINO" dataset import --source "${FMNIST_SOURCE:-/usr/share/datasets/fashion-mnist}" --out "$W/fmnist" --split all --threads "$(nproc)" >/dev/null
bench_dino_pipeline "$W/pipeline.yaml" "$W" "$BATCH"
[ -f "$W/out/bench/mean_and_std_of_dataset.txt" ] || "$PCDINO" meanstd -c "$W/pipeline.yaml" >/dev/null

row() {  # row CASE AMP SECONDS_PER_STEP [baseline]
  local rate ratio
  rate=$(awk -v s="$3" -v b="$BATCH" 'BEGIN { printf "%.0f", b / s }')
  [ "${4:-}" = baseline ] && BASE=$rate
  ratio=$(awk -v r="$rate" -v b="${BASE:-0}" 'BEGIN { if (b > 0) printf "%.2fx", r / b; else print "-" }')
  printf '%-22s %-9s %8s %9s %8s\n' "$1" "$2" "$3" "$rate" "$ratio"
}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "# bench/train_gpu.sh on $gpu, $(date -u +%F), $("$PCDINO" --version | head -1), torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), batch $BATCH"
printf '%-22s %-9s %8s %9s %8s\n' case autocast s/step images/s "vs base"
# python_step AMP ARGS...: bench/baseline_dino_step.py on the GPU under autocast AMP, STEPS timed after 5.
python_step() {
  local amp=$1
  shift
  "$PYTHON" "$ROOT/bench/baseline_dino_step.py" --device cuda --amp "$amp" --batch "$BATCH" --steps "$STEPS" \
    --warmup 5 --threads 8 "$@" 2>/dev/null
}
for amp in $AMPS; do
  s=$(python_step "$amp")
  if [ "$amp" = none ]; then row "python step (baseline)" float32 "$s" baseline; else row "python step" "$amp" "$s"; fi
  # vision_transformer.py's own attention, the baseline of the figures before issue #61
  row "python, explicit attn" "${amp/none/float32}" "$(python_step "$amp" --attention explicit)"
done
# train_case AMP MODEL FLAGS...: `pcdino train` of the pipeline, 2 epochs of STEPS, autocast AMP (none:
# float32), into the folder MODEL (emptied first).
train_case() {
  local amp=$1 model=$2 fp16=true
  shift 2
  [ "$amp" = none ] && fp16=false
  rm -rf "$model"
  "$PCDINO" train -c "$W/pipeline.yaml" --set "train_scDINO.hyperparameters.use_fp16=$fp16" \
    --amp-dtype "${amp/none/auto}" --loader-threads "$LOADER_THREADS" --limit-images $((STEPS * BATCH)) \
    --model-dir "$model" --no-resume "$@"
}

for amp in $AMPS; do
  for data in $CASES; do
    [ "$data" = graph ] && [ "$amp" = float16 ] && continue  # --cuda-graph refuses float16's loss scaling
    model="$W/model-$amp"
    synthetic=(); [ "$data" = synthetic ] && synthetic=(--synthetic-crops)
    [ "$data" = graph ] && synthetic=(--synthetic-crops --cuda-graph)
    train_case "$amp" "$model" "${synthetic[@]}"
    s=$(tail -n 1 "$model/metrics.jsonl" | "$PYTHON" -c 'import json,sys; print("%.4f" % ('"$BATCH"' / json.load(sys.stdin)["images_per_second"]))')
    case $data in
      real) row "pcdino train" "${amp/none/float32}" "$s" ;;
      synthetic) row "pcdino, synthetic" "${amp/none/float32}" "$s" ;;
      graph) row "pcdino, synth., graph" "${amp/none/float32}" "$s" ;;
    esac
    "$PYTHON" -c '
import json, sys
epochs = [m for m in map(json.loads, open(sys.argv[1])) if "images_per_second" in m]
m = epochs[-1]
print("  (loss %.3f; per step, %s: " % (m["loss"], m.get("phase_clock", "host_clock")) + ", ".join("%s %.4f s" % kv for kv in m["seconds_per_step"].items()) + ")")
if sys.argv[2] == "graph":  # epoch 1 holds the eager warm-up steps and the capture
    print("  (epoch 1, with the warm-up steps and the capture: %.0f images/s)" % epochs[0]["images_per_second"])' \
      "$model/metrics.jsonl" "$data"
  done
done
# The compiled baselines after pcdino's rows: their compiles (minutes for max-autotune) come last under a
# deadline.
for amp in $AMPS; do
  for mode in $COMPILE_MODES; do
    read -r s compile_s <<<"$(python_step "$amp" --compile "$mode" || echo "- -")"
    [ "$s" = - ] && { printf '%-22s %-9s  failed (torch.compile %s)\n' "python, compiled" "${amp/none/float32}" "$mode"; continue; }
    row "python, compiled" "${amp/none/float32}" "$s"
    echo "  (torch.compile mode $mode; compile $compile_s s apart)"
  done
done

# kernel_floor AMP FLAGS...: pcdino's kernel seconds per step over its second epoch (--profile-kernels).
kernel_floor() {
  local amp=$1 model="$W/model-profile"
  shift
  train_case "$amp" "$model" --profile-kernels "$@" >/dev/null 2>&1 || { echo -; return; }
  tail -n 1 "$model/metrics.jsonl" | "$PYTHON" -c 'import json,sys; m = json.load(sys.stdin); print("%.4f" % m["kernel_seconds_per_step"] if "kernel_seconds_per_step" in m else "-")'
}

[ "$FLOOR" = 1 ] || exit 0
echo
echo "# kernel-time floor (the PyTorch profiler's CUDA activities, CUPTI): GPU seconds of the kernels per step"
printf '%-22s %-9s %13s\n' case autocast "kernel s/step"
for amp in $AMPS; do
  printf '%-22s %-9s %13s\n' "python step" "${amp/none/float32}" "$(python_step "$amp" --kernel-floor || echo -)"
  for mode in $COMPILE_MODES; do
    printf '%-22s %-9s %13s  (%s)\n' "python, compiled" "${amp/none/float32}" \
      "$(python_step "$amp" --kernel-floor --compile "$mode" || echo -)" "$mode"
  done
  printf '%-22s %-9s %13s\n' "pcdino, synthetic" "${amp/none/float32}" "$(kernel_floor "$amp" --synthetic-crops)"
  [ "$amp" = float16 ] && continue
  printf '%-22s %-9s %13s\n' "pcdino, synth., graph" "${amp/none/float32}" "$(kernel_floor "$amp" --synthetic-crops --cuda-graph)"
done
