#!/usr/bin/env bash
# The folders match the programs (issue #18): every program's main is in cli/; no source includes a
# header from another folder's src/ (a component is used through its include/ only); each component's
# headers declare its own namespace pcdino::<component>; no branch on a stage's name (the stage table in
# core/stages.hpp says what differs between stages); and the cluster and AMI tools, which only write
# text, link none of the data layer's libraries (MPI, HDF5, OpenCV, libtiff).
set -euo pipefail
root="${PCDINO_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
build="${PCDINO_BUILD_DIR:-$root/build}"
cd "$root"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

components=(core app cluster ami spank train pipelines sbatch doctor monitoring)
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.cpp.in' | grep -E "^($(IFS='|'; echo "${components[*]}")|cli)/")
[ ${#sources[@]} -ge 50 ] || { echo "expected the project's C++ sources from git ls-files, found ${#sources[@]}" >&2; exit 1; }

# 1. Every main in cli/.
for f in $(grep -lE '^int main\(' "${sources[@]}" || true); do
  case "$f" in cli/*) ;; *) fail "$f defines main(); programs live in cli/" ;; esac
done

# 2. Headers only through include/: no quoted include that reaches into a src/ folder or climbs out of one.
hits=$(grep -nE '^#include "([^"]*/)?src/|^#include "\.\./' "${sources[@]}" || true)
[ -z "$hits" ] || fail "includes of another folder's sources:"$'\n'"$hits"
hits=$(grep -nE '^#include "[a-z_]+\.hpp"' cli/*.cpp | grep -v '"commands\.hpp"' || true)
[ -z "$hits" ] || fail "cli/ includes a header that is not its own:"$'\n'"$hits"

# 3. A namespace per component.
for c in "${components[@]}"; do
  [ "$c" = core ] && continue  # core is the project's base namespace, pcdino
  for h in $(git ls-files "$c/include/pcdino/$c/*.hpp"); do
    grep -qE "^namespace pcdino::$c( |::)" "$h" || fail "$h declares nothing in namespace pcdino::$c"
  done
done

# 4. No branch on a stage's name.
hits=$(git grep -nE 'if \(stage(_name|\.name)? ==' -- '*.cpp' '*.hpp' || true)
[ -z "$hits" ] || fail "branches on a stage's name (put the difference in the stage table):"$'\n'"$hits"

# 5. The cluster and AMI tools link no data-layer library: their link lines as CMake generated them.
link_line() {  # $1: an executable's path under the build folder
  if [ -f "$build/build.ninja" ]; then
    awk -v t="build $1 " 'index($0, t) == 1 { found = 1; next } found && /LINK_LIBRARIES/ { print; exit }' \
      "$build/build.ninja"
  else
    cat "$build/$(dirname "$1")/CMakeFiles/$(basename "$1").dir/link.txt" 2>/dev/null || true
  fi
}
for exe in tests/pcdino_cluster_tests tests/pcdino_ami_tests; do
  line=$(link_line "$exe")
  if [ -z "$line" ]; then
    fail "no link line for $exe in $build (configure the build first)"
    continue
  fi
  libs=$(grep -oE 'lib(mpi|hdf5|opencv|tiff|torch|pcdino_data)[a-z_0-9]*' <<<"$line" | sort -u || true)
  [ -z "$libs" ] || fail "$exe links the data layer: $(echo $libs)"
done

# 6. The folders' floors (issue #52): a component includes only the headers of components on lower floors,
# so no arrow runs up and no two folders loop (train/ and pipelines/ among them).
#   4  cli
#   3  pipelines (the extract stage runs the trainer's ViT)
#   2  train, doctor
#   1  monitoring, app, cluster, ami, spank, sbatch
#   0  core
declare -A floor=([core]=0 [monitoring]=1 [app]=1 [cluster]=1 [ami]=1 [spank]=1 [sbatch]=1 [train]=2 [doctor]=2
  [pipelines]=3 [cli]=4)
for c in "${!floor[@]}"; do
  while IFS=: read -r file used; do
    [ -n "$used" ] || continue
    [ "$used" = "$c" ] && continue
    if [ -z "${floor[$used]:-}" ] || [ "${floor[$used]}" -ge "${floor[$c]}" ]; then
      fail "$file (floor ${floor[$c]}) includes pcdino/$used/ (floor ${floor[$used]:-unknown}): an arrow up"
    fi
  done < <(git ls-files "$c/*.cpp" "$c/*.hpp" "$c/*.in" | xargs -r grep -oE '^#include "pcdino/[a-z_]+/' |
    sed -E 's#^([^:]+):.*pcdino/([a-z_]+)/$#\1:\2#' | sort -u)
done
# The trainer carries no faiss (the kNN stage's library): its program's link line.
line=$(link_line cli/pcdino-train)
if [ -n "$line" ] && grep -q faiss <<<"$line"; then fail "cli/pcdino-train links faiss"; fi

if [ "$failures" -gt 0 ]; then
  echo "$failures layout check(s) failed" >&2
  exit 1
fi
echo "ok: mains in cli/, components used through include/, a namespace each, no stage branches, cluster/ami free of MPI, HDF5, OpenCV, libtiff, no include from a higher floor, pcdino-train without faiss"
