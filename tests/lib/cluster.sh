# shellcheck shell=bash
# The local Slurm cluster for integration tests (sourced after assert.sh): each test gets its own state
# directory and ports, and the cluster goes down when the test exits, whatever happened.

# slurm_release: the version of the slurmd on PATH ("slurm 25.11.7" from slurmd -V; "" without one).
# slurm_at_least MAJOR.MINOR: whether it is that release or newer (sbatch/local-cluster-config.sh asks the same).
slurm_release() { slurmd -V 2>/dev/null | awk '{print $2}'; }
slurm_at_least() { [ "$(printf '%s\n' "$1" "$(slurm_release)" | sort -V | head -n 1)" = "$1" ]; }

# cluster_up DIR PORT: starts the cluster, exports SLURM_CONF and friends, fails the test if it cannot. Its
# nodes run pcdino's node check (this build's) as Prolog and HealthCheckProgram, and mount DIR's parent, the
# test's work folder, as their shared filesystem (LOCAL_CLUSTER_SHARED sets another).
cluster_up() {
  LC="$PCDINO_SOURCE_DIR/sbatch/local-cluster"
  export LOCAL_CLUSTER_DIR="$1" LOCAL_CLUSTER_PORT="$2"
  export LOCAL_CLUSTER_SHARED="${LOCAL_CLUSTER_SHARED:-$(dirname "$1")}" LOCAL_CLUSTER_PCDINO="${PCDINO_BIN:-}"
  mkdir -p "$LOCAL_CLUSTER_SHARED"
  trap stop_cluster EXIT
  run "$LC" up
  assert_rc 0 "local cluster up"
  [ "$RC" -eq 0 ] || fatal "cannot continue without a cluster"
  eval "$("$LC" env)"
}

