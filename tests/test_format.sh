#!/usr/bin/env bash
# Every C++ source of the project is formatted by the checked-in .clang-format (clang-format 14, Debian 12's).
source "$(dirname "$0")/lib/assert.sh"
: "${PCDINO_SOURCE_DIR:?}"
cd "$PCDINO_SOURCE_DIR" || fatal "no source dir"
format=$(command -v clang-format-14 || command -v clang-format) || fatal "clang-format is not installed (Debian: clang-format-14)"
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
[ ${#sources[@]} -gt 0 ] || fatal "no C++ sources found (not a git checkout?)"
run "$format" --dry-run --Werror "${sources[@]}"
assert_rc 0 "clang-format --dry-run over ${#sources[@]} files (run clang-format -i on the files named above)"
finish
