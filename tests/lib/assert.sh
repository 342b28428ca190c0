# shellcheck shell=bash
# Assertions for pcdino's shell-driven tests (sourced). Each failed check prints what was expected and
# what happened, and the test ends non-zero at the end (or at once with `fatal`).
set -uo pipefail

TEST_FAILURES=0
TEST_CHECKS=0

fail() {
  echo "FAIL: $*" >&2
  TEST_FAILURES=$((TEST_FAILURES + 1))
}
fatal() {
  echo "FATAL: $*" >&2
  exit 1
}
pass() {
  TEST_CHECKS=$((TEST_CHECKS + 1))
  echo "ok: $*"
}

# run CMD...: runs CMD, keeping its exit code in $RC and its stdout/stderr in $OUT / $ERR.
run() {
  local out_file err_file
  out_file=$(mktemp) err_file=$(mktemp)
  "$@" >"$out_file" 2>"$err_file"
  RC=$?
  OUT=$(<"$out_file") ERR=$(<"$err_file")
  rm -f "$out_file" "$err_file"
}

assert_rc() {  # assert_rc EXPECTED DESCRIPTION
  if [ "$RC" -eq "$1" ]; then pass "$2 (exit $RC)"; else
    fail "$2: expected exit $1, got $RC"$'\n'"stdout: $OUT"$'\n'"stderr: $ERR"
  fi
}
assert_contains() {  # assert_contains HAYSTACK NEEDLE DESCRIPTION
  if [[ "$1" == *"$2"* ]]; then pass "$3"; else fail "$3: '$2' not found in:"$'\n'"$1"; fi
}
assert_not_contains() {
  if [[ "$1" != *"$2"* ]]; then pass "$3"; else fail "$3: '$2' unexpectedly found in:"$'\n'"$1"; fi
}
assert_eq() {  # assert_eq ACTUAL EXPECTED DESCRIPTION
  if [ "$1" == "$2" ]; then pass "$3"; else fail "$3: expected '$2', got '$1'"; fi
}

# Ends the test: prints the count and exits 1 if any check failed. A test that passed removes its work
# folder $W under test-work/ (checkpoints of 168 MB each, a Debian root: CI's disk is shared), after its
# EXIT trap has run (a cluster or a server in $W stopped first); PCDINO_KEEP_TEST_WORK=1 keeps it.
# own_mpi_session_dir: this test's Open MPI 4 programs keep their session folders in a folder of their own.
# Under /tmp/ompi.HOST.UID, shared by every test, a job that ends removes that folder while one starting beside
# it makes its own there ("A call to mkdir was unable to create the desired directory", pipelines.downstream
# beside the local-cluster tests, 2026-11-29). For tests that run mpirun or singletons outside a local cluster.
own_mpi_session_dir() {
  TEST_OMPI_DIR=$(mktemp -d /tmp/pcdino-ompi.XXXXXX) || fatal "mktemp"
  export OMPI_MCA_orte_tmpdir_base=$TEST_OMPI_DIR
}

finish() {
  [ -z "${TEST_OMPI_DIR:-}" ] || rm -rf "$TEST_OMPI_DIR"
  echo "$TEST_CHECKS checks passed, $TEST_FAILURES failed"
  [ "$TEST_FAILURES" -eq 0 ] || return 1
  [[ -z "${PCDINO_KEEP_TEST_WORK:-}" && "${W:-}" == "${PCDINO_BUILD_DIR:-/nonexistent}"/test-work/?* ]] || return 0
  local pending
  pending=$(trap -p EXIT)  # trap -- 'COMMAND' EXIT
  if [ -n "$pending" ]; then
    trap - EXIT
    eval "set -- $pending"
    eval "$3"
  fi
  cd / && rm -rf "$W"
}
