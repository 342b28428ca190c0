#!/usr/bin/env bash
# The Fashion-MNIST GPU recipe (issue #49): sbatch/examples/fashion-mnist-gpu.yaml trained for MINUTES on
# one GPU (train_scDINO.time_budget_minutes: the steps that fit, its schedules ending at the last of
# them; start-up and the online kNN count as spent), with the step captured as a CUDA graph where the
# precision allows it, then the kNN stage on the teacher's CLS features beside the same network untrained
# and the raw pixels, on the same split and by the same kNN (held-out split: 80% bank, 20% queries).
# Prints the curve (the teacher's online kNN top-1 every KNN_EVERY epochs on ONLINE_KNN_IMAGES held-out
# images: seconds since the start, epoch, iterations) and the three kNN rows by k.
#
# usage: bench/fashion_mnist_gpu.sh [BUILD_DIR] [--set KEY=VALUE | other `pcdino train` option ...]
# environment: MINUTES (6), KNN_EVERY (1), ONLINE_KNN_IMAGES (10000), GRAPH (auto: --cuda-graph on a GPU unless the precision is
#              float16; 0: never), LOADER_THREADS (the cores), FMNIST_SOURCE (the IDX files, default
#              Debian's), PYTHON (a python3), WORK (BUILD_DIR/bench-work/fashion-mnist-gpu)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  BUILD="$1"
  shift
fi
PCDINO="$BUILD/cli/pcdino"
W="${WORK:-$BUILD/bench-work/fashion-mnist-gpu}"
MINUTES=${MINUTES:-6} KNN_EVERY=${KNN_EVERY:-1} ONLINE_KNN_IMAGES=${ONLINE_KNN_IMAGES:-10000} GRAPH=${GRAPH:-auto} LOADER_THREADS=${LOADER_THREADS:-$(nproc)}
PYTHON=${PYTHON:-python3}
export PCDINO_LOG_LEVEL=${PCDINO_LOG_LEVEL:-warn}
mkdir -p "$W"

data="$W/fashion-mnist"
if [ ! -d "$data" ]; then
  "$PCDINO" dataset import --source "${FMNIST_SOURCE:-/usr/share/datasets/fashion-mnist}" --split all \
    --out "$data.tmp" --threads "$(nproc)" >/dev/null
  mv "$data.tmp" "$data"
fi
config="$W/fashion-mnist-gpu.yaml"
sed -e "s|/fsx/fashion-mnist|$data|" -e "s|/fsx/output|$W/out|" "$ROOT/sbatch/examples/fashion-mnist-gpu.yaml" >"$config"
run="$W/out/fashion-mnist-gpu"
rm -rf "$run"
"$PCDINO" meanstd -c "$config" >/dev/null

graph=()
if [ "$GRAPH" != 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  # auto's precision on a GPU: bfloat16 from compute capability 8.0 (the graph's), float16 before it
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  if [ "$GRAPH" = 1 ] || [ "${cc%%.*}" -ge 8 ] 2>/dev/null; then graph=(--cuda-graph); fi
fi
start=$SECONDS
PCDINO_LOG_LEVEL=info "$PCDINO" train -c "$config" --no-resume --loader-threads "$LOADER_THREADS" "${graph[@]}" \
  --set "train_scDINO.time_budget_minutes=$MINUTES" --set "train_scDINO.hyperparameters.online_knn_every=$KNN_EVERY" \
  --set "train_scDINO.hyperparameters.online_knn_images=$ONLINE_KNN_IMAGES" "$@" >"$run.train.log" 2>&1 || { tail -20 "$run.train.log"; exit 1; }
seconds=$((SECONDS - start))
bench_sets "$@"
"$PCDINO" extract -c "$config" "${BENCH_SETS[@]}" --no-csv >/dev/null
"$PCDINO" knn -c "$config" "${BENCH_SETS[@]}" >/dev/null
bench_knn_baselines "$PCDINO" "$config" "$run" fashion-mnist-gpu

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
echo "# bench/fashion_mnist_gpu.sh on ${gpu:-$(nproc) CPU cores}, $(date -u +%F), $("$PCDINO" --version | head -1)," \
  "MINUTES=$MINUTES ${graph[*]} $*"
"$PYTHON" - "$run" "$seconds" "$W/out" <<'PY'
import glob, json, re, sys
from datetime import datetime
run, seconds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
records = [json.loads(l) for l in open(glob.glob(run + "/scDINO_ViTs/*/metrics.jsonl")[0])]
stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]")
knn = re.compile(r"epoch (\d+)/(\d+): online kNN top-1 ([0-9.]+)% \((\d+) held-out images, k (\d+)")
first = None
curve = []
for line in open(run + ".train.log"):
    m = stamp.match(line)
    if not m:
        continue
    t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f")
    first = first or t
    if k := knn.search(line):
        curve.append(((t - first).total_seconds(), int(k.group(1)), float(k.group(3))))
        held_out, kk = k.group(4), k.group(5)
iterations = {r["epoch"]: r["iteration"] for r in records if r.get("record") == "iteration"}
start = next((r["online_knn_top1"] for r in records if r.get("record") == "start"), None)
epochs = [r for r in records if r.get("record") == "epoch"]
print(f"train: {seconds} s, {len(epochs)} epochs, last loss {epochs[-1]['loss']:.4f}, "
      f"{sum(e['images_per_second'] for e in epochs) / len(epochs):.0f} images/s (mean over epochs)")
if curve:
    print(f"# the curve: online kNN top-1 of the teacher (k {kk}, {held_out} held-out images)")
    print("seconds  epoch  iterations  top-1")
    if start is not None:
        print(f"{0:7.0f}  {0:5d}  {0:10d}  {start:5.2f}  (untrained)")
    for s, e, top1 in curve:
        print(f"{s:7.0f}  {e:5d}  {iterations.get(e - 1, 0):10d}  {top1:5.2f}")
def results(path):
    return {r["k"]: r["top1"] for r in json.load(open(path))["results"]}
rows = [("trained", results(run + "/kNN/knn.json")),
        ("untrained", results(out + "/fashion-mnist-gpu-untrained/kNN/knn.json")),
        ("raw pixels", results(out + "/fashion-mnist-gpu-raw-pixels/kNN/knn.json"))]
ks = sorted(rows[0][1])
print("# kNN top-1 (pcdino knn: the held-out split, 80% bank, 20% queries)")
print("features    " + "".join(f"{'k=' + str(k):>8}" for k in ks))
for name, r in rows:
    print(f"{name:<12}" + "".join(f"{r.get(k, float('nan')):8.2f}" for k in ks))
PY
