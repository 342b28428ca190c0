// Whether a pipeline's jobs fit the queue they are sent to (`pcdino cluster validate|generate --pipeline`):
// what sbatch would refuse ("Requested node configuration is not available") or Slurm would leave pending
// for ever, found before the cluster exists. A queue's compute resources are its node groups: a stage's job
// runs where one of them can hold it, so a check fails as an error only when no compute resource of the
// queue passes it, and as a warning for the ones it rules out when another passes.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>

#include "pcdino/cluster/catalogue.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/stages.hpp"
#include "pcdino/core/yaml_reader.hpp"
#include "schema.hpp"

namespace pcdino::cluster {

namespace {

// How ParallelCluster defines a compute resource's Slurm nodes (aws-parallelcluster-cookbook
// cookbooks/aws-parallelcluster-slurm/files/default/head_node_slurm/slurm/config_utils.py, read 2026-11-29 at
// 6f5fd41): the smallest vCPU count and GPU count of its instance types; threads per core 2 on x86 (the
// catalogue's types), so that DisableSimultaneousMultithreading leaves half the vCPUs; gres GPUs counted only
// where the manufacturer is NVIDIA.
const char* const kNodeSource =
    "aws-parallelcluster-cookbook head_node_slurm/slurm/config_utils.py _get_min_vcpus, "
    "_get_min_gpu_count_and_type (read 2026-11-29)";
// The catalogue's accelerators that are not NVIDIA GPUs: no gres GPU in ParallelCluster's Slurm (same
// source).
const char* const kNotGresGpus[] = {"Trainium", "Gaudi"};

int gres_gpus(const InstanceType& it) {
  for (const char* model : kNotGresGpus)
    if (it.gpu_model == model) return 0;
  return it.gpus;
}

std::string text_of(const YAML::Node& n) {
  return n.IsDefined() && n.IsScalar() ? n.Scalar() : "";
}

YAML::Node child(const YAML::Node& n, const char* key) {
  if (!n.IsDefined() || !n.IsMap() || !n[key].IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  return n[key];
}

std::vector<YAML::Node> list_of(const YAML::Node& n) {
  std::vector<YAML::Node> out;
  if (n.IsDefined() && n.IsSequence())
    for (const auto& item : n) out.push_back(item);
  return out;
}

// One compute resource as a stage's job sees it: the node's GPUs and the CPUs Slurm gives it.
struct NodeGroup {
  YAML::Node node;    // the compute resource
  YAML::Node where;   // the key its findings point at (InstanceType or Instances)
  std::string path;   // "Scheduling.SlurmQueues[i].ComputeResources[j].InstanceType"
  std::string types;  // "g4dn.2xlarge" (Instances: "g5.12xlarge/g6.12xlarge")
  bool known = false;
  int gpus = 0;
  int cpus = 0;
  std::string cpu_note;  // "" or " (its cores: DisableSimultaneousMultithreading)"
  long long max_count = 10;
};

// The compute resource's instance facts: the smallest of its Instances (ParallelCluster's flexible types
// give every node of the resource the same Slurm definition).
NodeGroup node_group(const YAML::Node& cr, const std::string& path) {
  NodeGroup g;
  g.node = cr;
  std::vector<std::string> names;
  if (const YAML::Node type = child(cr, "InstanceType"); type.IsDefined()) {
    g.where = type, g.path = path + ".InstanceType";
    names.push_back(text_of(type));
  } else {
    g.where = child(cr, "Instances"), g.path = path + ".Instances";
    for (const auto& i : list_of(child(cr, "Instances"))) names.push_back(text_of(child(i, "InstanceType")));
  }
  if (!g.where.IsDefined()) g.where = cr, g.path = path;
  g.known = !names.empty();
  for (std::size_t k = 0; k < names.size(); ++k) {
    g.types += (k == 0 ? "" : "/") + names[k];
    const InstanceType* it = find_instance(names[k]);
    if (it == nullptr) {
      g.known = false;
      continue;
    }
    g.gpus = k == 0 ? gres_gpus(*it) : std::min(g.gpus, gres_gpus(*it));
    g.cpus = k == 0 ? it->vcpus : std::min(g.cpus, it->vcpus);
  }
  const YAML::Node smt = child(cr, "DisableSimultaneousMultithreading");
  if (smt.IsDefined() && smt.IsScalar() && (smt.Scalar() == "true" || smt.Scalar() == "True")) {
    g.cpus /= 2;
    g.cpu_note = " (its cores: DisableSimultaneousMultithreading)";
  }
  if (const YAML::Node max = child(cr, "MaxCount"); max.IsDefined()) {
    const std::optional<double> n = max.IsScalar() ? number_of(max) : std::nullopt;
    g.max_count = n ? static_cast<long long>(*n) : 0;
  }
  return g;
}

// A check of one compute resource: "" when the pipeline's jobs fit it, else why not.
struct FitCheck {
  std::string key;  // the pipeline key it is about, for grouping
  std::string (*why)(const PipelineConfig&, const NodeGroup&);
  const char* source;
};

std::string gpus_of(int asked, const char* key, const NodeGroup& g, bool gpus) {
  if (!gpus || asked <= g.gpus) return "";
  return std::string(key) + " asks for " + std::to_string(asked) +
         " GPUs per node (--gres=gpu:" + std::to_string(asked) + ") but " + g.types + " has " +
         std::to_string(g.gpus);
}

// The largest CPU count per node that a stage of the pipeline asks for with slurm.cpus_per_task, and its
// stage (tasks per node times --cpus-per-task; a stage that spreads its ranks puts at least one on a node).
std::string cpus_per_task_of(const PipelineConfig& p, const NodeGroup& g) {
  const int per_task = p.slurm.cpus_per_task;
  if (per_task <= 0) return "";
  for (const auto& stage : pipeline_stages()) {
    if (!stage_enabled(stage, p)) continue;
    const StageResources r = stage.resources(p);
    const int tasks = std::max(1, r.tasks_per_node);
    if (tasks * per_task <= g.cpus) continue;
    return "slurm.cpus_per_task " + std::to_string(per_task) + " (--cpus-per-task) for " +
           std::to_string(tasks) + " task(s) per node of stage " + stage.name + " is " +
           std::to_string(tasks * per_task) + " CPUs per node, " + g.types + " has " +
           std::to_string(g.cpus) + g.cpu_note;
  }
  return "";
}

// Training's ranks, one per GPU, each with num_workers loader processes beside it.
std::string workers_of(const PipelineConfig& p, const NodeGroup& g) {
  const int tasks = std::max(1, p.train.num_gpus);
  const int cpus = tasks * (p.train.num_workers + 1);
  if (cpus <= g.cpus) return "";
  return "train_scDINO.num_workers " + std::to_string(p.train.num_workers) + " + 1 CPUs for each of " +
         std::to_string(tasks) + " task(s) is " + std::to_string(cpus) + " CPUs per node, " + g.types +
         " has " + std::to_string(g.cpus) + " vCPUs" + g.cpu_note;
}

const std::vector<FitCheck>& checks() {
  static const std::vector<FitCheck> table = {
      {"train_scDINO.num_gpus",
       [](const PipelineConfig& p, const NodeGroup& g) {
         return gpus_of(p.train.num_gpus, "train_scDINO.num_gpus", g, p.slurm.gpus);
       },
       kInstanceSource},
      {"downstream_analyses.compute_cls_features.num_gpus",
       [](const PipelineConfig& p, const NodeGroup& g) {
         return gpus_of(p.downstream.compute_cls_features.num_gpus,
                        "downstream_analyses.compute_cls_features.num_gpus", g, p.slurm.gpus);
       },
       kInstanceSource},
      {"slurm.cpus_per_task", cpus_per_task_of, kNodeSource},
      {"train_scDINO.num_workers", workers_of, kNodeSource},
  };
  return table;
}

// ParallelCluster mounts a queue's instance store at EphemeralVolume.MountDir (default /scratch): where
// train_scDINO.stage_dataset's copies belong. Elsewhere they fill the root volume.
const char* const kEphemeralSource =
    "ParallelCluster v3.11.1 schemas/cluster_schema.py QueueEphemeralVolumeSchema (MountDir default "
    "/scratch, DEFAULT_EPHEMERAL_DIR)";

bool inside(const std::string& path, const std::string& dir) {
  const std::string d = dir.size() > 1 && dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  return path == d || path.rfind(d == "/" ? d : d + "/", 0) == 0;
}

template <class Add>
void check_stage_dataset(const PipelineConfig& p, const YAML::Node& queue, const std::string& qp,
                         const std::vector<NodeGroup>& groups, const Add& add) {
  const std::string& stage = p.train.stage_dataset;
  if (stage.empty()) return;
  const YAML::Node ephemeral =
      child(child(child(queue, "ComputeSettings"), "LocalStorage"), "EphemeralVolume");
  const std::string key = qp + ".ComputeSettings.LocalStorage.EphemeralVolume";
  if (!ephemeral.IsDefined()) {
    add(Severity::warning, queue, qp,
        "train_scDINO.stage_dataset " + stage +
            " stages the dataset on each node, but the queue mounts no instance store (" + key +
            ", the site spec's local_scratch): the copies go to the root volume",
        kEphemeralSource);
    return;
  }
  const YAML::Node dir = child(ephemeral, "MountDir");
  const std::string mount = dir.IsDefined() ? text_of(dir) : "/scratch";
  if (!inside(stage, mount)) {
    add(Severity::warning, dir.IsDefined() ? dir : ephemeral, key + ".MountDir",
        "train_scDINO.stage_dataset " + stage + " is not on the queue's instance store, mounted at " + mount +
            ": the copies go to the root volume; set it to " + mount,
        kEphemeralSource);
  }
  for (const auto& g : groups) {
    if (!g.known) continue;
    const InstanceType* it = find_instance(g.types.substr(0, g.types.find('/')));
    if (it != nullptr && it->instance_store_gb == 0)
      add(Severity::warning, g.where, g.path,
          "train_scDINO.stage_dataset " + stage + ": " + g.types +
              " has no instance store, so its nodes stage the dataset on the root volume",
          kInstanceSource);
  }
}

std::string names_of(const std::vector<YAML::Node>& queues) {
  std::string out;
  for (const auto& q : queues) out += (out.empty() ? "" : ", ") + text_of(child(q, "Name"));
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<Finding> check_pipeline_fit(const std::string& cluster_yaml, const std::string& name,
                                        const PipelineConfig& pipeline, const std::string& queue) {
  const YAML::Node root = load_yaml(cluster_yaml, name);
  std::vector<Finding> out;
  const std::string from = pipeline.source.empty() ? "pipeline" : pipeline.source;
  const auto add = [&](Severity s, const YAML::Node& node, const std::string& path,
                       const std::string& message, const std::string& source) {
    out.push_back({s, yaml_location(name, node), path, from + ": " + message, source});
  };
  const YAML::Node scheduling = child(root, "Scheduling");
  const std::vector<YAML::Node> queues = list_of(child(scheduling, "SlurmQueues"));
  const std::string partition = pipeline.slurm.partition;
  const auto find = [&](const std::string& q) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < queues.size(); ++i)
      if (text_of(child(queues[i], "Name")) == q) return i;
    return std::nullopt;
  };
  // The queue the jobs go to: --queue, else slurm.partition, else Slurm's default partition, which
  // ParallelCluster makes of the first queue.
  if (!partition.empty() && !find(partition)) {
    add(Severity::error, scheduling, "Scheduling.SlurmQueues",
        "slurm.partition '" + partition +
            "' (--partition) is not a queue of this cluster (its queues: " + names_of(queues) + ")",
        "pcdino/core/config.hpp SlurmConfig::partition");
    return out;
  }
  if (!queue.empty() && !partition.empty() && queue != partition) {
    add(Severity::error, scheduling, "Scheduling.SlurmQueues",
        "slurm.partition '" + partition + "' sends the jobs to that queue, not to the queue '" + queue +
            "' to check",
        "pcdino/core/config.hpp SlurmConfig::partition");
    return out;
  }
  const std::string wanted = !queue.empty() ? queue : partition;
  const std::optional<std::size_t> index = wanted.empty() && !queues.empty() ? 0 : find(wanted);
  if (!index) {
    add(Severity::error, scheduling, "Scheduling.SlurmQueues",
        "no queue '" + wanted + "' to run the pipeline on (its queues: " + names_of(queues) + ")", "");
    return out;
  }
  const std::string qp = "Scheduling.SlurmQueues[" + std::to_string(*index) + "]";
  std::vector<NodeGroup> groups;
  const auto resources = list_of(child(queues[*index], "ComputeResources"));
  for (std::size_t j = 0; j < resources.size(); ++j)
    groups.push_back(node_group(resources[j], qp + ".ComputeResources[" + std::to_string(j) + "]"));
  const std::size_t unknown =
      std::count_if(groups.begin(), groups.end(), [](const NodeGroup& g) { return !g.known; });
  for (const auto& g : groups) {
    if (!g.known)
      add(Severity::warning, g.where, g.path,
          "'" + g.types + "' is not in the catalogue: cannot check the pipeline's fit", kInstanceSource);
  }

  for (const auto& check : checks()) {
    std::vector<std::pair<const NodeGroup*, std::string>> failed;
    for (const auto& g : groups)
      if (g.known)
        if (std::string why = check.why(pipeline, g); !why.empty()) failed.push_back({&g, why});
    if (failed.empty()) continue;
    // Fatal only when no compute resource of the queue is left for the stage (and none is unknown).
    const bool none_left = failed.size() + unknown == groups.size();
    for (const auto& [g, why] : failed) {
      if (none_left && unknown == 0)
        add(Severity::error, g->where, g->path, why, check.source);
      else
        add(Severity::warning, g->where, g->path,
            why + (none_left ? "" : ": these jobs run only on the queue's other compute resources"),
            check.source);
    }
  }

  check_stage_dataset(pipeline, queues[*index], qp, groups, add);

  // Training's nodes come from the queue's compute resources together.
  long long max_nodes = 0;
  for (const auto& g : groups) max_nodes += g.max_count;
  if (!groups.empty() && pipeline.train.nnodes > max_nodes) {
    const bool one = groups.size() == 1;
    const YAML::Node max = child(groups[0].node, "MaxCount");
    add(Severity::error, one && max.IsDefined() ? max : queues[*index],
        one ? qp + ".ComputeResources[0].MaxCount" : qp + ".ComputeResources",
        "train_scDINO.nnodes " + std::to_string(pipeline.train.nnodes) + " is more than " +
            (one ? "MaxCount " : "the queue's MaxCount in all ") + std::to_string(max_nodes),
        "ParallelCluster v3.11.1 schemas/cluster_schema.py SlurmComputeResourceSchema (MaxCount default 10)");
  }
  return out;
}

}  // namespace pcdino::cluster
