# shellcheck shell=bash
# The bench harness: every benchmark prints rows of one table with defined columns, so runs on different
# machines compare. Sourced by the bench/*.sh scripts.
#
#   case       what was measured
#   layout     input layout (tiff = class folders of TIFF files, packed = HDF5 shards)
#   ranks      MPI ranks; threads = decoding threads per rank
#   cache      warm (files in page cache) or cold (caches dropped before the run)
#   images     images processed
#   seconds    wall time of the measured part (best of REPEAT runs)
#   images/s   images / seconds
#   vs base    images/s divided by the baseline row's images/s (same table)
set -euo pipefail

BENCH_REPEAT=${BENCH_REPEAT:-3}
BASELINE_RATE=""

bench_header() {
  printf '%-22s %-7s %5s %7s %5s %7s %8s %10s %8s\n' case layout ranks threads cache images seconds images/s "vs base"
}

# bench_row CASE LAYOUT RANKS THREADS CACHE IMAGES SECONDS [baseline]
bench_row() {
  local rate ratio
  rate=$(awk -v n="$6" -v s="$7" 'BEGIN { printf "%.0f", n / s }')
  if [ "${8:-}" = baseline ]; then BASELINE_RATE=$rate; fi
  ratio=$(awk -v r="$rate" -v b="${BASELINE_RATE:-0}" 'BEGIN { if (b > 0) printf "%.1fx", r / b; else print "-" }')
  printf '%-22s %-7s %5s %7s %5s %7s %8.2f %10s %8s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$rate" "$ratio"
}

drop_caches() {  # returns non-zero where the kernel does not let us
  sync && { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
}

# best_of CMD...: runs CMD BENCH_REPEAT times; prints the smallest value CMD printed on its last stdout line.
best_of() {
  local best="" v i
  for ((i = 0; i < BENCH_REPEAT; i++)); do
    v=$("$@" | tail -n 1)
    best=$(awk -v a="$best" -v b="$v" 'BEGIN { if (a == "" || b < a) print b; else print a }')
  done
  echo "$best"
}
