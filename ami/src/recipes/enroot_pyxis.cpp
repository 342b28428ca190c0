// 70-enroot-pyxis.sh: Enroot and Pyxis; what ParallelCluster's AMI already holds at the wanted version is
// checked, not rebuilt. Pyxis goes where ParallelCluster puts it (a node-local path; its example plugstack
// line names it); the head node's OnNodeConfigured action enables it (`pcdino cluster generate`,
// spank.pyxis).
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

const char* const kEnrootApt = R"SH(base=https://github.com/NVIDIA/enroot/releases/download/v$VERSION
wget -q -O /tmp/enroot.deb "$base/enroot_$VERSION-1_amd64.deb"
wget -q -O /tmp/enroot-caps.deb "$base/enroot+caps_$VERSION-1_amd64.deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades /tmp/enroot.deb /tmp/enroot-caps.deb
rm -f /tmp/enroot.deb /tmp/enroot-caps.deb
)SH";

const char* const kEnrootRpm = R"SH(base=https://github.com/NVIDIA/enroot/releases/download/v$VERSION
rpm -q "enroot-$VERSION" >/dev/null 2>&1 || @INSTALL@ "$base/enroot-$VERSION-1.@RPM_DIST@.x86_64.rpm" \
  "$base/enroot+caps-$VERSION-1.@RPM_DIST@.x86_64.rpm"
)SH";

const char* const kEnrootCheck =
    R"SH(enroot version | grep -qx "$VERSION" || fail "enroot version is $(enroot version)"
)SH";

const char* const kPyxis = R"SH(PYXIS=@PYXIS@
rm -rf /tmp/pyxis
git clone -q --depth 1 --branch "v$PYXIS" https://github.com/NVIDIA/pyxis.git /tmp/pyxis
make -C /tmp/pyxis CPPFLAGS="-I /opt/slurm/include"
mkdir -p /usr/local/lib/slurm
install -m 0755 /tmp/pyxis/spank_pyxis.so /usr/local/lib/slurm/spank_pyxis.so.new
mv -f /usr/local/lib/slurm/spank_pyxis.so.new /usr/local/lib/slurm/spank_pyxis.so
rm -rf /tmp/pyxis
)SH";

const char* const kPyxisCheck =
    R"SH([ -f /usr/local/lib/slurm/spank_pyxis.so ] || fail "no /usr/local/lib/slurm/spank_pyxis.so"
done_ok
)SH";

}  // namespace

std::string enroot_pyxis_recipe(const RecipeContext& c) {
  const bool base_enroot = c.ships(c.spec.versions.at("enroot"), &parallelcluster::Release::enroot);
  const bool base_pyxis = c.ships(c.spec.versions.at("pyxis"), &parallelcluster::Release::pyxis);
  return (base_enroot ? shipped("enroot $VERSION") : std::string(c.apt ? kEnrootApt : kEnrootRpm)) +
         kEnrootCheck + (base_pyxis ? shipped("Pyxis @PYXIS@") : std::string(kPyxis)) + kPyxisCheck;
}

}  // namespace pcdino::ami
