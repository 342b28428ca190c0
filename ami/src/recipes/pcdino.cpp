// 85-pcdino.sh: pcdino itself, from a prebuilt package or built on the build instance from its source.
// The package's layout and package.txt: cmake/PcdinoPackage.cmake. Nothing goes under /opt/slurm here: the
// nodes mount it from the head node, whose OnNodeConfigured action installs the plugin from here.
#include "accelerator_image.hpp"
#include "pcdino/core/node_check_site.hpp"
#include "pcdino/core/text_template.hpp"
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

const char* const kPackage = R"SH(PKG=${PCDINO_FILES:-/tmp/pcdino-files}/@PACKAGE@
rm -rf "$PREFIX.new" && mkdir -p "$PREFIX.new"
tar -xzf "$PKG" -C "$PREFIX.new" --strip-components=1
# The image keeps manifest.json, verify.sh and the version stamps in /opt/pcdino beside the package.
for d in bin lib share; do rm -rf "${PREFIX:?}/$d"; mv "$PREFIX.new/$d" "$PREFIX/$d"; done
rm -rf "$PREFIX.new"
)SH";

// Built on the build instance as the cookbook builds Pyxis (install_pyxis.rb: against /opt/slurm/include),
// with the OS's packages, the AMI's Open MPI and libfabric, the image's CUDA and NCCL, and the pinned
// LibTorch. SLURM_PREFIX, MPI_HOME, EFA_HOME, PCDINO_PREFIX and PCDINO_FILES move it off ParallelCluster's
// paths; PCDINO_LIBTORCH_DIR names a LibTorch already on the machine instead of the download
// (docs/clusters.md).
const char* const kSourceBuild = R"SH(SLURM_PREFIX=${SLURM_PREFIX:-/opt/slurm}
MPI_HOME=${MPI_HOME:-/opt/amazon/openmpi}
EFA_HOME=${EFA_HOME:-/opt/amazon/efa}
# The Slurm that ParallelCluster @PC_VERSION@'s nodes run (@SLURM_SOURCE@). Slurm loads a SPANK plugin only
# of its own major.minor, so the headers must be that Slurm's: checked before anything is installed or built.
SLURM_RELEASE=@SLURM@
header=$SLURM_PREFIX/include/slurm/slurm_version.h
[ -f "$header" ] || fail "no $header: this is not ParallelCluster's AMI (its Slurm headers are missing)"
# SLURM_VERSION_NUMBER = major << 16 | minor << 8 | micro; Slurm names releases with a two-digit minor.
number=$(awk '$1 == "#define" && $2 == "SLURM_VERSION_NUMBER" {print $3}' "$header")
[ -n "$number" ] || fail "no SLURM_VERSION_NUMBER in $header"
headers=$(printf '%d.%02d.%d' $((number >> 16 & 255)) $((number >> 8 & 255)) $((number & 255)))
if [ "${headers%.*}" != "${SLURM_RELEASE%.*}" ]; then
  fail "$header is Slurm $headers, ParallelCluster @PC_VERSION@ runs Slurm $SLURM_RELEASE: a plugin built against these headers would not load; build on ParallelCluster @PC_VERSION@'s own AMI"
fi
SRC=${PCDINO_FILES:-/tmp/pcdino-files}/@SOURCE_PACKAGE@
[ -f "$SRC" ] || fail "missing files/@SOURCE_PACKAGE@: make it with scripts/package --source (see files/README)"
[ -x "$MPI_HOME/bin/mpicc" ] || fail "no $MPI_HOME/bin/mpicc (the EFA installer's Open MPI)"
# pcdino's dependencies from @OS@'s own packages (@OS_PACKAGES_SOURCE@).
@UPDATE@
@INSTALL@ @OS_PACKAGES@
if [ -n "${PCDINO_LIBTORCH_DIR:-}" ]; then
  TORCH=$PCDINO_LIBTORCH_DIR
  echo "pcdino: LibTorch from PCDINO_LIBTORCH_DIR=$TORCH instead of the pinned @LIBTORCH@"
else
  # PyTorch publishes no digests: the pinned one was recorded by @LIBTORCH_SOURCE@.
  TORCH=/opt/libtorch-@LIBTORCH@
  if [ ! -f "$TORCH/share/cmake/Torch/TorchConfig.cmake" ]; then
    wget -q -O /tmp/libtorch.zip "@LIBTORCH_URL@"
    echo "@LIBTORCH_SHA256@  /tmp/libtorch.zip" | sha256sum -c --quiet - ||
      fail "the LibTorch download is not the pinned @LIBTORCH@ (sha256 differs)"
    rm -rf "$TORCH.new" && mkdir -p "$TORCH.new"
    unzip -q /tmp/libtorch.zip -d "$TORCH.new"
    rm -rf "$TORCH" && mv "$TORCH.new/libtorch" "$TORCH" && rm -rf "$TORCH.new" /tmp/libtorch.zip
  fi
