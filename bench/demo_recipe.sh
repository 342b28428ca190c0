#!/usr/bin/env bash
# One training recipe at the demo's budget, judged by kNN: `pcdino train` (one process, THREADS
# LibTorch threads, the demo's global batch: its 2 ranks x batch_size_per_gpu) on the demo's data (1,000 Fashion-MNIST images per
# class from each split), then `pcdino extract` of the teacher and `pcdino knn` on the held-out split,
# beside the same network untrained. Every recipe starts from sbatch/examples/demo.yaml; the arguments
# change it (`--set key=value`, as `pcdino train` takes them; other `pcdino train` options go to training only).
#
# usage: bench/demo_recipe.sh NAME [--set KEY=VALUE ...]
# environment: SEED (40: meta.seed, which also draws the split and the initial weights), THREADS (2),
#              BUILD (build), WORK (BUILD/bench-work/demo-recipe); a slower machine on purpose (the demo's
#              budget on the slow class): CORES (a taskset list: every step runs on these cores only, e.g.
#              0) and LOAD (that many busy loops on CORES while it trains, e.g. 1 to halve one core)
# prints one line: name seed steps seconds loss-by-epoch entropy/KL-of-the-last-epoch online-kNN (before
#                  training, then by epoch) trained-top1 (best k) untrained-top1 (best k) difference, raw
#                  pixels' top1 (best k); then, for a run the time budget cut, the precision choice, the cut
#                  and the schedules' values at the last step beside their ends
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD:-$ROOT/build}"
PCDINO="$BUILD/cli/pcdino"
W="${WORK:-$BUILD/bench-work/demo-recipe}"
NAME="$1"
shift
SEED=${SEED:-40} THREADS=${THREADS:-2} LOAD=${LOAD:-0}
export PCDINO_LOG_LEVEL=${PCDINO_LOG_LEVEL:-warn}
pin=()
[ -n "${CORES:-}" ] && pin=(taskset -c "$CORES")
loads=()
stop_loads() { [ ${#loads[@]} -eq 0 ] || kill "${loads[@]}" 2>/dev/null || true; }
trap stop_loads EXIT
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
"${pin[@]}" "$PCDINO" meanstd -c "$config" >/dev/null
for _ in $(seq "$LOAD"); do
  "${pin[@]}" sh -c 'while :; do :; done' &
  loads+=($!)
done
start=$SECONDS
PCDINO_LOG_LEVEL=info "${pin[@]}" "$PCDINO" train -c "$config" --threads "$THREADS" --no-resume "$@" \
  >"$rundir.train.log" 2>&1 || { tail -20 "$rundir.train.log"; exit 1; }
seconds=$((SECONDS - start))
stop_loads
loads=()
"${pin[@]}" "$PCDINO" extract -c "$config" --threads "$THREADS" --no-csv >/dev/null
"${pin[@]}" "$PCDINO" knn -c "$config" >/dev/null
bench_sets "$@"
bench_knn_baselines "$PCDINO" "$config" "$rundir" "$run" --threads "$THREADS"
/usr/bin/python3 - "$NAME" "$SEED" "$seconds" "$rundir" "$W/out/$run-untrained/kNN/knn.json" \
  "$W/out/$run-raw-pixels/kNN/knn.json" "$rundir.train.log" <<'PY'
import glob, json, re, sys
name, seed, seconds, rundir, untrained, raw, log = sys.argv[1:]
records = [json.loads(l) for l in open(glob.glob(rundir + "/scDINO_ViTs/*/metrics.jsonl")[0])]
epochs = [r for r in records if r.get("record") == "epoch"]
steps = max(r["iteration"] for r in records if r.get("record") == "iteration")
def best(path):
    r = max(json.load(open(path))["results"], key=lambda x: x["top1"])
    return r["top1"], r["k"]
t, tk = best(rundir + "/kNN/knn.json")
u, uk = best(untrained)
online = " ".join("%.1f" % r["online_knn_top1"] for r in records if "online_knn_top1" in r) or "-"
r, rk = best(raw)
print("%-28s seed %-3s steps %4d %5ss loss %s H %.2f KL %.3f online %s | trained %.2f (k %d) untrained %.2f (k %d) diff %+.2f raw %.2f (k %d)"
      % (name, seed, steps, seconds, " ".join("%.3f" % e["loss"] for e in epochs), epochs[-1]["teacher_entropy"],
         epochs[-1]["kl"], online, t, tk, u, uk, t - u, r, rk))
for line in open(log):
    if "use_fp16 on the CPU" in line or "time_budget_minutes" in line:
        print("  " + re.sub(r"^\[[^]]*\] (\[[^]]*\] )?\[info\] ", "", line.strip()))
last = [r for r in records if r.get("record") == "iteration"][-1]
print("  last step %d: lr %.3g wd %.4f momentum %.6f" % (last["iteration"], last["lr"], last["wd"], last["momentum"]))
PY
