#!/usr/bin/env bash
# Part 1 of tests/train/test_node_failure.sh (node2's slurmd, slurmstepd and rank killed with SIGKILL after
# the second checkpoint, on the three-node local cluster at 10 s node-failure timings) with the demo's model
# and recipe (sbatch/examples/demo.yaml) on 100 Fashion-MNIST images per class; prints the job's restart as
# `pcdino status` shows it and whether its checkpoint equals an uninterrupted run's (bench/RESULTS.md,
# issue #39). Needs a build (scripts/build); work folder NODE_FAILURE_DIR (default build/node-failure-demo).
set -u
root="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
export PCDINO_SOURCE_DIR="$root" PCDINO_BUILD_DIR="${PCDINO_BUILD_DIR:-$root/build}"
export PCDINO_BIN="$PCDINO_BUILD_DIR/cli/pcdino"
source "$root/tests/lib/assert.sh"
source "$root/tests/lib/python.sh"
source "$root/tests/lib/cluster.sh"
source "$root/tests/lib/pipeline.sh"
W="${NODE_FAILURE_DIR:-$PCDINO_BUILD_DIR/node-failure-demo}"
rm -rf "$W" && mkdir -p "$W/jobs"
P=$PCDINO_BIN
"$P" dataset import --source /usr/share/datasets/fashion-mnist --per-class 100 --out "$W/data" >/dev/null
sed -e "s|^  output_dir: \"\"|  output_dir: \"$W/out\"|" -e "s|^  dataset_dir: \"\"|  dataset_dir: \"$W/data\"|" \
  "$root/sbatch/examples/demo.yaml" >"$W/demo.yaml"
export LOCAL_CLUSTER_NODES=3 LOCAL_CLUSTER_NODE_FAILURE=10
cluster_up "$W/cluster" 19317
cd "$W" || exit 1
run "$P" meanstd -c demo.yaml --threads 1; assert_rc 0 meanstd
run "$P" submit demo.yaml --stages train,extract,labels,knn,plots; assert_rc 0 submit
RUN="$W/out/demo"; job=$(job_of train); err="$RUN/logs/train_err_$job.err"
wait_for 1200 epochs_logged "$RUN" 2 || fatal "no two epochs"
sleep "$((RANDOM % 5)).$((RANDOM % 10))"
rank=""; wait_for 30 eval 'rank=$(node_pids node2); [ -n "$rank" ]' || fatal "no rank on node2"
kill -KILL "$(<"$LOCAL_CLUSTER_DIR/run/slurmd-node2.pid")" "$(ps -o ppid= "$rank" | tr -d ' ')" "$rank"
echo "killed at $(date -Is) ($(grep -c 'rank 0/.*iteration' "$err") progress lines of rank 0)"
wait_all 3600
run "$P" status demo.yaml; echo "$OUT"
grep "^pcdino\|resuming from\|srun: error" "$err"
run sbatch --parsable --wait -N2 -n2 --cpus-per-task=1 -o "$W/jobs/uninterrupted_%j.out" --wrap \
  "srun --mpi=pmix '$P' train -c '$W/demo.yaml' --threads 1 --model-dir '$W/uninterrupted'"
assert_rc 0 uninterrupted
torch_py - "$RUN/scDINO_ViTs/dino_vit/checkpoint.pth" "$W/uninterrupted/checkpoint.pth" <<'PY'
import sys, torch
a, b = (torch.load(p, map_location="cpu") for p in sys.argv[1:3])
same = a["epoch"] == b["epoch"] and torch.equal(a["dino_loss"]["center"], b["dino_loss"]["center"])
for key in ("student", "teacher"):
    same = same and a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])
print("identical" if same else "different", a["epoch"], a["args"].get("slurm_restart_count"), a["args"].get("writer"))
PY
head -n 5 "$RUN/kNN/global_kNN.txt"
cluster_down