# cluster_diagnosis ID: what the daemons logged on the job and on the nodes' states, the last lines of each
# log, sdiag's scheduler cycles and agents, the nodes as slurmctld has them, and the cluster's processes and
# slurmctld's threads with their state and where they wait (a stuck daemon shows there).
cluster_diagnosis() {
  local log pids pid task
  (cd "${LOCAL_CLUSTER_DIR:?}/log" 2>/dev/null || exit 0
    echo "--- the daemons' lines on job $1 and on the nodes"
    grep -E "JobId=$1([^0-9]|\$)|job $1([^0-9]|\$)|node[0-9]+.*(state|respond|drain|DOWN|[Pp]rolog)" ./*.log |
      tail -n 60
    for log in slurmctld.log slurmd-*.log; do
      echo "--- the end of $log"
      tail -n 20 "$log"
    done)
  echo "--- sdiag: the controller's threads, agents and scheduler cycles"
  sdiag 2>&1 | sed -n '1,/^Remote Procedure Call statistics by message type/p'
  echo "--- scontrol show nodes"
  scontrol show nodes 2>&1
  echo "--- the cluster's processes"
  pids=$(pgrep -d, -f -- "$LOCAL_CLUSTER_DIR|slurmstepd") && ps -o pid,ppid,stat,wchan:28,etime,args -p "$pids"
  echo "--- slurmctld's threads: how many, name, state, wait channel"
  for pid in $(pgrep -f -- "slurmctld .*$LOCAL_CLUSTER_DIR"); do
    for task in /proc/"$pid"/task/*; do
      echo "$(cat "$task/comm") $(sed 's/.*) \([A-Z]\).*/\1/' "$task/stat") $(cat "$task/wchan")"
    done | sort | uniq -c
  done
}

# wait_job ID [SECONDS]: until the job leaves the queue (default at most 120 s). A job still there then fails
# the test, with what Slurm says of it and of the nodes and cluster_diagnosis, so that the checks after it do
# not read a job that has not ended.
wait_job() {
  local limit=${2:-120}
  local deadline=$((SECONDS + limit))
  while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
  [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
  fail "job $1 still queued after $limit s: $(scontrol show job "$1" 2>&1; squeue -s 2>&1; sinfo -N 2>&1)
$(cluster_diagnosis "$1")"
  return 1
}

# sbatch_wait [SECONDS] SBATCH_ARGS...: `sbatch --wait` that notices the end at once: submits, prints the job
# id, waits with wait_job (default 600 s) and returns 0 only if the job COMPLETED (Slurm's sbatch --wait
# polls after 2, 10 and then every 32 s: each job a test waited on that way cost it up to 30 s).
sbatch_wait() {
  local limit=600 id
  [[ $1 =~ ^[0-9]+$ ]] && { limit=$1; shift; }
  id=$(sbatch --parsable "$@") || return 1
  id=${id%%;*}
  echo "$id"
  wait_job "$id" "$limit" || return 1
  scontrol show job -o "$id" | grep -q 'JobState=COMPLETED '
}

# beside_cluster PID...: processes a test starts beside the cluster (a Prometheus, an exporter), ended with it.
BESIDE_CLUSTER=()
beside_cluster() { BESIDE_CLUSTER+=("$@"); }

# stop_cluster: ends the processes beside it, then the cluster (the EXIT trap of cluster_up).
stop_cluster() {
  local pid
  for pid in "${BESIDE_CLUSTER[@]}"; do kill "$pid" 2>/dev/null; done
  BESIDE_CLUSTER=()
  "$LC" down >/dev/null 2>&1
}

# cluster_down: stops it now (the EXIT trap would too).
cluster_down() {
  stop_cluster
  trap - EXIT
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds, looked at every 0.2 s (a failure after SECONDS).
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# epochs_logged RUN N: the training in run folder RUN has logged N epochs (log.txt lines).
epochs_logged() { [ -f "$1/scDINO_ViTs/dino_vit/log.txt" ] && [ "$(wc -l <"$1/scDINO_ViTs/dino_vit/log.txt")" -ge "$2" ]; }

# node_pids NODE: the pids of the training ranks on NODE of this cluster (SLURM_CONF), not of another test
# cluster's node of that name.
node_pids() {
  local pid
  for pid in $(pgrep -f "pcdino-train"); do
    env_has "$pid" "SLURMD_NODENAME=$1" && env_has "$pid" "SLURM_CONF=$SLURM_CONF" && echo "$pid"
  done
  return 0
}

# env_has PID LINE: process PID's environment holds LINE ("NAME=value") exactly. grep reads all of it: with
# `grep -q` and pipefail the test failed when grep stopped at the match before tr had written a job's whole
# environment (tr then ends by SIGPIPE), so a rank was found or not by chance (train.fail_fast, CI 2026-11-29).
env_has() { tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -xF -- "$2" >/dev/null; }

# --- a sick node (issue #60) ----------------------------------------------------------------------------
# Each node of the local cluster is a mount namespace of its own (its slurmd's): these make one node sick
# there alone, as a real node's GPU or filesystem fails while it still answers Slurm.

# in_node NODE COMMAND...: runs COMMAND in NODE's mount namespace.
in_node() {
  local pid
  pid=$(<"$LOCAL_CLUSTER_DIR/run/slurmd-$1.pid") || return 1
  shift
  # --root: the node's root directory too, not only its mounts. Entering a mount namespace resets the root to
  # the namespace's; in a stack's chroot (scripts/stack), the node's paths are the chroot's, not the host's.
  nsenter -t "$pid" -m --root -- "$@"
}

# sicken NODE FAULT: readonly (its shared filesystem remounted read-only), hung (its shared filesystem
# served by a FUSE daemon that is then stopped: every access blocks, as on a hung FSx or NFS server), xid79
# (a GPU fallen off the bus: its kernel log holds the driver's Xid 79 and its nvidia-smi, first on the node
# check's PATH, cannot reach that GPU; tests/doctor/fixtures/nvidia). `local-cluster replace NODE` heals it.
sicken() {
  local node=$1 fault=$2 shared=$LOCAL_CLUSTER_SHARED fixtures="$PCDINO_SOURCE_DIR/tests/doctor/fixtures/nvidia"
  case "$fault" in
    readonly) in_node "$node" mount -o remount,bind,ro "$shared" ;;
    hung)
      in_node "$node" bindfs "$shared" "$shared" || return 1
      local p ns
      ns=$(readlink "/proc/$(<"$LOCAL_CLUSTER_DIR/run/slurmd-$node.pid")/ns/mnt")
      for p in $(pgrep -x bindfs); do
        [ "$(readlink "/proc/$p/ns/mnt")" = "$ns" ] && kill -STOP "$p"
      done
      ;;
    xid79)
      local bin="$LOCAL_CLUSTER_DIR/sick-$node/bin"
      mkdir -p "$bin"
      sed "s#@FIXTURES@#$fixtures#" "$fixtures/nvidia-smi-xid79.in" >"$bin/nvidia-smi"
      chmod 0755 "$bin/nvidia-smi"
      in_node "$node" mount --bind "$bin" "$LOCAL_CLUSTER_DIR/node/bin" &&
        in_node "$node" mount --bind "$fixtures/kmsg-xid79.txt" /dev/kmsg
      ;;
    *) fatal "sicken: no fault '$fault' (readonly, hung, xid79)" ;;
  esac
}
