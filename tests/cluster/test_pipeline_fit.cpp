// check_pipeline_fit(): a pipeline's jobs against the queue they go to (`--pipeline`), on the generated
// workshop configuration (g4dn.2xlarge: 1 T4, 8 vCPUs; MaxCount 6) and small hand-written ones.
#include <gtest/gtest.h>

#include <string>

#include "pcdino/cluster/generate.hpp"
#include "pcdino/cluster/site.hpp"
#include "pcdino/cluster/validate.hpp"
#include "pcdino/core/config.hpp"

namespace pcdino::cluster {
namespace {

std::string workshop_config() {
  return generate_cluster(load_site_spec(std::string(PCDINO_SOURCE_DIR) + "/cluster/examples/workshop.yaml"))
      .cluster_config;
}

// Findings as "E path: message" / "W path: message" lines.
std::string fit(const std::string& cluster, const std::string& pipeline_yaml, const std::string& queue = "") {
  std::string out;
  for (const auto& f : check_pipeline_fit(cluster, "c.yaml", parse_config(pipeline_yaml, "p.yaml"), queue))
    out += std::string(f.severity == Severity::error     ? "E "
                       : f.severity == Severity::warning ? "W "
                                                         : "P ") +
           f.path + ": " + f.message + "\n";
  return out;
}

// A queue "q" with the given compute resources (YAML list items at the right indentation).
std::string one_queue(const std::string& resources) {
  return "Scheduling:\n  Scheduler: slurm\n  SlurmQueues:\n    - Name: q\n      ComputeResources:\n" +
         resources;
}

TEST(PipelineFit, TheWorkshopPipelineFitsItsCluster) {
  const std::string pipeline = std::string(PCDINO_SOURCE_DIR) + "/sbatch/examples/workshop.yaml";
  EXPECT_TRUE(check_pipeline_fit(workshop_config(), "c.yaml", load_config(pipeline)).empty())
      << "sbatch/examples/workshop.yaml is the pipeline of cluster/examples/workshop.yaml";
}

TEST(PipelineFit, CpusPerTaskAgainstTheInstanceCpus) {
  const std::string cluster = workshop_config();
  const std::string workers = "train_scDINO:\n  num_workers: 1\n";
  EXPECT_EQ(
      fit(cluster, workers + "slurm:\n  cpus_per_task: 96\n"),
      "E Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType: p.yaml: slurm.cpus_per_task 96 "
      "(--cpus-per-task) for 1 task(s) per node of stage meanstd is 96 CPUs per node, g4dn.2xlarge has 8\n");
  EXPECT_EQ(fit(cluster, workers + "slurm:\n  cpus_per_task: 8\n"), "") << "8 of 8 fits";
  // Two ranks per node (train_scDINO.num_gpus on a CPU-only queue) take twice the CPUs.
  const std::string cpu = one_queue("        - Name: c\n          InstanceType: c5.4xlarge\n");
  EXPECT_EQ(
      fit(cpu, "train_scDINO:\n  num_gpus: 2\n  num_workers: 1\nslurm:\n  gpus: false\n  cpus_per_task: 8\n"),
      "")
      << "2 x 8 of c5.4xlarge's 16";
  EXPECT_NE(
      fit(cpu, "train_scDINO:\n  num_gpus: 2\n  num_workers: 1\nslurm:\n  gpus: false\n  cpus_per_task: 9\n")
          .find("slurm.cpus_per_task 9 (--cpus-per-task) for 2 task(s) per node of stage train is 18 CPUs "
                "per node, c5.4xlarge has 16"),
      std::string::npos);
  // DisableSimultaneousMultithreading: Slurm's node has the cores only.
  const std::string smt = one_queue(
      "        - Name: c\n          InstanceType: c5.4xlarge\n          DisableSimultaneousMultithreading: "
      "true\n");
  EXPECT_NE(fit(smt, "train_scDINO:\n  num_workers: 1\nslurm:\n  gpus: false\n  cpus_per_task: 9\n")
                .find("is 9 CPUs per node, c5.4xlarge has 8 (its cores: DisableSimultaneousMultithreading)"),
            std::string::npos);
}

TEST(PipelineFit, TrainingWorkersAgainstTheInstanceCpus) {
  EXPECT_NE(fit(workshop_config(), "train_scDINO:\n  num_workers: 8\n")
                .find("train_scDINO.num_workers 8 + 1 CPUs for each of 1 task(s) is 9 CPUs per node, "
                      "g4dn.2xlarge has 8 vCPUs"),
            std::string::npos);
}

TEST(PipelineFit, PartitionMustBeAQueue) {
  const std::string cluster = workshop_config();
  EXPECT_EQ(fit(cluster, "slurm:\n  partition: gpu\n"),
            "E Scheduling.SlurmQueues: p.yaml: slurm.partition 'gpu' (--partition) is not a queue of this "
            "cluster (its queues: train-g4dn-2xl)\n");
  EXPECT_EQ(fit(cluster, "train_scDINO:\n  num_workers: 1\nslurm:\n  partition: train-g4dn-2xl\n"), "");
  EXPECT_NE(
      fit(cluster, "slurm:\n  partition: train-g4dn-2xl\n", "other")
          .find("slurm.partition 'train-g4dn-2xl' sends the jobs to that queue, not to the queue 'other'"),
      std::string::npos);
  EXPECT_NE(fit(cluster, "train_scDINO:\n  num_workers: 1\n", "other")
                .find("no queue 'other' to run the pipeline on (its queues: train-g4dn-2xl)"),
            std::string::npos);
}

TEST(PipelineFit, ThePartitionChoosesTheQueueChecked) {
  const std::string two =
      "Scheduling:\n  Scheduler: slurm\n  SlurmQueues:\n"
      "    - Name: cpu\n      ComputeResources:\n        - Name: c\n          InstanceType: c5.4xlarge\n"
      "    - Name: gpu\n      ComputeResources:\n        - Name: g\n          InstanceType: g4dn.12xlarge\n"
      "          MaxCount: 4\n";
  const std::string pipeline = "train_scDINO:\n  num_gpus: 4\n  num_workers: 3\n  nnodes: 2\n";
  EXPECT_NE(fit(two, pipeline)
                .find("E Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType: p.yaml: "
                      "train_scDINO.num_gpus asks for 4 GPUs per node (--gres=gpu:4) but "
                      "c5.4xlarge has 0"),
            std::string::npos)
      << "no partition: Slurm's default, the first queue";
  EXPECT_EQ(fit(two, pipeline + "slurm:\n  partition: gpu\n"), "");
  EXPECT_NE(
      fit(two, "train_scDINO:\n  num_gpus: 4\n  num_workers: 3\n  nnodes: 5\nslurm:\n  partition: gpu\n")
          .find("E Scheduling.SlurmQueues[1].ComputeResources[0].MaxCount: p.yaml: train_scDINO.nnodes 5 "
                "is more than MaxCount 4"),
      std::string::npos);
}

TEST(PipelineFit, GpusPerNodeAgainstTheInstanceGpus) {
  EXPECT_EQ(
      fit(workshop_config(), "train_scDINO:\n  num_gpus: 4\n  num_workers: 1\n"),
      "E Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType: p.yaml: train_scDINO.num_gpus asks "
      "for 4 GPUs per node (--gres=gpu:4) but g4dn.2xlarge has 1\n");
  EXPECT_NE(
      fit(workshop_config(),
          "train_scDINO:\n  num_workers: 1\ndownstream_analyses:\n  compute_cls_features:\n    num_gpus: 2\n")
          .find("downstream_analyses.compute_cls_features.num_gpus asks for 2 GPUs per node"),
      std::string::npos);
  // On a CPU-only cluster (slurm.gpus false) num_gpus counts ranks, not GPUs.
  const std::string cpu = one_queue("        - Name: c\n          InstanceType: c5.4xlarge\n");
  EXPECT_EQ(fit(cpu, "train_scDINO:\n  num_gpus: 2\n  num_workers: 1\nslurm:\n  gpus: false\n"), "");
  // ParallelCluster's gres counts NVIDIA GPUs only: a Trainium node has none to give --gpus-per-node.
  const std::string trn = one_queue("        - Name: t\n          InstanceType: trn1.32xlarge\n");
  EXPECT_NE(fit(trn, "train_scDINO:\n  num_gpus: 1\n  num_workers: 1\n").find("trn1.32xlarge has 0"),
            std::string::npos);
}

TEST(PipelineFit, AnyComputeResourceOfTheQueueMayHoldTheJobs) {
  const std::string mixed = one_queue(
      "        - Name: small\n          InstanceType: g4dn.2xlarge\n"
      "        - Name: big\n          InstanceType: g4dn.12xlarge\n");
  EXPECT_EQ(
      fit(mixed, "train_scDINO:\n  num_gpus: 4\n  num_workers: 1\n"),
      "W Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType: p.yaml: train_scDINO.num_gpus asks "
      "for 4 GPUs per node (--gres=gpu:4) but g4dn.2xlarge has 1: these jobs run only on the queue's other "
      "compute resources\n");
  // Instances (flexible types): the smallest of them.
  const std::string flexible = one_queue(
      "        - Name: f\n          Instances:\n            - InstanceType: g4dn.12xlarge\n"
      "            - InstanceType: g4dn.2xlarge\n");
  EXPECT_EQ(
      fit(flexible, "train_scDINO:\n  num_gpus: 4\n  num_workers: 1\n"),
      "E Scheduling.SlurmQueues[0].ComputeResources[0].Instances: p.yaml: train_scDINO.num_gpus asks for 4 "
      "GPUs per node (--gres=gpu:4) but g4dn.12xlarge/g4dn.2xlarge has 1\n");
  // A type the catalogue does not know: a warning, and no error for what cannot be told.
  const std::string unknown = one_queue("        - Name: u\n          InstanceType: x9.huge\n");
  EXPECT_EQ(fit(unknown, "train_scDINO:\n  num_gpus: 4\n"),
            "W Scheduling.SlurmQueues[0].ComputeResources[0].InstanceType: p.yaml: 'x9.huge' is not in the "
            "catalogue: cannot check the pipeline's fit\n");
}

TEST(PipelineFit, TheStagedDatasetBelongsOnTheQueuesInstanceStore) {
  // cluster/examples/workshop.yaml: local_scratch /local_scratch, the queue's EphemeralVolume.MountDir (one
  // loader thread: the default 10 do not fit its 8 vCPUs).
  const std::string cluster = workshop_config();
  EXPECT_EQ(fit(cluster, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /local_scratch/pcdino\n"), "");
  EXPECT_EQ(fit(cluster, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /local_scratch\n"), "");
  EXPECT_EQ(
      fit(cluster, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /tmp\n"),
      "W Scheduling.SlurmQueues[0].ComputeSettings.LocalStorage.EphemeralVolume.MountDir: p.yaml: "
      "train_scDINO.stage_dataset /tmp is not on the queue's instance store, mounted at /local_scratch: "
      "the copies go to the root volume; set it to /local_scratch\n");
  EXPECT_EQ(
      fit(cluster, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /local_scratch_other\n").substr(0, 2),
      "W ");
  // A queue without an instance store mount; ParallelCluster's default mount dir; a type without a store.
  const std::string bare = one_queue("        - Name: g\n          InstanceType: g4dn.2xlarge\n");
  EXPECT_NE(
      fit(bare, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /scratch\n")
          .find("W Scheduling.SlurmQueues[0]: p.yaml: train_scDINO.stage_dataset /scratch stages the dataset "
                "on each node, but the queue mounts no instance store"),
      std::string::npos);
  const std::string mounted =
      one_queue("        - Name: g\n          InstanceType: g4dn.2xlarge\n") +
      "      ComputeSettings:\n        LocalStorage:\n          EphemeralVolume: {}\n";
  EXPECT_EQ(fit(mounted, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /scratch/data\n"), "")
      << "MountDir's default";
  const std::string no_store =
      one_queue("        - Name: c\n          InstanceType: c5.4xlarge\n") +
      "      ComputeSettings:\n        LocalStorage:\n          EphemeralVolume: {}\n";
  EXPECT_NE(fit(no_store, "train_scDINO:\n  num_workers: 1\n  stage_dataset: /scratch\n")
                .find("c5.4xlarge has no instance store, so its nodes stage the dataset on the root volume"),
            std::string::npos);
  EXPECT_EQ(fit(bare, "train_scDINO:\n  num_workers: 1\n"), "") << "nothing said when the key is unset";
}

}  // namespace
}  // namespace pcdino::cluster
