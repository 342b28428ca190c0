#!/usr/bin/env bash
# pcdino doctor on the local two-node cluster (issue #21): a healthy allocation passes and prints the table
# (both nodes, the allreduce bus bandwidth between them, the shared filesystem's throughput); faults
# injected for real, one at a time, on node2 alone are found and named with the node and its drain line.
# node2's slurmd is restarted for each fault the way it would differ on a real node: in a mount namespace
# of its own (the shared directory read-only; the task prolog that sets the profile's variable missing),
# or on a CPU taken by other processes; its task is stopped with SIGSTOP, or never starts. Last, the doctor stage of a
# pipeline: with node2 faulty the check fails, training never starts and `pcdino status` says why; healthy,
# training waits for the check and runs.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/doctor"
rm -rf "$W" && mkdir -p "$W/shared" "$W/jobs"
P="$PCDINO_BIN"

# This test is the doctor's: the node check (the cluster's prolog) would drain node2 for the same faults
# before the doctor ran there, and node2's slurmd restarts in namespaces of this test's own.
export LOCAL_CLUSTER_NODE_CHECK=off
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18817}"
# The profile's variable comes from a task prolog, as a SPANK profile sets it in every task. For the fault,
# node2's prolog unsets it: srun passes the batch step's environment (node1's) to every task, so a node
# without the profile must remove it, not merely not set it.
printf '#!/bin/sh\necho export PCDINO_TEST_PROFILE=nvidia-efa\n' >"$W/taskprolog.sh"
printf '#!/bin/sh\necho unset PCDINO_TEST_PROFILE\n' >"$W/no-prolog.sh"
# A node whose tasks never start (their prolog hangs): its rank never joins MPI.
printf '#!/bin/sh\nsleep 300\n' >"$W/hung-prolog.sh"
chmod +x "$W/taskprolog.sh" "$W/no-prolog.sh" "$W/hung-prolog.sh"
echo "TaskProlog=$W/taskprolog.sh" >>"$SLURM_CONF"
scontrol reconfigure >/dev/null || fatal "scontrol reconfigure"
sleep 2

# The image manifest (`pcdino ami`'s) as this host's versions are; node2's differs for the fault.
manifest() {  # manifest PCDINO_VERSION
  printf '{"name": "test-image", "components": {"pcdino": "%s", "libfabric": "%s", "openmpi": "%s", "cudnn": "9.1.0"}}\n' \
    "$1" "$(pkg-config --modversion libfabric)" "$(mpirun --allow-run-as-root --version | sed -n '1s/.* //p')"
}
manifest "$("$P" --version | sed -n '1s/^pcdino \([^ ]*\).*/\1/p')" >"$W/manifest.json"
manifest 0.0.9 >"$W/other-manifest.json"

HOGS=()
cleanup() {
  for pid in "${HOGS[@]}"; do kill "$pid" 2>/dev/null; done
  "$LC" down >/dev/null 2>&1
}
trap cleanup EXIT

doctor() {  # doctor [ANSWER_S]: the check as users run it, on both nodes; the report in $W/doctor.json
  rm -f "$W/doctor.json"
  run timeout 300 "$P" doctor --submit --nodes 2 --log "$W/jobs/doctor-%j.out" --shared-dir "$W/shared" \
    --probe-mb 16 --scratch "$W" --min-scratch-gib 0.01 --expect-env PCDINO_TEST_PROFILE \
    --manifest "$W/manifest.json" --answer-timeout "${1:-20}" --json "$W/doctor.json"
}

json() {  # json EXPR: a Python expression over the report `r`
  /usr/bin/python3 -c "import json,sys; r = json.load(open('$W/doctor.json')); print($1)"
}

# restart_node2 PREFIX...: node2's slurmd again, started through PREFIX (a namespace, a CPU set).
node2_idle() {  # node2_idle: waits up to 30 s for node2 to be idle (no job, not completing one)
  local i
  for ((i = 0; i < 150; i++)); do
    scontrol show node -o node2 2>/dev/null | grep -q ' State=IDLE ' && [ -z "$(squeue -h)" ] && return 0
    sleep 0.2
  done
  return 1
}

