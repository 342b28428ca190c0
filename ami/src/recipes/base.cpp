// 00-base.sh: pcdino's package (or source tarball) is checked first, so that a missing or foreign one fails
// the build before the hour of drivers, CUDA and NCCL; then the build tools every later recipe uses.
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

// A source build needs its tarball.
const char* const kSourceCheck = R"SH(FILES=${PCDINO_FILES:-/tmp/pcdino-files}
[ -f "$FILES/@SOURCE_PACKAGE@" ] || fail "missing files/@SOURCE_PACKAGE@: make it with scripts/package --source (see files/README)"
)SH";

// A prebuilt package must be for the image's OS and its Slurm.
const char* const kPackageCheck = R"SH(FILES=${PCDINO_FILES:-/tmp/pcdino-files}
PKG=$FILES/@PACKAGE@
[ -f "$PKG" ] || fail "missing files/@PACKAGE@: make it with scripts/package on @OS@ (see files/README)"
facts=$(tar -xzOf "$PKG" "@PACKAGE_DIR@/share/pcdino/package.txt" 2>/dev/null || true)
built=$(sed -n 's/^os=//p' <<<"$facts")
[ "$built" = @OS@ ] || fail "files/@PACKAGE@ was built for '${built:-no package.txt}', the image is @OS@"
SLURM_RELEASE=@SLURM@
slurm=$(sed -n 's/^slurm=//p' <<<"$facts")
if [ -n "$SLURM_RELEASE" ] && [ "${slurm%.*}" != "${SLURM_RELEASE%.*}" ]; then
  fail "files/@PACKAGE@'s spank_pcdino.so is built for Slurm ${slurm:-unknown}, ParallelCluster @PC_VERSION@ runs Slurm $SLURM_RELEASE (@SLURM_SOURCE@): rebuild it with scripts/package -DSLURM_INCLUDE_DIR=/opt/slurm/include on that release's AMI, or use build.pcdino: source"
fi
)SH";

const char* const kAptTools = R"SH(@UPDATE@
@INSTALL@ build-essential git wget curl tar autoconf automake libtool pkg-config
command -v git >/dev/null || fail "git missing"
done_ok
)SH";

const char* const kYumTools = R"SH(@INSTALL@ gcc gcc-c++ make git wget tar autoconf automake libtool
command -v git >/dev/null || fail "git missing"
done_ok
)SH";

}  // namespace

std::string base_recipe(const RecipeContext& c) {
  return std::string(c.spec.pcdino_from == "source" ? kSourceCheck : kPackageCheck) +
         (c.apt ? kAptTools : kYumTools);
}

}  // namespace pcdino::ami
