#!/usr/bin/env bash
# Every shell script of the project passes shellcheck (warnings and errors; style notes are advisory).
source "$(dirname "$0")/lib/assert.sh"
: "${PCDINO_SOURCE_DIR:?}"
cd "$PCDINO_SOURCE_DIR" || fatal "no source dir"
mapfile -t scripts < <(git ls-files 2>/dev/null | while read -r f; do
  [ -f "$f" ] && head -c 64 "$f" | grep -qE '^#!.*(bash|sh)|shellcheck shell=' && echo "$f"
done)
[ ${#scripts[@]} -gt 0 ] || scripts=(sbatch/local-cluster scripts/* .ci/run tests/lib/assert.sh tests/*/*.sh)
for f in "${scripts[@]}"; do
  run shellcheck -x --severity=warning "$f"
  assert_rc 0 "shellcheck $f"
done
finish
