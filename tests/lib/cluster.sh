# shellcheck shell=bash
# The local Slurm cluster for integration tests (sourced after assert.sh): each test gets its own state
# directory and ports, and the cluster goes down when the test exits, whatever happened.

# cluster_up DIR PORT: starts the cluster, exports SLURM_CONF and friends, fails the test if it cannot.
cluster_up() {
  LC="$PCDINO_SOURCE_DIR/sbatch/local-cluster"
  export LOCAL_CLUSTER_DIR="$1" LOCAL_CLUSTER_PORT="$2"
  trap '"$LC" down >/dev/null 2>&1' EXIT
  run "$LC" up
  assert_rc 0 "local cluster up"
  [ "$RC" -eq 0 ] || fatal "cannot continue without a cluster"
  eval "$("$LC" env)"
}

# wait_job ID [SECONDS]: until the job leaves the queue (default at most 120 s).
wait_job() {
  local deadline=$((SECONDS + ${2:-120}))
  while [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
}

# cluster_down: stops it now (the EXIT trap would too).
cluster_down() {
  "$LC" down >/dev/null 2>&1
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
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURMD_NODENAME=$1" &&
      tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" && echo "$pid"
  done
  return 0
}
