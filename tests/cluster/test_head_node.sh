#!/usr/bin/env bash
# Integration (issue #20): the package and the head node's OnNodeConfigured action on the local cluster.
# CPack's tarball, unpacked into an empty prefix, runs `pcdino --version`; the generated head-node.sh
# (cluster/examples/p5-efa), run against a Slurm tree laid out as ParallelCluster 3.11.1's (/opt/slurm/etc
# under a test prefix, Pyxis's example configuration in /opt/parallelcluster/examples), makes Slurm load
# spank_pcdino.so from that package: after the daemons restart, `sbatch --accel-profile` works and a job
# sees the profile's variables; a second run rewrites nothing and Pyxis's line stays; a Pyxis line already
# there (3.11.0's) is kept; verify.sh sees the plugin loaded, and fails when it is listed but not loadable;
# the node check's site file and its prolog.d link to the image's wrapper are there, written once.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
[ -f "$PCDINO_BUILD_DIR/spank/spank_pcdino.so" ] || fatal "no spank_pcdino.so (libslurm-dev missing at configure time?)"
W="$PCDINO_BUILD_DIR/test-work/cluster_head_node"
rm -rf "$W" && mkdir -p "$W/jobs" "$W/prefix"
EX="$PCDINO_SOURCE_DIR/cluster/examples/p5-efa"
version=$(sed -n 's/^project(pcdino VERSION \([0-9.]*\).*/\1/p' "$PCDINO_SOURCE_DIR/CMakeLists.txt")

# 1. The package: CPack from this build (what scripts/package runs after building).
run bash -c "cd '$PCDINO_BUILD_DIR' && cpack -G TGZ -B '$W/pkg'"
assert_rc 0 "cpack makes the package"
os=$(sed -n 's/^PCDINO_PACKAGE_OS:STRING=//p' "$PCDINO_BUILD_DIR/CMakeCache.txt")
pkg="$W/pkg/pcdino-$version-$os-x86_64.tar.gz"
assert_eq "$(ls "$W"/pkg/*.tar.gz)" "$pkg" "named pcdino-<version>-<os>-x86_64.tar.gz"
tar -xzf "$pkg" -C "$W/prefix" --strip-components=1
run env -i PATH=/usr/bin:/bin "$W/prefix/bin/pcdino" --version
assert_rc 0 "pcdino --version runs from the unpacked package"
assert_contains "$OUT" "pcdino $version" "and reports the package's version"
txt=$(cat "$W/prefix/share/pcdino/package.txt")
assert_contains "$txt" "os=$os" "package.txt names the OS it was built on"
assert_contains "$txt" "needs=libyaml-cpp.so" "and the system libraries it needs"
[ -f "$W/prefix/lib/slurm/spank_pcdino.so" ] && [ -f "$W/prefix/share/pcdino/spank/accel-profiles.yaml" ]
assert_eq "$?" 0 "it holds the plugin and its profiles"

# 2. A ParallelCluster 3.11.1-shaped tree: the local cluster's folder is <prefix>/opt/slurm, Pyxis's example
# configuration is where the cookbook leaves it. No Pyxis here: its stand-in line is optional, not required.
SLURM_PREFIX="$W/opt/slurm"
EXAMPLES="$W/opt/parallelcluster/examples"
mkdir -p "$EXAMPLES/pyxis"
pyxis_line="optional /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis"
echo "$pyxis_line" >"$EXAMPLES/pyxis/pyxis.conf"
cluster_up "$SLURM_PREFIX" "${TEST_CLUSTER_PORT:-18417}"
# The image's node-check wrapper, as its 85-pcdino.sh writes it (ami/examples/current), and ParallelCluster's
# prolog.d (3.6+).
mkdir -p "$W/prefix/libexec/pcdino" "$SLURM_PREFIX/etc/scripts/prolog.d"
"$W/prefix/bin/pcdino" node-check --wrapper --site /opt/slurm/etc/pcdino/node-check.yaml --pcdino "$W/prefix/bin/pcdino" \
  >"$W/prefix/libexec/pcdino/node-check" && chmod 0755 "$W/prefix/libexec/pcdino/node-check"
head_node() {
  run env SLURM_PREFIX="$SLURM_PREFIX" PCDINO_PREFIX="$W/prefix" PARALLELCLUSTER_EXAMPLES="$EXAMPLES" \
    bash "$EX/head-node.sh"
}
head_node
assert_rc 0 "head-node.sh runs"
assert_contains "$OUT" "plugstack.conf loads spank_pcdino.so" "and says what it did"
assert_eq "$(readlink "$SLURM_PREFIX/etc/scripts/prolog.d/95_pcdino_node_check")" "$W/prefix/libexec/pcdino/node-check" \
  "the image's node-check wrapper is a prolog of prolog.d (issue #60)"
assert_contains "$(cat "$SLURM_PREFIX/etc/pcdino/node-check.yaml")" $'  - MountDir: /fsx\n    StorageType: FsxLustre' \
  "its site file names the cluster's FSx"
run "$LC" down
run "$LC" up
assert_rc 0 "the daemons restart"

report='echo var=$NCCL_SOCKET_IFNAME rank=$RANK world=$WORLD_SIZE'
for cmd in sbatch srun; do
  run "$cmd" --help
  assert_contains "$OUT" "--accel-profile=NAME" "$cmd --help lists --accel-profile: Slurm loads the plugin"
