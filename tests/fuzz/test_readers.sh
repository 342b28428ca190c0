#!/usr/bin/env bash
# Every libFuzzer target of scripts/fuzz (the readers of outside bytes: TIFFs, PNG and JPEG, the YAML files,
# pack.json, features.h5, IDX, the site and image specs, the node check's parsers, the metrics textfile, a
# checkpoint's pickle; issue #73) builds and runs its CI inputs (scripts/fuzz TARGET --ci: a count from its
# seeds and a fixed seed, ~8 s each, the same inputs at every run of the same code) under AddressSanitizer
# and UBSan, without a crash, a leak, an input over 1 s or an allocation over its limit. Long runs, which
# draw new inputs each time: scripts/fuzz TARGET SECONDS.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
command -v clang++-14 >/dev/null || command -v clang++ >/dev/null ||
  { echo "skipped: no clang++ (Debian 12's clang-14 and libclang-rt-14-dev)"; exit 77; }
export FUZZ_BUILD_DIR="$PCDINO_BUILD_DIR/fuzz-tree"
targets=$("$PCDINO_SOURCE_DIR/scripts/fuzz" --list | cut -d: -f1)
assert_eq "$(wc -w <<<"$targets")" 11 "scripts/fuzz lists its 11 targets"
for t in $targets; do
  run "$PCDINO_SOURCE_DIR/scripts/fuzz" "$t" --ci
  assert_rc 0 "$t: ${OUT##*$'\n'}${ERR:+ $ERR}"
done
run "$PCDINO_SOURCE_DIR/scripts/fuzz" nothing
assert_rc 64 "an unknown target is a usage error"
finish
