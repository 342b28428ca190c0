#!/usr/bin/env bash
# Integration, label "image" (issue #36): the generated scripts/85-pcdino.sh of a source-built image, run for
# real as root in a fresh Debian 12 root (debootstrap from Debian's mirror, entered with chroot in a private
# mount namespace) that is laid out as ParallelCluster's AMI: /opt/slurm (include/, lib/, sbin/),
# /opt/amazon/openmpi and /opt/amazon/efa. It installs the packages it names, builds pcdino from the
# `scripts/package --source` tarball and installs it to /opt/pcdino; the plugin it built is then loaded by
# the local two-node cluster (srun --help lists --accel-profile, a job's tasks see the profile's variables)
# and its `pcdino train` trains one epoch inside the root, whose metrics (the pinned prometheus-cpp the script
# built, since Ubuntu 22.04 packages none) are read back through Debian's node exporter.
#
# Stand-ins, each documented: Debian's Slurm 22.05 headers and binaries form /opt/slurm (the script's
# SLURM_RELEASE line names 22.05.8 instead of ParallelCluster 3.16.3's 25.11.8, since the local cluster's
# daemons are Debian's, and no Debian release packages Slurm 25.11; ami.source_build runs the same script's
# guard with 25.11 headers); Debian's Open MPI and libfabric stand where the EFA installer puts its own;
# Debian's CPU LibTorch replaces the download through PCDINO_LIBTORCH_DIR (the README's switch); Debian's
# prometheus-cpp_1.0.1.orig.tar.gz, the same bytes as the pinned GitHub archive, lies in files/.
#
# It downloads ~1.5 GB of Debian packages and builds pcdino once more (771 s from nothing on the 2-core
# machine, 149 s with what it keeps, 2026-11-27), so ctest skips it (exit 77) unless
# PCDINO_TEST_IMAGE_BUILD=1 (.ci/run sets it). What a later run can reuse is kept outside the build tree, in
# $PCDINO_IMAGE_CACHE (default $PCDINO_STACK_CACHE/image-build, beside scripts/stack's roots), so that
# CI's fresh clone reuses it: the bootstrapped root as a tarball named by its package list (delete it for a
# fresh root), the root's downloaded .deb files (its /var/cache/apt/archives), and a compiler cache for the
# script's builds (ccache in the root, CCACHE_DIR there; CMake takes the launcher from the environment, so
# the script itself is as generated).
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
source "$(dirname "$0")/../lib/pipeline.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
if [ "${PCDINO_TEST_IMAGE_BUILD:-0}" != 1 ]; then
  echo "skipped: set PCDINO_TEST_IMAGE_BUILD=1 to build pcdino in a fresh Debian 12 root (~1.5 GB, ~5 min)"
  exit 77
fi
[ "$(id -u)" = 0 ] || fatal "needs root (debootstrap, chroot, mount)"
command -v debootstrap >/dev/null || fatal "no debootstrap (scripts/install-deps installs it)"
W="$PCDINO_BUILD_DIR/test-work/image_build"
R="$W/root"
# The base AMI's stand-ins (Open MPI, libfabric, CPU LibTorch) and the root's compiler cache.
STAND_INS="ca-certificates libopenmpi-dev openmpi-bin libfabric-dev libtorch-dev libopenblas0-pthread ccache"
KEEP="${PCDINO_IMAGE_CACHE:-${PCDINO_STACK_CACHE:-/var/cache/pcdino/stacks}/image-build}"
CACHE="$KEEP/root-bookworm-$(printf '%s' "$STAND_INS" | sha256sum | cut -c1-12).tar"
rm -rf "$W" && mkdir -p "$W" "$KEEP/apt-archives" "$KEEP/ccache"

# 1. A fresh Debian 12 root with what ParallelCluster's AMI holds before pcdino's step.
if [ -f "$CACHE" ]; then
  mkdir -p "$R" && tar -xf "$CACHE" -C "$R"
else
  run debootstrap --variant=minbase bookworm "$R" http://deb.debian.org/debian
  assert_rc 0 "debootstrap bookworm"
fi
# in_root COMMAND...: chroot into $R with /proc, /sys, /dev, the kept .deb files (its apt archive) and the
# compiler cache (/var/cache/ccache) in a mount namespace of its own.
in_root() {
  unshare --mount --fork bash -c 'set -e; r=$1; keep=$2; shift 2
    mount -t proc proc "$r/proc"; mount --rbind /sys "$r/sys"; mount --rbind /dev "$r/dev"
    mkdir -p "$r/var/cache/apt/archives" "$r/var/cache/ccache"
    mount --bind "$keep/apt-archives" "$r/var/cache/apt/archives"
    mount --bind "$keep/ccache" "$r/var/cache/ccache"
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' \
    _ "$R" "$KEEP" "$@"
}
if [ ! -f "$CACHE" ]; then
  # Package scripts must not start services in the root.
  printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d" && chmod 755 "$R/usr/sbin/policy-rc.d"
  run in_root bash -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends $STAND_INS"
  assert_rc 0 "the base AMI's stand-ins in the root (Open MPI, libfabric, CPU LibTorch) and ccache"
  tar -cf "$CACHE.tmp" -C "$R" . && mv "$CACHE.tmp" "$CACHE"
