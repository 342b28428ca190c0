#include "pcdino/ami/spec.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "pcdino/core/error.hpp"

namespace pcdino::ami {

namespace {

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& what) const {
    const YAML::Mark m = node.Mark();
    const std::string at =
        m.is_null() ? source_
                    : source_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    throw ConfigError(at + ": " + path + ": " + what);
  }

  void only(const YAML::Node& map, const std::string& path, const std::set<std::string>& keys) const {
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      if (keys.count(key) == 0) {
        std::string known;
        for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
        fail(kv.first, path.empty() ? key : path + "." + key, "unknown key (known: " + known + ")");
      }
    }
  }

  YAML::Node map(const YAML::Node& parent, const std::string& key, const std::string& path,
                 bool required) const {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) {
      if (required) fail(parent, path, "missing");
      return YAML::Node(YAML::NodeType::Map);
    }
    if (!n.IsMap()) fail(n, path, "expected a mapping");
    return n;
  }

  std::string text(const YAML::Node& parent, const std::string& key, const std::string& path, bool required,
                   const std::string& pattern, const std::string& expected) const {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) {
      if (required) fail(parent, path, "missing (expected " + expected + ")");
      return "";
    }
    if (!n.IsScalar()) fail(n, path, "expected " + expected);
    if (!std::regex_match(n.Scalar(), std::regex(pattern)))
      fail(n, path, "expected " + expected + ", got '" + n.Scalar() + "'");
    return n.Scalar();
  }

  int integer(const YAML::Node& parent, const std::string& key, const std::string& path, int low, int high,
              int fallback) const {
    const YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) return fallback;
    try {
      const int v = n.as<int>();
      if (v >= low && v <= high) return v;
    } catch (const YAML::Exception&) {
    }
    fail(n, path,
         "expected an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "], got '" +
             (n.IsScalar() ? n.Scalar() : std::string("?")) + "'");
  }

 private:
  std::string source_;
};

const char* const kVersionPattern = R"([0-9]+(\.[0-9]+)*(-[0-9A-Za-z.]+)?)";
const char* const kInstancePattern = R"([a-z][a-z0-9-]*\.[0-9a-z]+)";

}  // namespace

ImageSpec parse_image_spec(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap())
    throw ConfigError(source + ": expected a mapping (name, region, base, build, versions, ...)");
  Reader r(source);
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
  r.only(build, "build", {"instance_type", "root_volume_gb"});
  const std::string type =
      r.text(build, "instance_type", "build.instance_type", false, kInstancePattern, "an EC2 instance type");
  if (!type.empty()) s.build_instance_type = type;
  s.root_volume_gb = r.integer(build, "root_volume_gb", "build.root_volume_gb", 35, 16384, 100);

  const std::string accel =
      r.text(root, "accelerator", "accelerator", false, "nvidia|habana|none", "nvidia, habana or none");
  if (!accel.empty()) s.accelerator = accel;

  const YAML::Node versions = r.map(root, "versions", "versions", true);
  std::set<std::string> allowed(std::begin(kCommonComponents), std::end(kCommonComponents));
  if (s.accelerator == "nvidia") allowed.insert(std::begin(kNvidiaComponents), std::end(kNvidiaComponents));
  for (const auto& kv : versions) {
    const std::string key = kv.first.Scalar();
    if (allowed.count(key) == 0) {
      const bool nvidia_only = std::find(std::begin(kNvidiaComponents), std::end(kNvidiaComponents), key) !=
                               std::end(kNvidiaComponents);
      r.fail(kv.first, "versions." + key,
             nvidia_only ? "only for accelerator: nvidia (this image is '" + s.accelerator + "')"
                         : "unknown component");
    }
    s.versions[key] = r.text(versions, key, "versions." + key, true, kVersionPattern, "a version like 1.2.3");
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
  std::ifstream in(path);
  if (!in) throw NoInputError("cannot read image spec '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_image_spec(text.str(), path);
}

}  // namespace pcdino::ami
