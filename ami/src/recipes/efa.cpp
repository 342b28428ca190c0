// 50-efa.sh: the EFA installer (libfabric, the EFA driver and its Open MPI), or the base AMI's where it
// ships the wanted release.
#include "pcdino/core/text_template.hpp"
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

const char* const kInstall =
    R"SH(if ! grep -q "EFA installer version: $VERSION" /opt/amazon/efa_installed_packages 2>/dev/null; then
  cd /tmp
@FETCH@  tar -xf efa.tar.gz
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
  if (base_efa) return shipped("EFA installer $VERSION") + kCheck;
  const PinnedDownload& pin = pin_of("efa_installer", c.spec.versions.at("efa_installer"));
  return fill_template(kInstall, {{"FETCH", indented(fetch_pinned(pin, "/tmp/efa.tar.gz"), "  ")}}) + kCheck;
}

}  // namespace pcdino::ami
