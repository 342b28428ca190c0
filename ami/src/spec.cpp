#include "pcdino/ami/spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "accelerator_image.hpp"
#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::ami {

namespace {

const char* const kVersionPattern = R"([0-9]+(\.[0-9]+)*(-[0-9A-Za-z.]+)?)";
const char* const kLibTorchPattern = R"([0-9]+\.[0-9]+\.[0-9]+\+(cpu|cu[0-9]{3}))";
const char* const kInstancePattern = R"([a-z][a-z0-9-]*\.[0-9a-z]+)";

}  // namespace

ImageSpec parse_image_spec(const std::string& yaml_text, const std::string& source) {
  YamlReader r(source);
  const YAML::Node root = r.load(yaml_text);
  if (!root.IsMap())
    throw ConfigError(source + ": expected a mapping (name, region, base, build, versions, ...)");
  r.only(root, "", {"name", "region", "base", "build", "accelerator", "versions", "verify"});
  ImageSpec s;
  s.source = source;
  s.name = r.text(root, "name", "name", true, R"([A-Za-z0-9][A-Za-z0-9._-]{0,100})",
                  "an image name ([A-Za-z0-9._-])");
  s.region = r.text(root, "region", "region", true, R"([a-z]{2}(-gov)?-[a-z]+-[0-9])",
                    "an AWS region like us-west-2");

  const YAML::Node base = r.map(root, "base", "base", true);
  r.only(base, "base", {"parallelcluster_version", "os", "ami"});
  s.parallelcluster_version = r.text(base, "parallelcluster_version", "base.parallelcluster_version", true,
                                     R"(3\.[0-9]+\.[0-9]+)", "a ParallelCluster 3.x.y version");
  s.os = r.text(base, "os", "base.os", true, "alinux2|alinux2023|ubuntu2204",
                "alinux2, alinux2023 or ubuntu2204");
  s.base_ami =
      r.text(base, "ami", "base.ami", false, R"(ami-[0-9a-f]{8,17})", "an AMI id like ami-0123456789abcdef0");

  const YAML::Node build = r.map(root, "build", "build", false);
  r.only(build, "build", {"instance_type", "root_volume_gb", "pcdino"});
  const std::string type =
      r.text(build, "instance_type", "build.instance_type", false, kInstancePattern, "an EC2 instance type");
  if (!type.empty()) s.build_instance_type = type;
  s.root_volume_gb = r.integer(build, "root_volume_gb", "build.root_volume_gb", 35, 16384, 100);
  const std::string from =
      r.text(build, "pcdino", "build.pcdino", false, "source|package",
             "source (build on the image) or package (a prebuilt scripts/package tarball)");
  if (!from.empty()) s.pcdino_from = from;

  // The accelerator kinds of core/accelerator.hpp, or none.
  const std::string accel = r.text(root, "accelerator", "accelerator", false,
                                   accelerator_names("|") + "|none", accelerator_names(", ") + " or none");
  if (!accel.empty()) s.accelerator = accel;

  const YAML::Node versions = r.map(root, "versions", "versions", true);
  // Components by accelerator: pinning another accelerator's is an error naming the one it belongs to.
  std::map<std::string, std::vector<std::string>> by_accelerator;
  for (const AcceleratorImage* kind : accelerator_images())
    by_accelerator[kind->name].assign(kind->components.begin(), kind->components.end());
  std::set<std::string> allowed(std::begin(kCommonComponents), std::end(kCommonComponents));
  const auto own = by_accelerator.find(s.accelerator);
  if (own != by_accelerator.end()) allowed.insert(own->second.begin(), own->second.end());
  if (s.pcdino_from == "source")
    allowed.insert(std::begin(kSourceBuildComponents), std::end(kSourceBuildComponents));
  std::set<std::string> optional(std::begin(kOptionalComponents), std::end(kOptionalComponents));
  if (const AcceleratorImage* kind = accelerator_image(s.accelerator))
    optional.insert(kind->optional_components.begin(), kind->optional_components.end());
  for (const auto& kv : versions) {
    const std::string key = kv.first.Scalar();
    if (allowed.count(key) == 0 && optional.count(key) == 0) {
      std::string owner;
      for (const auto& [accelerator, components] : by_accelerator)
        if (std::find(components.begin(), components.end(), key) != components.end()) owner = accelerator;
      const bool source_only = key == kSourceBuildComponents[0];
      r.fail(kv.first, "versions." + key,
             !owner.empty() ? "only for accelerator: " + owner + " (this image is '" + s.accelerator + "')"
             : source_only  ? "only for build.pcdino: source (a prebuilt package was linked elsewhere)"
                            : "unknown component");
    }
    s.versions[key] =
        key == kSourceBuildComponents[0]
            ? r.text(versions, key, "versions." + key, true, kLibTorchPattern,
                     "a LibTorch release and variant like 2.5.1+cu124 or 2.5.1+cpu")
            : r.text(versions, key, "versions." + key, true, kVersionPattern, "a version like 1.2.3");
  }
  for (const auto& key : allowed) {
    if (s.versions.count(key) == 0) r.fail(versions, "versions." + key, "missing: every component is pinned");
  }

  const YAML::Node verify = r.map(root, "verify", "verify", false);
  r.only(verify, "verify", {"instance_type", "nodes", "gpus_per_node"});
  s.verify_instance_type = r.text(verify, "instance_type", "verify.instance_type", false, kInstancePattern,
                                  "an EC2 instance type");
  if (s.verify_instance_type.empty()) s.verify_instance_type = s.build_instance_type;
  s.verify_nodes = r.integer(verify, "nodes", "verify.nodes", 1, 1024, 2);
  s.verify_gpus_per_node = r.integer(verify, "gpus_per_node", "verify.gpus_per_node", 0, 64, 0);
  return s;
}

ImageSpec load_image_spec(const std::string& path) {
  return parse_image_spec(read_file(path, "image spec"), path);
}

}  // namespace pcdino::ami
