#!/usr/bin/env bash
# Fuzzes the SPANK plugin's parsers with libFuzzer (Debian's clang-14) for a bounded time
# (FUZZ_SECONDS, default 30) from the corpus in spank/fuzz/corpus, under AddressSanitizer and UBSan. Built
# from the plugin's library sources and core's accelerator table, which is all it links of pcdino.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
CXX=$(command -v clang++-14 || command -v clang++ || true)
[ -n "$CXX" ] || fatal "clang++ not found (scripts/install-deps installs clang-14 and libclang-rt-14-dev)"
S="$PCDINO_SOURCE_DIR/spank"
W="$PCDINO_BUILD_DIR/test-work/spank_fuzz"
mkdir -p "$W/corpus"
run "$CXX" -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$S/include" -I"$PCDINO_SOURCE_DIR/core/include" "$S/fuzz/fuzz_parsers.cpp" "$S/src/profiles.cpp" \
  "$S/src/environment.cpp" "$S/src/args.cpp" "$PCDINO_SOURCE_DIR/core/src/accelerator.cpp" \
  -lyaml-cpp -o "$W/fuzz_parsers"
assert_rc 0 "fuzz target builds with $CXX"
[ "$RC" -eq 0 ] || { echo "$ERR" | tail -20; fatal "cannot build"; }
# New inputs go to the build tree; the seeds in the repository are only read.
run "$W/fuzz_parsers" -max_total_time="${FUZZ_SECONDS:-30}" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$W/corpus" "$S/fuzz/corpus"
assert_rc 0 "no crash, leak or sanitizer report in ${FUZZ_SECONDS:-30} s"
assert_contains "$ERR" "Done" "the fuzzer ran to its time limit"
echo "$ERR" | grep -E 'stat::number_of_executed_units|cov:' | tail -2
finish
