#include "pcdino/cluster/validate.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/parallelcluster.hpp"
#include "pcdino/core/yaml_reader.hpp"
#include "schema.hpp"

namespace pcdino::cluster {

namespace {

// "ParallelCluster v3.11.1 validators/cluster_validators.py NameValidator": the upstream class a check
// restates.
std::string upstream(const std::string& file, const std::string& cls) {
  return "ParallelCluster v" + parallelcluster_release() + " " + file + " " + cls;
}
std::string validator(const std::string& file, const std::string& cls) {
  return upstream("validators/" + file, cls);
}
std::string schema_rule(const std::string& cls) {
  return upstream("schemas/cluster_schema.py", cls);
}

class Checker {
 public:
  explicit Checker(std::string name) : name_(std::move(name)) {}

  void add(Severity severity, const YAML::Node& node, const std::string& path, const std::string& message,
           const std::string& source = "") {
    // One finding per key path and kind: the first (the schema walk runs first) says what is wrong.
    if (!seen_.insert({path, severity}).second) return;
    Finding f;
    f.severity = severity;
    f.where = yaml_location(name_, node);
    f.path = path;
    f.message = message;
    f.source = source;
    findings.push_back(f);
  }
  void error(const YAML::Node& node, const std::string& path, const std::string& message,
             const std::string& source = "") {
    add(Severity::error, node, path, message, source);
  }
  void warning(const YAML::Node& node, const std::string& path, const std::string& message,
               const std::string& source = "") {
    add(Severity::warning, node, path, message, source);
  }
  void policy(const YAML::Node& node, const std::string& path, const std::string& message) {
    add(Severity::policy, node, path, message, "pcdino policy");
  }

  std::vector<Finding> findings;

