// 50-efa.sh: the EFA installer (libfabric, the EFA driver and its Open MPI), or the base AMI's where it
// ships the wanted release.
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

const char* const kInstall =
    R"SH(if ! grep -q "EFA installer version: $VERSION" /opt/amazon/efa_installed_packages 2>/dev/null; then
  cd /tmp
  curl -fsSL -o efa.tar.gz "https://efa-installer.amazonaws.com/aws-efa-installer-$VERSION.tar.gz"
  tar -xf efa.tar.gz
  (cd aws-efa-installer && ./efa_installer.sh -y)
  rm -rf efa.tar.gz aws-efa-installer
fi
)SH";

const char* const kCheck =
    R"SH(grep -q "EFA installer version: $VERSION" /opt/amazon/efa_installed_packages || fail "efa_installed_packages"
/opt/amazon/efa/bin/fi_info --version >/dev/null || fail "fi_info does not run"
[ -x /opt/amazon/openmpi/bin/mpirun ] || fail "Open MPI of the EFA installer missing"
done_ok
)SH";

}  // namespace

std::string efa_recipe(const RecipeContext& c) {
  const bool base_efa =
      c.ships(c.spec.versions.at("efa_installer"), &parallelcluster::Release::efa_installer);
  return (base_efa ? shipped("EFA installer $VERSION") : std::string(kInstall)) + kCheck;
}

}  // namespace pcdino::ami
