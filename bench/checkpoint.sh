#!/usr/bin/env bash
# A checkpoint's write and reads at the workshop's model (vit_small/16, 5 channels, out_dim 65536, AdamW's
# moments: about 700 MB), side by side: pcdino's save_checkpoint / read_checkpoint_state / load_checkpoint
# (build/bench/pcdino_checkpoint_bench) against PyTorch's torch.save / torch.load of the same file's
# contents (the baseline; Debian's python3-torch). Medians of REPEAT runs, warm page cache, seconds and
# MB/s; "vs torch" is torch's seconds over pcdino's (above 1: pcdino faster).
#
# usage: bench/checkpoint.sh [BUILD_DIR]
source "$(dirname "$0")/lib.sh"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
W="$BUILD/bench-work/checkpoint"
rm -rf "$W" && mkdir -p "$W"
ours=$("$BUILD/bench/pcdino_checkpoint_bench" "$W" "$BENCH_REPEAT")
theirs=$(torch_py - "$W/checkpoint.pth" "$W/torch.pth" "$BENCH_REPEAT" <<'PY'
import statistics, sys, time, torch
src, dst, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
obj = torch.load(src, map_location="cpu")
def median(f):
    runs = []
    for _ in range(repeats):
        t = time.perf_counter(); f(); runs.append(time.perf_counter() - t)
    return statistics.median(runs)
print("save", median(lambda: torch.save(obj, dst)))
print("load", median(lambda: torch.load(dst, map_location="cpu")))
PY
)
value() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
mb=$(awk -v b="$(value bytes "$ours")" 'BEGIN { printf "%.0f", b / 1e6 }')
printf '%-34s %8s %8s %9s\n' operation seconds MB/s "vs torch"
row() {  # row NAME SECONDS [TORCH_SECONDS]
  awk -v n="$1" -v s="$2" -v t="${3:-}" -v mb="$mb" \
    'BEGIN { printf "%-34s %8.3f %8.0f %9s\n", n, s, mb / s, t == "" ? "-" : sprintf("%.1fx", t / s) }'
}
row "torch.save (baseline)" "$(value save "$theirs")"
row "pcdino save_checkpoint" "$(value save_checkpoint "$ours")" "$(value save "$theirs")"
row "torch.load (baseline)" "$(value load "$theirs")"
row "pcdino load_checkpoint" "$(value load_checkpoint "$ours")" "$(value load "$theirs")"
row "pcdino read_checkpoint_state" "$(value read_checkpoint_state "$ours")" "$(value load "$theirs")"
echo "($mb MB; $BENCH_REPEAT runs each; $(nproc) cores)"