done
job=$(sbatch --parsable --accel-profile=nvidia-efa -N2 -n2 -o "$W/jobs/job_%j.out" -e "$W/jobs/job_%j.err" \
  --wrap "srun bash -c '$report'")
wait_job "$job"
assert_eq "$(sort "$W/jobs/job_$job.out")" $'var=^docker,lo,veth rank=0 world=2\nvar=^docker,lo,veth rank=1 world=2' \
  "sbatch --accel-profile=nvidia-efa: both tasks see the profile's variables"
# Slurm reads Pyxis's line too: optional here, so the missing library is only logged.
assert_contains "$(cat "$W/jobs/job_$job.err")" "spank: /usr/local/lib/slurm/spank_pyxis.so: Dlopen of plugin file failed" \
  "Slurm reads Pyxis's line through the include"
run sbatch --accel-profile=bogus --wrap true
assert_rc 255 "an unknown profile is refused at submission"
assert_contains "$(cat "$SLURM_PREFIX/etc/plugstack.conf.d/pyxis.conf")" "$pyxis_line" "Pyxis enabled from the example"

# 3. Idempotent: a second run rewrites nothing (same bytes, same modification times).
snapshot() {
  find "$SLURM_PREFIX/etc" "$SLURM_PREFIX/lib" -maxdepth 2 \( -name 'plugstack*' -o -name '*.yaml' -o -name '*.so' \
    -o -name '*.conf' \) -type f -printf '%p %T@ %m %u\n' | sort
  cat "$SLURM_PREFIX/etc/plugstack.conf" "$SLURM_PREFIX"/etc/plugstack.conf.d/*
}
before=$(snapshot)
head_node
assert_rc 0 "head-node.sh runs a second time"
assert_not_contains "$OUT" "wrote" "and writes nothing"
assert_eq "$(snapshot)" "$before" "plugstack.conf, its includes, the plugin and profiles are unchanged"
assert_eq "$(grep -c 'plugstack.conf.d' "$SLURM_PREFIX/etc/plugstack.conf")" 1 "one include line"

# 4. verify.sh (ami/examples/current) on this node: the plugin is loaded and its libraries found; then the
# plugin is broken (listed, not loadable) and verify.sh says so and fails.
verify() {
  run env MANIFEST="$PCDINO_SOURCE_DIR/ami/examples/current/files/manifest.json" PCDINO_PREFIX="$W/prefix" \
    SLURM_PREFIX="$SLURM_PREFIX" bash "$PCDINO_SOURCE_DIR/ami/examples/current/verify.sh"
}
verify
assert_contains "$OUT" "ok      spank_pcdino loaded by srun (--accel-profile)" "verify.sh: loaded"
assert_contains "$OUT" "ok      pcdino libraries" "verify.sh: the package's libraries are found"
assert_contains "$OUT" "ok      pcdino $version" "verify.sh: the package's version"
echo "not a shared object" >"$SLURM_PREFIX/lib/slurm/spank_pcdino.so.new"
mv -f "$SLURM_PREFIX/lib/slurm/spank_pcdino.so.new" "$SLURM_PREFIX/lib/slurm/spank_pcdino.so"
verify
assert_rc 1 "verify.sh fails"
assert_contains "$OUT" "MISMATCH spank_pcdino: listed in $SLURM_PREFIX/etc/plugstack.conf.d/pcdino.conf but srun does not load it" \
  "naming where it is listed"
head_node
assert_contains "$OUT" "wrote $SLURM_PREFIX/lib/slurm/spank_pcdino.so" "head-node.sh repairs the plugin"
verify
assert_contains "$OUT" "ok      spank_pcdino loaded" "and it loads again"
cluster_down

# 5. ParallelCluster 3.11.0's shape: plugstack.conf with its include line and a Pyxis link already there.
T="$W/pc-3.11.0/opt/slurm"
mkdir -p "$T/etc/plugstack.conf.d" "$T/etc/scripts/prolog.d"
echo "include $T/etc/plugstack.conf.d/*" >"$T/etc/plugstack.conf"
echo "required /usr/local/lib/slurm/spank_pyxis.so runtime_path=/run/pyxis" >"$W/pc-3.11.0/pyxis.conf"
ln -s "$W/pc-3.11.0/pyxis.conf" "$T/etc/plugstack.conf.d/pyxis.conf"
run env SLURM_PREFIX="$T" PCDINO_PREFIX="$W/prefix" PARALLELCLUSTER_EXAMPLES="$EXAMPLES" bash "$EX/head-node.sh"
assert_rc 0 "head-node.sh on a 3.11.0-shaped tree"
assert_eq "$(cat "$T/etc/plugstack.conf")" "include $T/etc/plugstack.conf.d/*" "plugstack.conf untouched"
[ -L "$T/etc/plugstack.conf.d/pyxis.conf" ]
assert_eq "$?" 0 "Pyxis's link kept"
assert_contains "$(cat "$T/etc/plugstack.conf.d/pcdino.conf")" "spank_pcdino.so config=$T/etc/accel-profiles.yaml default=nvidia-efa" \
  "pcdino's line beside it"

# 6. No pcdino image on the head node: a clear failure, nothing written.
run env SLURM_PREFIX="$W/none/opt/slurm" PCDINO_PREFIX="$W/none/opt/pcdino" bash "$EX/head-node.sh"
assert_rc 1 "head-node.sh without the pcdino package fails"
assert_contains "$ERR" "no $W/none/opt/pcdino/lib/slurm/spank_pcdino.so: the head node must run the pcdino image" \
  "naming the missing file"
finish
