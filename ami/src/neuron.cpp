// The Neuron (AWS Trainium and Inferentia) kind: its SDK releases, instance types, compatibility rules,
// template facts, verify checks and recipes, as one row of the accelerator kinds (accelerator_image.hpp).
#include "pcdino/ami/neuron.hpp"

#include <algorithm>

#include "accelerator_image.hpp"
#include "recipes/neuron.hpp"

namespace pcdino::ami {

const std::vector<NeuronRelease>& neuron_releases() {
  // Package versions: n2-manifest.json's trn1/inf2/trn2 entries. OSes: the runtime's last Amazon Linux 2
  // release is 2.19 (announce-eos-al2, announce-no-support-al2: from 2.20 only the driver supports it);
  // trn2 from 2.21 (release notes 2.21.0).
  static const std::vector<NeuronRelease> table = {
      {"2.19.0",
       "2.17.17.0",
       "2.21.41.0",
       "2.21.46.0",
       "2.18.3.0",
       {"ubuntu2204", "alinux2", "alinux2023"},
       {"trn1", "trn1n", "inf2"},
       "aws-neuron-sdk v2.19.0 src/helperscripts/n2-manifest.json, release notes 07/03/2024"},
      {"2.20.0",
       "2.18.12.0",
       "2.22.14.0",
       "2.22.26.0",
       "2.19.0.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2"},
       "aws-neuron-sdk v2.20.0 src/helperscripts/n2-manifest.json; announce-no-support-al2.rst"},
      {"2.21.0",
       "2.19.64.0",
       "2.23.110.0",
       "2.23.133.0",
       "2.20.204.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.21.0 src/helperscripts/n2-manifest.json; release notes 2.21.0 (Trn2)"},
      {"2.22.0",
       "2.20.28.0",
       "2.24.53.0",
       "2.24.59.0",
       "2.22.61.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.22.0 src/helperscripts/n2-manifest.json"},
      {"2.23.0",
       "2.21.37.0",
       "2.25.57.0",
       "2.25.65.0",
       "2.23.9.0",
       {"ubuntu2204", "alinux2023"},
       {"trn1", "trn1n", "inf2", "trn2"},
       "aws-neuron-sdk v2.23.0 src/helperscripts/n2-manifest.json; announce-no-support-ubuntu-20-base.rst"},
  };
  return table;
}

const NeuronRelease* neuron_release(const std::string& version) {
  for (const auto& r : neuron_releases())
    if (version == r.release) return &r;
  return nullptr;
}