fi
# ParallelCluster's layout: Slurm under /opt/slurm, the EFA installer's Open MPI and libfabric under /opt/amazon.
mkdir -p "$R/opt/slurm/include" "$R/opt/slurm/lib" "$R/opt/slurm/sbin" "$R/opt/amazon/openmpi/bin" \
  "$R/opt/amazon/efa/lib/pkgconfig"
cp -r /usr/include/slurm "$R/opt/slurm/include/"
cp -a /usr/lib/x86_64-linux-gnu/slurm-wlm/. "$R/opt/slurm/lib/"
cp /usr/sbin/slurmd "$R/opt/slurm/sbin/"
for tool in mpicc mpicxx mpirun; do ln -sf "/usr/bin/$tool" "$R/opt/amazon/openmpi/bin/$tool"; done
ln -sf /usr/lib/x86_64-linux-gnu/pkgconfig/libfabric.pc "$R/opt/amazon/efa/lib/pkgconfig/libfabric.pc"
slurm=$(n=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' /usr/include/slurm/slurm_version.h)
  printf '%d.%02d.%d' $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))

# 2. The image's files: the generated script and the source tarball.
cat >"$W/image.yaml" <<'YAML'
name: image-build-test
region: us-east-1
base: {parallelcluster_version: "3.16.3", os: ubuntu2204}
accelerator: none
versions: {efa_installer: "1.51.0", enroot: "3.5.0", pyxis: "0.20.0", pcdino: "0.1.0", libtorch: "2.5.1+cpu"}
YAML
run "$PCDINO_BIN" ami generate "$W/image.yaml" --out "$W/image"
assert_rc 0 "generate the source-built image"
run env PCDINO_BUILD_DIR="$W/src" "$PCDINO_SOURCE_DIR/scripts/package" --source
assert_rc 0 "scripts/package --source"
mkdir -p "$R/tmp/pcdino-files"
cp "$W/src/package/pcdino-0.1.0-src.tar.gz" "$R/tmp/pcdino-files/"
# Ubuntu 22.04 packages no prometheus-cpp: the script builds the pinned release, from files/ where a copy
# lies there. Debian's orig tarball is that release's tag archive, byte for byte (the script checks it).
PROM=$(sed -n 's|^prom=.*/\(prometheus-cpp-[0-9.]*\.tar\.gz\)$|\1|p' "$W/image/scripts/85-pcdino.sh")
[ -n "$PROM" ] || fail "the script builds no pinned prometheus-cpp"
PROM_CACHE="$KEEP/$PROM"
v=${PROM#prometheus-cpp-} && v=${v%.tar.gz}
if [ ! -f "$PROM_CACHE" ]; then
  curl -fsS -o "$PROM_CACHE.tmp" "http://deb.debian.org/debian/pool/main/p/prometheus-cpp/prometheus-cpp_$v.orig.tar.gz" &&
    mv "$PROM_CACHE.tmp" "$PROM_CACHE" || fatal "cannot download Debian's prometheus-cpp_$v.orig.tar.gz"
fi
cp "$PROM_CACHE" "$R/tmp/pcdino-files/$PROM"
grep -q '^SLURM_RELEASE=25.11.8$' "$W/image/scripts/85-pcdino.sh" || fail "the script pins 3.16.3's Slurm"
sed "s/^SLURM_RELEASE=25.11.8\$/SLURM_RELEASE=$slurm/" "$W/image/scripts/85-pcdino.sh" >"$R/tmp/85-pcdino.sh"

# 3. The script, as Packer runs it (as root, bash), with the documented LibTorch switch.
start=$SECONDS
# Compiles go through ccache: paths under /tmp (the script's mktemp build folder) are hashed relative.
run in_root bash -c 'export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache \
    CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR=/tmp CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G
  ccache --zero-stats >/dev/null
  PCDINO_LIBTORCH_DIR=/usr bash /tmp/85-pcdino.sh >/tmp/85-pcdino.log 2>&1 && rc=0 || rc=$?
  ccache --show-stats >/tmp/ccache-stats.txt 2>&1 || true
  exit "$rc"'
script_rc=$RC
OUT=$(<"$R/tmp/85-pcdino.log")
echo "85-pcdino.sh ran for $((SECONDS - start)) s (its output: $R/tmp/85-pcdino.log); ccache:" \
  "$(grep -E '^ *(Hits|Misses):' "$R/tmp/ccache-stats.txt" | tr -s ' ' | paste -sd ';')"
RC=$script_rc
assert_rc 0 "85-pcdino.sh installs the OS packages, builds and installs pcdino"
assert_contains "$OUT" "LibTorch from PCDINO_LIBTORCH_DIR=/usr instead of the pinned 2.5.1+cpu" "the switch is said"
assert_contains "$OUT" "pcdino 0.1.0 installed and checked" "its checks pass"
run in_root /opt/pcdino/bin/pcdino --version
assert_contains "$OUT" "metrics   prometheus-cpp $v " "pcdino on the image writes metrics (the pinned prometheus-cpp $v)"
assert_eq "$(cat "$R/opt/pcdino/versions/pcdino")" "0.1.0" "the version stamp"
PLUGIN="$R/opt/pcdino/lib/slurm/spank_pcdino.so"
run "$PCDINO_BIN" ami check-plugin "$PLUGIN" --slurm "$slurm"
assert_rc 0 "the plugin is built for the root's /opt/slurm ($slurm)"
cmp -s "$PLUGIN" "$R/usr/local/lib/slurm/spank_pcdino.so" || fail "the plugin is also where Pyxis's lives"
run in_root /opt/pcdino/bin/pcdino --version
assert_contains "$OUT" "slurm     $slurm" "pcdino --version names the Slurm it was built for"
run in_root bash /tmp/85-pcdino.sh
assert_contains "$OUT" "pcdino 0.1.0 already installed" "a second run does nothing"

# 4. The plugin built in the root, loaded by the local two-node cluster.
cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18977}"
cat >"$W/accel.yaml" <<'YAML'
profiles:
  image-test:
    env:
      - name: PCDINO_IMAGE_TEST
        value: "from-the-image"
