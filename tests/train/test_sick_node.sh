#!/usr/bin/env bash
# Integration (issue #60): a sick node, one that still answers Slurm, never gets the job back. On a three-node
# local cluster (each node a mount namespace with the shared folder mounted, pcdino's node check as Slurm's
# Prolog and HealthCheckProgram), a two-node training with node2 sick, nobody acting:
#  a. node2's shared filesystem read-only;
#  b. node2's GPU fallen off the bus: the driver's Xid 79 in its kernel log, nvidia-smi unable to reach it
#     (NVIDIA's documented formats, tests/doctor/fixtures/nvidia);
#  c. node2's shared filesystem hung (a FUSE mount whose daemon is stopped: every access blocks);
#  d. node2 turning sick mid-training: after the first epoch its GPU falls off the bus and its rank dies.
# In each, `sinfo -R` shows node2 drained with a reason that names the fault, the training completes on node1
# and node3, and its checkpoint equals an uninterrupted two-rank run's tensor for tensor. In (d) the job
# script keeps node2 out of its restart, the health check drains it once idle, `local-cluster replace` (what
# ParallelCluster's clustermgtd does) brings it back, and a second training runs on it. Then the health check
# as slurmd runs it: it drains a sick node, returns the node pcdino drained once healthy, and leaves alone
# one an admin drained. PCDINO_SICK_NODE_PARTS (default a,b,c,d,health) chooses parts.
#
# Without the node check (PCDINO_SICK_NODE_CHECK=off, the suite before issue #60) part (a) with a rank that
# dies on node2 reproduces the fault: the requeued job lands on node2 again until slurm.max_restarts is spent.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/python.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/sick_node"
rm -rf "$W" && mkdir -p "$W/fsx/jobs"
P=$PCDINO_BIN
FSX="$W/fsx"  # the cluster's shared filesystem: data and runs live there, the cluster's state does not

command -v bindfs >/dev/null || fatal "bindfs is missing (scripts/install-deps installs it)"
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$FSX/data" u8x1 3 60 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
pipeline() {  # pipeline NAME [NODES]: the training of NODES (2) ranks on as many nodes, in $FSX/NAME.yaml
  EPOCHS=4 DOWNSTREAM="slurm:
  gpus: false
  exclusive: false
  cpus_per_task: 1
  max_restarts: 3" tiny_pipeline "$FSX/$1.yaml" "$1" "$FSX"
  sed -i "s/^train_scDINO:\$/train_scDINO:\n  nnodes: ${2:-2}\n  num_gpus: 1/" "$FSX/$1.yaml"
}

PARTS=",${PCDINO_SICK_NODE_PARTS:-a,b,c,d,health},"
part() { [[ $PARTS == *",$1,"* ]]; }
export LOCAL_CLUSTER_NODES=3 LOCAL_CLUSTER_NODE_FAILURE=10 LOCAL_CLUSTER_SHARED="$FSX"
export LOCAL_CLUSTER_NODE_CHECK="${PCDINO_SICK_NODE_CHECK:-on}" LOCAL_CLUSTER_HEALTH_CHECK_INTERVAL=20
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-19117}"
cd "$FSX" || fatal "no $FSX"
if [ "$LOCAL_CLUSTER_NODE_CHECK" = on ]; then
  assert_contains "$(scontrol show config)" "HealthCheckProgram      = $LOCAL_CLUSTER_DIR/etc/node-check" \
    "slurmd runs the node check as HealthCheckProgram"
  # 25.11 lists each Prolog as Prolog[N] (src/api/config_info.c), 22.05 as Prolog.
  assert_contains "$(scontrol show config | grep -E '^Prolog(\[0\])? ')" "$LOCAL_CLUSTER_DIR/etc/prolog.d/*" \
    "and as Prolog: a glob of prolog.d, as ParallelCluster's"
  assert_eq "$(readlink "$LOCAL_CLUSTER_DIR/etc/prolog.d/95_pcdino_node_check")" "$LOCAL_CLUSTER_DIR/etc/node-check" \
    "whose 95_pcdino_node_check is the node check"
fi