restart_node2() {
  local record="$LOCAL_CLUSTER_DIR/run/slurmd-node2.pid" pid i
  node2_idle || fatal "node2 not idle before its restart: $(scontrol show node -o node2 | grep -o 'State=[^ ]*'); $(squeue -h)"
  pid=$(<"$record")
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  setsid "$@" slurmd -D -N node2 -f "$SLURM_CONF" </dev/null >>"$LOCAL_CLUSTER_DIR/log/slurmd-node2.stdout" 2>&1 &
  echo $! >"$record"
  node2_idle && return 0
  fatal "node2 not idle after its restart ($(scontrol show node -o node2 | grep -o 'State=[^ ]*')): $(tail -n 5 "$LOCAL_CLUSTER_DIR/log/slurmd-node2.log")"
}

# node2_with_mount SRC DST [ro]: node2's slurmd in a mount namespace of its own where SRC is bind-mounted
# over DST (read-only with "ro"); nothing changes for node1 or the host.
node2_with_mount() {
  # shellcheck disable=SC2016  # expanded by the inner sh
  restart_node2 unshare -m sh -c \
    'if [ -n "$2" ]; then mount --bind -o ro "$0" "$1"; else mount --bind "$0" "$1"; fi && shift 2 && exec "$@"' \
    "$1" "$2" "${3:-}"
}

expect_node2_drained() {  # expect_node2_drained CHECK TEXT: the fault is named on node2, with its drain line
  assert_rc 1 "$1: exit 1"
  assert_contains "$OUT" "node2        FAIL" "$1: node2 fails"
  assert_contains "$OUT" "node1        ok" "$1: node1 passes"
  assert_contains "$OUT" "$2" "$1: the fault is named"
  assert_contains "$OUT" "drain: scontrol update NodeName=node2 State=DRAIN 'Reason=pcdino doctor: $1" \
    "$1: the drain line for node2"
  assert_eq "$(json "r['healthy'], r['nodes'][1]['healthy'], r['nodes'][0]['healthy']")" "False False True" \
    "$1: doctor.json names node2"
}

# --- 1. healthy -------------------------------------------------------------------------------------
# The nodes' features as ParallelCluster gives them (static, instance type, compute resource): the doctor
# reads the instance type there, for its published NCCL floor.
scontrol update NodeName=node1,node2 AvailableFeatures=static,p4d.24xlarge,cr1 ActiveFeatures=static,p4d.24xlarge,cr1 ||
  fatal "scontrol update AvailableFeatures"
doctor
assert_rc 0 "two healthy nodes: exit 0"
assert_contains "$OUT" "node1        ok" "the table has node1"
assert_contains "$OUT" "node2        ok" "and node2"
assert_contains "$OUT" "MPI allreduce over 2 nodes" "the allreduce sweep between them"
assert_contains "$OUT" "busbw" "with its bus bandwidth"
assert_contains "$OUT" "write" "and the shared filesystem's throughput"
assert_contains "$OUT" "healthy" "verdict"
assert_not_contains "$OUT" "drain:" "no drain line"
assert_eq "$(json "r['healthy'], len(r['nodes']), len(r['allreduce']['points']) > 0, r['allreduce']['points'][-1]['busbw_gb_s'] > 0")" \
  "True 2 True True" "doctor.json: healthy, two nodes, bus bandwidth measured"
assert_eq "$(json "[c['name'] for c in r['nodes'][1]['checks']]")" \
  "['shared_fs', 'scratch', 'slurm_view', 'environment', 'libfabric', 'gaudi', 'neuron', 'spank_plugin', 'image', 'speed']" "every check ran on node2"
assert_eq "$(json "[(c['ok'], c['detail']) for c in r['nodes'][1]['checks'] if c['name'] in ('gaudi', 'neuron')]")" \
  "[(True, 'not present'), (True, 'not present')]" "no Gaudi or Neuron device here: not present, healthy"
assert_contains "$OUT" "test-image: libfabric" "the versions matched the image manifest"
assert_eq "$(json "r['nodes'][0]['instance_type'], r['nodes'][1]['instance_type'], r['nccl']['ok'], r['nccl']['points']")" \
  "p4d.24xlarge p4d.24xlarge True []" "doctor.json: the instance type from Slurm's features; no NCCL sweep"
assert_contains "$OUT" "0 GPUs, p4d.24xlarge" "the table names the instance type"
assert_contains "$OUT" "nccl allreduce: not measured: no node has a GPU the CUDA runtime shows" \
  "without GPUs the NCCL sweep is not measured, and says why"

