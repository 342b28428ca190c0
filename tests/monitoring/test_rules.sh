#!/usr/bin/env bash
# The alert rules of monitoring/rules/ (issue #40): `promtool check rules` accepts the thresholds and the
# alerts; every `promtool test rules` file in monitoring/rules/tests/ passes (each alert fires on synthetic
# series where it should, with its labels and annotations, and stays quiet where it should not); and every
# alert of pcdino-alerts.yml has such a test both ways, so a new alert cannot arrive untested. Needs only
# promtool (Debian's `prometheus`), no build and no daemon.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../lib/assert.sh
source "$(dirname "$0")/../lib/assert.sh"
root="${PCDINO_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
rules="$root/monitoring/rules"
command -v promtool >/dev/null || fatal "promtool not found (Debian: apt-get install prometheus)"

step() {  # step DESCRIPTION COMMAND...: prints COMMAND, runs it (its output shows), counts the outcome
  local what=$1
  shift
  echo "+ $*"
  if "$@"; then pass "$what"; else fail "$what (exit $?)"; fi
}

step "promtool check rules: thresholds and alerts" \
  promtool check rules "$rules/pcdino-thresholds.yml" "$rules/pcdino-alerts.yml"

tests=("$rules"/tests/*.yml)
[ -f "${tests[0]}" ] || fatal "no promtool test files in $rules/tests"
for t in "${tests[@]}"; do
  # promtool resolves rule_files relative to the test file.
  step "promtool test rules ${t#"$root"/}" promtool test rules "$t"
done

# Each alert is named by an alert_rule_test that expects it to fire (a list of exp_alerts follows) and by
# one that expects nothing (`exp_alerts: []`).
mapfile -t alerts < <(sed -nE 's/^ *- alert: *([A-Za-z0-9_]+) *$/\1/p' "$rules/pcdino-alerts.yml")
[ ${#alerts[@]} -gt 0 ] || fatal "no alert found in $rules/pcdino-alerts.yml"
for a in "${alerts[@]}"; do
  expected=$(awk -v a="$a" '
    $1 == "alertname:" { name = $2; next }
    name == a && $1 == "exp_alerts:" { print ($2 == "[]" ? "quiet" : "fires"); name = "" }
  ' "${tests[@]}" | sort -u | paste -sd ' ')
  assert_eq "$expected" "fires quiet" "$a: tested where it fires and where it does not"
done
finish