YAML
echo "required $PLUGIN config=$W/accel.yaml default=image-test" >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"
run srun --help
assert_contains "$OUT" "--accel-profile=NAME" "srun --help lists the built plugin's --accel-profile"
run srun -N2 -n2 --accel-profile=image-test bash -c 'echo "$SLURM_NODEID $PCDINO_IMAGE_TEST"'
assert_rc 0 "a two-node step with the profile"
assert_eq "$(sort <<<"$OUT")" "0 from-the-image
1 from-the-image" "every task sees the profile's variable"

# 5. The built trainer trains one epoch inside the root.
mkdir -p "$R/work"
/usr/bin/python3 "$PCDINO_SOURCE_DIR/tests/pipelines/make_synthetic.py" "$R/work/data" u8x1 3 24 >/dev/null ||
  fatal "cannot write the synthetic dataset (python3-tifffile)"
tiny_pipeline "$R/work/pipeline.yaml" image /work
run in_root /opt/pcdino/bin/pcdino meanstd -c /work/pipeline.yaml
assert_rc 0 "the built pcdino's meanstd"
mkdir -p "$R/var/lib/prometheus/node-exporter"  # the node exporter's textfile folder, pcdino's default
run in_root /opt/pcdino/bin/pcdino train -c /work/pipeline.yaml --threads 1 --device cpu --model-dir /work/model
assert_rc 0 "the built pcdino trains one epoch"
[ -s "$R/work/model/checkpoint.pth" ] || fail "no checkpoint.pth after the epoch"
assert_eq "$(wc -l <"$R/work/model/log.txt")" 1 "one epoch in log.txt"

# 6. Its metrics, read back through a node exporter's textfile collector on the image's folder.
command -v prometheus-node-exporter >/dev/null || fatal "no prometheus-node-exporter (scripts/install-deps)"
EXPORTER=127.0.0.1:$((${TEST_CLUSTER_PORT:-18977} + 50))  # past the local cluster's ports, as monitoring.scrape
prometheus-node-exporter --web.listen-address="$EXPORTER" --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$R/var/lib/prometheus/node-exporter" >"$W/exporter.log" 2>&1 &
exporter=$!
scraped() { curl -sf "http://$EXPORTER/metrics" >"$W/scrape.txt"; }
wait_for 30 scraped || echo "the node exporter did not answer: $(tail -n 3 "$W/exporter.log")" >>"$W/scrape.txt"
kill "$exporter" 2>/dev/null || true
steps=$(sed -n 's/^pcdino_train_steps_total{.*} \([0-9.e+]*\)$/\1/p' "$W/scrape.txt")
if [ -n "$steps" ] && [ "$(printf '%.0f' "$steps")" -gt 0 ]; then
  pass "pcdino_train_steps_total $steps, read through the node exporter"
else
  fail "no pcdino_train_steps_total through the node exporter ($(grep -c '^pcdino_' "$W/scrape.txt") pcdino_ lines): $(tail -n 1 "$W/scrape.txt")"
fi
finish
