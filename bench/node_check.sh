#!/usr/bin/env bash
# The node check's cost as Slurm's prolog (issue #60): on the three-node local cluster (each node a mount
# namespace with the shared folder mounted), the wrapper Slurm runs is run RUNS times (default 20) on node1 as
# slurmd runs a prolog (in the node's namespace, with only SLURMD_NODENAME, SLURM_JOB_ID and SLURM_CONF), and
# timed from start to exit; then the p50 and p95 of that wall time and of each probe's own time (the report's
# JSON). A healthy node's prolog is on the critical path of every job: the target is a p50 under 10 s.
# Then one real job's prolog as slurmd ran it, from sbatch to the batch script's first line. Needs a build.
# HOSTILE=1 (issue #70): first an unprivileged user puts a FIFO, a link to /dev/zero, a 64 GiB sparse file and
# 100 forged metrics files into the textfile folder under the names the check reads, and fills nothing.
set -u
root="$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)"
export PCDINO_SOURCE_DIR="$root" PCDINO_BUILD_DIR="${PCDINO_BUILD_DIR:-$root/build}"
export PCDINO_BIN="$PCDINO_BUILD_DIR/cli/pcdino"
source "$root/tests/lib/assert.sh"
source "$root/tests/lib/cluster.sh"
RUNS=${RUNS:-20}
W="${NODE_CHECK_DIR:-$PCDINO_BUILD_DIR/node-check-bench}"
rm -rf "$W" && mkdir -p "$W/fsx" "$W/reports"
export LOCAL_CLUSTER_NODES=3 LOCAL_CLUSTER_SHARED="$W/fsx" LOCAL_CLUSTER_HEALTH_CHECK_INTERVAL=3600
cluster_up "$W/cluster" 19417
if [ "${HOSTILE:-0}" = 1 ]; then
  source "$root/tests/lib/users.sh"
  test_users
  T="$LOCAL_CLUSTER_DIR/textfile"
  chmod 1777 "$T"
  as "$USER_A" sh -c "mkfifo '$T/pcdino_node_check_node1.prom' && ln -s /dev/zero '$T/pcdino_1_0.prom' &&
    truncate -s 64G '$T/pcdino_2_0.prom' &&
    for i in \$(seq 100); do printf 'pcdino_build_info{stage=\"doctor\",node=\"node1\"} 1\n' >'$T/pcdino_9\$i.prom'; done" ||
    fatal "cannot plant the user's files in $T"
  echo "user $USER_A's FIFO, link, sparse file and 100 forged files in $T"
fi
for ((i = 1; i <= RUNS; i++)); do
  start=$(date +%s.%N)
  in_node node1 env -i SLURMD_NODENAME=node1 SLURM_JOB_ID=$((1000 + i)) SLURM_CONF="$SLURM_CONF" \
    "$LOCAL_CLUSTER_DIR/etc/node-check" >/dev/null 2>&1 || fatal "the node check failed on a healthy node1"
  end=$(date +%s.%N)
  cp "$LOCAL_CLUSTER_DIR/log/node-check-node1.json" "$W/reports/$i.json"
  echo "$start $end" >>"$W/reports/wall.txt"
done
/usr/bin/python3 - "$W/reports" "$RUNS" <<'PY'
import json, os, statistics, sys
folder, runs = sys.argv[1], int(sys.argv[2])
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]
wall = [float(b) - float(a) for a, b in (l.split() for l in open(os.path.join(folder, "wall.txt")))]
probes, inside = {}, []
for i in range(1, runs + 1):
    r = json.load(open(os.path.join(folder, f"{i}.json")))
    inside.append(r["seconds"])
    for c in r["checks"]:
        probes.setdefault(c["name"], []).append(c["seconds"])
print(f"{'what':<34} {'p50 (s)':>9} {'p95 (s)':>9}   ({runs} runs)")
print(f"{'prolog, exec to exit (wall)':<34} {pct(wall, .5):>9.3f} {pct(wall, .95):>9.3f}")
print(f"{'the check inside pcdino':<34} {pct(inside, .5):>9.3f} {pct(inside, .95):>9.3f}")
for name, xs in probes.items():
    print(f"{'  probe ' + name:<34} {pct(xs, .5):>9.3f} {pct(xs, .95):>9.3f}")
PY
# One job end to end: from submission to its batch script, the prolog on both nodes in between.
t0=$(date +%s.%N)
job=$(sbatch --parsable -N2 -o "$W/job_%j.out" --wrap 'date +%s.%N')
wait_job "$job" 60
awk -v t0="$t0" '{ printf "sbatch to the batch script of a 2-node job (prolog on both, PrologFlags=Alloc): %.2f s\n", $1 - t0 }' \
  "$W/job_$job.out"
cluster_down
