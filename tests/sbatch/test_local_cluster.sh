#!/usr/bin/env bash
# Integration: the local Slurm cluster runs real jobs. Brings it up, checks two idle nodes, runs a
# three-job --dependency=afterok chain and a two-node srun job, checks from the jobs' own output files that
# they ran in order and on both nodes, then brings it down and checks that no daemon it started is left. The
# node check is its prolog and health check; `replace` brings back only a drained node.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"

LC="$PCDINO_SOURCE_DIR/sbatch/local-cluster"
# 86 characters deep, as deep as munged's socket allows: a step's socket under DIR/spool would be too long
# for a socket path (107 characters; CI's checkout, 6 characters longer than /work/main, met it from job 10 on).
DIR="$PCDINO_BUILD_DIR/test-clusters/local_cluster"
rm -rf "$DIR"
pad=$((86 - ${#DIR} - 1))
[ "$pad" -le 0 ] || DIR+="/$(printf 'd%.0s' $(seq "$pad"))"
export LOCAL_CLUSTER_DIR="$DIR" LOCAL_CLUSTER_PORT=${TEST_CLUSTER_PORT:-17817}
trap '"$LC" down >/dev/null 2>&1' EXIT
# Slurm 26.05's HealthCheckTimeout (issue #74): set where the slurmd has it, so that the node check's limit is
# seen to follow it; earlier releases' fixed 60 s otherwise.
release=$(slurm_release)
newest=$(slurm_at_least 26.05 && echo yes || echo no)
[ "$newest" = no ] || export LOCAL_CLUSTER_HEALTH_CHECK_TIMEOUT=50

run "$LC" up
assert_rc 0 "local-cluster up"
[ "$RC" -eq 0 ] || fatal "cannot continue without a cluster"

eval "$("$LC" env)"
assert_eq "$SLURM_CONF" "$DIR/etc/slurm.conf" "env exports SLURM_CONF"
spool=$(scontrol show config | sed -n 's/^SlurmdSpoolDir *= *//p')
assert_eq "$(readlink -f "${spool%/%n}")" "$DIR/spool" "Slurm's spool, $spool, is DIR's (${#DIR} characters deep)"
socket="${spool/\%n/node8}/node8_67043328.4294967291"  # the longest step socket name of up to 8 nodes and jobs
assert_eq "$([ ${#socket} -le 107 ] && echo fits)" fits "a step's socket there fits a socket path: $socket"
run sinfo -h -N -o '%N %T'
assert_eq "$OUT" $'node1 idle\nnode2 idle' "sinfo lists two idle nodes"

run "$LC" up
assert_rc 0 "a second 'up' is harmless"
assert_contains "$ERR" "already up" "a second 'up' starts nothing"

run "$LC" --port $((LOCAL_CLUSTER_PORT + 100)) up
assert_rc 64 "'up' with another port while running is refused"
assert_contains "$ERR" "is running with port=$LOCAL_CLUSTER_PORT nodes=2" "the message says how it runs"

# pcdino's node check is the cluster's Prolog and HealthCheckProgram (issue #60), slurmd ran it at start.
if [ -n "${PCDINO_BIN:-}" ]; then
  run scontrol show config
  assert_contains "$OUT" "HealthCheckProgram      = $DIR/etc/node-check" "the node check is the HealthCheckProgram"
  assert_contains "$(grep -E '^(Prolog|PrologFlags) ' <<<"$OUT")" "Alloc,DeferBatch" "and the prolog, at allocation"
  assert_contains "$(cat "$DIR/log/node-check-node2.json" 2>/dev/null)" '"verdict": "ok"' "node2's first check passed"
  # The health check's limit: HealthCheckTimeout on 26.05 and later, and only there; Slurm's fixed 60 s before.
  limit=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%g s: %s" % (r["limit_seconds"], r["limit"]))' \
    "$DIR/log/node-check-node2.json" 2>&1)
  if [ "$newest" = yes ]; then
    assert_contains "$OUT" "HealthCheckTimeout      = 50 sec" "Slurm $release runs the health check within the cluster's HealthCheckTimeout"
    assert_eq "$limit" "50 s: HealthCheckTimeout of Slurm $release" "and so does the node check, saying so"
  else
    assert_not_contains "$(grep -v '^#' "$DIR/etc/slurm.conf")" "HealthCheckTimeout" "no HealthCheckTimeout for Slurm $release, which refuses it"
    assert_eq "$limit" "60 s: Slurm $release's fixed limit for a HealthCheckProgram" "the node check runs within Slurm $release's fixed limit"
  fi
fi
# replace plays ParallelCluster's clustermgtd, which replaces only a drained or down node.
run "$LC" replace node2
assert_rc 76 "replace refuses a node in service"
assert_contains "$ERR" "node2 is IDLE: clustermgtd replaces only a drained or down node" "saying why"
run "$LC" replace node9
assert_rc 64 "replace refuses a node the cluster does not have"
scontrol update NodeName=node2 State=DRAIN Reason="a test"
run "$LC" replace node2
assert_rc 0 "a drained node is replaced: $ERR"
assert_eq "$(sinfo -h -n node2 -o %T)" "idle" "and back in service"

pids_before=$(cat "$DIR"/run/*.pid | sort)
assert_eq "$(echo "$pids_before" | wc -l)" 4 "four daemons recorded (munged, slurmctld, 2 slurmd)"

# --- a dependency chain A -> B -> C; each job records when it started and ended, and checks that its
# predecessor's output is complete.
JOBS="$DIR/jobs"
mkdir -p "$JOBS"
cd "$JOBS" || fatal "no $JOBS"
stage() {  # stage NAME PREDECESSOR: the batch script of one link of the chain
  cat <<SCRIPT
#!/bin/bash
echo "start \$(date +%s.%N) \$SLURMD_NODENAME"
if [ -n "$2" ]; then grep -q '^end ' "$JOBS/$2.out" || { echo "predecessor $2 not finished"; exit 1; }; fi
sleep 1
echo "end \$(date +%s.%N)"
SCRIPT
}
a=$(stage A "" | sbatch --parsable -J chainA -o "$JOBS/A.out")
b=$(stage B A | sbatch --parsable -J chainB -o "$JOBS/B.out" --dependency=afterok:"$a")
c=$(stage C B | sbatch --parsable -J chainC -o "$JOBS/C.out" --dependency=afterok:"$b")
# --- a two-node job: one task per node through srun, one line per task.
d=$(sbatch --parsable -J twonode -N2 -n2 -o "$JOBS/D.out" \
  --wrap 'srun -N2 -n2 --ntasks-per-node=1 bash -c "echo task \$SLURM_PROCID on \$SLURMD_NODENAME"')
[[ "$a$b$c$d" =~ ^[0-9]+$ ]] || fatal "sbatch did not return job ids: '$a' '$b' '$c' '$d'"
pass "submitted jobs $a $b $c $d"

deadline=$((SECONDS + 180))
while [ -n "$(squeue -h -o %i)" ] && [ $SECONDS -lt $deadline ]; do sleep 1; done
assert_eq "$(squeue -h -o %i)" "" "all jobs left the queue"

for job in "$a" "$b" "$c" "$d"; do
  info=$(scontrol show job "$job")
  assert_contains "$info" "JobState=COMPLETED" "job $job completed"
  assert_contains "$info" "ExitCode=0:0" "job $job exit code 0"
done

a_end=$(awk '/^end/ {print $2}' A.out)
b_start=$(awk '/^start/ {print $2}' B.out)
b_end=$(awk '/^end/ {print $2}' B.out)
c_start=$(awk '/^start/ {print $2}' C.out)
in_order=$(awk -v a="$a_end" -v b="$b_start" -v be="$b_end" -v c="$c_start" \
  'BEGIN { print (a != "" && b != "" && c != "" && a <= b && be <= c) ? "yes" : "no" }')
assert_eq "$in_order" yes "chain ran in order (A ended $a_end <= B started $b_start; B ended $b_end <= C started $c_start)"

assert_eq "$(sort D.out)" $'task 0 on node1\ntask 1 on node2' "srun -N2 ran one task on each node"

# --- down stops exactly what was started.
run "$LC" status
assert_rc 0 "status while up"
assert_contains "$OUT" "node2" "status prints sinfo's node lines"
# down stops every daemon it has a record of, even when told fewer nodes than it started.
run "$LC" --nodes 1 down
assert_rc 0 "local-cluster down"
left=""
for pid in $pids_before; do
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
  if [ -n "$state" ] && [ "$state" != Z ]; then left="$left $pid"; fi
done
assert_eq "$left" "" "no daemon started by 'up' is left running"
run pgrep -f -- "$DIR/"
assert_eq "$OUT" "" "no process names the cluster's directory"
if [ -L "${spool%/spool/%n}" ]; then fail "down left the link ${spool%/spool/%n}"; else pass "down removed the spool's link"; fi
run "$LC" status
assert_rc 3 "status after down reports not running"
trap - EXIT

finish