# Inside an allocation (a batch script of two nodes), pcdino doctor makes itself a step of both nodes.
run sbatch_wait 120 -N2 -o "$W/jobs/alloc-%j.out" \
  --wrap "$(printf '%q ' "$P" doctor --shared-dir "$W/shared" --probe-mb 8 --scratch "$W" --min-scratch-gib 0.01)"
assert_rc 0 "in a batch script: exit 0"
alloc=$(cat "$W"/jobs/alloc-*.out)
assert_contains "$alloc" "node1        ok" "in a batch script: node1 checked"
assert_contains "$alloc" "node2        ok" "and node2, one task each"

# --- 2. the shared directory read-only on node2 ------------------------------------------------------
node2_with_mount "$W/shared" "$W/shared" ro
doctor
expect_node2_drained shared_fs "Read-only file system"

# --- 3. node2's tasks lack the profile's variable ----------------------------------------------------
node2_with_mount "$W/no-prolog.sh" "$W/taskprolog.sh"
doctor
expect_node2_drained environment "missing PCDINO_TEST_PROFILE"

# --- 3b. node2 runs another image: its manifest names another pcdino than the one it runs ------------
node2_with_mount "$W/other-manifest.json" "$W/manifest.json"
doctor
expect_node2_drained image "test-image: pcdino: image 0.0.9, node"

# --- 4. node2 CPU-starved: its slurmd (and so its tasks) on CPU 1, with three busy processes there -----
restart_node2 taskset -c 1
# Each in a session of its own: the scheduler shares a CPU between sessions (autogroups) before processes,
# so node2's task gets about a quarter of CPU 1, and its memory probe a quarter of node1's rate. With seven
# such processes (an eighth) node2 did not answer within 20 s in CI (2026-11-26): starved, it is slow, not
# hung, so this run waits 120 s for its answer.
for _ in 1 2 3; do
  setsid taskset -c 1 sh -c 'while :; do :; done' &
  HOGS+=($!)
done
doctor 120
expect_node2_drained speed "the nodes' median"
for pid in "${HOGS[@]}"; do kill "$pid" 2>/dev/null; done
HOGS=()
restart_node2

# --- 5. node2's task stops answering (SIGSTOP) -------------------------------------------------------
start=$SECONDS
timeout 300 "$P" doctor --submit --nodes 2 --log "$W/jobs/stop-%j.out" --shared-dir "$W/shared" --probe-mb 512 \
  --answer-timeout 20 --json "$W/doctor.json" >"$W/stop.out" 2>&1 &
