#!/usr/bin/env bash
# pcdino against DINO's own code, side by side on one GPU: the same Fashion-MNIST split (seed 40, 80/20),
# model (sbatch/examples/fashion-mnist-gpu.yaml: vit_tiny, patch 4, 28/16-px crops, six local crops, out_dim
# 4096, batch 256), hyperparameters, epochs and precision (float16 autocast with loss scaling, DINO's
# use_fp16). DINO trains with facebookresearch/dino's main_dino.train_dino through bench/dino_reference.py
# (which says what it replaces: dataset, augmentation, ViT input size); pcdino with `pcdino train`. Both
# teachers are then scored by one evaluation (DINO's eval_knn.knn_classifier over their CLS features, the
# training split as bank, the held-out split as queries), beside the untrained network and the raw pixels;
# pcdino's own kNN stage is printed too. Prints each epoch's seconds, images/s and loss for both.
#
# usage: bench/dino_parity.sh [BUILD_DIR]
# environment: DINO_DIR (required: a checkout of facebookresearch/dino, or its files with the commit in a COMMIT
#   file; measured with 7c446df, 2023-04-27),
#   EPOCHS (8), WARMUP_EPOCHS (1), WORKERS (DINO's DataLoader workers, 8), LOADER_THREADS (pcdino's, 8),
#   PHASES ("prepare dino pcdino eval": run some, e.g. to overlap DINO with a build), PYTHON (the
#   interpreter with the GPU PyTorch and torchvision), FMNIST_SOURCE (the IDX files, default Debian's),
#   W (work folder, default BUILD_DIR/bench-work/dino-parity); for a check without a GPU: SET (more
#   KEY=VALUE overrides), AMP (pcdino's --amp-dtype, float16), DINO_FLAGS (e.g. --cpu-smoke)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="${W:-$BUILD/bench-work/dino-parity}"
: "${DINO_DIR:?DINO_DIR must name a checkout of facebookresearch/dino}"
EPOCHS=${EPOCHS:-8} WARMUP_EPOCHS=${WARMUP_EPOCHS:-1} WORKERS=${WORKERS:-8} LOADER_THREADS=${LOADER_THREADS:-8}
PHASES=${PHASES:-prepare dino pcdino eval} PYTHON=${PYTHON:-$(torch_python)} AMP=${AMP:-float16}
read -r -a sets <<<"${SET:-}"
read -r -a dino_flags <<<"${DINO_FLAGS:-}"
RUN=$W/out/fashion-mnist-parity
MEAN_STD=$RUN/mean_and_std_of_dataset.txt
export PCDINO_LOG_LEVEL=${PCDINO_LOG_LEVEL:-warn}
mkdir -p "$W"
has() { [[ " $PHASES " == *" $1 "* ]]; }
# dino_commit: DINO_DIR's commit when it is a checkout of its own (not a copy inside another repository),
# else the first line of its COMMIT file, else its path.
dino_commit() {
  local top
  top=$(git -C "$DINO_DIR" rev-parse --show-toplevel 2>/dev/null || true)
  if [ -n "$top" ] && [ "$top" = "$(cd "$DINO_DIR" && pwd -P)" ]; then git -C "$DINO_DIR" rev-parse --short HEAD
  elif [ -f "$DINO_DIR/COMMIT" ]; then head -c 7 "$DINO_DIR/COMMIT"
  else echo "$DINO_DIR"; fi
}

if has prepare; then
  [ -d "$W/fmnist" ] || "$PCDINO" dataset import --source "${FMNIST_SOURCE:-/usr/share/datasets/fashion-mnist}" \
    --out "$W/fmnist" --split all --threads "$(nproc)" >/dev/null
  sed -e "s|/fsx/fashion-mnist|$W/fmnist|; s|/fsx/output|$W/out|; s|name_of_run: .*|name_of_run: fashion-mnist-parity|" \
    "$ROOT/sbatch/examples/fashion-mnist-gpu.yaml" >"$W/example.yaml"
  # One effective file for both sides: DINO's cosine schedules need warmup_epochs <= epochs.
  "$PCDINO" config -c "$W/example.yaml" --set "train_scDINO.epochs=$EPOCHS" \
    --set "train_scDINO.hyperparameters.warmup_epochs=$WARMUP_EPOCHS" \
    --set train_scDINO.hyperparameters.online_knn_every=0 "${sets[@]/#/--set=}" >"$W/parity.yaml"
  [ -f "$MEAN_STD" ] || "$PCDINO" meanstd -c "$W/parity.yaml" >/dev/null
fi

if has dino; then
  rm -rf "$W/dino"
  "$PYTHON" "$ROOT/bench/dino_reference.py" train --dino "$DINO_DIR" --config "$W/parity.yaml" \
    --mean-std "$MEAN_STD" --out "$W/dino" --workers "$WORKERS" "${dino_flags[@]}" >"$W/dino.log" 2>&1 ||
    { tail -20 "$W/dino.log"; exit 1; }
fi

if has pcdino; then
  rm -rf "$RUN/scDINO_ViTs" "$RUN/CLS_features" "$RUN/kNN"
  "$PCDINO" train -c "$W/parity.yaml" --amp-dtype "$AMP" --loader-threads "$LOADER_THREADS" --no-resume
  "$PCDINO" extract -c "$W/parity.yaml" >/dev/null
  "$PCDINO" labels -c "$W/parity.yaml" >/dev/null
  "$PCDINO" knn -c "$W/parity.yaml" >/dev/null
fi

if has eval; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo "no GPU")
  echo "# bench/dino_parity.sh on $gpu, $(date -u +%F), $("$PCDINO" --version | head -1), torch" \
    "$("$PYTHON" -c 'import torch; print(torch.__version__)'), DINO $(dino_commit), $EPOCHS epochs"
  "$PYTHON" - "$W/dino/epochs.jsonl" "$RUN/scDINO_ViTs/dino_vit/metrics.jsonl" <<'EOF'
import json, sys
dino = [json.loads(l) for l in open(sys.argv[1])]
pc = [m for m in map(json.loads, open(sys.argv[2])) if m.get("record") == "epoch"]
print("%-6s %24s %24s" % ("epoch", "DINO: images/s, loss", "pcdino: images/s, loss"))
for i in range(max(len(dino), len(pc))):
    d = "%9.0f %9.4f" % (dino[i]["images_per_second"], dino[i]["loss"]) if i < len(dino) else "-"
    q = "%9.0f %9.4f" % (pc[i]["images_per_second"], pc[i]["loss"]) if i < len(pc) else "-"
    print("%-6d %24s %24s" % (i + 1, d, q))
EOF
  "$PYTHON" "$ROOT/bench/dino_reference.py" eval --dino "$DINO_DIR" --config "$W/parity.yaml" --mean-std "$MEAN_STD" \
    --checkpoint "pcdino=$RUN/scDINO_ViTs/dino_vit/checkpoint.pth" --checkpoint "dino=$W/dino/checkpoint.pth" \
    --json "$W/parity.json"
  echo "# pcdino's own kNN stage on its teacher (kNN/knn.json):"
  "$PYTHON" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":"))[:600])' "$RUN/kNN/knn.json"
fi
