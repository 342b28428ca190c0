// NVIDIA's driver, Fabric Manager and dcgm-exporter, and the NVIDIA kind's table of recipes.
#include "recipes/nvidia.hpp"

namespace pcdino::ami {

namespace {

const char* const kDriver = R"SH(
# The installed module, not nvidia-smi: the build instance has no GPU.
current=$(modinfo -F version nvidia 2>/dev/null || true)
if [ "$current" != "$VERSION" ]; then
  wget -q -O /tmp/nvidia.run "https://us.download.nvidia.com/tesla/$VERSION/NVIDIA-Linux-x86_64-$VERSION.run"
  # Built for the running kernel, not loaded: the build instance needs no GPU.
  sh /tmp/nvidia.run --silent --dkms --ui=none --no-questions --skip-module-load
  rm -f /tmp/nvidia.run
fi
installed=$(modinfo -F version nvidia 2>/dev/null || true)
[ "$installed" = "$VERSION" ] || fail "kernel module nvidia is '$installed'"
done_ok
)SH";

const char* const kFabricManagerApt = R"SH(BRANCH=${VERSION%%.*}
PKG=nvidia-fabricmanager-$BRANCH
apt-mark unhold "$PKG" >/dev/null 2>&1 || true
wget -q -O /tmp/fm.deb "https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/${PKG}_${VERSION}-1_amd64.deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades /tmp/fm.deb
rm -f /tmp/fm.deb
apt-mark hold "$PKG"
installed=$(dpkg-query -W -f='${Version}' "$PKG")
[ "${installed%-*}" = "$VERSION" ] || fail "$PKG is $installed, the driver is $VERSION"
done_ok
)SH";

const char* const kFabricManagerYum = R"SH(PKG=nvidia-fabric-manager
yum versionlock delete "$PKG" >/dev/null 2>&1 || true
@INSTALL@ "https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/$PKG-$VERSION-1.x86_64.rpm"
yum versionlock "$PKG"
installed=$(rpm -q --qf '%{VERSION}' "$PKG")
[ "$installed" = "$VERSION" ] || fail "$PKG is $installed, the driver is $VERSION"
done_ok
)SH";

const char* const kDcgmExporter =
    R"SH(# NVIDIA's dcgm-exporter from its CUDA repository for @FM_REPO@, at the pinned package version; the
# head node's Prometheus scrapes it on :@DCGM_EXPORTER_PORT@ (its default) for the dashboard's GPU panels.
PKG=@DCGM_EXPORTER_PACKAGE@
wget -q -O /tmp/dcgm-exporter.deb "https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/${PKG}_${VERSION}_amd64.deb"
needs=$(dpkg-deb -f /tmp/dcgm-exporter.deb Depends)
dcgm=$(dpkg-query -W -f='${Package} ${Version}\n' 'datacenter-gpu-manager*' 2>/dev/null || true)
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades /tmp/dcgm-exporter.deb; then
  fail "$PKG $VERSION needs '$needs'; the AMI has '${dcgm:-no DCGM package}'"
fi
rm -f /tmp/dcgm-exporter.deb
installed=$(dpkg-query -W -f='${Version}' "$PKG")
[ "$installed" = "$VERSION" ] || fail "$PKG is '$installed', not $VERSION"
# The fields the dashboard and the alert read are among the ones the service exports.
for field in @DCGM_FIELDS@; do
  grep -q "^ *$field *," @DCGM_COUNTERS@ || fail "@DCGM_COUNTERS@ does not export $field"
done
systemctl enable nvidia-dcgm-exporter.service
done_ok
)SH";

}  // namespace

std::string nvidia_driver_recipe(const RecipeContext& c) {
  return std::string(c.apt ? R"SH(@INSTALL@ "linux-headers-$(uname -r)")SH"
                           : R"SH(@INSTALL@ "kernel-devel-$(uname -r)" || @INSTALL@ kernel-devel)SH") +
         kDriver;
}

// Replaces the base AMI's version-locked package; ParallelCluster's node configuration starts the service
// where it finds NVSwitches.
std::string fabric_manager_recipe(const RecipeContext& c) {
  return c.apt ? kFabricManagerApt : kFabricManagerYum;
}

// check_compatibility() has refused it off ubuntu2204. The package depends on DCGM 4
// (datacenter-gpu-manager-4-core), which the cookbook's nvidia_dcgm resource installs from ParallelCluster's
// own bucket (its platform.rb dcgm_version '4.6.0-1' in a 2026 commit, 02106c37; not read at a 3.16 tag) and
// leaves no NVIDIA repository behind: the dependency is checked against what is installed, before apt would
// look for it in a repository the image does not have.
std::string dcgm_exporter_recipe(const RecipeContext&) {
  return kDcgmExporter;
}

const std::vector<Recipe>& nvidia_recipes() {
  static const std::vector<Recipe> table = {
      {"nvidia_driver", "10-nvidia-driver.sh", When::always, nvidia_driver_recipe},
      {"fabric_manager", "15-fabric-manager.sh", When::pinned, fabric_manager_recipe},
      {"cuda", "20-cuda.sh", When::always, cuda_recipe},
      {"cudnn", "30-cudnn.sh", When::always, cudnn_recipe},
      {"nccl", "40-nccl.sh", When::always, nccl_recipe},
      {"aws_ofi_nccl", "60-aws-ofi-nccl.sh", When::always, aws_ofi_nccl_recipe},
      {"dcgm_exporter", "77-dcgm-exporter.sh", When::pinned, dcgm_exporter_recipe},
      {"nccl_tests", "80-nccl-tests.sh", When::always, nccl_tests_recipe},
  };
  return table;
}

}  // namespace pcdino::ami
