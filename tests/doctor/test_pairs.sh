#!/usr/bin/env bash
# pcdino doctor's pairs of neighbours (issue #21), over real Open MPI on this host: with the group's bus
# bandwidth below the floor on three ranks, each pair (0,1), (1,2), (2,0) is measured alone (three rounds
# for an odd count) and reported; with every pair below an unreachable floor, no single node is blamed.
# Which node the pairs blame when one is slow is decided by slow_ranks(), tested in test_probes.cpp.
set -uo pipefail
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_BUILD_DIR:?}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=tcp,self
W="$PCDINO_BUILD_DIR/test-work/doctor_pairs"
rm -rf "$W" && mkdir -p "$W"

run timeout 120 mpirun --oversubscribe -np 3 "$PCDINO_BIN" doctor --no-slurm-view --scratch "" --manifest "" \
  --min-busbw-gbps 1000000 --answer-timeout 60 --json "$W/doctor.json"
assert_rc 1 "three ranks below an unreachable floor: exit 1"
assert_contains "$OUT" "pairs of neighbours at the largest size" "the pairs are measured and listed"
assert_contains "$OUT" "every pair of neighbours is below it too: the network, not one node" \
  "no single node is blamed when every pair is slow"
assert_not_contains "$OUT" "network    " "no node has a failed network check"
assert_eq "$(/usr/bin/python3 -c "import json; p = json.load(open('$W/doctor.json'))['allreduce']['pairs_busbw_gb_s']; print(len(p), all(b > 0 for b in p))")" \
  "3 True" "doctor.json: three pairs, each measured"

run timeout 120 mpirun --oversubscribe -np 3 "$PCDINO_BIN" doctor --no-slurm-view --scratch "" --manifest "" \
  --answer-timeout 60 --json "$W/doctor.json"
assert_not_contains "$OUT" "pairs of neighbours" "no floor: no pairs"
finish
