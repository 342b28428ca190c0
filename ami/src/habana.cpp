// The Habana (Intel Gaudi) kind: its releases, instance types, compatibility rules, template facts, verify
// checks and recipes, as one row of the accelerator kinds (accelerator_image.hpp).
#include "pcdino/ami/habana.hpp"

#include <algorithm>

#include "accelerator_image.hpp"
#include "recipes/habana.hpp"

namespace pcdino::ami {

const std::vector<GaudiRelease>& gaudi_releases() {
  // Each matrix page lists the devices it covers and the OSes. Amazon Linux 2 is last listed in 1.13,
  // first-generation Gaudi in 1.21 (1.22's page covers "Gaudi 2 ... and Gaudi 3" only); Amazon Linux 2023
  // never. Ubuntu 20.04 and 24.04 are not base.os values and are left out. Not confirmed: the 1.20 page
  // itself (not retrieved; 1.19's and 1.21's rows agree), and for 1.16-1.21 whether the OS list read is the
  // first-generation table's or the combined one's (both list Ubuntu 22.04).
  static const std::vector<GaudiRelease> table = {
      {"1.13", true, {"ubuntu2204", "alinux2"}, "docs.habana.ai Support_Matrix_v1.13.0"},
      {"1.14",
       true,
       {"ubuntu2204"},
       "docs.habana.ai Support_Matrix_v1.14.0 (release notes 1.14.0: Ubuntu 20.04 removed)"},
      {"1.15", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.15.0"},
      {"1.16", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.16.0"},
      {"1.17", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.17.0"},
      {"1.18", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.18.0"},
      {"1.19", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.19.0"},
      {"1.20", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.20.0"},
      {"1.21", true, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.21.0"},
      {"1.22", false, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.22.0 (Gaudi 2 and Gaudi 3 only)"},
      {"1.23", false, {"ubuntu2204"}, "docs.habana.ai Support_Matrix_v1.23.0 (Gaudi 2 and Gaudi 3 only)"},
  };
  return table;
}

namespace {

// Intel Gaudi: the release's support matrix (OS, first-generation Gaudi) and pcdino's script (Intel's
// Debian repository).
void check_habana(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  const std::string version = spec.versions.at("gaudi_software");
  const std::string line = major_minor(version);
  const GaudiRelease* release = nullptr;
  for (const auto& r : gaudi_releases())
    if (line == r.release) release = &r;
  if (release == nullptr) {
    found->push_back({"versions.gaudi_software " + version, "its support matrix",
                      "Intel Gaudi software " + line + " is not in the table (known: " +
                          joined(gaudi_releases(), [](const GaudiRelease& r) { return r.release; }) + ")",
                      "docs.habana.ai Support Matrix, per release"});
    return;
  }
  if (std::find(release->os.begin(), release->os.end(), spec.os) == release->os.end()) {
    found->push_back({"versions.gaudi_software " + version, "base.os " + spec.os,
                      "Intel Gaudi software " + line + " supports " +
                          joined(release->os, [](const char* os) { return os; }) +
                          " among pcdino's base.os values",
                      release->source});
  } else if (spec.os != "ubuntu2204") {
    found->push_back(
        {"accelerator habana", "base.os " + spec.os,
         "pcdino installs the Gaudi packages from Intel's Debian repository: use base.os ubuntu2204",
         "ami/src/recipes/habana.cpp, 20-gaudi.sh"});
  }
  const AcceleratorInstance* node = accelerator_instance(spec.verify_instance_type);
  if (node != nullptr && std::string(node->device) == "HL-205" && !release->first_gen) {
    found->push_back({"versions.gaudi_software " + version,
                      "verify.instance_type " + spec.verify_instance_type,
                      spec.verify_instance_type +
                          "'s first-generation Gaudi (HL-205) is last supported by Intel "
                          "Gaudi software 1.21; " +
                          line + " supports Gaudi 2 and Gaudi 3 only",
                      release->source});
  }
}

void habana_facts(const ImageSpec& spec, Vars* v) {
  (*v)["DESCRIPTION"] = "Intel Gaudi software " + spec.versions.at("gaudi_software");
}

// verify.sh's checks of a Gaudi image (only the image's own: their placeholders are its).
const char* const kChecks =
    R"SH(# hl-smi prints the driver as X.Y.Z-<git hash> (driver_version: the field name third-party tools query;
# Intel documents the -Q query form); the packages' build number is not in it.
gaudi=$(want gaudi_software)
driver=$(hl-smi -Q driver_version -f csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
check gaudi_software "${gaudi%%-*}" "${driver%%-*}"
check "Gaudi cards (@VERIFY_TYPE@)" @DEVICES@ "$(hl-smi -Q index -f csv,noheader 2>/dev/null | grep -c .)"
)SH";
const char* const kDl1 =
    "AWS Compute Blog 'Amazon EC2 DL1 instances Deep Dive' (8 Gaudi, 32 GB HBM2 each; four EFA ENIs)";

}  // namespace

// What a Gaudi image pins: the Intel Gaudi software release with its build ("1.21.0-555", as HabanaAI's
// release tags write it), the prefix of every habanalabs package's version.
const AcceleratorImage& habana_image() {
  static const AcceleratorImage kind = {
      "habana",
      {"gaudi_software"},
      {},
      habana_recipes(),
      {{"dl1.24xlarge", "habana", "HL-205", 8, 1, kDl1}},
      check_habana,
      habana_facts,
      kChecks,
      "",
      "",
  };
  return kind;
}

}  // namespace pcdino::ami
