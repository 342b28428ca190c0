#!/usr/bin/env bash
# pcdino doctor's pairs of neighbours (issue #21), over real Open MPI on this host: with the group's bus
# bandwidth below the floor on three ranks, each pair (0,1), (1,2), (2,0) is measured alone (three rounds
# for an odd count) and reported; with every pair below an unreachable floor, no single node is blamed; with
# one rank CPU-starved, its two pairs fall below the floor and that rank, alone, fails the network check.
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

# Rank 2 made slow for real: alone on CPU 1 with three busy processes (each in a session of its own, as the
# scheduler shares a CPU between sessions first), ranks 0 and 1 on CPU 0. Over TCP its pairs run at ~0.02-0.09
# GB/s, the pair without it at ~0.5-0.95 (measured on this 2-core machine); the floor sits between. With seven
# such processes the starved rank's own probes (the memory probe) outran their 60 s on a slow day
# (2026-11-26), and it never answered.
HOGS=()
stop_hogs() {
  local pid
  for pid in "${HOGS[@]}"; do kill "$pid" 2>/dev/null; done
}
trap stop_hogs EXIT
for _ in 1 2 3; do
  setsid taskset -c 1 sh -c 'while :; do :; done' &
  HOGS+=($!)
done
args=(doctor --no-slurm-view --scratch "" --manifest "" --min-busbw-gbps 0.4 --answer-timeout 60 --json "$W/doctor.json")
run timeout 120 mpirun --oversubscribe -np 2 taskset -c 0 "$PCDINO_BIN" "${args[@]}" : -np 1 taskset -c 1 "$PCDINO_BIN" "${args[@]}"
assert_rc 1 "a slow rank: exit 1"
assert_contains "$OUT" "pairs of neighbours blame" "the pairs blame a node"
network_failures() {  # per rank, its failed network checks; then the pairs' busbw
  /usr/bin/python3 -c "import json; r = json.load(open('$W/doctor.json'))
print([[c['name'] for c in n['checks'] if c['name'] == 'network' and not c['ok']] for n in r['nodes']])
print('pairs (GB/s):', [round(b, 3) for b in r['allreduce']['pairs_busbw_gb_s']])"
}
assert_eq "$(network_failures | head -n 1)" "[[], [], ['network']]" \
  "rank 2, and only rank 2, fails the network check ($(network_failures | tail -n 1))"
finish
