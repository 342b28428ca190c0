#!/usr/bin/env bash
# One training recipe at the demo's budget, judged by kNN: `pcdino train` (one process, THREADS
# LibTorch threads, the demo's global batch: its 2 ranks x batch_size_per_gpu) on the demo's data (1,000 Fashion-MNIST images per
# class from each split), then `pcdino extract` of the teacher and `pcdino knn` on the held-out split,
# beside the same network untrained. Every recipe starts from sbatch/examples/demo.yaml; the arguments
# change it (`--set key=value`, as `pcdino train` takes them; other `pcdino train` options go to training only).
#
# usage: bench/demo_recipe.sh NAME [--set KEY=VALUE ...]
# environment: SEED (40: meta.seed, which also draws the split and the initial weights), THREADS (2),
#              BUILD (build), WORK (BUILD/bench-work/demo-recipe)
# prints one line: name seed steps seconds loss-by-epoch entropy/KL-of-the-last-epoch online-kNN (before
#                  training, then by epoch) trained-top1 (best k) untrained-top1 (best k) difference
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="${WORK:-$BUILD/bench-work/demo-recipe}"
NAME="$1"
shift
SEED=${SEED:-40} THREADS=${THREADS:-2}
export PCDINO_LOG_LEVEL=${PCDINO_LOG_LEVEL:-warn}
mkdir -p "$W"

data="$W/fashion-mnist-1000"
if [ ! -d "$data" ]; then
  "$PCDINO" dataset import --source /usr/share/datasets/fashion-mnist --per-class 1000 --out "$data.tmp" >/dev/null
  mv "$data.tmp" "$data"
fi
run="$NAME-s$SEED"
per_rank=$(sed -n 's/^  batch_size_per_gpu: \([0-9]*\).*/\1/p' "$ROOT/sbatch/examples/demo.yaml")
config="$W/$run.yaml"
sed -e "s|^  output_dir: \"\"|  output_dir: \"$W/out\"|" -e "s|^  dataset_dir: \"\"|  dataset_dir: \"$data\"|" \
  -e "s|^  name_of_run: demo|  name_of_run: $run|" -e "s|^  seed: 40|  seed: $SEED|" \
  -e "s|^  nnodes: 2 .*|  nnodes: 1|" -e "s|^  batch_size_per_gpu: $per_rank|  batch_size_per_gpu: $((2 * per_rank))|" \
  "$ROOT/sbatch/examples/demo.yaml" >"$config"
rundir="$W/out/$run"
rm -rf "$rundir"
"$PCDINO" meanstd -c "$config" >/dev/null
start=$SECONDS
"$PCDINO" train -c "$config" --threads "$THREADS" --no-resume "$@" >/dev/null
seconds=$((SECONDS - start))
"$PCDINO" extract -c "$config" --threads "$THREADS" --no-csv >/dev/null
"$PCDINO" knn -c "$config" >/dev/null
# The same network untrained (the --set arguments may change its architecture; the others are train's).
sets=()
while [ $# -gt 0 ]; do
  [ "$1" = --set ] && [ $# -gt 1 ] && sets+=(--set "$2") && shift
  shift
done
"$PCDINO" extract -c "$config" "${sets[@]}" --random-init --threads "$THREADS" --no-csv --output "$rundir/untrained.h5" >/dev/null
"$PCDINO" knn -c "$config" "${sets[@]}" --features "$rundir/untrained.h5" --name-of-run "$run-untrained" >/dev/null
/usr/bin/python3 - "$NAME" "$SEED" "$seconds" "$rundir" "$W/out/$run-untrained/kNN/knn.json" <<'PY'
import glob, json, sys
name, seed, seconds, rundir, untrained = sys.argv[1:]
records = [json.loads(l) for l in open(glob.glob(rundir + "/scDINO_ViTs/*/metrics.jsonl")[0])]
epochs = [r for r in records if r.get("record") == "epoch"]
steps = max(r["iteration"] for r in records if r.get("record") == "iteration")
def best(path):
    r = max(json.load(open(path))["results"], key=lambda x: x["top1"])
    return r["top1"], r["k"]
t, tk = best(rundir + "/kNN/knn.json")
u, uk = best(untrained)
online = " ".join("%.1f" % r["online_knn_top1"] for r in records if "online_knn_top1" in r) or "-"
print("%-28s seed %-3s steps %4d %5ss loss %s H %.2f KL %.3f online %s | trained %.2f (k %d) untrained %.2f (k %d) diff %+.2f"
      % (name, seed, steps, seconds, " ".join("%.3f" % e["loss"] for e in epochs), epochs[-1]["teacher_entropy"],
         epochs[-1]["kl"], online, t, tk, u, uk, t - u))
PY
