// The lines that fetch what an image installs, each with the check of what it fetched (recipe.hpp).
#include "pcdino/core/error.hpp"
#include "pcdino/core/text_template.hpp"
#include "recipes/recipe.hpp"

namespace pcdino::ami {

namespace {

// "https://github.com/NVIDIA/nccl.git" -> "NVIDIA/nccl" (messages name the repository, not its URL).
std::string repository_name(const std::string& url) {
  std::string name = url;
  const std::string host = "https://github.com/";
  if (name.rfind(host, 0) == 0) name = name.substr(host.size());
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".git") == 0) name.resize(name.size() - 4);
  return name;
}

}  // namespace

const PinnedDownload& pin_of(const std::string& component, const std::string& version,
                             const std::string& variant) {
  const PinnedDownload* pin = pinned_download(component, version, variant);
  if (pin == nullptr)
    throw ConfigError("versions." + component + " " + version +
                      (variant.empty() ? "" : " (" + variant + ")") +
                      ": no pinned download with a recorded sha256 or commit (ami/src/downloads.cpp)");
  return *pin;
}

std::string fetch_pinned(const PinnedDownload& pin, const std::string& file) {
  return fill_template(R"SH(# @WHAT@: sha256 from @SOURCE@.
wget -q -O @FILE@ "@URL@"
echo "@SHA256@  @FILE@" | sha256sum -c --quiet - || fail "the @WHAT@ download is not the pinned file (sha256 differs)"
)SH",
                       {{"WHAT", std::string(pin.component) + " " + pin.version},
                        {"SOURCE", pin.source},
                        {"FILE", file},
                        {"URL", pin.url},
                        {"SHA256", pin.digest}});
}

std::string clone_pinned(const PinnedDownload& pin, const std::string& dir) {
  return fill_template(R"SH(# @REPO@ @TAG@ is commit @COMMIT@ (@SOURCE@).
git clone -q --depth 1 --branch @TAG@ @URL@ @DIR@
[ "$(git -C @DIR@ rev-parse HEAD)" = @COMMIT@ ] || fail "@REPO@'s tag @TAG@ is not commit @COMMIT@: the tag moved"
)SH",
                       {{"REPO", repository_name(pin.url)},
                        {"TAG", pin.tag},
                        {"COMMIT", pin.digest},
                        {"SOURCE", pin.source},
                        {"URL", pin.url},
                        {"DIR", dir}});
}

std::string trusted_key(const SigningKey& key, const std::string& keyring, bool armor) {
  if (*key.fingerprint == '\0')
    throw ConfigError(
        std::string("no fingerprint of the ") + key.name +
        " signing key is recorded (ami/src/downloads.cpp): nothing is installed from its repository");
  // Imported into a keyring of its own: exactly one key, the recorded one, goes on.
  return fill_template(R"SH(# The @NAME@ signing key, @FPR@ (@SOURCE@).
key=$(mktemp)
wget -q -O "$key" "@URL@"
gnupg=$(mktemp -d)
gpg --homedir "$gnupg" --batch --quiet --import "$key"
fpr=$(gpg --homedir "$gnupg" --with-colons --fingerprint | awk -F: '$1 == "pub" {p = 1; next} $1 == "fpr" && p {print $10; p = 0}')
[ "$fpr" = @FPR@ ] || fail "the @NAME@ key is '${fpr:-none}', not @FPR@"
gpg --homedir "$gnupg" --batch @ARMOR@--export @FPR@ >@KEYRING@.tmp
mv -f @KEYRING@.tmp @KEYRING@
rm -rf "$gnupg" "$key"
)SH",
                       {{"NAME", key.name},
                        {"FPR", key.fingerprint},
                        {"SOURCE", key.source},
                        {"URL", key.url},
                        {"ARMOR", armor ? "--armor " : ""},
                        {"KEYRING", keyring}});
}

std::string cuda_repo_download(const std::string& package) {
  return trusted_key(signing_key("nvidia-cuda-deb"), "/usr/share/keyrings/pcdino-cuda.gpg", false) +
         fill_template(
             R"SH(# NVIDIA's CUDA repository only while the package is fetched: apt checks it against the signed index.
echo "deb [signed-by=/usr/share/keyrings/pcdino-cuda.gpg] https://developer.download.nvidia.com/compute/cuda/repos/@FM_REPO@/x86_64/ /" \
  >/etc/apt/sources.list.d/pcdino-cuda.list
apt-get update -q
rm -rf /tmp/pcdino-apt && mkdir -p /tmp/pcdino-apt
chown _apt /tmp/pcdino-apt 2>/dev/null || true
(cd /tmp/pcdino-apt && apt-get download -q "@PACKAGE@")
rm -f /etc/apt/sources.list.d/pcdino-cuda.list
apt-get update -q
debs=(/tmp/pcdino-apt/*.deb)
[ -f "${debs[0]}" ] || fail "apt-get download @PACKAGE@ fetched nothing"
)SH",
             {{"PACKAGE", package}});
}

std::string indented(const std::string& text, const std::string& prefix) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out += (line.empty() ? "" : prefix) + line + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace pcdino::ami
