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
