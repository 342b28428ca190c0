#!/usr/bin/env bash
# Integration: `local-cluster up` with a state directory it cannot write, or a port already in use, fails
# with a message naming the directory or port, and leaves no daemon behind.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"

LC="$PCDINO_SOURCE_DIR/sbatch/local-cluster"
BASE="$PCDINO_BUILD_DIR/test-clusters/bad_input"
PORT=${TEST_CLUSTER_PORT:-17917}
rm -rf "$BASE"
mkdir -p "$BASE"

no_daemons_for() {  # no_daemons_for DIR DESCRIPTION
  local found
  found=$(pgrep -af -- "$1/" | grep -v pgrep || true)
  assert_eq "$found" "" "$2: no daemon left behind"
}

# 1. A state directory that cannot be created: its parent is a regular file.
touch "$BASE/not-a-directory"
dir="$BASE/not-a-directory/cluster"
run "$LC" --dir "$dir" --port "$PORT" up
assert_rc 73 "uncreatable state directory"
assert_contains "$ERR" "$dir" "message names the directory"
no_daemons_for "$dir" "uncreatable state directory"

# 2. A state directory that exists but is read-only (root ignores permission bits, so use a read-only
# bind mount in a private mount namespace where this machine allows one).
if unshare -m true 2>/dev/null; then
  dir="$BASE/readonly"
  mkdir -p "$dir"
  run unshare -m bash -c "mount --bind '$dir' '$dir' && mount -o remount,bind,ro '$dir' && '$LC' --dir '$dir' --port $PORT up"
  assert_rc 73 "read-only state directory"
  assert_contains "$ERR" "$dir" "message names the read-only directory"
  no_daemons_for "$dir" "read-only state directory"
else
  echo "skip: read-only state directory (no mount namespaces here)"
fi

# 3. Ports in use: the controller's port, then a node's port. Each check happens before any daemon starts.
listen() {  # listen PORT: hold a TCP port until killed
  python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(); print("listening", flush=True); time.sleep(300)' "$1" &
  LISTENER=$!
  local i
  for ((i = 0; i < 50; i++)); do ss -Htln "sport = :$1" | grep -q . && return 0; sleep 0.1; done
  fatal "could not hold port $1 for the test"
}

for busy in "$PORT" "$((PORT + 2))"; do
  dir="$BASE/port-$busy"
  listen "$busy"
  run "$LC" --dir "$dir" --port "$PORT" up
  kill "$LISTENER" 2>/dev/null
  wait "$LISTENER" 2>/dev/null
  assert_rc 75 "port $busy in use"
  assert_contains "$ERR" "port $busy" "message names port $busy"
  no_daemons_for "$dir" "port $busy in use"
  assert_eq "$(ls "$dir/run/"*.pid 2>/dev/null)" "" "port $busy in use: no PID recorded"
done

# 4. A daemon that dies while starting: everything this 'up' started is stopped again. slurmd cannot be
# made to fail for real here without breaking the host, so a stand-in that exits at once takes its place.
dir="$BASE/slurmd-dies"
fakebin="$BASE/fakebin"
mkdir -p "$fakebin"
# It answers -V as the real one does (local-cluster asks the release); started as a daemon (-D) it dies.
cat >"$fakebin/slurmd" <<EOF
#!/bin/sh
case " \$* " in *" -D "*) echo "slurmd: fatal: simulated start failure" >&2; exit 1 ;; esac
exec $(command -v slurmd) "\$@"
EOF
chmod +x "$fakebin/slurmd"
run env PATH="$fakebin:$PATH" "$LC" --dir "$dir" --port "$PORT" --timeout 20 up
assert_rc 69 "a slurmd that dies at start"
assert_contains "$ERR" "slurmd-node1 failed to start" "message names the failed daemon"
assert_contains "$ERR" "simulated start failure" "the daemon's own last words (its standard error) are shown"
assert_contains "$ERR" "stopped slurmctld" "slurmctld started by this 'up' is stopped"
assert_contains "$ERR" "stopped munged" "munged started by this 'up' is stopped"
no_daemons_for "$dir" "a slurmd that dies at start"

# 5. Bad flags are usage errors.
run "$LC" --port 80 up
assert_rc 64 "privileged port refused"
assert_contains "$ERR" "--port" "message names --port"
run "$LC" sideways
assert_rc 64 "unknown command refused"
run "$LC" --expedited-requeue maybe up
assert_rc 64 "--expedited-requeue takes on or off"
# Expedited requeues are Slurm 25.11's: an older slurmd's cluster refuses them before starting anything.
if ! slurm_at_least 25.11; then
  run "$LC" --dir "$BASE/expedite" --port "$PORT" --expedited-requeue on up
  assert_rc 64 "--expedited-requeue on before Slurm 25.11"
  assert_contains "$ERR" "needs Slurm 25.11 or later" "message names the release"
  no_daemons_for "$BASE/expedite" "--expedited-requeue on before Slurm 25.11"
fi
run "$LC" --health-check-timeout 0 up
assert_rc 64 "--health-check-timeout takes 1 to 65535 s"
assert_contains "$ERR" "--health-check-timeout must be 1 to 65535 seconds" "message names the option"
# HealthCheckTimeout is Slurm 26.05's: an older slurmd's cluster refuses another limit than its fixed 60 s.
if ! slurm_at_least 26.05; then
  run "$LC" --dir "$BASE/health-timeout" --port "$PORT" --health-check-timeout 30 up
  assert_rc 64 "--health-check-timeout 30 before Slurm 26.05"
  assert_contains "$ERR" "needs Slurm 26.05 or later" "message names the release"
  no_daemons_for "$BASE/health-timeout" "--health-check-timeout before Slurm 26.05"
fi
run "$LC" --metrics-auth-users 'alice bob' up
assert_rc 64 "--metrics-auth-users takes user names separated by commas"
assert_contains "$ERR" "--metrics-auth-users must be user names" "message names the option"
# MetricsAuthUsers is Slurm 26.05's too: an older slurmd's cluster refuses it (its /metrics answers anyone).
if ! slurm_at_least 26.05; then
  run "$LC" --dir "$BASE/metrics-auth" --port "$PORT" --metrics-auth-users alice up
  assert_rc 64 "--metrics-auth-users before Slurm 26.05"
  assert_contains "$ERR" "needs Slurm 26.05 or later (MetricsAuthUsers)" "message names the release and key"
  no_daemons_for "$BASE/metrics-auth" "--metrics-auth-users before Slurm 26.05"
fi

finish
