#!/usr/bin/env bash
# Integration (issue #36): a SPANK plugin built for another Slurm major.minor is named as such. The plugin
# is really built (cmake, the spank_pcdino target) against a copy of this host's Slurm headers whose
# slurm_version.h says 23.11.10, as ParallelCluster 3.11's /opt/slurm/include does, and listed in the local
# cluster's plugstack.conf: the real srun (Debian's 22.05) refuses it, and `pcdino ami check-plugin`, the
# generated verify.sh and `pcdino doctor` each name both versions. The plugin built for this Slurm passes.
source "$(dirname "$0")/../lib/assert.sh"
source "$(dirname "$0")/../lib/cluster.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/spank_plugin_version"
rm -rf "$W" && mkdir -p "$W"
GOOD="$PCDINO_BUILD_DIR/spank/spank_pcdino.so"
[ -f "$GOOD" ] || fatal "no $GOOD (libslurm-dev missing at configure time?)"
# The other plugin is built from a copy of /usr/include/slurm, Debian's libslurm-dev: where another Slurm runs
# (scripts/stack slurm25.11's, in /opt/slurm), those headers are not its own and the test has nothing to
# compare against, so it says so and skips (77) instead of failing.
header=/usr/include/slurm/slurm_version.h
running=$(slurmd -V 2>/dev/null | awk '{print $2}')  # needs no slurm.conf, unlike scontrol
if [ ! -f "$header" ]; then
  echo "skipped: no $header (Debian's libslurm-dev) to build a plugin of another Slurm from"
  exit 77
fi
number=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' "$header")
headers=$(printf '%d.%02d' $((number >> 16)) $(((number >> 8) & 0xff)))
if [ "${running%.*}" != "$headers" ]; then
  echo "skipped: $header is Slurm $headers's, the Slurm here is ${running:-none} ($(command -v slurmd || echo 'no slurmd'))"
  exit 77
fi

# A 23.11-shaped header tree: Debian's headers, SLURM_VERSION_NUMBER = SLURM_VERSION_NUM(23, 11, 10).
mkdir -p "$W/slurm-23.11/include"
cp -r /usr/include/slurm "$W/slurm-23.11/include/"
sed -i 's/^#define SLURM_VERSION_NUMBER .*/#define SLURM_VERSION_NUMBER 0x170b0a/' \
  "$W/slurm-23.11/include/slurm/slurm_version.h"
run cmake -S "$PCDINO_SOURCE_DIR" -B "$W/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCDINO_WITH_TORCH=OFF \
  -DPCDINO_BUILD_TESTS=OFF -DPCDINO_BUILD_BENCH=OFF -DSLURM_INCLUDE_DIR="$W/slurm-23.11/include"
assert_rc 0 "configure against the 23.11 headers"
run cmake --build "$W/build" --target spank_pcdino
assert_rc 0 "build spank_pcdino against them"
OTHER="$W/build/spank/spank_pcdino.so"

cluster_up "$W/cluster" "${TEST_CLUSTER_PORT:-18917}"
slurm=$(scontrol --version | awk '{print $2}')

run "$PCDINO_BIN" ami check-plugin "$GOOD"
assert_rc 0 "the plugin built here loads here"
assert_contains "$OUT" "built for Slurm $slurm, the node runs $slurm" "and says so"
run "$PCDINO_BIN" ami check-plugin "$OTHER"
assert_rc 78 "the plugin built for 23.11 is refused"
assert_contains "$ERR" "is built for Slurm 23.11.10 but the node runs Slurm $slurm" "naming both versions"
assert_contains "$ERR" "rebuild pcdino against this Slurm's headers" "and the rebuild to do"
# Judged against a release's AMIs instead of this node: 3.11.1 runs 23.11.10, 3.16.3 runs 25.11.8.
run "$PCDINO_BIN" ami check-plugin "$OTHER" --parallelcluster 3.11.1
assert_rc 0 "the 23.11 plugin loads on ParallelCluster 3.11.1's AMIs"
run "$PCDINO_BIN" ami check-plugin "$OTHER" --parallelcluster 3.16.3
assert_rc 78 "the 23.11 plugin is refused for ParallelCluster 3.16.3"
assert_contains "$ERR" "is built for Slurm 23.11.10 but the node runs Slurm 25.11.8" "naming 3.16.3's Slurm"
assert_contains "$ERR" "(ParallelCluster 3.16.3's AMIs)" "and the release"
run "$PCDINO_BIN" ami check-plugin "$OTHER" --parallelcluster 3.14.1
assert_rc 78 "a release whose Slurm is unknown is refused, not guessed"
assert_contains "$ERR" "its Slurm is unknown" "saying so"

# Listed in plugstack.conf: the real srun refuses to load it (Slurm's own version check).
echo "required $OTHER" >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"
run srun -N1 true
assert_contains "$ERR" "Incompatible Slurm plugin $OTHER version (23.11.10)" "srun itself refuses the 23.11 plugin"

# Listed as optional, jobs still start (sbatch and srun skip it): verify.sh and the doctor can run.
echo "optional $OTHER" >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"

# verify.sh of a generated image, pointed at this cluster.
run "$PCDINO_BIN" ami generate "$PCDINO_SOURCE_DIR/ami/examples/workshop.yaml" -o "$W/image"
assert_rc 0 "generate an image"
mkdir -p "$W/prefix/bin" && ln -s "$PCDINO_BIN" "$W/prefix/bin/pcdino"
run env MANIFEST="$W/image/files/manifest.json" PCDINO_PREFIX="$W/prefix" SLURM_PREFIX="$LOCAL_CLUSTER_DIR" \
  bash "$W/image/verify.sh"
assert_contains "$OUT" "MISMATCH spank_pcdino version: $OTHER is built for Slurm 23.11.10 but the node runs Slurm $slurm" \
  "verify.sh names both versions"

# The doctor on a node of the cluster.
job=$(sbatch --parsable -N1 -o "$W/doctor_%j.out" --wrap "'$PCDINO_BIN' doctor --manifest '$W/image/files/manifest.json' --nccl false --json '$W/doctor.json'")
wait_job "$job"
assert_contains "$(cat "$W/doctor.json" 2>/dev/null)" "is built for Slurm 23.11.10 but the node runs Slurm $slurm" \
  "the doctor's spank_plugin check names both versions ($(tail -n 5 "$W/doctor_$job.out"))"

echo "required $GOOD" >"$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new"
mv "$LOCAL_CLUSTER_DIR/etc/plugstack.conf.new" "$LOCAL_CLUSTER_DIR/etc/plugstack.conf"
run env MANIFEST="$W/image/files/manifest.json" PCDINO_PREFIX="$W/prefix" SLURM_PREFIX="$LOCAL_CLUSTER_DIR" \
  bash "$W/image/verify.sh"
assert_contains "$OUT" "ok      spank_pcdino version: $GOOD built for Slurm $slurm" "verify.sh passes the plugin built here"
cluster_down

finish
