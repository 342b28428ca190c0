// 70-enroot-pyxis.sh: Enroot and Pyxis; what ParallelCluster's AMI already holds at the wanted version is
// checked, not rebuilt. Pyxis goes where ParallelCluster puts it (a node-local path; its example plugstack
// line names it); the head node's OnNodeConfigured action enables it (`pcdino cluster generate`,
// spank.pyxis).
#include "pcdino/core/text_template.hpp"
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

// Enroot from its release tag as NVIDIA's "From source" installation builds it (doc/installation.md of the
// tag): its release packages have no published digest (downloads.hpp). Laid out as those packages are
// (pkg/deb/rules: prefix= exec_prefix=/usr datarootdir=/usr/share), with the enroot+caps package's
// capabilities (`make setcap`), so that users import and convert images unprivileged. The build compiles its
// helpers against the tag's own musl (submodules at the commits the tag records, which git checks by id).
const char* const kEnrootBuild = R"SH(rm -rf /tmp/enroot-src
@CLONE@git -C /tmp/enroot-src submodule update -q --init
make -C /tmp/enroot-src install prefix= exec_prefix=/usr datarootdir=/usr/share
make -C /tmp/enroot-src setcap prefix= exec_prefix=/usr
rm -rf /tmp/enroot-src
)SH";

const char* const kEnrootCheck =
    R"SH(enroot version | grep -qx "$VERSION" || fail "enroot version is $(enroot version)"
)SH";

const char* const kPyxis = R"SH(rm -rf /tmp/pyxis
@CLONE@make -C /tmp/pyxis CPPFLAGS="-I /opt/slurm/include"
mkdir -p /usr/local/lib/slurm
install -m 0755 /tmp/pyxis/spank_pyxis.so /usr/local/lib/slurm/spank_pyxis.so.new
mv -f /usr/local/lib/slurm/spank_pyxis.so.new /usr/local/lib/slurm/spank_pyxis.so
rm -rf /tmp/pyxis
)SH";

const char* const kPyxisCheck =
    R"SH([ -f /usr/local/lib/slurm/spank_pyxis.so ] || fail "no /usr/local/lib/slurm/spank_pyxis.so"
done_ok
)SH";

// Enroot's build and runtime dependencies (its installation.md "From source", per OS family; libmd from
// 3.5.0 on).
std::string enroot_build(const RecipeContext& c) {
  const std::string& version = c.spec.versions.at("enroot");
  std::string packages =
      c.apt ? "curl gawk jq squashfs-tools parallel libcap2-bin" : "jq squashfs-tools parallel libcap";
  if (parallelcluster::compare_versions(version, "3.5.0") >= 0)
    packages += c.apt ? " libmd-dev" : " libmd-devel";
  return "@INSTALL@ " + packages + "\n" +
         fill_template(kEnrootBuild, {{"CLONE", clone_pinned(pin_of("enroot", version), "/tmp/enroot-src")}});
}

std::string pyxis_build(const RecipeContext& c) {
  return fill_template(kPyxis,
                       {{"CLONE", clone_pinned(pin_of("pyxis", c.spec.versions.at("pyxis")), "/tmp/pyxis")}});
}

}  // namespace

std::string enroot_pyxis_recipe(const RecipeContext& c) {
  const bool base_enroot = c.ships(c.spec.versions.at("enroot"), &parallelcluster::Release::enroot);
  const bool base_pyxis = c.ships(c.spec.versions.at("pyxis"), &parallelcluster::Release::pyxis);
  return (base_enroot ? shipped("enroot $VERSION") : enroot_build(c)) + kEnrootCheck +
         (base_pyxis ? shipped("Pyxis @PYXIS@") : pyxis_build(c)) + kPyxisCheck;
}

}  // namespace pcdino::ami