namespace {

// AWS Neuron: the SDK release's packages, OSes and instance families.
void check_neuron(const ImageSpec& spec, std::vector<Incompatibility>* found) {
  const std::string version = spec.versions.at("neuron_sdk");
  const NeuronRelease* release = neuron_release(version);
  if (release == nullptr) {
    found->push_back({"versions.neuron_sdk " + version, "its packages",
                      "Neuron SDK " + version + " is not in the table of package versions (known: " +
                          joined(neuron_releases(), [](const NeuronRelease& r) { return r.release; }) + ")",
                      "aws-neuron-sdk src/helperscripts/n2-manifest.json, per release"});
    return;
  }
  if (std::find(release->os.begin(), release->os.end(), spec.os) == release->os.end()) {
    found->push_back({"versions.neuron_sdk " + version, "base.os " + spec.os,
                      "the Neuron runtime of " + version + " supports " +
                          joined(release->os, [](const char* os) { return os; }),
                      release->source});
  }
  const AcceleratorInstance* node = accelerator_instance(spec.verify_instance_type);
  if (node == nullptr || std::string(node->accelerator) != "neuron") return;
  const std::string family = instance_family(node->type);
  bool supported = false;
  for (const char* f : release->families) supported = supported || family == f;
  if (!supported) {
    found->push_back({"versions.neuron_sdk " + version, "verify.instance_type " + spec.verify_instance_type,
                      "Neuron SDK " + version + " supports " +
                          joined(release->families, [](const char* f) { return f; }) + " (" + node->device +
                          " needs a later release)",
                      release->source});
  }
}

// The release's four packages for 20-neuron.sh and verify.sh.
void neuron_facts(const ImageSpec& spec, Vars* v) {
  // check_compatibility() has refused a release without a table row.
  const NeuronRelease* neuron = neuron_release(spec.versions.at("neuron_sdk"));
  (*v)["NEURON_DKMS"] = neuron->dkms;
  (*v)["NEURON_RUNTIME"] = neuron->runtime_lib;
  (*v)["NEURON_COLLECTIVES"] = neuron->collectives;
  (*v)["NEURON_TOOLS"] = neuron->tools;
  (*v)["NEURON_SDK"] = neuron->release;
  (*v)["DESCRIPTION"] = "Neuron SDK " + spec.versions.at("neuron_sdk");
}

// verify.sh's checks of a Neuron image (only the image's own: their placeholders are its).
const char* const kChecks =
    R"SH(# Neuron SDK @NEURON_SDK@: aws-neuronx-dkms @NEURON_DKMS@; the module's version is compared up to a '-'.
module=$(modinfo -F version neuron 2>/dev/null)
check neuron_driver @NEURON_DKMS@ "${module%%-*}"
check "Neuron devices (@VERIFY_TYPE@)" @DEVICES@ "$(find /dev -maxdepth 1 -name 'neuron[0-9]*' 2>/dev/null | grep -c .)"
if PATH=/opt/aws/neuron/bin:$PATH neuron-ls >/dev/null 2>&1; then echo "ok      neuron-ls runs"; else
  echo "MISMATCH neuron-ls does not run"; problems=$((problems + 1)); fi
)SH";

const char* const kTrn1 =
    "aws-neuron-sdk about-neuron/arch/neuron-hardware/trn1-arch.rst (16 Trainium chips of 2 "
    "NeuronCore-v2), "
    "setup-trn1-multi-node-execution.rst ('trn1.32xlarge has 8 EFA devices, trn1n.32xlarge has 16'; "
    "no EFA on the smaller sizes)";
const char* const kTrn2 =
    "aws-neuron-sdk trn2-arch.rst (16 Trainium2 chips of 8 NeuronCore-v3), logical-neuroncore-config.rst "
    "(LNC=2 by default: 4 logical cores per chip)";
const char* const kInf2 = "aws-neuron-sdk inf2-arch.rst (Inferentia2 chips of 2 NeuronCore-v2)";

}  // namespace

// A Neuron image pins the Neuron SDK release ("2.22.0"), whose four packages' versions come from
// neuron_releases(). cores_per_device: NeuronCores per device as neuron-ls shows them by default.
const AcceleratorImage& neuron_image() {
  static const AcceleratorImage kind = {
      "neuron",
      {"neuron_sdk"},
      {},
      neuron_recipes(),
      {
          {"trn1.2xlarge", "neuron", "Trainium", 1, 2, kTrn1},
          {"trn1.32xlarge", "neuron", "Trainium", 16, 2, kTrn1},
          {"trn1n.32xlarge", "neuron", "Trainium", 16, 2, kTrn1},
          {"trn2.48xlarge", "neuron", "Trainium2", 16, 4, kTrn2},
          {"inf2.xlarge", "neuron", "Inferentia2", 1, 2, kInf2},
          {"inf2.8xlarge", "neuron", "Inferentia2", 1, 2, kInf2},
          {"inf2.24xlarge", "neuron", "Inferentia2", 6, 2, kInf2},
          {"inf2.48xlarge", "neuron", "Inferentia2", 12, 2, kInf2},
      },
      check_neuron,
      neuron_facts,
      kChecks,
      "",
      "",
  };
  return kind;
}

}  // namespace pcdino::ami