 private:
  std::string name_;
  std::set<std::pair<std::string, Severity>> seen_;
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

// A defined scalar as ParallelCluster's Integer field reads it (2.5 and "6" are 2 and 6), or nothing (type
// errors are the schema walk's findings).
std::optional<long long> as_int(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  const std::optional<double> number = number_of(n);
  if (!number) return std::nullopt;
  return static_cast<long long>(*number);
}

bool truthy(const YAML::Node& n) {
  try {
    return n.IsDefined() && n.IsScalar() && n.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

bool is_false(const YAML::Node& n) {
  try {
    return n.IsDefined() && n.IsScalar() && !n.as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

// The elements of a list, or none (a wrong type is the schema walk's finding).
std::vector<YAML::Node> items(const YAML::Node& n) {
  std::vector<YAML::Node> out;
  if (n.IsDefined() && n.IsSequence())
    for (const auto& item : n) out.push_back(item);
  return out;
}

std::string queue_path(std::size_t i) {
  return "Scheduling.SlurmQueues[" + std::to_string(i) + "]";
}
std::string resource_path(std::size_t i, std::size_t j) {
  return queue_path(i) + ".ComputeResources[" + std::to_string(j) + "]";
}

// ---------------------------------------------------------------------------------------------------
// The schema's cross-key rules (marshmallow @validates_schema), enforced while ParallelCluster loads.

void check_schema_rules(Checker& c, const YAML::Node& root) {
  const YAML::Node scheduling = at(root, {"Scheduling"});
  const std::string scheduler = text(at(scheduling, {"Scheduler"}));
  if (scheduler == "slurm" && items(at(scheduling, {"SlurmQueues"})).empty() &&
      !at(scheduling, {"SlurmQueues"}).IsDefined()) {
    c.error(scheduling, "Scheduling.SlurmQueues", "a Slurm cluster needs at least one queue",
            schema_rule("SchedulingSchema.no_coexist_schedulers"));
  }
  for (const char* other : {"AwsBatchQueues", "AwsBatchSettings"}) {
    if (scheduler == "slurm" && at(scheduling, {other}).IsDefined())
      c.error(at(scheduling, {other}), std::string("Scheduling.") + other, "belongs to Scheduler: awsbatch",
              schema_rule("SchedulingSchema.right_scheduler_schema"));
  }
  const YAML::Node slurm = at(scheduling, {"SlurmSettings"});
  if (at(slurm, {"ExternalSlurmdbd"}).IsDefined() && !at(slurm, {"MungeKeySecretArn"}).IsDefined())
    c.error(at(slurm, {"ExternalSlurmdbd"}), "Scheduling.SlurmSettings.MungeKeySecretArn",
            "an ExternalSlurmdbd needs the cluster's MungeKeySecretArn",
            validator("slurm_settings_validator.py", "ExternalSlurmdbdRequiresCustomMungeKey"));
  if (scheduler == "awsbatch") {
    c.warning(scheduling, "Scheduling.Scheduler",
              "AWS Batch clusters are not checked by pcdino (it runs on Slurm): AwsBatchQueues and "
              "AwsBatchSettings are left to ParallelCluster");
  }

  // Each shared storage carries the settings of its StorageType and no other.
  static const std::map<std::string, std::string> settings_of = {{"Ebs", "EbsSettings"},
                                                                 {"Efs", "EfsSettings"},
                                                                 {"FsxLustre", "FsxLustreSettings"},
                                                                 {"FsxOntap", "FsxOntapSettings"},
                                                                 {"FsxOpenZfs", "FsxOpenZfsSettings"},
                                                                 {"FileCache", "FileCacheSettings"}};
  const auto storage = items(at(root, {"SharedStorage"}));
  for (std::size_t i = 0; i < storage.size(); ++i) {
    const std::string sp = "SharedStorage[" + std::to_string(i) + "]";
    const std::string type = text(at(storage[i], {"StorageType"}));
    for (const auto& [other_type, key] : settings_of) {
      if (other_type != type && at(storage[i], {key.c_str()}).IsDefined())
        c.error(at(storage[i], {key.c_str()}), sp + "." + key,
                key + " does not go with StorageType " + (type.empty() ? "(none)" : type),
                schema_rule("SharedStorageSchema.right_storage_settings"));
    }
    if ((type == "FsxOpenZfs" || type == "FsxOntap" || type == "FileCache") &&
        !at(storage[i], {settings_of.at(type).c_str()}).IsDefined())
      c.error(storage[i], sp + "." + settings_of.at(type),
              "StorageType " + type + " needs its " + settings_of.at(type),
              schema_rule("SharedStorageSchema (required_when in the schema data)"));
    static const std::regex none("/?NONE");
    if (std::regex_match(text(at(storage[i], {"MountDir"})), none))
      c.error(at(storage[i], {"MountDir"}), sp + ".MountDir", "NONE is not a mount directory",
              schema_rule("SharedStorageSchema.shared_dir_validator"));
    const YAML::Node fsx = at(storage[i], {"FsxLustreSettings"});
    if (type != "FsxLustre" || !fsx.IsMap()) continue;
    if (at(fsx, {"FileSystemId"}).IsDefined() && fsx.size() > 1)
      c.error(fsx, sp + ".FsxLustreSettings",
              "with FileSystemId (an existing file system) no other FsxLustreSettings key may be set",
              schema_rule("FsxLustreSettingsSchema.validate_file_system_id_ignored_parameters"));
    if (at(fsx, {"BackupId"}).IsDefined()) {
      for (const char* key : {"DeploymentType", "PerUnitStorageThroughput", "StorageCapacity", "ImportPath",
                              "ExportPath", "ImportedFileChunkSize", "KmsKeyId"}) {
        if (at(fsx, {key}).IsDefined())
          c.error(at(fsx, {key}), sp + ".FsxLustreSettings." + key,
                  std::string(key) + " is taken from the backup",
                  schema_rule("FsxLustreSettingsSchema.validate_backup_id_unsupported_parameters"));
      }
    }
  }

  const auto queues = items(at(scheduling, {"SlurmQueues"}));
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const auto resources = items(at(queues[i], {"ComputeResources"}));
    for (std::size_t j = 0; j < resources.size(); ++j) {
      const YAML::Node cr = resources[j];
      const bool type = at(cr, {"InstanceType"}).IsDefined(), instances = at(cr, {"Instances"}).IsDefined();
      if (type && instances)
        c.error(at(cr, {"Instances"}), resource_path(i, j) + ".Instances",
                "InstanceType and Instances cannot both be set",
                schema_rule("SlurmComputeResourceSchema.no_coexist_instance_type_flexibility"));
      if (!type && !instances && !at(cr, {"CapacityReservationTarget", "CapacityReservationId"}).IsDefined())
        c.error(cr, resource_path(i, j) + ".InstanceType",
                "needs InstanceType, Instances or its own CapacityReservationTarget.CapacityReservationId",
                schema_rule("SlurmComputeResourceSchema.instance_type_declaration"));
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// ParallelCluster's validators that need no AWS call, and the facts about instance types it checks online.

// A queue, as its compute resources' checks see it.
struct QueueFacts {
  YAML::Node node;
  std::string path;  // "Scheduling.SlurmQueues[i]"
  bool block;        // CapacityType CAPACITY_BLOCK
  bool multi_az;     // over several subnets (offline: other validators keep them in distinct AZs)
};

// A compute resource's MinCount and MaxCount, and its capacity reservation.
void check_resource_size(Checker& c, const QueueFacts& queue, const YAML::Node& cr, const std::string& cp) {
  // MaxCount >= MinCount; a capacity block is a fixed number of reserved, static nodes.
  const YAML::Node min = at(cr, {"MinCount"}), max = at(cr, {"MaxCount"});
  const std::optional<long long> lo = min.IsDefined() ? as_int(min) : 0,
                                 hi = max.IsDefined() ? as_int(max) : 10;
  const std::string size = validator("cluster_validators.py", "ComputeResourceSizeValidator");
  if (lo && hi && *lo > *hi)
    c.error(min.IsDefined() ? min : cr, cp + ".MinCount",
            "MinCount " + std::to_string(*lo) + " is greater than MaxCount " + std::to_string(*hi), size);
  if (queue.block && lo && hi && *lo != *hi)
    c.error(max.IsDefined() ? max : cr, cp + ".MaxCount",
            "a CAPACITY_BLOCK queue needs MaxCount equal to MinCount (the block's size), got MinCount " +
                std::to_string(*lo) + " and MaxCount " + std::to_string(*hi),
            size);
  if (queue.block && lo && *lo == 0)
    c.error(min.IsDefined() ? min : cr, cp + ".MinCount",
            "a CAPACITY_BLOCK queue needs MinCount > 0 (the block's size)", size);
  const YAML::Node own = at(cr, {"CapacityReservationTarget"});
  if (queue.block &&
      text(at(own.IsDefined() ? cr : queue.node, {"CapacityReservationTarget", "CapacityReservationId"}))
          .empty())
    c.error(cr, cp + ".CapacityReservationTarget.CapacityReservationId",
            "a CAPACITY_BLOCK queue needs the block's reservation id (cr-...), on the compute resource "
            "or the "
            "queue (a resource group ARN does not do)",
            validator("ec2_validators.py", "CapacityTypeValidator"));
  if (at(cr, {"Instances"}).IsDefined() &&
      at(cr, {"CapacityReservationTarget", "CapacityReservationId"}).IsDefined())
    c.error(at(cr, {"CapacityReservationTarget"}), cp + ".CapacityReservationTarget",
            "a CapacityReservationId cannot be used with Instances",
            validator("ec2_validators.py", "CapacityReservationValidator"));
}

// A compute resource's placement group and EFA.
void check_placement_and_efa(Checker& c, const QueueFacts& queue, const YAML::Node& cr,
                             const std::string& cp) {
  // The effective placement group: the compute resource's own, else the queue's.
  const YAML::Node pg = at(cr, {"Networking", "PlacementGroup"}).IsDefined()
                            ? at(cr, {"Networking", "PlacementGroup"})
                            : at(queue.node, {"Networking", "PlacementGroup"});
  const bool pg_named = !text(at(pg, {"Name"})).empty() || !text(at(pg, {"Id"})).empty();
  const bool pg_on = pg_named || truthy(at(pg, {"Enabled"}));
  if (pg_named && is_false(at(pg, {"Enabled"})))
    c.error(at(pg, {"Enabled"}), cp + ".Networking.PlacementGroup.Enabled",
            "a placement group with a Name or Id cannot have Enabled: false",
            validator("ec2_validators.py", "PlacementGroupNamingValidator"));
  if (!text(at(pg, {"Name"})).empty() && !text(at(pg, {"Id"})).empty())
    c.error(at(pg, {"Id"}), cp + ".Networking.PlacementGroup.Id", "set Name or Id, not both",
            validator("ec2_validators.py", "PlacementGroupNamingValidator"));
  if (queue.block && pg_on)
    c.warning(pg, queue.path + ".Networking.PlacementGroup",
              "a placement group with a CAPACITY_BLOCK queue can fail to launch the reserved instances",
              validator("ec2_validators.py", "PlacementGroupCapacityTypeValidator"));
  // An on-demand reservation and the group ParallelCluster makes: the reservation's own group cannot be
  // that one (ParallelCluster refuses the pair when it has one, and warns of capacity when it has none).
  const bool reserved = !text(at(cr, {"CapacityReservationTarget", "CapacityReservationId"})).empty() ||
                        !text(at(queue.node, {"CapacityReservationTarget", "CapacityReservationId"})).empty();
  if (!queue.block && reserved && pg_on && !pg_named)
    c.warning(
        pg, queue.path + ".Networking.PlacementGroup",
        "a capacity reservation with the placement group ParallelCluster makes: a reservation made in a "
        "cluster placement group is refused unless that group is named (PlacementGroup.Name), and one "
        "in none may meet insufficient capacity outside it",
        validator("ec2_validators.py", "PlacementGroupCapacityReservationValidator"));
  if (queue.multi_az && pg_on)
    c.error(pg, queue.path + ".Networking.PlacementGroup",
            "a queue over several subnets (AZs) cannot use a placement group",
            validator("networking_validators.py", "MultiAzPlacementGroupValidator"));

  // EFA: the type must support it (a fact ParallelCluster checks online, here from the catalogue).
  const YAML::Node efa = at(cr, {"Efa", "Enabled"});
  const bool efa_on = truthy(efa);
  if (truthy(at(cr, {"Efa", "GdrSupport"})) && !efa_on)
    c.error(at(cr, {"Efa", "GdrSupport"}), cp + ".Efa.GdrSupport", "GdrSupport needs Efa.Enabled: true",
            validator("cluster_validators.py", "EfaValidator"));
  if (efa_on && queue.multi_az)
    c.error(efa, cp + ".Efa.Enabled", "EFA cannot be used in a queue over several subnets (AZs)",
            validator("cluster_validators.py", "EfaMultiAzValidator"));
  if (efa_on && !queue.block && !queue.multi_az && !pg_on && !is_false(at(pg, {"Enabled"})))
    c.error(efa, queue.path + ".Networking.PlacementGroup.Enabled",
            "an EFA compute resource needs its placement group stated (Enabled: true for the bandwidth "
            "EFA is for, or Enabled: false)",
            validator("cluster_validators.py", "EfaPlacementGroupValidator"));
  else if (efa_on && !queue.block && !queue.multi_az && is_false(at(pg, {"Enabled"})))
    c.warning(at(pg, {"Enabled"}), queue.path + ".Networking.PlacementGroup.Enabled",
              "EFA without a placement group: expect less bandwidth",
              validator("cluster_validators.py", "EfaPlacementGroupValidator"));
}

// The facts of a compute resource's InstanceType from the catalogue; whether it has instance store (false
// for a type not in the catalogue).
bool check_instance_type(Checker& c, const QueueFacts& queue, const YAML::Node& cr, const std::string& cp) {
  const YAML::Node efa = at(cr, {"Efa", "Enabled"});
  const bool efa_on = truthy(efa);
  const std::string type = text(at(cr, {"InstanceType"}));
  const InstanceType* it = find_instance(type);
  if (it == nullptr) {
    c.warning(at(cr, {"InstanceType"}), cp + ".InstanceType",
              "'" + type +
                  "' is not in pcdino's instance catalogue: its EFA, GPU and storage facts are not checked",
              kInstanceSource);
    return false;
  }
  if (efa_on && !it->efa)
    c.error(efa, cp + ".Efa.Enabled",
            type + " does not support EFA (ParallelCluster's EfaValidator asks EC2 the same, online)",
            kInstanceSource);
  else if (!efa_on && it->efa && it->gpus > 0 && !queue.multi_az)
    c.warning(cr, cp + ".Efa.Enabled",
              type + " supports EFA but it is not enabled: multi-node training uses TCP", kInstanceSource);
  return it->instance_store_disks > 0;
}

void check_queues(Checker& c, const std::vector<YAML::Node>& queues) {
  const std::string names = validator("cluster_validators.py", "NameValidator");
  const std::string duplicates = validator("cluster_validators.py", "DuplicateNameValidator");
  std::set<std::string> queue_names;
  std::size_t total_resources = 0;
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const std::string qp = queue_path(i);
    const YAML::Node q = queues[i];
    const YAML::Node name = at(q, {"Name"});
    const std::string qn = text(name);
    if (qn.size() > 25 || qn == "default")
      c.error(name, qp + ".Name", "queue name '" + qn + "' must be at most 25 characters and not 'default'",
              names);
    if (!qn.empty() && !queue_names.insert(qn).second)
      c.error(name, qp + ".Name", "queue name '" + qn + "' is used twice", duplicates);
    const auto subnets = items(at(q, {"Networking", "SubnetIds"}));
    std::set<std::string> subnet_ids;
    for (std::size_t k = 0; k < subnets.size(); ++k) {
      if (!subnet_ids.insert(text(subnets[k])).second)
        c.error(subnets[k], qp + ".Networking.SubnetIds[" + std::to_string(k) + "]",
                "subnet " + text(subnets[k]) + " is listed twice",
                validator("networking_validators.py", "QueueSubnetsValidator"));
    }
    const QueueFacts queue{q, qp, text(at(q, {"CapacityType"})) == "CAPACITY_BLOCK", subnet_ids.size() > 1};
    const auto resources = items(at(q, {"ComputeResources"}));
    total_resources += resources.size();
    std::set<std::string> cr_names;
    bool any_instance_type = false, all_have_store = true;
    for (std::size_t j = 0; j < resources.size(); ++j) {
      const std::string cp = resource_path(i, j);
      const YAML::Node cr = resources[j];
      const YAML::Node cname = at(cr, {"Name"});
      const std::string cn = text(cname);
      if (cn.size() > 25 || cn == "default")
        c.error(cname, cp + ".Name",
                "compute resource name '" + cn + "' must be at most 25 characters and not 'default'", names);
      if (!cn.empty() && !cr_names.insert(cn).second)
        c.error(cname, cp + ".Name", "compute resource name '" + cn + "' is used twice in this queue",
                duplicates);
      check_resource_size(c, queue, cr, cp);
      check_placement_and_efa(c, queue, cr, cp);
      if (!at(cr, {"InstanceType"}).IsDefined()) continue;
      any_instance_type = true;
      if (!check_instance_type(c, queue, cr, cp)) all_have_store = false;
    }
    if (any_instance_type && subnet_ids.size() > 1)
      c.error(at(q, {"Networking", "SubnetIds"}), qp + ".Networking.SubnetIds",
              "a queue whose compute resources use InstanceType takes exactly one subnet (use Instances for "
              "several)",
              validator("networking_validators.py", "SingleInstanceTypeSubnetValidator"));
    const YAML::Node eph = at(q, {"ComputeSettings", "LocalStorage", "EphemeralVolume"});
    if (eph.IsDefined() && !all_have_store)
      c.warning(
          eph, qp + ".ComputeSettings.LocalStorage.EphemeralVolume",
          "EphemeralVolume needs instance store on every compute resource; an EBS-only type boots without "
          "the volume (ParallelCluster does not check this)",
          kInstanceSource);
  }
  if (total_resources > 50)
    c.error(queues.back(), "Scheduling.SlurmQueues",
            std::to_string(total_resources) + " compute resources in the cluster, at most 50 are allowed",
            validator("cluster_validators.py", "MaxCountValidator"));
}

// FSx for Lustre, as ParallelCluster's fsx_validators.py checks a new file system (constants.py
// FSX_SSD_THROUGHPUT, FSX_HDD_THROUGHPUT).
void check_fsx(Checker& c, const std::vector<YAML::Node>& storage, const std::vector<YAML::Node>& queues) {
  static const std::map<std::string, std::vector<long long>> ssd_throughput = {
      {"PERSISTENT_1", {50, 100, 200}}, {"PERSISTENT_2", {125, 250, 500, 1000}}};
  static const std::vector<long long> hdd_throughput = {12, 40};
  const auto list = [](const std::vector<long long>& v) {
    std::string s;
    for (long long x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
    return s;
  };
  std::set<std::string> compute_subnets;
  for (const auto& q : queues)
    for (const auto& s : items(at(q, {"Networking", "SubnetIds"}))) compute_subnets.insert(text(s));

  for (std::size_t i = 0; i < storage.size(); ++i) {
    if (text(at(storage[i], {"StorageType"})) != "FsxLustre") continue;
    const std::string p = "SharedStorage[" + std::to_string(i) + "].FsxLustreSettings";
    const YAML::Node s = at(storage[i], {"FsxLustreSettings"});
    if (!s.IsMap() || at(s, {"FileSystemId"}).IsDefined()) continue;  // an existing file system
    if (compute_subnets.size() > 1)
      c.error(s, p, "a new FSx for Lustre file system cannot serve compute subnets in several AZs",
              validator("cluster_validators.py", "ManagedFsxMultiAzValidator"));
    const std::string deployment =
        text(at(s, {"DeploymentType"})).empty() ? "SCRATCH_2" : text(at(s, {"DeploymentType"}));
    const bool hdd = text(at(s, {"StorageType"})) == "HDD";
    const bool persistent = deployment.rfind("PERSISTENT_", 0) == 0;
    const YAML::Node tp_node = at(s, {"PerUnitStorageThroughput"});
    const std::optional<long long> tp = as_int(tp_node);
    const bool tp_set = tp && *tp != 0;
    const std::string persistent_options = validator("fsx_validators.py", "FsxPersistentOptionsValidator");
    const std::string storage_options = validator("fsx_validators.py", "FsxStorageTypeOptionsValidator");
    if (persistent && !tp_set)
      c.error(tp_node.IsDefined() ? tp_node : s, p + ".PerUnitStorageThroughput",
              deployment + " needs PerUnitStorageThroughput", persistent_options);
    if (!persistent && tp_set)
      c.error(tp_node, p + ".PerUnitStorageThroughput", deployment + " takes no PerUnitStorageThroughput",
              persistent_options);
    if (!persistent && at(s, {"KmsKeyId"}).IsDefined())
      c.error(at(s, {"KmsKeyId"}), p + ".KmsKeyId", deployment + " takes no KmsKeyId", persistent_options);
    if (hdd) {
      if (deployment != "PERSISTENT_1")
        c.error(at(s, {"DeploymentType"}).IsDefined() ? at(s, {"DeploymentType"}) : s, p + ".DeploymentType",
                "HDD storage needs DeploymentType PERSISTENT_1, got " + deployment, storage_options);
      if (!tp || std::find(hdd_throughput.begin(), hdd_throughput.end(), *tp) == hdd_throughput.end())
        c.error(tp_node.IsDefined() ? tp_node : s, p + ".PerUnitStorageThroughput",
                "HDD storage needs PerUnitStorageThroughput of " + list(hdd_throughput) + " MB/s/TiB, got '" +
                    text(tp_node) + "'",
                storage_options);
    } else {
      if (at(s, {"DriveCacheType"}).IsDefined())
        c.error(at(s, {"DriveCacheType"}), p + ".DriveCacheType", "a drive cache needs StorageType: HDD",
                storage_options);
      const auto allowed = ssd_throughput.find(deployment);
      if (tp_set && allowed != ssd_throughput.end() &&
          std::find(allowed->second.begin(), allowed->second.end(), *tp) == allowed->second.end())
        c.error(tp_node, p + ".PerUnitStorageThroughput",
                deployment + " SSD storage needs PerUnitStorageThroughput of " + list(allowed->second) +
                    " MB/s/TiB, got " + std::to_string(*tp),
                storage_options);
    }
    // Capacity (GiB), unless restored from a backup.
    const YAML::Node cap_node = at(s, {"StorageCapacity"});
    const std::optional<long long> cap = as_int(cap_node);
    const std::string capacity = validator("fsx_validators.py", "FsxStorageCapacityValidator");
    std::string rule;
    if (at(s, {"BackupId"}).IsDefined()) {
    } else if (!cap_node.IsDefined() || (cap && *cap == 0)) {
      c.error(cap_node.IsDefined() ? cap_node : s, p + ".StorageCapacity",
              "a new file system needs StorageCapacity", capacity);
    } else if (!cap) {
    } else if (deployment == "SCRATCH_1") {
      if (!(*cap == 1200 || *cap == 2400 || *cap % 3600 == 0))
        rule = "SCRATCH_1: 1200, 2400 or a multiple of 3600";
    } else if (deployment == "PERSISTENT_1" && hdd) {
      if (tp == 12 && *cap % 6000 != 0) rule = "HDD at 12 MB/s/TiB: a multiple of 6000";
      if (tp == 40 && *cap % 1800 != 0) rule = "HDD at 40 MB/s/TiB: a multiple of 1800";
    } else if (!(*cap == 1200 || *cap % 2400 == 0)) {
      rule = deployment + ": 1200 or a multiple of 2400";
    }
    if (!rule.empty())
      c.error(cap_node, p + ".StorageCapacity", "StorageCapacity " + std::to_string(*cap) + " GiB; " + rule,
              capacity);
    // Backups: a start time or tag copying needs a retention; a retention needs a persistent file system
    // without S3 links (retention 0 counts as none).
    const std::string backups = validator("fsx_validators.py", "FsxBackupOptionsValidator");
    const std::optional<long long> retention = as_int(at(s, {"AutomaticBackupRetentionDays"}));
    const bool retained = retention && *retention != 0;
    for (const char* key : {"DailyAutomaticBackupStartTime", "CopyTagsToBackups"}) {
      if (at(s, {key}).IsDefined() && !retained)
        c.error(at(s, {key}), p + "." + key,
                std::string(key) + " needs a non-zero AutomaticBackupRetentionDays", backups);
    }
    if (retained && !persistent)
      c.error(at(s, {"AutomaticBackupRetentionDays"}), p + ".AutomaticBackupRetentionDays",
              "automatic backups need a PERSISTENT_1 or PERSISTENT_2 file system", backups);
    // S3 links.
    for (const char* key : {"ImportedFileChunkSize", "ExportPath", "AutoImportPolicy"}) {
      if (at(s, {key}).IsDefined() && !at(s, {"ImportPath"}).IsDefined())
        c.error(at(s, {key}), p + "." + key, std::string(key) + " needs ImportPath",
                validator("fsx_validators.py", "FsxS3Validator"));
    }
    if (at(s, {"DataRepositoryAssociations"}).IsDefined() &&
        (at(s, {"ImportPath"}).IsDefined() || at(s, {"ExportPath"}).IsDefined()))
      c.error(at(s, {"DataRepositoryAssociations"}), p + ".DataRepositoryAssociations",
              "DataRepositoryAssociations cannot be used with ImportPath or ExportPath",
              validator("fsx_validators.py", "FsxDraValidator"));
    for (const char* key : {"ImportPath", "ExportPath"}) {
      const std::string path = text(at(s, {key}));
      if (at(s, {key}).IsDefined() && path.rfind("s3://", 0) != 0)
        c.error(at(s, {key}), p + "." + key, "'" + path + "' is not an s3:// URL",
                validator("s3_validators.py", "S3BucketUriValidator"));
      if (at(s, {key}).IsDefined() && deployment == "PERSISTENT_2")
        c.error(at(s, {key}), p + "." + key,
                "PERSISTENT_2 links S3 through DataRepositoryAssociations, not " + std::string(key) +
                    " (FSx refuses it when the stack is created; ParallelCluster does not check this)",
                kFsxSource);
    }
  }
}

void check_mount_dirs(Checker& c, const std::vector<YAML::Node>& storage) {
  static const std::set<std::string> reserved = {"/bin",
                                                 "/boot",
                                                 "/dev",
                                                 "/etc",
                                                 "/lib",
                                                 "/lib64",
                                                 "/media",
                                                 "/mnt",
                                                 "/opt",
                                                 "/opt/parallelcluster",
                                                 "/opt/parallelcluster/shared",
                                                 "/opt/parallelcluster/shared_login_nodes",
                                                 "/opt/slurm",
                                                 "/opt/intel",
                                                 "/proc",
                                                 "/root",
                                                 "/run",
                                                 "/sbin",
                                                 "/srv",
                                                 "/sys",
                                                 "/tmp",
                                                 "/usr",
                                                 "/var"};
  std::map<std::string, std::size_t> seen;
  std::set<std::string> names, ids;
  for (std::size_t i = 0; i < storage.size(); ++i) {
    const std::string sp = "SharedStorage[" + std::to_string(i) + "]";
    const YAML::Node dir = at(storage[i], {"MountDir"});
    std::string d = text(dir);
    if (!d.empty() && reserved.count(d[0] == '/' ? d : "/" + d))
      c.error(dir, sp + ".MountDir", "'" + d + "' is a system directory",
              validator("cluster_validators.py", "SharedStorageMountDirValidator"));
    if (!d.empty() && !seen.emplace(d, i).second)
      c.error(dir, sp + ".MountDir",
              "'" + d + "' is also the MountDir of SharedStorage[" + std::to_string(seen[d]) + "]",
              validator("cluster_validators.py", "DuplicateMountDirValidator"));
    const YAML::Node name = at(storage[i], {"Name"});
    if (text(name).size() > 30 || text(name) == "default")
      c.error(name, sp + ".Name", "a storage name must be at most 30 characters and not 'default'",
              validator("cluster_validators.py", "SharedStorageNameValidator"));
    if (!text(name).empty() && !names.insert(text(name)).second)
      c.error(name, sp + ".Name", "storage name '" + text(name) + "' is used twice",
              validator("cluster_validators.py", "DuplicateNameValidator"));
    // An existing volume or file system is mounted once (cluster_config.py existing_storage_id_list).
    static const std::map<std::string, std::pair<const char*, const char*>> existing_id = {
        {"Ebs", {"EbsSettings", "VolumeId"}},
        {"Efs", {"EfsSettings", "FileSystemId"}},
        {"FsxLustre", {"FsxLustreSettings", "FileSystemId"}},
        {"FsxOpenZfs", {"FsxOpenZfsSettings", "VolumeId"}},
        {"FsxOntap", {"FsxOntapSettings", "VolumeId"}},
        {"FileCache", {"FileCacheSettings", "FileCacheId"}}};
    const auto kind = existing_id.find(text(at(storage[i], {"StorageType"})));
    if (kind == existing_id.end()) continue;
    const auto& [settings, key] = kind->second;
    const YAML::Node id = at(storage[i], {settings, key});
    if (!text(id).empty() && !ids.insert(text(id)).second)
      c.error(id, sp + "." + settings + "." + key, "'" + text(id) + "' is mounted twice",
              validator("cluster_validators.py", "DuplicateNameValidator"));
  }
  for (const auto& [a, i] : seen)
    for (const auto& [b, j] : seen)
      if (i != j && b.rfind(a + "/", 0) == 0)
        c.error(at(storage[j], {"MountDir"}), "SharedStorage[" + std::to_string(j) + "].MountDir",
                "'" + b + "' is inside '" + a + "', the MountDir of SharedStorage[" + std::to_string(i) + "]",
                validator("cluster_validators.py", "OverlappingMountDirValidator"));
}

// An EBS volume (shared EbsSettings or a RootVolume) as ebs_validators.py bounds it: size per volume type,
// IOPS only on io1, io2 and gp3. A root volume without Size has the AMI's (checked online upstream).
void check_ebs_volume(Checker& c, const YAML::Node& e, const std::string& p) {
  static const std::map<std::string, std::pair<long long, long long>> size_gib = {
      {"standard", {1, 1024}}, {"io1", {4, 16384}},   {"io2", {4, 65536}},  {"gp2", {1, 16384}},
      {"gp3", {1, 16384}},     {"st1", {500, 16384}}, {"sc1", {500, 16384}}};
  if (!e.IsMap()) return;
  const std::string type = text(at(e, {"VolumeType"})).empty() ? "gp3" : text(at(e, {"VolumeType"}));
  const auto bounds = size_gib.find(type);
  const std::optional<long long> size = as_int(at(e, {"Size"}));
  if (size && bounds != size_gib.end() && (*size < bounds->second.first || *size > bounds->second.second))
    c.error(at(e, {"Size"}), p + ".Size",
            type + " volumes are " + std::to_string(bounds->second.first) + " to " +
                std::to_string(bounds->second.second) + " GiB, got " + std::to_string(*size),
            validator("ebs_validators.py", "EbsVolumeTypeSizeValidator"));
  if (at(e, {"Iops"}).IsDefined() && type != "io1" && type != "io2" && type != "gp3")
    c.error(at(e, {"Iops"}), p + ".Iops", type + " volumes take no Iops",
            validator("ebs_validators.py", "EbsVolumeIopsValidator"));
}

void check_ebs(Checker& c, const YAML::Node& root, const std::vector<YAML::Node>& storage,
               const std::vector<YAML::Node>& queues) {
  for (std::size_t i = 0; i < storage.size(); ++i)
    if (text(at(storage[i], {"StorageType"})) == "Ebs")
      check_ebs_volume(c, at(storage[i], {"EbsSettings"}),
                       "SharedStorage[" + std::to_string(i) + "].EbsSettings");
  check_ebs_volume(c, at(root, {"HeadNode", "LocalStorage", "RootVolume"}),
                   "HeadNode.LocalStorage.RootVolume");
  for (std::size_t i = 0; i < queues.size(); ++i)
    check_ebs_volume(c, at(queues[i], {"ComputeSettings", "LocalStorage", "RootVolume"}),
                     queue_path(i) + ".ComputeSettings.LocalStorage.RootVolume");
}

// Custom slurm.conf parameters: each level has parameters ParallelCluster writes itself and refuses from
// the user (compared lower case; the deny-lists are the schema data's), and node names it reserves.
void check_slurm_settings(Checker& c, const YAML::Node& root, const std::vector<YAML::Node>& queues) {
  const ParallelClusterSchema& schema = ParallelClusterSchema::get();
  const std::string deny = validator("slurm_settings_validator.py", "CustomSlurmSettingsValidator");
  // One finding per level, naming every refused parameter, as upstream.
  const auto check = [&](const std::vector<YAML::Node>& lines, const std::string& path,
                         const std::string& level, bool skip_multi_key,
                         const std::vector<const char*>& deny_lists) {
    std::set<std::string> denied;
    for (const YAML::Node& line : lines) {
      if (!line.IsMap() || (skip_multi_key && line.size() > 1)) continue;  // a custom node or partition
      for (const auto& kv : line) {
        const std::string key = ascii_lower(kv.first.Scalar());
        for (const char* list : deny_lists) {
          const auto& names = schema.validator_limit("CustomSlurmSettingsValidator", list);
          if (std::find(names.begin(), names.end(), key) != names.end()) denied.insert(kv.first.Scalar());
        }
      }
    }
    if (denied.empty()) return;
    std::string names;
    for (const auto& d : denied) names += (names.empty() ? "" : ", ") + d;
    c.error(lines.front(), path,
            "ParallelCluster sets these slurm.conf parameters itself at " + level + " level: " + names, deny);
  };
  const auto lines = items(at(root, {"Scheduling", "SlurmSettings", "CustomSlurmSettings"}));
  std::vector<const char*> cluster_lists = {"SlurmSettings_CustomSlurmSettings_global"};
  if (at(root, {"Scheduling", "SlurmSettings", "Database"}).IsDefined())
    cluster_lists.push_back("SlurmSettings_CustomSlurmSettings_when_Database_set");
  check(lines, "Scheduling.SlurmSettings.CustomSlurmSettings", "SlurmConf", true, cluster_lists);
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (!lines[k].IsMap()) continue;
    for (const auto& kv : lines[k]) {
      const std::string key = ascii_lower(kv.first.Scalar());
      const std::string value = text(kv.second);
      if (key == "nodename" &&
          (value.find("-st-") != std::string::npos || value.find("-dy-") != std::string::npos))
        c.error(
            kv.second,
            "Scheduling.SlurmSettings.CustomSlurmSettings[" + std::to_string(k) + "]." + kv.first.Scalar(),
            "node name '" + value + "': '-st-' and '-dy-' are reserved for ParallelCluster's own nodes",
            validator("slurm_settings_validator.py", "CustomSlurmNodeNamesValidator"));
    }
  }
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const YAML::Node own = at(queues[i], {"CustomSlurmSettings"});
    if (own.IsDefined())
      check({own}, queue_path(i) + ".CustomSlurmSettings", "Queue", false, {"Queue_CustomSlurmSettings"});
    const auto resources = items(at(queues[i], {"ComputeResources"}));
    for (std::size_t j = 0; j < resources.size(); ++j) {
      const YAML::Node cr = at(resources[j], {"CustomSlurmSettings"});
      if (cr.IsDefined())
        check({cr}, resource_path(i, j) + ".CustomSlurmSettings", "ComputeResource", false,
              {"ComputeResource_CustomSlurmSettings"});
    }
  }
}

// Custom action scripts are downloaded by every node: https or s3://bucket/key.
void check_custom_actions(Checker& c, const YAML::Node& root, const std::vector<YAML::Node>& queues) {
  const std::string url = validator("s3_validators.py", "UrlValidator");
  const auto check = [&](const YAML::Node& actions, const std::string& path) {
    for (const char* event : {"OnNodeStart", "OnNodeConfigured", "OnNodeUpdated"}) {
      const YAML::Node e = at(actions, {event});
      std::vector<std::pair<YAML::Node, std::string>> scripts = {
          {at(e, {"Script"}), path + "." + event + ".Script"}};
      const auto seq = items(at(e, {"Sequence"}));
      for (std::size_t k = 0; k < seq.size(); ++k)
        scripts.push_back(
            {at(seq[k], {"Script"}), path + "." + event + ".Sequence[" + std::to_string(k) + "].Script"});
      for (const auto& [node, p] : scripts) {
        if (!node.IsDefined()) continue;
        static const std::regex s3("s3://[^/]+/.+");
        const std::string s = text(node);
        if (s.rfind("https://", 0) != 0 && !std::regex_match(s, s3))
          c.error(node, p, "'" + s + "' is not an https:// or s3://bucket/key URL", url);
      }
    }
  };
  check(at(root, {"HeadNode", "CustomActions"}), "HeadNode.CustomActions");
  for (std::size_t i = 0; i < queues.size(); ++i)
    check(at(queues[i], {"CustomActions"}), queue_path(i) + ".CustomActions");
}

// Reserved and repeated tag keys in one Tags list (common_schema.py validate_no_reserved_tag,
// validate_no_duplicate_tag); types and lengths are the schema walk's.
void check_tag_list(Checker& c, const YAML::Node& tags, const std::string& path) {
  std::set<std::string> keys;
  const auto list = items(tags);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node key = at(list[i], {"Key"});
    const std::string k = text(key), kp = path + "[" + std::to_string(i) + "].Key";
    if (k.rfind("parallelcluster:", 0) == 0 && k != "parallelcluster:custom_resource")
      c.error(key, kp, "the prefix 'parallelcluster:' is reserved",
              upstream("schemas/common_schema.py", "validate_no_reserved_tag"));
    if (!k.empty() && !keys.insert(k).second)
      c.error(key, kp, "tag key '" + k + "' is used twice in this list",
              upstream("schemas/common_schema.py", "validate_no_duplicate_tag"));
  }
}

void check_tags(Checker& c, const YAML::Node& root, const std::vector<YAML::Node>& queues) {
  check_tag_list(c, at(root, {"Tags"}), "Tags");
  for (std::size_t i = 0; i < queues.size(); ++i) {
    check_tag_list(c, at(queues[i], {"Tags"}), queue_path(i) + ".Tags");
    const auto resources = items(at(queues[i], {"ComputeResources"}));
    for (std::size_t j = 0; j < resources.size(); ++j)
      check_tag_list(c, at(resources[j], {"Tags"}), resource_path(i, j) + ".Tags");
  }
}

// pcdino's policy: who may reach the head node, IMDSv2, and where the nodes live. Not ParallelCluster's
// verdict; fails a validation only with --strict.
void check_policy(Checker& c, const YAML::Node& root, const std::vector<YAML::Node>& queues,
                  const ValidateOptions& options) {
  const YAML::Node ips = at(root, {"HeadNode", "Ssh", "AllowedIps"});
  if (!ips.IsDefined() && !options.allow_ssh_from_anywhere) {
    c.policy(at(root, {"HeadNode"}), "HeadNode.Ssh.AllowedIps",
             "not set: ParallelCluster then allows SSH from 0.0.0.0/0; name the CIDR that may connect");
  } else if (text(ips) == "0.0.0.0/0" && !options.allow_ssh_from_anywhere) {
    c.policy(ips, "HeadNode.Ssh.AllowedIps",
             "SSH from anywhere (0.0.0.0/0); if that is intended, say so: head_node.allow_ssh_from_anywhere: "
             "true in the site spec (cluster validate: --allow-ssh-from-anywhere)");
  }
  const YAML::Node imds = at(root, {"Imds", "ImdsSupport"});
  if (!imds.IsDefined() || text(imds) != "v2.0")
    c.policy(imds.IsDefined() ? imds : root, "Imds.ImdsSupport",
             "require IMDSv2 on every node (ImdsSupport: v2.0)");
  const YAML::Node secured = at(root, {"HeadNode", "Imds", "Secured"});
  if (is_false(secured))
    c.policy(secured, "HeadNode.Imds.Secured",
             "the head node's IMDS must stay restricted to root and the cluster admin");
  // Compute subnets are private (reached through NAT); the head node's is public. Offline we can only tell
  // that they are the same subnet.
  const std::string head_subnet = text(at(root, {"HeadNode", "Networking", "SubnetId"}));
  for (std::size_t i = 0; i < queues.size(); ++i) {
    const auto subnets = items(at(queues[i], {"Networking", "SubnetIds"}));
    for (std::size_t k = 0; k < subnets.size(); ++k) {
      if (!head_subnet.empty() && text(subnets[k]) == head_subnet)
        c.policy(subnets[k], queue_path(i) + ".Networking.SubnetIds[" + std::to_string(k) + "]",
                 "compute nodes in the head node's subnet " + head_subnet +
                     ": the head node belongs in a public subnet, compute nodes in a private one");
    }
  }
}

}  // namespace

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::error:
      return "error";
    case Severity::policy:
      return "policy";
    case Severity::warning:
      return "warning";
  }
  return "?";
}

std::string Finding::str() const {
  return std::string(severity_name(severity)) + ": " + where + ": " + path + ": " + message +
         (source.empty() ? "" : " [" + source + "]");
}

std::string parallelcluster_release() {
  return ParallelClusterSchema::get().release();
}

const std::vector<SchemaChange>& schema_changes() {
  // The 3.13 to 3.16 schemas could not be read (no tag after v3.12.0 in any snapshot, PyPI unreachable):
  // only changes named in a source are here; keys added since are unknown keys to the schema walk.
  static const std::vector<SchemaChange> table = {
      {"LoginNodes.Pools[].Ssh.KeyName", "3.15.0", "3.15.1",
       "awslabs/awsome-distributed-ai PR #1211 ('The only configuration parameter removed in the 3.14.2 -> "
       "3.15.1 delta is LoginNodes/Pools/Ssh/KeyName', checked with 3.15.1's ClusterSchema)"},
  };
  return table;
}

namespace {
// The newest release the restated schema is known to equal: v3.12.0's cluster_schema.py has no field added
// or removed against v3.11.1 (git diff at the hanwen-cluster/aws-parallelcluster v3.12.0 tag).
const char* const kSchemaSameThrough = "3.12.0";
const char* const kFirstChecked = "3.11.0";  // v3.11.0 -> v3.11.1: no change in cli/src/pcluster/schemas/

// The nodes at `path` ("A.B[].C"): every element of a list step.
std::vector<YAML::Node> nodes_at(const YAML::Node& root, const std::string& path) {
  std::vector<YAML::Node> level = {root};
  std::stringstream in(path);
  std::string step;
  while (std::getline(in, step, '.')) {
    const bool each = step.size() > 2 && step.compare(step.size() - 2, 2, "[]") == 0;
    const std::string key = each ? step.substr(0, step.size() - 2) : step;
    std::vector<YAML::Node> next;
    for (const auto& n : level) {
      if (!n.IsMap() || !n[key].IsDefined()) continue;
      if (!each)
        next.push_back(n[key]);
      else if (n[key].IsSequence())
        for (const auto& item : n[key]) next.push_back(item);
    }
    level = next;
  }
  return level;
}
}  // namespace

std::string release_problem(const std::string& release) {
  const parallelcluster::Release* row = parallelcluster::find_release(release);
  if (row == nullptr || parallelcluster::compare_versions(release, kFirstChecked) < 0)
    return "pcdino checks configurations for ParallelCluster " + std::string(kFirstChecked) + " to " +
           parallelcluster::newest_release().release + " (the " + parallelcluster_release() +
           " schema, with the changes known since), not " + release;
  return "";
}

std::string schema_basis(const std::string& release) {
  std::size_t removed = 0;
  for (const auto& change : schema_changes())
    if (parallelcluster::compare_versions(release, change.removed) >= 0) ++removed;
  return "ParallelCluster " + release + ": the " + parallelcluster_release() +
         " schema and offline validators, unchanged through " + kSchemaSameThrough +
         (parallelcluster::compare_versions(release, kSchemaSameThrough) > 0
              ? ", with " + std::to_string(removed) + " key(s) removed since; keys added after " +
                    kSchemaSameThrough + " are not known to pcdino"
              : std::string());
}

std::vector<Finding> validate_cluster_config(const std::string& yaml_text, const std::string& name,
                                             const ValidateOptions& options) {
  const YAML::Node root = load_yaml(yaml_text, name);
  Checker c(name);
  if (!root.IsMap()) {
    c.error(root, "", "not a ParallelCluster configuration (expected a mapping)");
    return c.findings;
  }
  // The schema data restates Slurm's sections only: an AWS Batch cluster's are not unknown, just unchecked
  // (check_schema_rules says so).
  const bool batch = text(at(root, {"Scheduling", "Scheduler"})) == "awsbatch";
  const std::string release =
      options.release.empty() ? std::string(parallelcluster::newest_release().release) : options.release;
  // Image.Os follows the release's operating systems (the schema's enum is 3.11.1's: no ubuntu2404, and
  // ubuntu2004 still in it); the custom-AMI-only ones (rocky8, rocky9) keep the schema's verdict.
  const YAML::Node os = at(root, {"Image", "Os"});
  const bool release_os = os.IsScalar() && parallelcluster::find_os(os.Scalar()) != nullptr;
  walk_schema(root, options.template_placeholders,
              [&](const YAML::Node& node, const std::string& path, const std::string& message,
                  const std::string& source) {
                if (batch && path.rfind("Scheduling.AwsBatch", 0) == 0) return;
                if (path == "Image.Os" && release_os) return;
                c.error(node, path, message, source);
              });
  if (release_os) {
    if (const std::string why = parallelcluster::os_support_problem(release, os.Scalar()); !why.empty())
      c.error(os, "Image.Os", why + " (this file is for " + release + ")", "pcdino/core/parallelcluster.hpp");
  }
  check_schema_rules(c, root);
  const auto queues = items(at(root, {"Scheduling", "SlurmQueues"}));
  const auto storage = items(at(root, {"SharedStorage"}));
  check_queues(c, queues);
  check_fsx(c, storage, queues);
  check_mount_dirs(c, storage);
  check_ebs(c, root, storage, queues);
  check_slurm_settings(c, root, queues);
  check_custom_actions(c, root, queues);
  check_tags(c, root, queues);
  if (!at(root, {"HeadNode", "Ssh", "KeyName"}).IsDefined())
    c.warning(at(root, {"HeadNode"}), "HeadNode.Ssh.KeyName",
              "no key pair: nobody can log in to the head node unless the AMI allows another way",
              validator("ec2_validators.py", "KeyPairValidator"));
  check_policy(c, root, queues, options);
  for (const auto& change : schema_changes()) {
    const bool removed = parallelcluster::compare_versions(release, change.removed) >= 0;
    const bool maybe = !removed && parallelcluster::compare_versions(release, change.maybe_from) >= 0;
    if (!removed && !maybe) continue;
    for (const auto& node : nodes_at(root, change.path)) {
      if (removed)
        c.error(node, change.path,
                std::string("removed from ParallelCluster's schema by ") + change.removed +
                    " (this file is for " + release + ")",
                change.source);
      else
        c.warning(node, change.path,
                  std::string("removed from ParallelCluster's schema in ") + change.maybe_from + " or by " +
                      change.removed + " (this file is for " + release + ")",
                  change.source);
    }
  }
  return c.findings;
}

}  // namespace pcdino::cluster