runner=$!
# Stopped while it probes the shared directory (its probe file names its PID), after MPI started and
# before it reports. (A task stopped before MPI_Init ends the check too, after --answer-timeout, but MPI
# cannot say which node did not join.)
stopped=""
for ((i = 0; i < 3000; i++)); do
  [ -z "$stopped" ] || break
  for file in "$W"/shared/.pcdino-doctor-*; do
    [ -e "$file" ] || continue
    pid=${file##*.tmp.} # .pcdino-doctor-{host}.tmp.{pid}.{random}
    pid=${pid%%.*}
    if env_has "$pid" SLURMD_NODENAME=node2; then
      kill -STOP "$pid" && stopped=$pid
    fi
  done
  sleep 0.01
done
[ -n "$stopped" ] && pass "node2's doctor task stopped (SIGSTOP)" || fail "found node2's doctor task to stop"
wait "$runner"
# shellcheck disable=SC2034  # read by assert_rc
RC=$?
OUT=$(cat "$W/stop.out")
elapsed=$((SECONDS - start))
assert_rc 1 "a node that stops answering: exit 1"
[ "$elapsed" -lt 90 ] && pass "in bounded time ($elapsed s with a 20 s answer timeout)" ||
  fail "a stopped node ended the check after $elapsed s"
assert_contains "$OUT" "node2        NO ANSWER" "the stopped node is named"
assert_contains "$OUT" "drain: scontrol update NodeName=node2 State=DRAIN 'Reason=pcdino doctor: did not answer" \
  "with its drain line"
assert_eq "$(json "r['healthy'], r['nodes'][1]['answered']")" "False False" "doctor.json: node2 did not answer"
kill -CONT "$stopped" 2>/dev/null
wait_all 60

# --- 5b. node2's task never starts: the others wait in MPI_Init until the startup watchdog ends it ------
node2_with_mount "$W/hung-prolog.sh" "$W/taskprolog.sh"
start=$SECONDS
doctor
elapsed=$((SECONDS - start))
assert_rc 1 "a node that never joins MPI: exit 1"
[ "$elapsed" -lt 90 ] && pass "in bounded time ($elapsed s with a 20 s answer timeout)" ||
  fail "a node that never joined ended the check after $elapsed s"
assert_contains "$OUT$ERR" "MPI did not start within 20 s on node1" "node1 says the step's MPI never started"
assert_not_contains "$OUT$ERR" "MPI did not start within 20 s on node2" "node2 never got that far"
scancel --state=RUNNING --quiet "$(squeue -h -o %i | head -n 1)" 2>/dev/null
restart_node2

# --- 6. the doctor stage of a pipeline ---------------------------------------------------------------
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$W/data" u8x1 3 20 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
DOWNSTREAM="slurm:
  gpus: false
  exclusive: false
  cpus_per_task: 1
doctor:
  enabled: true
  probe_mb: 8
  scratch: \"$W\"
  min_scratch_gib: 0.01
  expect_env: [PCDINO_TEST_PROFILE]" tiny_pipeline "$W/pipeline.yaml" checked "$W"
sed -i 's/^train_scDINO:$/train_scDINO:\n  nnodes: 2\n  num_gpus: 1/' "$W/pipeline.yaml"
RUN="$W/out/checked"
cd "$W" || fatal "no $W"

node2_with_mount "$W/no-prolog.sh" "$W/taskprolog.sh"
run "$P" submit pipeline.yaml
assert_rc 0 "submit a pipeline with the doctor stage"
assert_eq "$(grep -c ' job [0-9]' <<<"$OUT")" 7 "seven jobs: the check and the six stages: $OUT"
assert_contains "$OUT" "train    job $(job_of train) after doctor $(job_of doctor), meanstd $(job_of meanstd)" \
  "training waits for the check and for mean/std"
assert_contains "$(cat "$RUN/logs/doctor.sbatch")" "#SBATCH --nodes=2" "the check asks for the training's nodes"
wait_all 300
run "$P" status pipeline.yaml
assert_rc 1 "status: the check failed"
assert_eq "$(state_of doctor)" "$(job_of doctor) FAILED" "the doctor stage failed"
why="pcdino doctor: unhealthy: node2 (environment: missing PCDINO_TEST_PROFILE)"
assert_contains "$OUT" "error: $why" "status names the node and the fault"
assert_eq "$(state_of train)" "$(job_of train) CANCELLED" "training was cancelled"
assert_contains "$OUT" "not started: stage doctor FAILED: error: $why" "status says training never started and why"
assert_eq "$(grep -c "not started: stage doctor FAILED" <<<"$OUT")" 4 \
  "training, features, kNN and plots each name the check: $OUT"
[ ! -e "$RUN/logs/train_err_$(job_of train).err" ] && pass "training never started" ||
  fail "training started: $(cat "$RUN/logs/train_err_$(job_of train).err")"
assert_eq "$(grep -cE '^(meanstd|labels) .* COMPLETED' <<<"$OUT")" 2 "the stages that do not wait for it ran"
assert_eq "$(/usr/bin/python3 -c "import json; r = json.load(open('$RUN/logs/doctor.json')); print(r['healthy'], r['nodes'][1]['node'], r['nodes'][1]['healthy'])")" \
  "False node2 False" "the run's logs/doctor.json names node2"
assert_contains "$(cat "$RUN/logs/doctor_out_$(job_of doctor).out")" \
  "drain: scontrol update NodeName=node2 State=DRAIN" "the stage's output has node2's drain line"

restart_node2
run "$P" resume pipeline.yaml --stages doctor,train
assert_rc 0 "resume the check and training on healthy nodes"
assert_contains "$OUT" "train    job $(job_of train) after doctor $(job_of doctor)" "training waits for a new check"
wait_all 300
run "$P" status pipeline.yaml
assert_eq "$(state_of doctor)" "$(job_of doctor) COMPLETED" "the check passed"
assert_eq "$(state_of train)" "$(job_of train) COMPLETED" "training ran"
end=$(when doctor EndTime) start=$(when train StartTime)
[[ ! "$start" < "$end" ]] && pass "training started ($start) after the check ended ($end)" ||
  fail "training started at $start before the check ended at $end"
assert_eq "$(/usr/bin/python3 -c "import json; print(json.load(open('$RUN/logs/doctor.json'))['healthy'])")" "True" \
  "logs/doctor.json: healthy"

finish
