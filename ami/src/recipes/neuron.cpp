// 20-neuron.sh: the Neuron SDK release's four node packages at their versions (pcdino/ami/neuron.hpp), from
// AWS's repository; the driver is built by DKMS, not loaded: the build instance has no Neuron device.
#include "recipes/neuron.hpp"

#include "pcdino/core/text_template.hpp"

namespace pcdino::ami {

namespace {

const char* const kAptRepository = R"SH(@INSTALL@ "linux-headers-$(uname -r)" gnupg
codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
@KEY@echo "deb [signed-by=/usr/share/keyrings/neuron.gpg] https://apt.repos.neuron.amazonaws.com $codename main" \
  >/etc/apt/sources.list.d/neuron.list
@UPDATE@
@INSTALL@ "aws-neuronx-dkms=@NEURON_DKMS@*" "aws-neuronx-runtime-lib=@NEURON_RUNTIME@*" \
  "aws-neuronx-collectives=@NEURON_COLLECTIVES@*" "aws-neuronx-tools=@NEURON_TOOLS@*"
installed() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }
)SH";

const char* const kYumRepository = R"SH(@INSTALL@ "kernel-devel-$(uname -r)" "kernel-headers-$(uname -r)"
@KEY@cat >/etc/yum.repos.d/neuron.repo <<'REPO'
[neuron]
name=Neuron YUM Repository
baseurl=https://yum.repos.neuron.amazonaws.com
enabled=1
metadata_expire=0
gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-neuron
REPO
rpm --import /etc/pki/rpm-gpg/RPM-GPG-KEY-neuron
@INSTALL@ "aws-neuronx-dkms-@NEURON_DKMS@*" "aws-neuronx-runtime-lib-@NEURON_RUNTIME@*" \
  "aws-neuronx-collectives-@NEURON_COLLECTIVES@*" "aws-neuronx-tools-@NEURON_TOOLS@*"
installed() { rpm -q --qf '%{VERSION}' "$1" 2>/dev/null || true; }
)SH";

const char* const kChecks =
    R"SH(for pv in aws-neuronx-dkms=@NEURON_DKMS@ aws-neuronx-runtime-lib=@NEURON_RUNTIME@ \
  aws-neuronx-collectives=@NEURON_COLLECTIVES@ aws-neuronx-tools=@NEURON_TOOLS@; do
  got=$(installed "${pv%%=*}")
  case "$got" in "${pv#*=}"*) ;; *) fail "${pv%%=*} is '$got', Neuron SDK $VERSION pins ${pv#*=}" ;; esac
done
modinfo neuron >/dev/null 2>&1 || fail "DKMS did not build the neuron module for $(uname -r)"
[ -x /opt/aws/neuron/bin/neuron-ls ] || fail "/opt/aws/neuron/bin/neuron-ls missing"
echo "export PATH=/opt/aws/neuron/bin:\$PATH" >/etc/profile.d/neuron.sh
done_ok
)SH";

// AWS's repository, checked against its signing key (downloads.hpp) before anything is installed from it.
std::string neuron_sdk_recipe(const RecipeContext& c) {
  const std::string key =
      c.apt ? trusted_key(signing_key("neuron"), "/usr/share/keyrings/neuron.gpg", false)
            : trusted_key(signing_key("neuron-rpm"), "/etc/pki/rpm-gpg/RPM-GPG-KEY-neuron", true);
  return fill_template(c.apt ? kAptRepository : kYumRepository, {{"KEY", key}}) + kChecks;
}

}  // namespace

const std::vector<Recipe>& neuron_recipes() {
  static const std::vector<Recipe> table = {
      {"neuron_sdk", "20-neuron.sh", When::always, neuron_sdk_recipe},
  };
  return table;
}

}  // namespace pcdino::ami
