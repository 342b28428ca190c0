#!/usr/bin/env bash
# Integration (issue #36): the guards of a source-built image, by running the generated scripts here.
# 85-pcdino.sh of the default p5 example (ParallelCluster 3.16.3: Slurm 25.11.8) against an /opt/slurm whose
# slurm_version.h is this host's Slurm stops before installing or building, naming both versions; with
# 25.11 headers it passes that guard (and stops at the next, the missing source tarball). A prebuilt package
# whose package.txt names another Slurm is refused by 00-base.sh. `ami check` refuses a LibTorch for another
# CUDA than the image's, one whose CUDA needs a newer driver, and a source build on an OS without the
# packages (alinux2023), naming them.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/ami_source_build"
rm -rf "$W" && mkdir -p "$W/files"
EX="$PCDINO_SOURCE_DIR/ami/examples"
export PCDINO_PREFIX="$W/prefix" PCDINO_FILES="$W/files"

run "$PCDINO_BIN" ami generate "$EX/current.yaml" --out "$W/p5"
assert_rc 0 "generate the p5 example"
host=$(n=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' /usr/include/slurm/slurm_version.h)
  printf '%d.%02d.%d' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))
[ "$host" != 0.00.0 ] || fatal "no SLURM_VERSION_NUMBER in /usr/include/slurm/slurm_version.h (libslurm-dev)"
mkdir -p "$W/slurm-host/include" "$W/slurm-25.11/include"
cp -r /usr/include/slurm "$W/slurm-host/include/"
cp -r /usr/include/slurm "$W/slurm-25.11/include/"
sed -i 's/^#define SLURM_VERSION_NUMBER .*/#define SLURM_VERSION_NUMBER 0x190b08/' \
  "$W/slurm-25.11/include/slurm/slurm_version.h"

run env SLURM_PREFIX="$W/slurm-host" bash "$W/p5/scripts/85-pcdino.sh"
assert_rc 1 "85-pcdino.sh against another Slurm's headers stops"
assert_contains "$ERR" "slurm_version.h is Slurm $host, ParallelCluster 3.16.3 runs Slurm 25.11.8" \
  "naming both versions"
assert_not_contains "$ERR" "missing files/" "before anything else is looked at"
assert_not_contains "$OUT$ERR" "apt-get" "nothing installed"
[ ! -e "$W/prefix/bin" ] || fail "nothing built or installed"

run env SLURM_PREFIX="$W/slurm-25.11" bash "$W/p5/scripts/85-pcdino.sh"
assert_rc 1 "with 25.11 headers the guard passes and the next check stops it"
assert_contains "$ERR" "missing files/pcdino-0.1.0-src.tar.gz: make it with scripts/package --source" \
  "the source tarball is named"
assert_not_contains "$ERR" "slurm_version.h is" "the Slurm guard passed"

run env SLURM_PREFIX="$W/nothing" bash "$W/p5/scripts/85-pcdino.sh"
assert_rc 1 "no /opt/slurm at all"
assert_contains "$ERR" "no $W/nothing/include/slurm/slurm_version.h" "names the missing header"

# A prebuilt package (build.pcdino: package) records the Slurm its plugin is built for.
sed 's/^build:$/build:\n  pcdino: package/; /libtorch:/d' "$EX/current.yaml" >"$W/p5-package.yaml"
run "$PCDINO_BIN" ami generate "$W/p5-package.yaml" --out "$W/p5-package"
assert_rc 0 "generate with build.pcdino: package"
pkg=pcdino-0.1.0-ubuntu2204-x86_64
mkdir -p "$W/pkg/$pkg/share/pcdino"
printf 'name=pcdino\nversion=0.1.0\nos=ubuntu2204\nslurm=%s\n' "$host" >"$W/pkg/$pkg/share/pcdino/package.txt"
tar -czf "$W/files/$pkg.tar.gz" -C "$W/pkg" "$pkg"
run bash "$W/p5-package/scripts/00-base.sh"
assert_rc 1 "a package built for another Slurm is refused"
assert_contains "$ERR" "spank_pcdino.so is built for Slurm $host, ParallelCluster 3.16.3 runs Slurm 25.11.8" \
  "naming both versions"
assert_not_contains "$OUT" "already installed" "before anything is installed"

# ami check: LibTorch against the image's CUDA and driver; the OS's packages.
sed 's/libtorch: "2.5.1+cu124"/libtorch: "2.5.1+cu121"/' "$EX/current.yaml" >"$W/p5-cu121.yaml"
run "$PCDINO_BIN" ami check "$W/p5-cu121.yaml"
assert_rc 78 "a LibTorch for CUDA 12.1 on a CUDA 12.4 image is refused"
assert_contains "$OUT" "versions.libtorch 2.5.1+cu121 and versions.cuda 12.4.1 do not work together: LibTorch 2.5.1+cu121 is built for CUDA 12.1, the image's CUDA is 12.4" \
  "naming both"
sed 's/libtorch: "2.5.1+cu124"/libtorch: "2.5.1+cpu"/' "$EX/current.yaml" >"$W/p5-cpu.yaml"
run "$PCDINO_BIN" ami check "$W/p5-cpu.yaml"
assert_rc 78 "a CPU LibTorch on a GPU image is refused"
assert_contains "$OUT" "a CPU-only LibTorch on a GPU image trains on the CPU" "saying why"
sed 's/os: ubuntu2204/os: alinux2023/' "$EX/current.yaml" >"$W/p5-al2023.yaml"
run "$PCDINO_BIN" ami check "$W/p5-al2023.yaml"
assert_rc 78 "a source build on Amazon Linux 2023 is refused"
assert_contains "$OUT" "alinux2023's repositories lack HDF5 (amazonlinux/amazon-linux-2023 issue #296), OpenCV" \
  "naming the packages it lacks"
run "$PCDINO_BIN" ami check "$EX/current.yaml"
assert_rc 0 "the p5 example as it is"
finish