# The uninterrupted run every part is held against: two ranks, one thread each, as in the jobs.
pipeline uninterrupted
run "$P" meanstd -c uninterrupted.yaml --threads 1
assert_rc 0 "meanstd"
run sbatch_wait -N2 -n2 --cpus-per-task=1 -o "$FSX/jobs/uninterrupted_%j.out" --wrap \
  "srun --mpi=pmix '$P' train -c '$FSX/uninterrupted.yaml' --threads 1 --device cpu --model-dir '$FSX/uninterrupted'"
assert_rc 0 "the training without a sick node"
same_as_uninterrupted() {  # same_as_uninterrupted RUN
  run torch_py - "$FSX/out/$1/scDINO_ViTs/dino_vit/checkpoint.pth" "$FSX/uninterrupted/checkpoint.pth" <<'PY'
import sys, torch
a, b = (torch.load(p, map_location="cpu") for p in sys.argv[1:3])
same = a["epoch"] == b["epoch"] == 4 and torch.equal(a["dino_loss"]["center"], b["dino_loss"]["center"])
for key in ("student", "teacher"):
    same = same and a[key].keys() == b[key].keys() and all(torch.equal(a[key][k], b[key][k]) for k in a[key])
print("identical" if same else "different")
sys.exit(0 if same else 1)
PY
}
reason_of() { sinfo -h -R -n "$1" -o '%E' 2>/dev/null; }
drained_for() { reason_of node2 | grep -qF "$1"; }

# train NAME: submits NAME's training (mean/std first) and waits for it; RUN, job and err describe it.
train() {
  run "$P" meanstd -c "$1.yaml" --threads 1
  [ "$RC" -eq 0 ] || fail "meanstd of $1: $ERR"
  run "$P" submit "$1.yaml" --stages train
  assert_rc 0 "$1: submit the training"
  RUN="$FSX/out/$1"
  job=$(job_of train)
  err="$RUN/logs/train_err_$job.err"
}
# completed_without_node2 NAME FAULT: the training's job completed on node1 and node3 with the uninterrupted
# weights, and node2 is drained with a reason naming FAULT.
completed_without_node2() {
  wait_all 900
  assert_eq "$(scontrol show job -o "$job" | grep -o 'JobState=[A-Z]*')" "JobState=COMPLETED" "$1: the training completed"
  assert_contains "$(scontrol show job -o "$job" | grep -o ' NodeList=[^ ]*')" "NodeList=node[1,3]" \
    "$1: its last start ran on node1 and node3"
  if drained_for "$2"; then pass "$1: sinfo -R: node2 drained: $(reason_of node2)"; else
    fail "$1: node2 not drained for '$2': $(sinfo -R) $(sinfo -N)"
  fi
  same_as_uninterrupted "$1"
  assert_rc 0 "$1: its weights equal the uninterrupted run's tensor for tensor ($OUT)"
  # Which of the node check's two doors caught it (a health check can come first on an idle node).
  if grep -q "\[job $job\] prolog failed" "$LOCAL_CLUSTER_DIR/log/slurmd-node2.log"; then
    pass "$1: node2's prolog failed for job $job: the job was requeued without it"
  else
    pass "$1: no prolog of job $job failed on node2: its health check drained it"
  fi
}
heal_node2() {
  run "$LC" replace node2
  assert_rc 0 "node2 replaced (clustermgtd's part): $ERR"
}

# --- a. node2's shared filesystem read-only -------------------------------------------------------------------
if part a; then
  pipeline readonly
  sicken node2 readonly || fatal "cannot make node2's shared filesystem read-only"
  if [ "$LOCAL_CLUSTER_NODE_CHECK" = off ]; then
    # Before issue #60: nothing drains node2, and a rank there fails at every start (as its writes fail).
    ( while sleep 0.5; do for p in $(node_pids node2); do kill -KILL "$p"; done; done ) &
    killer=$!
    train readonly
    wait_all 900
    kill "$killer"
    assert_eq "$(scontrol show job -o "$job" | grep -o 'JobState=[A-Z]*')" "JobState=COMPLETED" \
      "readonly: the training completed (fails without the node check: it lands on node2 at every start)"
    grep '(start ' "$err" | sed 's/^/    /'
    finish
    exit
  fi
  train readonly
  completed_without_node2 readonly "shared_fs: cannot create '$FSX/.pcdino-doctor-"
  assert_contains "$(reason_of node2)" "Read-only file system" "readonly: the reason says read-only"
  assert_contains "$(cat "$LOCAL_CLUSTER_DIR/textfile/pcdino_node_check_node2.prom")" \
    'pcdino_doctor_check_ok{node="node2",rank="0",slurm_job_id="' "readonly: node2's verdict is exported as the doctor's metrics"
  assert_contains "$(grep '^pcdino_doctor_node_healthy' "$LOCAL_CLUSTER_DIR/textfile/pcdino_node_check_node2.prom")" \
    "} 0" "readonly: with node2 unhealthy"
  heal_node2