fi
WORK=$(mktemp -d /tmp/pcdino-build.XXXXXX)
tar -xzf "$SRC" -C "$WORK"
@PROMETHEUS_CPP@export PKG_CONFIG_PATH="$EFA_HOME/lib64/pkgconfig:$EFA_HOME/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The install keeps the link-time library paths (LibTorch, NCCL, Open MPI) as RUNPATH: nothing is copied.
cmake -S "$WORK/@SOURCE_DIR@" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCDINO_BUILD_TESTS=OFF \
  -DPCDINO_BUILD_BENCH=OFF -DCMAKE_PREFIX_PATH="$TORCH@PROMETHEUS_CPP_PREFIX@" -DPCDINO_REQUIRE_METRICS=ON \
  -DSLURM_INCLUDE_DIR="$SLURM_PREFIX/include" \
  -DMPI_HOME="$MPI_HOME" @CUDA_CMAKE@-DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON
cmake --build "$WORK/build" --parallel "$(nproc)"
DESTDIR="$WORK/stage" cmake --install "$WORK/build" >/dev/null
# The image keeps manifest.json, verify.sh and the version stamps in /opt/pcdino beside the build.
for d in bin lib share; do rm -rf "${PREFIX:?}/$d"; mv "$WORK/stage$PREFIX/$d" "$PREFIX/$d"; done
rm -rf "$WORK"
)SH";

const char* const kInstallChecks = R"SH(plugin=$PREFIX/lib/slurm/spank_pcdino.so
[ -f "$plugin" ] || fail "no lib/slurm/spank_pcdino.so"
missing=$(ldd "$PREFIX"/bin/* "$plugin" | awk '/not found/ {print $1}' | sort -u)
[ -z "$missing" ] || fail "libraries pcdino needs are missing: $missing"
"$PREFIX/bin/pcdino" --version | grep -q "pcdino $VERSION" || fail "pcdino --version is not $VERSION"
)SH";

const char* const kPluginInstall =
    R"SH("$PREFIX/bin/pcdino" ami check-plugin "$plugin" --slurm "$SLURM_RELEASE" ||
  fail "spank_pcdino.so is not built for Slurm $SLURM_RELEASE"
# Also where ParallelCluster's example plugstack.conf loads node-local plugins from (Pyxis's).
mkdir -p /usr/local/lib/slurm
install -m 0755 "$plugin" /usr/local/lib/slurm/spank_pcdino.so.new
mv -f /usr/local/lib/slurm/spank_pcdino.so.new /usr/local/lib/slurm/spank_pcdino.so
)SH";

// pcdino's node check as Slurm runs it (issue #60): the wrapper for ParallelCluster's paths (site file in
// /opt/slurm/etc/pcdino, which head-node.sh writes), that head-node.sh links into prolog.d and slurm.conf
// names HealthCheckProgram; the node's own disk keeps it, so a node with a pcdino image runs its own.
const char* const kNodeCheckInstall = R"SH(mkdir -p "$PREFIX/libexec/pcdino" /var/log/pcdino
"$PREFIX/bin/pcdino" node-check --wrapper --site @SITE@ --pcdino "$PREFIX/bin/pcdino" \
  >"$PREFIX/libexec/pcdino/node-check.new" || fail "pcdino node-check --wrapper failed"
chmod 0755 "$PREFIX/libexec/pcdino/node-check.new"
mv -f "$PREFIX/libexec/pcdino/node-check.new" "$PREFIX/libexec/pcdino/node-check"
)SH";

const char* const kMetricsCheck =
    R"SH(# The node exporter reads pcdino's metrics only from a build that writes them.
"$PREFIX/bin/pcdino" --version | grep -q "^  metrics   prometheus-cpp" || fail "pcdino is built without metrics"
)SH";

std::string node_check_install() {
  return fill_template(kNodeCheckInstall, {{"SITE", NodeCheckPaths{}.site}});
}

}  // namespace

std::string pcdino_package_recipe(const RecipeContext&) {
  return std::string(kPackage) + kInstallChecks + node_check_install() + "done_ok\n";
}

std::string pcdino_source_recipe(const RecipeContext& c) {
  return std::string(kSourceBuild) + kInstallChecks + kPluginInstall + node_check_install() + kMetricsCheck +
         (c.kind != nullptr ? c.kind->pcdino_check : "") + "done_ok\n";
}

}  // namespace pcdino::ami
