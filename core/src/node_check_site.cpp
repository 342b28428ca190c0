#include "pcdino/core/node_check_site.hpp"

#include <yaml-cpp/yaml.h>

#include <set>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino {

namespace {
const char* const kAbsolute = R"(/[A-Za-z0-9/_.@+-]*)";
}  // namespace

const char* const kImageNodeCheckWrapper = "/opt/pcdino/libexec/pcdino/node-check";

const std::vector<NodeCheckSiteKey>& node_check_site_keys() {
  static const std::vector<NodeCheckSiteKey> keys = {
      {"SharedStorage",
       "the shared filesystems, as ParallelCluster's SharedStorage: [{MountDir, StorageType}] (StorageType "
       "optional)"},
      {"LocalScratch", "local scratch directories, judged where they exist"},
      {"MinScratchGiB", "free space each scratch directory needs (GiB)"},
      {"Manifest", "the image manifest the node's versions are compared with (\"\": none)"},
      {"ProbeSeconds",
       "each probe's time limit (s), 1 to 20: the check stays under the 60 s Slurm gives a "
       "HealthCheckProgram"},
      {"Dcgm", "run dcgmi diag -r 1 where dcgmi exists (true/false)"},
      {"TextfileDir", "the node exporter's textfile collector folder for the verdict's metrics (\"\": none)"},
      {"DrainGuardPercent",
       "the drain guard, 1 to 100: no node is drained for a finding that this share (%) of its partitions' "
       "nodes are already drained for (a fault they share); 100: off"},
  };
  return keys;
}

const std::vector<StorageFilesystems>& storage_filesystems() {
  static const std::vector<StorageFilesystems> table = {
      {"FsxLustre", {"lustre"}},     {"FileCache", {"lustre"}},       {"Efs", {"nfs4", "nfs"}},
      {"FsxOntap", {"nfs", "nfs4"}}, {"FsxOpenZfs", {"nfs", "nfs4"}}, {"Ebs", {"ext4", "xfs"}},
  };
  return table;
}

NodeCheckSite parse_node_check_site(const std::string& text, const std::string& source) {
  const YamlReader r(source);
  const YAML::Node root = r.load(text);
  NodeCheckSite site;
  site.source = source;
  if (!root.IsDefined() || root.IsNull()) return site;
  if (!root.IsMap())
    r.fail(root, "", "expected a mapping of " + std::to_string(node_check_site_keys().size()) + " keys");
  std::set<std::string> known;
  for (const auto& k : node_check_site_keys()) known.insert(k.key);
  r.only(root, "", known);
  if (const YAML::Node list = root["SharedStorage"]; list.IsDefined()) {
    if (!list.IsSequence()) r.fail(list, "SharedStorage", "expected a list of {MountDir, StorageType}");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string path = "SharedStorage[" + std::to_string(i) + "]";
      if (!list[i].IsMap()) r.fail(list[i], path, "expected {MountDir, StorageType}");
      r.only(list[i], path, {"MountDir", "StorageType"});
      SharedStorage s;
      s.mount_dir = r.text(list[i], "MountDir", path + ".MountDir", true, kAbsolute, "an absolute directory");
      std::string types;
      for (const auto& t : storage_filesystems())
        types += std::string(types.empty() ? "" : "|") + t.storage_type;
      s.storage_type = r.text(list[i], "StorageType", path + ".StorageType", false, types, "one of " + types);
      site.shared_storage.push_back(s);
    }
  }
  if (const YAML::Node list = root["LocalScratch"]; list.IsDefined()) {
    if (!list.IsSequence()) r.fail(list, "LocalScratch", "expected a list of directories");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].IsScalar() || list[i].Scalar().empty() || list[i].Scalar().front() != '/')
        r.fail(list[i], "LocalScratch[" + std::to_string(i) + "]", "expected an absolute directory");
      site.local_scratch.push_back(list[i].Scalar());
    }
  }
  site.min_scratch_gib = r.integer(root, "MinScratchGiB", "MinScratchGiB", 0, 1 << 20, site.min_scratch_gib);
  if (root["Manifest"].IsDefined())
    site.manifest =
        r.text(root, "Manifest", "Manifest", false, std::string("|") + kAbsolute, "an absolute path or \"\"");
  site.probe_seconds =
      r.integer(root, "ProbeSeconds", "ProbeSeconds", 1, kMaxProbeSeconds, site.probe_seconds);
  site.dcgm = r.boolean(root, "Dcgm", "Dcgm", site.dcgm);
  if (root["TextfileDir"].IsDefined())
    site.textfile_dir = r.text(root, "TextfileDir", "TextfileDir", false, std::string("|") + kAbsolute,
                               "an absolute folder or \"\"");
  site.drain_guard_percent =
      r.integer(root, "DrainGuardPercent", "DrainGuardPercent", 1, 100, site.drain_guard_percent);
  return site;
}

NodeCheckSite read_node_check_site(const std::string& path) {
  return parse_node_check_site(read_file(path, "the node check's site file"), path);
}

std::string write_node_check_site(const NodeCheckSite& site, const std::string& generator) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& s : site.shared_storage) {
    YAML::Node n;
    n["MountDir"] = s.mount_dir;
    if (!s.storage_type.empty()) n["StorageType"] = s.storage_type;
    root["SharedStorage"].push_back(n);
  }
  for (const auto& d : site.local_scratch) root["LocalScratch"].push_back(d);
  root["MinScratchGiB"] = site.min_scratch_gib;
  root["Manifest"] = site.manifest;
  root["ProbeSeconds"] = site.probe_seconds;
  root["Dcgm"] = site.dcgm;
  root["TextfileDir"] = site.textfile_dir;
  root["DrainGuardPercent"] = site.drain_guard_percent;
  YAML::Emitter out;
  out.SetIndent(2);
  out << root;
  return "# pcdino node check: what every node of this cluster should show (pcdino node-check --help).\n# "
         "Written by " +
         generator + ".\n" + out.c_str() + "\n";
}

std::string node_check_wrapper(const NodeCheckPaths& paths) {
  std::string path;
  for (const auto& p : paths.path) path += (path.empty() ? "" : ":") + p;
  return "#!/bin/sh\n"
         "# pcdino's node check as Slurm runs it: the Prolog (Prolog= with PrologFlags=Alloc, or a file in\n"
         "# ParallelCluster's prolog.d) and the HealthCheckProgram. A finding of severity drain drains this "
         "node\n"
         "# with the reason \"pcdino: ...\"; in the prolog it also fails, so Slurm requeues the job "
         "elsewhere.\n"
         "# Written by `pcdino node-check --wrapper`; see `pcdino node-check --help`.\n"
         "# slurmd starts both with almost no environment: no PATH, and the health check without "
         "SLURM_CONF.\n"
         "PATH=" +
         shell_quote(path) +
         "\nexport PATH\n"
         "SLURM_CONF=${SLURM_CONF:-" +
         shell_quote(paths.slurm_conf) +
         "}\n"
         "export SLURM_CONF\n"
         "exec " +
         shell_quote(paths.pcdino) + " node-check --slurm --site " + shell_quote(paths.site) +
         (paths.json.empty() ? "" : " --json " + shell_quote(paths.json)) + "\n";
}

}  // namespace pcdino