fi

# --- b. node2's GPU fell off the bus (Xid 79) -----------------------------------------------------------------
if part b; then
  pipeline xid
  sicken node2 xid79 || fatal "cannot give node2 a lost GPU"
  train xid
  completed_without_node2 xid "gpu_xid: gpu 0000:3b:00 Xid 79 GPU has fallen off the bus (reboot the node)"
  assert_contains "$(reason_of node2)" "gpus: gpu 0000:3B:00.0: GPU is lost" "xid: and nvidia-smi's lost GPU"
  heal_node2
fi

# --- c. node2's shared filesystem hung ------------------------------------------------------------------------
if part c; then
  pipeline hung
  sicken node2 hung || fatal "cannot hang node2's shared filesystem"
  train hung
  completed_without_node2 hung "shared_fs: $FSX: did not finish within 10 s"
  heal_node2
fi

# --- d. node2 turns sick mid-training --------------------------------------------------------------------------
if part d; then
  pipeline midway
  train midway
  wait_for 600 epochs_logged "$RUN" 1 || fatal "the training did not train an epoch: $(cat "$err")"
  rank=""
  wait_for 30 eval 'rank=$(node_pids node2); [ -n "$rank" ]' || fatal "no rank on node2: $(squeue)"
  sicken node2 xid79 || fatal "cannot give node2 a lost GPU"
  kill -KILL "$rank"  # the rank whose GPU fell off the bus: CUDA ends it
  pass "node2's GPU fell off the bus after epoch 1 and its rank ($rank) died at $(date -Is)"
  wait_all 900
  assert_contains "$(cat "$err")" "without node2, where it failed" "midway: the job script kept node2 out of its restart"
  # node2, idle again, meets its health check (HealthCheckInterval 20 s) and is drained.
  if wait_for 120 drained_for "Xid 79"; then pass "midway: node2 drained once idle: $(reason_of node2)"; else
    fail "midway: node2 not drained: $(sinfo -R)"
  fi
  completed_without_node2 midway "Xid 79"
  run "$P" status midway.yaml
  assert_contains "$OUT" "kept off node2, where it failed" "status says the restart left node2 out"
  heal_node2
  assert_eq "$(sinfo -h -n node2 -o %T)" "idle" "node2 is back in service"
  pipeline again 3
  train again
  wait_all 900
  assert_eq "$(scontrol show job -o "$job" | grep -o 'JobState=[A-Z]*')" "JobState=COMPLETED" \
    "a second training on all three nodes completed"
  assert_contains "$(scontrol show job -o "$job" | grep -o ' NodeList=[^ ]*')" "NodeList=node[1-3]" "it used node2"
fi

# --- the health check as slurmd runs it ----------------------------------------------------------------------
if part health; then
  health() { in_node node2 env -i SLURMD_NODENAME=node2 "$LOCAL_CLUSTER_DIR/etc/node-check"; }
  sicken node2 readonly
  run health
  assert_rc 0 "the health check exits 0 (slurmd only logs its status)"
  if drained_for "Read-only file system"; then pass "it drained the sick node"; else fail "not drained: $(sinfo -R)"; fi
  in_node node2 mount -o remount,bind,rw "$FSX"
  run health
  if wait_for 30 sh -c '[ "$(sinfo -h -n node2 -o %T)" = idle ]'; then
    pass "once healthy, the node pcdino drained is back in service"
  else
    fail "node2 not resumed: $(sinfo -N) $OUT $ERR"
  fi
  scontrol update NodeName=node2 State=DRAIN Reason="maintenance: new cables"
  run health
  assert_eq "$(reason_of node2)" "maintenance: new cables" "a node an admin drained stays drained, its reason kept"
  scontrol update NodeName=node2 State=RESUME
fi
cluster_down
finish
