// NVIDIA's driver, Fabric Manager and dcgm-exporter, and the NVIDIA kind's table of recipes.
#include "recipes/nvidia.hpp"

#include "pcdino/core/text_template.hpp"

namespace pcdino::ami {

namespace {

const char* const kDriverInstall = R"SH(
# The installed module, not nvidia-smi: the build instance has no GPU.
current=$(modinfo -F version nvidia 2>/dev/null || true)
if [ "$current" != "$VERSION" ]; then
@FETCH@  # Built for the running kernel, not loaded: the build instance needs no GPU.
  sh /tmp/nvidia.run --silent --dkms --ui=none --no-questions --skip-module-load
  rm -f /tmp/nvidia.run
fi
)SH";

const char* const kDriverCheck = R"SH(installed=$(modinfo -F version nvidia 2>/dev/null || true)
[ "$installed" = "$VERSION" ] || fail "kernel module nvidia is '$installed'"
done_ok
)SH";

const char* const kFabricManagerApt = R"SH(BRANCH=${VERSION%%.*}
PKG=nvidia-fabricmanager-$BRANCH
apt-mark unhold "$PKG" >/dev/null 2>&1 || true
@INSTALL@ gnupg
@DOWNLOAD@DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "${debs[0]}"
rm -rf /tmp/pcdino-apt
apt-mark hold "$PKG"
installed=$(dpkg-query -W -f='${Version}' "$PKG")
[ "${installed%-*}" = "$VERSION" ] || fail "$PKG is $installed, the driver is $VERSION"
done_ok
)SH";

// The repository's packages are signed with NVIDIA's rpm key: yum checks them against it.
const char* const kFabricManagerYum = R"SH(PKG=nvidia-fabric-manager
yum versionlock delete "$PKG" >/dev/null 2>&1 || true
@KEY@cat >/etc/yum.repos.d/pcdino-cuda.repo <<'REPO'
[pcdino-cuda]
name=NVIDIA CUDA repository (pcdino: Fabric Manager)
baseurl=https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/
enabled=0
gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-pcdino-cuda
REPO
@INSTALL@ --enablerepo=pcdino-cuda "$PKG-$VERSION-1"
rm -f /etc/yum.repos.d/pcdino-cuda.repo
yum versionlock "$PKG"
installed=$(rpm -q --qf '%{VERSION}' "$PKG")
[ "$installed" = "$VERSION" ] || fail "$PKG is $installed, the driver is $VERSION"
done_ok
)SH";

const char* const kDcgmExporter =
    R"SH(# NVIDIA's dcgm-exporter from its CUDA repository for @FM_REPO@, at the pinned package version; the
# head node's Prometheus scrapes it on :@DCGM_EXPORTER_PORT@ (its default) for the dashboard's GPU panels.
PKG=@DCGM_EXPORTER_PACKAGE@
@INSTALL@ gnupg
@DOWNLOAD@needs=$(dpkg-deb -f "${debs[0]}" Depends)
dcgm=$(dpkg-query -W -f='${Package} ${Version}\n' 'datacenter-gpu-manager*' 2>/dev/null || true)
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "${debs[0]}"; then
  fail "$PKG $VERSION needs '$needs'; the AMI has '${dcgm:-no DCGM package}'"
fi
rm -rf /tmp/pcdino-apt
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

// The base AMI's driver at the wanted version is checked, not fetched; another is the pinned runfile.
std::string nvidia_driver_recipe(const RecipeContext& c) {
  const std::string& version = c.spec.versions.at("nvidia_driver");
  if (c.ships(version, &parallelcluster::Release::nvidia_driver))
    return shipped("NVIDIA driver $VERSION") + kDriverCheck;
  return std::string(c.apt ? R"SH(@INSTALL@ "linux-headers-$(uname -r)")SH"
                           : R"SH(@INSTALL@ "kernel-devel-$(uname -r)" || @INSTALL@ kernel-devel)SH") +
         fill_template(
             kDriverInstall,
             {{"FETCH", indented(fetch_pinned(pin_of("nvidia_driver", version), "/tmp/nvidia.run"), "  ")}}) +
         kDriverCheck;
}

// Replaces the base AMI's version-locked package with one from NVIDIA's CUDA repository, its signing key
// checked first (downloads.hpp; the rpm key has no recorded fingerprint, so check_compatibility() refuses
// Amazon Linux); ParallelCluster's node configuration starts the service where it finds NVSwitches.
std::string fabric_manager_recipe(const RecipeContext& c) {
  if (c.apt) return fill_template(kFabricManagerApt, {{"DOWNLOAD", cuda_repo_download("$PKG=${VERSION}-1")}});
  return fill_template(kFabricManagerYum,
                       {{"KEY", trusted_key(signing_key("nvidia-cuda-rpm"),
                                            "/etc/pki/rpm-gpg/RPM-GPG-KEY-pcdino-cuda", true)}});
}

// check_compatibility() has refused it off ubuntu2204. The package depends on DCGM 4
// (datacenter-gpu-manager-4-core), which the cookbook's nvidia_dcgm resource installs from ParallelCluster's
// own bucket (its platform.rb dcgm_version '4.6.0-1' in a 2026 commit, 02106c37; not read at a 3.16 tag) and
// leaves no NVIDIA repository behind: the package is fetched from NVIDIA's CUDA repository (listed only while
// it is fetched, its key checked) and its dependency checked against what is installed, before apt would
// look for it in a repository the image does not have.
std::string dcgm_exporter_recipe(const RecipeContext&) {
  return fill_template(kDcgmExporter, {{"DOWNLOAD", cuda_repo_download("$PKG=$VERSION")}});
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
