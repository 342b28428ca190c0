#include "pcdino/cluster/validate.hpp"

#include <yaml-cpp/yaml.h>

#include <optional>
#include <regex>
#include <set>

#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::cluster {

namespace {

const char* const kPcSchema = "ParallelCluster 3.x configuration schema (cli/src/pcluster/schemas)";
const char* const kSizeValidator =
    "ParallelCluster 3.11.1 ComputeResourceSizeValidator (cli/src/pcluster/validators/cluster_validators.py)";
const char* const kCapacityTypeValidator =
    "ParallelCluster 3.11.1 CapacityTypeValidator (cli/src/pcluster/validators/ec2_validators.py)";

class Checker {
 public:
  explicit Checker(std::string name) : name_(std::move(name)) {}

  void add(const YAML::Node& node, const std::string& path, const std::string& message,
           const std::string& source = "", bool error = true) {
    Finding f;
    f.error = error;
    f.where = yaml_location(name_, node);
    f.path = path;
    f.message = message;
    f.source = source;
    findings.push_back(f);
  }

  std::vector<Finding> findings;

 private:
  std::string name_;
};

// Walks `keys` down from `node`; an undefined (never an invalid) node where any step is missing, so that
// optional sections can be read without checks at every level.
YAML::Node at(const YAML::Node& node, std::initializer_list<const char*> keys) {
  YAML::Node current = node;
  for (const char* key : keys) {
    if (!current.IsDefined() || !current.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const YAML::Node next = current[key];
    if (!next.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    current.reset(next);  // operator= would write into the tree
  }
  return current;
}

// A defined scalar's text, or "".
std::string text(const YAML::Node& n) {
  return n.IsDefined() && n.IsScalar() ? n.Scalar() : "";
}

// A defined scalar that is an integer, or nothing ("four", 2.5, a list).
std::optional<int> as_int(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  try {
    return n.as<int>();
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// The integer at `n`, `fallback` when absent; a finding (ParallelCluster's schema types these keys as
// integers) and nothing when it is there and not an integer.
std::optional<int> integer_key(Checker& c, const YAML::Node& n, const std::string& path, int fallback) {
  if (!n.IsDefined()) return fallback;
  const std::optional<int> v = as_int(n);
  if (!v) {
    c.add(n, path,
          "expected an integer, got " + (n.IsScalar() ? "'" + n.Scalar() + "'" : "a list or mapping"),
          kPcSchema);
  }
  return v;
}

bool truthy(const YAML::Node& n) {
  try {
    return n.IsDefined() && n.IsScalar() && n.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

void check_names(Checker& c, const YAML::Node& queues) {
  // ParallelCluster: queue and compute resource names are [a-z][a-z0-9-]*, queue names at most 25
  // characters, compute resource names at most 25 (together they name the Slurm nodes).
  static const std::regex pattern("[a-z][a-z0-9-]*");
  std::set<std::string> queue_names;
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const std::string qp = "Scheduling.SlurmQueues[" + std::to_string(i) + "]";
    const YAML::Node name = at(queues[i], {"Name"});
    const std::string qn = text(name);
    if (!std::regex_match(qn, pattern) || qn.size() > 25 || qn == "default") {
      c.add(
          name, qp + ".Name",
          "queue name '" + qn + "' must match [a-z][a-z0-9-]*, be at most 25 characters and not be 'default'",
          kPcSchema);
    }
    if (!queue_names.insert(qn).second)
      c.add(name, qp + ".Name", "queue name '" + qn + "' is used twice", kPcSchema);
    const YAML::Node crs = at(queues[i], {"ComputeResources"});
    std::set<std::string> cr_names;
    for (std::size_t j = 0; crs.IsSequence() && j < crs.size(); ++j) {
      const std::string cp = qp + ".ComputeResources[" + std::to_string(j) + "]";
      const YAML::Node cname = at(crs[j], {"Name"});
      const std::string cn = text(cname);
      if (!std::regex_match(cn, pattern) || cn.size() > 25) {
        c.add(cname, cp + ".Name",
              "compute resource name '" + cn + "' must match [a-z][a-z0-9-]* and be at most 25 characters",
              kPcSchema);
      }
      if (!cr_names.insert(cn).second)
        c.add(cname, cp + ".Name", "compute resource name '" + cn + "' is used twice", kPcSchema);
      const YAML::Node min = at(crs[j], {"MinCount"}), max = at(crs[j], {"MaxCount"});
      const std::optional<int> min_count = integer_key(c, min, cp + ".MinCount", 0),
                               max_count = integer_key(c, max, cp + ".MaxCount", 10);
      if (!min_count || !max_count) continue;
      const int lo = *min_count, hi = *max_count;
      if (lo > hi) {
        c.add(min, cp + ".MinCount",
              "MinCount " + std::to_string(lo) + " is greater than MaxCount " + std::to_string(hi));
      }
      // A capacity block is a fixed number of reserved instances, all of them static nodes.
      if (text(at(queues[i], {"CapacityType"})) != "CAPACITY_BLOCK") continue;
      if (lo != hi) {
        c.add(max.IsDefined() ? max : crs[j], cp + ".MaxCount",
              "a CAPACITY_BLOCK queue needs MaxCount equal to MinCount (the block's size), got MinCount " +
                  std::to_string(lo) + " and MaxCount " + std::to_string(hi),
              kSizeValidator);
      }
      if (lo == 0) {
        c.add(min.IsDefined() ? min : crs[j], cp + ".MinCount",
              "a CAPACITY_BLOCK queue needs MinCount > 0 (the block's size)", kSizeValidator);
      }
      const YAML::Node own = at(crs[j], {"CapacityReservationTarget"});
      const std::string reservation = text(
          at(own.IsDefined() ? crs[j] : queues[i], {"CapacityReservationTarget", "CapacityReservationId"}));
      if (reservation.empty()) {
        c.add(crs[j], cp + ".CapacityReservationTarget.CapacityReservationId",
              "a CAPACITY_BLOCK queue needs the block's reservation id (cr-...), on the compute resource or "
              "the "
              "queue (a resource group ARN does not do)",
              kCapacityTypeValidator);
      }
    }
  }
}

void check_queue_hardware(Checker& c, const YAML::Node& queues) {
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const std::string qp = "Scheduling.SlurmQueues[" + std::to_string(i) + "]";
    const YAML::Node q = queues[i];
    const YAML::Node crs = at(q, {"ComputeResources"});
    bool any_efa = false, all_have_store = true;
    for (std::size_t j = 0; crs.IsSequence() && j < crs.size(); ++j) {
      const std::string cp = qp + ".ComputeResources[" + std::to_string(j) + "]";
      const std::string type = text(at(crs[j], {"InstanceType"}));
      const InstanceType* it = find_instance(type);
      if (it == nullptr) {
        c.add(at(crs[j], {"InstanceType"}), cp + ".InstanceType",
              "'" + type +
                  "' is not in pcdino's instance catalogue: its EFA, GPU and storage facts are not checked",
              kInstanceSource, false);
        continue;
      }
      if (it->instance_store_disks == 0) all_have_store = false;
      const YAML::Node efa = at(crs[j], {"Efa", "Enabled"});
      if (truthy(efa)) {
        any_efa = true;
        if (!it->efa) c.add(efa, cp + ".Efa.Enabled", type + " does not support EFA", kInstanceSource);
      } else if (it->efa && it->gpus > 0) {
        c.add(crs[j], cp + ".Efa.Enabled",
              type + " supports EFA but it is not enabled: multi-node training uses TCP", kInstanceSource,
              false);
      }
    }
    if (any_efa) {
      const YAML::Node pg = at(q, {"Networking", "PlacementGroup", "Enabled"});
      if (!pg.IsDefined()) {
        c.add(
            at(q, {"Networking"}), qp + ".Networking.PlacementGroup.Enabled",
            "a queue with EFA needs its placement group stated (Enabled: true for the bandwidth EFA is for)");
      }
      const YAML::Node subnets = at(q, {"Networking", "SubnetIds"});
      if (!subnets.IsSequence() || subnets.size() != 1) {
        c.add(subnets, qp + ".Networking.SubnetIds", "a queue with EFA must use exactly one subnet (one AZ)");
      }
    }
    const YAML::Node eph = at(q, {"ComputeSettings", "LocalStorage", "EphemeralVolume"});
    if (eph.IsDefined() && !all_have_store) {
      c.add(
          eph, qp + ".ComputeSettings.LocalStorage.EphemeralVolume",
          "EphemeralVolume needs instance store on every compute resource; an EBS-only type boots without it "
          "(ParallelCluster does not check this)",
          kInstanceSource);
    }
  }
}

void check_fsx(Checker& c, const YAML::Node& storage) {
  for (std::size_t i = 0; storage.IsSequence() && i < storage.size(); ++i) {
    if (text(at(storage[i], {"StorageType"})) != "FsxLustre") continue;
    const std::string p = "SharedStorage[" + std::to_string(i) + "].FsxLustreSettings";
    const YAML::Node s = at(storage[i], {"FsxLustreSettings"});
    if (!s.IsDefined() || at(s, {"FileSystemId"}).IsDefined()) continue;  // an existing file system
    const std::string type =
        text(at(s, {"DeploymentType"})).empty() ? "SCRATCH_2" : text(at(s, {"DeploymentType"}));
    const FsxRules* rules = fsx_rules(type);
    if (rules == nullptr) {
      c.add(at(s, {"DeploymentType"}), p + ".DeploymentType",
            "unknown deployment type '" + type + "' (SCRATCH_1, SCRATCH_2, PERSISTENT_1, PERSISTENT_2)",
            kFsxSource);
      continue;
    }
    const YAML::Node cap = at(s, {"StorageCapacity"});
    if (!cap.IsDefined()) {
      c.add(s, p + ".StorageCapacity", "a new file system needs StorageCapacity", kFsxSource);
    } else {
      if (const auto gib = integer_key(c, cap, p + ".StorageCapacity", 0)) {
        const std::string problem = fsx_capacity_problem(*rules, *gib);
        if (!problem.empty()) c.add(cap, p + ".StorageCapacity", problem, kFsxSource);
      }
    }
    const YAML::Node tp = at(s, {"PerUnitStorageThroughput"});
    if (rules->throughputs.empty() && tp.IsDefined()) {
      c.add(tp, p + ".PerUnitStorageThroughput", type + " takes no PerUnitStorageThroughput", kFsxSource);
    } else if (!rules->throughputs.empty()) {
      std::string allowed;
      bool ok = false;
      for (int t : rules->throughputs) {
        allowed += (allowed.empty() ? "" : ", ") + std::to_string(t);
        ok = ok || as_int(tp) == t;
      }
      if (!ok) {
        c.add(tp.IsDefined() ? tp : s, p + ".PerUnitStorageThroughput",
              type + " needs PerUnitStorageThroughput of " + allowed + " MB/s/TiB, got '" + text(tp) + "'",
              kFsxSource);
      }
    }
    // ParallelCluster's schema allows LZ4 only (FsxLustreSettingsSchema, cluster_schema.py, v3.11.1); no
    // compression is the key left out, and FSx's own "NONE" is refused there.
    const std::string comp = text(at(s, {"DataCompressionType"}));
    if (!comp.empty() && comp != "LZ4") {
      c.add(at(s, {"DataCompressionType"}), p + ".DataCompressionType",
            "ParallelCluster accepts only LZ4 (leave the key out for no compression), got '" + comp + "'",
            kPcSchema);
    }
    for (const char* key : {"ImportPath", "ExportPath"}) {
      if (at(s, {key}).IsDefined() && !rules->import_export_paths) {
        c.add(at(s, {key}), p + "." + key,
              type + " links S3 through data repository associations, not " + key, kFsxSource);
      }
    }
  }
}

void check_access(Checker& c, const YAML::Node& root, const ValidateOptions& options) {
  const YAML::Node ips = at(root, {"HeadNode", "Ssh", "AllowedIps"});
  if (!ips.IsDefined() && !options.allow_ssh_from_anywhere) {
    c.add(at(root, {"HeadNode"}), "HeadNode.Ssh.AllowedIps",
          "not set: ParallelCluster then allows SSH from 0.0.0.0/0; name the CIDR that may connect");
  } else if (text(ips) == "0.0.0.0/0" && !options.allow_ssh_from_anywhere) {
    c.add(ips, "HeadNode.Ssh.AllowedIps",
          "SSH from anywhere (0.0.0.0/0); say so explicitly if that is intended");
  }
  const YAML::Node imds = at(root, {"Imds", "ImdsSupport"});
  if (imds.IsDefined() && text(imds) != "v2.0")
    c.add(imds, "Imds.ImdsSupport", "use IMDSv2 only (v2.0)", kPcSchema);
  const YAML::Node secured = at(root, {"HeadNode", "Imds", "Secured"});
  if (secured.IsDefined() && !truthy(secured)) {
    c.add(secured, "HeadNode.Imds.Secured",
          "the head node's IMDS must stay restricted to root and the cluster admin");
  }
  // Compute subnets are private (reached through NAT); the head node's is public. Offline we can only
  // tell that they are the same subnet.
  const std::string head_subnet = text(at(root, {"HeadNode", "Networking", "SubnetId"}));
  const YAML::Node queues = at(root, {"Scheduling", "SlurmQueues"});
  for (std::size_t i = 0; queues.IsSequence() && i < queues.size(); ++i) {
    const YAML::Node subnets = at(queues[i], {"Networking", "SubnetIds"});
    for (std::size_t k = 0; subnets.IsSequence() && k < subnets.size(); ++k) {
      if (!head_subnet.empty() && text(subnets[k]) == head_subnet) {
        c.add(subnets[k],
              "Scheduling.SlurmQueues[" + std::to_string(i) + "].Networking.SubnetIds[" + std::to_string(k) +
                  "]",
              "compute nodes in the head node's subnet " + head_subnet +
                  ": the head node belongs in a public subnet, compute nodes in a private one");
      }
    }
  }
}

// A plain (unquoted) scalar that YAML reads as a number or a boolean: ParallelCluster's string fields
// refuse it ("Not a valid string"), so 123 or true must be quoted.
bool plain_non_string(const YAML::Node& n) {
  if (!n.IsScalar() || n.Tag() != "?") return false;
  static const std::regex number_or_bool(
      R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|true|True|TRUE|false|False|FALSE|\.inf|\.nan)");
  return std::regex_match(n.Scalar(), number_or_bool);
}

// One Tags list (the cluster's, a queue's or a compute resource's), as ParallelCluster's TagSchema and its
// validate_no_reserved_tag / validate_no_duplicate_tag (common_schema.py, v3.11.1) check it.
void check_tag_list(Checker& c, const YAML::Node& tags, const std::string& path) {
  if (!tags.IsDefined()) return;
  if (!tags.IsSequence()) {
    c.add(tags, path, "expected a list of {Key, Value}", kPcSchema);
    return;
  }
  std::set<std::string> keys;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const std::string tp = path + "[" + std::to_string(i) + "]";
    const struct {
      const char* name;
      std::size_t max;
    } fields[] = {{"Key", 128}, {"Value", 256}};
    for (const auto& f : fields) {
      const YAML::Node v = at(tags[i], {f.name});
      if (!v.IsDefined() || !v.IsScalar()) {
        c.add(v.IsDefined() ? v : tags[i], tp + "." + f.name,
              "a tag needs a " + std::string(f.name) + " string", kPcSchema);
      } else if (plain_non_string(v)) {
        c.add(v, tp + "." + f.name, "'" + v.Scalar() + "' is read as a number or boolean: quote it",
              kPcSchema);
      } else if (v.Scalar().size() > f.max) {
        c.add(v, tp + "." + f.name, "longer than " + std::to_string(f.max) + " characters", kPcSchema);
      }
    }
    const std::string key = text(at(tags[i], {"Key"}));
    if (key.rfind("parallelcluster:", 0) == 0 && key != "parallelcluster:custom_resource") {
      c.add(at(tags[i], {"Key"}), tp + ".Key", "the prefix 'parallelcluster:' is reserved", kPcSchema);
    }
    if (!key.empty() && !keys.insert(key).second) {
      c.add(at(tags[i], {"Key"}), tp + ".Key", "tag key '" + key + "' is used twice in this list", kPcSchema);
    }
  }
}

void check_tags(Checker& c, const YAML::Node& root, const YAML::Node& queues) {
  check_tag_list(c, at(root, {"Tags"}), "Tags");
  for (std::size_t i = 0; queues.IsSequence() && i < queues.size(); ++i) {
    const std::string qp = "Scheduling.SlurmQueues[" + std::to_string(i) + "]";
    check_tag_list(c, at(queues[i], {"Tags"}), qp + ".Tags");
    const YAML::Node crs = at(queues[i], {"ComputeResources"});
    for (std::size_t j = 0; crs.IsSequence() && j < crs.size(); ++j)
      check_tag_list(c, at(crs[j], {"Tags"}), qp + ".ComputeResources[" + std::to_string(j) + "].Tags");
  }
}

}  // namespace

std::string Finding::str() const {
  return std::string(error ? "error" : "warning") + ": " + where + ": " + path + ": " + message +
         (source.empty() ? "" : " [" + source + "]");
}

std::vector<Finding> validate_cluster_config(const std::string& yaml_text, const std::string& name,
                                             const ValidateOptions& options) {
  const YAML::Node root = load_yaml(yaml_text, name);
  Checker c(name);
  if (!root.IsMap()) {
    c.add(root, "", "not a ParallelCluster configuration (expected a mapping)");
    return c.findings;
  }
  const YAML::Node queues = at(root, {"Scheduling", "SlurmQueues"});
  if (!queues.IsSequence() || queues.size() == 0) {
    c.add(at(root, {"Scheduling"}), "Scheduling.SlurmQueues", "at least one queue is needed", kPcSchema);
  } else {
    check_names(c, queues);
    check_queue_hardware(c, queues);
  }
  check_fsx(c, at(root, {"SharedStorage"}));
  check_access(c, root, options);
  check_tags(c, root, queues);
  return c.findings;
}

std::vector<Finding> check_pipeline_fit(const std::string& cluster_yaml, const std::string& name,
                                        const PipelineConfig& pipeline, const std::string& queue) {
  const YAML::Node root = load_yaml(cluster_yaml, name);
  Checker c(name);
  const YAML::Node queues = at(root, {"Scheduling", "SlurmQueues"});
  std::size_t index = 0;
  bool found = queue.empty() && queues.IsSequence() && queues.size() > 0;
  for (std::size_t i = 0; !queue.empty() && queues.IsSequence() && i < queues.size(); ++i) {
    if (text(at(queues[i], {"Name"})) == queue) index = i, found = true;
  }
  if (!found) {
    c.add(at(root, {"Scheduling"}), "Scheduling.SlurmQueues",
          "no queue '" + queue + "' to run the pipeline on");
    return c.findings;
  }
  const std::string cp = "Scheduling.SlurmQueues[" + std::to_string(index) + "].ComputeResources[0]";
  const YAML::Node cr = at(queues[index], {"ComputeResources"})[0];
  const std::string type = text(at(cr, {"InstanceType"}));
  const InstanceType* it = find_instance(type);
  if (it == nullptr) {
    c.add(at(cr, {"InstanceType"}), cp + ".InstanceType",
          "'" + type + "' is not in the catalogue: cannot check the pipeline's fit", kInstanceSource, false);
    return c.findings;
  }
  const std::string where = pipeline.source.empty() ? "pipeline" : pipeline.source;
  const auto gpus_fit = [&](int asked, const std::string& key) {
    if (asked > it->gpus) {
      c.add(at(cr, {"InstanceType"}), cp + ".InstanceType",
            where + ": " + key + " asks for " + std::to_string(asked) + " GPUs per node (--gres=gpu:" +
                std::to_string(asked) + ") but " + type + " has " + std::to_string(it->gpus),
            kInstanceSource);
    }
  };
  gpus_fit(pipeline.train.num_gpus, "train_scDINO.num_gpus");
  gpus_fit(pipeline.downstream.compute_cls_features.num_gpus,
           "downstream_analyses.compute_cls_features.num_gpus");
  const YAML::Node max_node = at(cr, {"MaxCount"});
  const std::optional<int> max_count = max_node.IsDefined() ? as_int(max_node) : std::optional<int>(10);
  if (max_count && pipeline.train.nnodes > *max_count) {
    c.add(at(cr, {"MaxCount"}), cp + ".MaxCount",
          where + ": train_scDINO.nnodes " + std::to_string(pipeline.train.nnodes) +
              " is more than MaxCount " + std::to_string(*max_count));
  }
  // One task per GPU, each with num_workers loader processes plus itself.
  const int tasks = std::max(1, pipeline.train.num_gpus);
  const int cpus = tasks * (pipeline.train.num_workers + 1);
  if (cpus > it->vcpus) {
    c.add(at(cr, {"InstanceType"}), cp + ".InstanceType",
          where + ": train_scDINO.num_workers " + std::to_string(pipeline.train.num_workers) +
              " + 1 CPUs for each of " + std::to_string(tasks) + " task(s) is " + std::to_string(cpus) +
              " CPUs per node, " + type + " has " + std::to_string(it->vcpus) + " vCPUs",
          kInstanceSource);
  }
  return c.findings;
}

}  // namespace pcdino::cluster
