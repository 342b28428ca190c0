// 20-gaudi.sh: the Intel Gaudi software release's node packages.
#include "recipes/habana.hpp"

namespace pcdino::ami {

namespace {

// Intel documents habanalabs-installer.sh --type base; it installs these packages from Intel's Debian
// repository, which this script uses directly (the source line HabanaAI's READMEs and Dockerfiles use) so
// that every package is pinned and checked. The modules are built by DKMS, not loaded: the build instance
// has no Gaudi. The versions start with the pinned release and build (a prefix: the Debian revision's exact
// form was not confirmed from a package listing). Intel publishes no fingerprint of the repository's key
// (downloads.hpp): check_compatibility() refuses the image until one is recorded, which trusted_key() then
// checks.
std::string gaudi_recipe(const RecipeContext&) {
  return R"SH(@INSTALL@ "linux-headers-$(uname -r)" gnupg
codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
)SH" + trusted_key(signing_key("habana"), "/usr/share/keyrings/habana.gpg", false) +
         R"SH(echo "deb [signed-by=/usr/share/keyrings/habana.gpg] https://vault.habana.ai/artifactory/debian $codename main" \
  >/etc/apt/sources.list.d/habana.list
@UPDATE@
packages=(habanalabs-firmware habanalabs-dkms habanalabs-thunk habanalabs-graph habanalabs-rdma-core habanalabs-firmware-tools)
@INSTALL@ "${packages[@]/%/=$VERSION*}"
for p in "${packages[@]}"; do
  got=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
  case "$got" in "$VERSION"*) ;; *) fail "$p is '$got'" ;; esac
done
modinfo habanalabs >/dev/null 2>&1 || fail "DKMS did not build the habanalabs module for $(uname -r)"
command -v hl-smi >/dev/null || fail "hl-smi (habanalabs-firmware-tools) missing"
done_ok
)SH";
}

}  // namespace

const std::vector<Recipe>& habana_recipes() {
  static const std::vector<Recipe> table = {
      {"gaudi_software", "20-gaudi.sh", When::always, gaudi_recipe},
  };
  return table;
}

}  // namespace pcdino::ami
