// The doctor's per-node probes and its report (issue #21), on this machine's real filesystem, libfabric
// and Slurm's own output format; the multi-node check runs on the local cluster (test_doctor.sh).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "../lib/temp_dir.hpp"
#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/version.hpp"
#include "pcdino/doctor/accelerators.hpp"
#include "pcdino/doctor/doctor.hpp"
#include "pcdino/doctor/habana.hpp"
#include "pcdino/doctor/neuron.hpp"
#include "pcdino/doctor/node_check.hpp"
#include "pcdino/doctor/probes.hpp"

namespace pcdino::doctor {
namespace {

TEST(DoctorProbes, SlurmsNodeLineGivesCpusMemoryAndGpus) {
  // As `scontrol show node -o` prints it (Slurm 22.05), shortened.
  const auto v = parse_scontrol_node(
      "NodeName=gpu-st-p5-1 Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 CPUEfctv=192 CPUTot=192 CPULoad=0.01 "
      "AvailableFeatures=static,p5.48xlarge Gres=gpu:h100:8(S:0-1) NodeAddr=10.0.1.5 RealMemory=2000000 "
      "State=IDLE Partitions=gpu");
  EXPECT_EQ(v.name, "gpu-st-p5-1");
  EXPECT_EQ(v.cpus, 192);
  EXPECT_EQ(v.real_memory_mib, 2000000U);
  EXPECT_EQ(v.gpus, 8);
  EXPECT_EQ(v.features, (std::vector<std::string>{"static", "p5.48xlarge"}));
  EXPECT_EQ(parse_scontrol_node("NodeName=a CPUTot=4 Gres=gpu:2,gpu:t4:1,shard:8").gpus, 3);
  EXPECT_EQ(parse_scontrol_node("NodeName=node1 CPUTot=2 RealMemory=100 Gres=(null)").gpus, 0);
  EXPECT_THROW(parse_scontrol_node("NodeName=node1 RealMemory=100"), DataError);
  EXPECT_THROW(parse_scontrol_node("NodeName=node1 CPUTot=two"), DataError);
}

// ParallelCluster's features of a node (static/dynamic, instance type, compute resource, efa, gpu): the
// instance type is the one with a dot; a node Slurm gives no features has none.
TEST(DoctorProbes, InstanceTypeIsTheFeatureWithADot) {
  const auto p4d = parse_scontrol_node(
      "NodeName=gpu-dy-cr1-3 CPUTot=96 AvailableFeatures=dynamic,p4d.24xlarge,cr1,efa,gpu "
      "ActiveFeatures=dynamic,p4d.24xlarge,cr1,efa,gpu");
  EXPECT_EQ(p4d.features.size(), 5U);
  EXPECT_EQ(instance_type_feature(p4d.features), "p4d.24xlarge");
  EXPECT_EQ(
      instance_type_feature(parse_scontrol_node("NodeName=n CPUTot=2 AvailableFeatures=(null)").features),
      "");
  EXPECT_EQ(instance_type_feature({"static", "cr1"}), "");
}

// The NCCL floor: the site's when set, else the published one of the nodes' common instance type.
TEST(DoctorNccl, FloorIsTheSitesOrTheInstanceTypesPublishedOne) {
  std::string source;
  EXPECT_EQ(nccl_floor(0, {"p4d.24xlarge", "p4d.24xlarge"}, {8, 8}, &source), 26.0);
  EXPECT_NE(source.find("p4d.24xlarge: aws-parallelcluster"), std::string::npos) << source;
  EXPECT_EQ(nccl_floor(0, {"p5.48xlarge"}, {8}, nullptr), 250.0);
  EXPECT_EQ(nccl_floor(40, {"p4d.24xlarge", "p4d.24xlarge"}, {8, 8}, &source), 40.0);
  EXPECT_EQ(source, "doctor.min_nccl_busbw_gbps");
  // The published figure is for whole nodes: a job on 4 of a p4d's 8 GPUs is not held to it.
  EXPECT_EQ(nccl_floor(0, {"p4d.24xlarge", "p4d.24xlarge"}, {4, 4}, &source), 0.0);
  EXPECT_NE(source.find("all 8 of its GPUs"), std::string::npos) << source;
  EXPECT_EQ(nccl_floor(0, {"p4d.24xlarge", "p5.48xlarge"}, {8, 8}, &source), 0.0);  // mixed: neither
  EXPECT_EQ(source, "the nodes are of several instance types");
  EXPECT_EQ(nccl_floor(0, {"p4d.24xlarge", ""}, {8, 8}, nullptr), 0.0);
  EXPECT_EQ(nccl_floor(0, {"g5.48xlarge", "g5.48xlarge"}, {8, 8}, &source), 0.0);  // none published
  EXPECT_EQ(source, "no floor is published for g5.48xlarge");
  EXPECT_EQ(nccl_floor(0, {}, {}, nullptr), 0.0);
}

// The CUDA runtime and NCCL through dlopen on this machine (no GPU): the runtime says why it shows no GPU,
// and a library that is not there is named.
TEST(DoctorNccl, GpuStackSaysWhyItCannotRun) {
  const GpuLibraries libraries = default_gpu_libraries();
  if (libraries.cudart.empty()) {  // built without nccl.h
    EXPECT_NE(probe_gpu_stack().error.find("built without nccl.h"), std::string::npos);
    return;
  }
  const GpuStack no_runtime = probe_gpu_stack({{"libpcdino-no-such-cudart.so"}, libraries.nccl});
  EXPECT_EQ(no_runtime.gpus, 0);
  EXPECT_NE(no_runtime.error.find("cannot load libpcdino-no-such-cudart.so"), std::string::npos)
      << no_runtime.error;
  const GpuStack no_nccl = probe_gpu_stack({libraries.cudart, {"libpcdino-no-such-nccl.so"}});
  if (no_nccl.error.find("cannot load libcudart") == std::string::npos) {  // the runtime is installed here
    EXPECT_NE(no_nccl.error.find("cannot load libpcdino-no-such-nccl.so"), std::string::npos)
        << no_nccl.error;
  }
  EXPECT_FALSE(no_runtime.loaded);
  const GpuStack here = probe_gpu_stack();
  if (here.error.find("cannot load") != std::string::npos) GTEST_SKIP() << here.error;
  EXPECT_TRUE(here.loaded);
  if (std::filesystem::exists("/dev/nvidia0")) return;  // a GPU machine: its count is real
  EXPECT_EQ(here.gpus, 0);
  EXPECT_NE(here.error.find("cudaGetDeviceCount: "), std::string::npos) << here.error;
  EXPECT_FALSE(here.no_device) << "no driver is not no device: " << here.error;
}

// A job Slurm gave none of a GPU node's GPUs uses none of them (they may be another job's) and is told to
// ask for them, whether the runtime shows them or, where devices are constrained, shows none; a runtime
// that does not load or fails otherwise is the node's fault.
TEST(DoctorNccl, AJobWithoutGpusUsesNoneAndIsNotABrokenNode) {
  const auto environment = [](std::map<std::string, std::string> env) {
    return [env = std::move(env)](const char* n) -> const char* {
      const auto it = env.find(n);
      return it == env.end() ? nullptr : it->second.c_str();
    };
  };
  const std::map<std::string, std::string> job = {{"SLURM_JOB_ID", "7"}};
  auto step = job;
  step["SLURM_STEP_ID"] = "0";
  const auto with = [](std::map<std::string, std::string> env, const char* name, const char* value) {
    env[name] = value;
    return env;
  };
  EXPECT_EQ(slurm_job_has_gpus(environment({})), std::nullopt) << "not in a Slurm job";
  EXPECT_EQ(slurm_job_has_gpus(environment(job)), false);
  EXPECT_EQ(slurm_job_has_gpus(environment(step)), false);
  EXPECT_EQ(slurm_job_has_gpus(environment(with(step, "SLURM_STEP_GPUS", "0"))), true) << "GPU 0";
  EXPECT_EQ(slurm_job_has_gpus(environment(with(step, "SLURM_STEP_GPUS", ""))), false);
  EXPECT_EQ(slurm_job_has_gpus(environment(with(step, "SLURM_GPUS_ON_NODE", "2"))), true);
  EXPECT_EQ(slurm_job_has_gpus(environment(with(step, "SLURM_GPUS_ON_NODE", "0"))), false) << "a count";
  EXPECT_EQ(slurm_job_has_gpus(environment(with(step, "SLURM_JOB_GPUS", "0,1"))), false)
      << "a step inherits the batch node's SLURM_JOB_GPUS";
  EXPECT_EQ(slurm_job_has_gpus(environment(with(job, "SLURM_JOB_GPUS", "0,1"))), true) << "outside a step";

  GpuStack none_shown;
  none_shown.loaded = true, none_shown.no_device = true;
  none_shown.error = "cudaGetDeviceCount: no CUDA-capable device is detected";
  GpuStack eight;
  eight.loaded = true, eight.gpus = 8;
  for (const GpuStack& stack : {none_shown, eight}) {
    const Check unasked = judge_gpu_stack(stack, false);
    EXPECT_TRUE(unasked.ok);
    EXPECT_NE(unasked.detail.find("GPUs not used: the job has none of this node's"), std::string::npos)
        << unasked.detail;
  }
  for (const std::optional<bool> asked : {std::optional<bool>(true), std::optional<bool>()}) {
    const Check failed = judge_gpu_stack(none_shown, asked);
    EXPECT_FALSE(failed.ok);
    EXPECT_EQ(failed.detail, none_shown.error);
  }
  GpuStack mismatch;
  mismatch.loaded = true;
  mismatch.error = "cudaGetDeviceCount: system has unsupported display driver / cuda driver combination";
  EXPECT_FALSE(judge_gpu_stack(mismatch, false).ok) << "a broken driver is the node's, GPUs asked or not";
  GpuStack zero;
  zero.loaded = true, zero.no_device = true;
  EXPECT_EQ(judge_gpu_stack(zero, true).detail, "the CUDA runtime shows no GPU");
  GpuStack no_nccl;
  no_nccl.error = "cannot load libnccl.so.2";
  EXPECT_FALSE(judge_gpu_stack(no_nccl, false).ok) << "a library that does not load is the node's";
  const Check good = judge_gpu_stack(eight, true);
  EXPECT_TRUE(good.ok);
  EXPECT_EQ(good.detail, "8 GPUs, CUDA runtime and NCCL loaded");
}

// Without a usable GPU the sweep fails before NCCL starts, on every rank, naming the rank and its reason,
// instead of hanging in NCCL.
TEST(DoctorNccl, SweepWithoutAGpuFailsBeforeNcclStarts) {
  if (std::filesystem::exists("/dev/nvidia0")) GTEST_SKIP() << "a GPU machine";
  if (default_gpu_libraries().cudart.empty()) GTEST_SKIP() << "built without nccl.h";
  const MpiWorld world;
  const auto failure = [&world](int gpus) {
    try {
      nccl_allreduce_sweep(world, gpus, {1u << 20}, 1);
    } catch (const NcclSetupError& e) {
      EXPECT_EQ(e.failed.size(), 1U);
      EXPECT_EQ(std::string(e.what()), "rank 0: " + e.failed.at(0));
      return e.failed.at(0);
    }
    return std::string("no NcclSetupError");
  };
  EXPECT_EQ(failure(0), "NCCL allreduce: no GPU on this node");
  const std::string one = failure(1);
  EXPECT_TRUE(one.rfind("cudaSetDevice: ", 0) == 0 || one.find("cannot load") != std::string::npos) << one;
}

TEST(DoctorProbes, FilesystemProbeWritesReadsAndRemoves) {
  test::TempDir d;
  const FilesystemProbe ok = probe_filesystem(d.path(), 4u << 20);
  EXPECT_TRUE(ok.exists);
  EXPECT_TRUE(ok.writable) << ok.error;
  EXPECT_GT(ok.write_mb_s, 0);
  EXPECT_GT(ok.read_mb_s, 0);
  EXPECT_TRUE(std::filesystem::is_empty(d.path())) << "the probe's file is removed";

  const FilesystemProbe missing = probe_filesystem(d / "nowhere", 1u << 20);
  EXPECT_FALSE(missing.exists);
  EXPECT_NE(missing.error.find(d / "nowhere"), std::string::npos) << missing.error;
  // /proc takes no new files, not even root's: the error names the file it could not create.
  const FilesystemProbe refused = probe_filesystem("/proc", 1u << 20);
  EXPECT_TRUE(refused.exists);
  EXPECT_FALSE(refused.writable);
  EXPECT_NE(refused.error.find("cannot create '/proc/.pcdino-doctor-"), std::string::npos) << refused.error;
}

// A probe killed at its time limit leaves its file: the next probe of the host removes it, but not the file
// of a probe that still runs (a prolog and the health check at once), nor anything of another name.
TEST(DoctorProbes, FilesystemProbeRemovesTheLeftoversOfDeadProbesOnly) {
  test::TempDir d;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string base = std::string(".pcdino-doctor-") + host + ".tmp.";
  // A pid that no process has: one past the kernel's largest.
  std::ifstream max_pid("/proc/sys/kernel/pid_max");
  long pid_max = 4194304;
  max_pid >> pid_max;
  const std::string dead = base + std::to_string(pid_max + 1) + ".17", live = base + "1.18";
  std::ofstream(d / dead) << "left";
  std::ofstream(d / live) << "running";
  std::ofstream(d / "user-file") << "mine";
  const FilesystemProbe ok = probe_filesystem(d.path(), 1u << 20);
  EXPECT_TRUE(ok.writable) << ok.error;
  EXPECT_FALSE(std::filesystem::exists(d / dead)) << "a dead probe's file is removed";
  EXPECT_TRUE(std::filesystem::exists(d / live)) << "pid 1 runs: its file stays";
  EXPECT_TRUE(std::filesystem::exists(d / "user-file"));
}

// A full filesystem, a quota, root squashed: the filesystem's own state, the same from every node, warns; a
// read-only mount or an I/O error of this node drains.
TEST(DoctorProbes, AFilesystemWideErrorWarnsAndANodesOwnDrains) {
  for (int e : {ENOSPC, EDQUOT, EACCES, EPERM}) EXPECT_TRUE(filesystem_wide_error(e)) << e;
  for (int e : {EROFS, EIO, ENOTCONN, ESTALE, 0}) EXPECT_FALSE(filesystem_wide_error(e)) << e;
  const Check full = shared_dir_failure("cannot write '/fsx/x': No space left on device", ENOSPC);
  EXPECT_FALSE(full.ok);
  EXPECT_EQ(full.severity, Severity::kWarn);
  EXPECT_NE(full.detail.find("No space left on device"), std::string::npos) << full.detail;
  EXPECT_EQ(shared_dir_failure("cannot create '/fsx/x': Read-only file system", EROFS).severity,
            Severity::kDrain);
  // Through the child process, as the node check runs it: the errno travels in its JSON.
  FilesystemProbe p;
  p.exists = true, p.error = "cannot write '/fsx/x': Disk quota exceeded", p.error_number = EDQUOT;
  EXPECT_EQ(nlohmann::json::parse(filesystem_probe_json(p)).value("errno", 0), EDQUOT);
}

// A filesystem that fills up as the probe writes: a small tmpfs of root's (skipped where mounts are refused).
TEST(DoctorProbes, AFullFilesystemIsAWarning) {
  test::TempDir d;
  const std::string mnt = d / "fsx";
  std::filesystem::create_directories(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  const Check c = check_shared_dir(mnt, 4u << 20, 0, 0, 10);
  const FilesystemProbe p = probe_filesystem(mnt, 4u << 20);
  const bool empty = std::filesystem::is_empty(mnt);
  ::umount2(mnt.c_str(), MNT_DETACH);
  EXPECT_EQ(p.error_number, ENOSPC) << p.error;
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.severity, Severity::kWarn) << c.detail;
  EXPECT_TRUE(empty) << "the probe's file is removed after the failed write";
}

// The drain guard: a finding that half a partition's nodes are already drained for drains no more of them.
TEST(DoctorProbes, TheDrainGuardHoldsBackAFindingHalfThePartitionCarries) {
  const auto node = [](const std::string& name, const std::string& partitions, const std::string& state,
                       const std::string& reason) {
    return parse_scontrol_node("NodeName=" + name + " CPUTot=4 State=" + state + " Partitions=" + partitions +
                               (reason.empty() ? "" : " Reason=" + reason + " [root@2026-11-29T07:00:00]"));
  };
  const auto report = [] {
    NodeCheckReport r;
    r.node = "q-4";
    r.checks = {{{"shared_fs", false, "/fsx: did not finish within 10 s"}, "shared_fs", 10},
                {{"gpus", true, "4 GPUs"}, "gpus", 1}};
    return r;
  };
  std::vector<SlurmNodeView> nodes = {
      node("q-1", "q", "IDLE+DRAIN", "pcdino: shared_fs: /fsx: did not finish within 10 s"),
      node("q-2", "q,debug", "MIXED+DRAIN", "pcdino: gpus: 3 of 4; shared_fs: /fsx: not mounted"),
      node("q-3", "q", "IDLE", ""),
      node("q-4", "q", "IDLE", ""),
      node("other-1", "other", "IDLE+DRAIN", "pcdino: shared_fs: /fsx: not mounted"),
      node("other-2", "other", "IDLE+DRAIN", "pcdino: shared_fs: /fsx: not mounted")};
  EXPECT_EQ(nodes[1].partitions, (std::vector<std::string>{"q", "debug"}));

  NodeCheckReport r = report();
  auto withheld = apply_drain_guard(r, nodes, 0.5);
  ASSERT_EQ(withheld.size(), 1u);
  EXPECT_EQ(withheld[0].check, "shared_fs");
  EXPECT_EQ(withheld[0].drained, 2);
  EXPECT_EQ(withheld[0].nodes, 4) << "the other partition's nodes do not count";
  EXPECT_FALSE(r.drain());
  EXPECT_NE(r.checks[0].check.detail.find("not drained: 2 of the 4 nodes of q already are for shared_fs"),
            std::string::npos)
      << r.checks[0].check.detail;

  // Drained by an admin, or for another check: not the same fault.
  nodes[0].reason = "replacing the GPU";
  r = report();
  EXPECT_TRUE(apply_drain_guard(r, nodes, 0.5).empty());
  EXPECT_TRUE(r.drain()) << "one of four drained for it: this node is drained as before";
  nodes[0].reason = "pcdino: gpus: 3 of 4";
  r = report();
  EXPECT_TRUE(apply_drain_guard(r, nodes, 0.5).empty());
  EXPECT_TRUE(r.drain());
  // 100 %: off.
  nodes[0].reason = "pcdino: shared_fs: /fsx: not mounted";
  r = report();
  EXPECT_TRUE(apply_drain_guard(r, nodes, 1.0).empty());
  EXPECT_TRUE(r.drain());
  // Two nodes: the first drains, the second is the guard's.
  r = report();
  r.node = "other-3";
  std::vector<SlurmNodeView> pair = {node("other-3", "pair", "IDLE", ""),
                                     node("other-4", "pair", "IDLE", "")};
  EXPECT_TRUE(apply_drain_guard(r, pair, 0.5).empty());
  pair[1] = node("other-4", "pair", "IDLE+DRAIN", "pcdino: shared_fs: /fsx: not mounted");
  EXPECT_EQ(apply_drain_guard(r, pair, 0.5).size(), 1u);
  // A node Slurm does not list is judged as before.
  r = report();
  r.node = "elsewhere";
  EXPECT_TRUE(apply_drain_guard(r, nodes, 0.5).empty());
  EXPECT_TRUE(r.drain());
}

TEST(DoctorProbes, ScratchResourcesVariablesAndProviders) {
  test::TempDir d;
  ASSERT_TRUE(free_bytes(d.path()).has_value());
  EXPECT_GT(*free_bytes(d.path()), 0U);
  EXPECT_FALSE(free_bytes(d / "nowhere").has_value());

  std::filesystem::create_directories(d / "dev");
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-modeset"})
    std::ofstream(std::filesystem::path(d / "dev") / name).put('\n');
  const HostResources host = host_resources(d / "dev");
  EXPECT_EQ(host.gpus, 2) << "nvidia<N> only, not the control devices";
  EXPECT_GT(host.cpus, 0);
  EXPECT_GT(host.memory_mib, 0U);

  const std::map<std::string, std::string> env = {{"FI_PROVIDER", "efa"}, {"EMPTY", ""}};
  const auto getenv = [&env](const char* n) -> const char* {
    const auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(missing_variables({"FI_PROVIDER", "EMPTY", "NCCL_SOCKET_IFNAME"}, getenv),
            (std::vector<std::string>{"EMPTY", "NCCL_SOCKET_IFNAME"}));

  // Debian's libfabric has its TCP/UDP/shared-memory providers on any machine.
  const auto providers = fabric_providers();
  ASSERT_FALSE(providers.empty());
  EXPECT_EQ(providers.front().rfind("error:", 0), std::string::npos) << providers.front();
}

// The versions a node reports, from the files the NVIDIA driver, the CUDA toolkit and the EFA installer
// write (their formats as those write them), libfabric's fi_version() and this build.
TEST(DoctorProbes, ImageVersionsFromVersionFilesAndLibraries) {
  test::TempDir d;
  VersionFiles files{d / "nvidia", d / "version.json", d / "efa_installed_packages"};
  EXPECT_EQ(image_versions(files).count("cuda"), 0U) << "no version file: absent";
  test::write_text(
      files.nvidia_driver,
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Tue Oct  8 03:22:07 UTC 2024\n"
      "GCC version:  gcc version 11.4.1 20230605 (Red Hat 11.4.1-2) (GCC)\n");
  test::write_text(files.cuda, R"({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, "nvcc": {}})");
  test::write_text(files.efa_installer, "# EFA installer version: 1.36.0\n# Debug packages installed: no\n");
  const auto v = image_versions(files);
  EXPECT_EQ(v.at("nvidia_driver"), "550.127.05");
  EXPECT_EQ(v.at("cuda"), "12.4.1");
  EXPECT_EQ(v.at("efa_installer"), "1.36.0");
  EXPECT_EQ(v.at("pcdino"), version());
  EXPECT_EQ(v.count("libfabric"), 1U) << "Debian's libfabric answers fi_version()";
}

// The manifest `pcdino ami` writes against a node: compared on the parts the node's source reports, and
// entries with no version or no source on the node are left out.
TEST(DoctorProbes, ManifestComparisonNamesEachMismatch) {
  const std::string manifest = R"({"name": "pcdino-p5", "components": {"nvidia_driver": "550.127.05",
      "cuda": "12.4.1", "nccl": "2.21.5-1", "libfabric": "1.22.0", "openmpi": "from efa_installer 1.36.0",
      "cudnn": "9.1.0.70", "pcdino": "0.1.0"}})";
  const std::map<std::string, std::string> node = {
      {"nvidia_driver", "550.127.05"}, {"cuda", "12.4.1"},   {"nccl", "2.21.5"},
      {"libfabric", "1.22"},           {"openmpi", "4.1.7"}, {"pcdino", "0.1.0"}};
  const auto same = compare_manifest(manifest, "m.json", node);
  EXPECT_EQ(same.image, "pcdino-p5");
  EXPECT_TRUE(same.mismatched.empty());
  EXPECT_EQ(same.matched, (std::vector<std::string>{"cuda 12.4.1", "libfabric 1.22.0", "nccl 2.21.5-1",
                                                    "nvidia_driver 550.127.05", "pcdino 0.1.0"}));
  auto other = node;
  other["nvidia_driver"] = "535.183.01";
  other["libfabric"] = "1.18";
  other.erase("cuda");
  EXPECT_EQ(compare_manifest(manifest, "m.json", other).mismatched,
            (std::vector<std::string>{"cuda: image 12.4.1, node none", "libfabric: image 1.22.0, node 1.18",
                                      "nvidia_driver: image 550.127.05, node 535.183.01"}));
  EXPECT_EQ(compare_manifest(manifest, "m.json", other, false).mismatched,
            std::vector<std::string>{"libfabric: image 1.22.0, node 1.18"})
      << "a node without GPUs is not judged on the GPU stack";
  EXPECT_THROW(compare_manifest("{\"name\": \"x\"}", "m.json", node), DataError);
  EXPECT_THROW(compare_manifest("not json", "m.json", node), DataError);
}

TEST(DoctorProbes, WithinGivesUpOnAHungProbe) {
  EXPECT_EQ(within<int>(5, [] { return 7; }), 7);
  const auto start = std::chrono::steady_clock::now();
  const auto late = within<int>(0.2, [] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return 1;
  });
  EXPECT_FALSE(late.has_value());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.5);
  EXPECT_THROW(within<int>(5, []() -> int { throw DataError("bad"); }), DataError);
}

// A slow node is the one common to the slow pairs of neighbours (pair k: ranks k, k+1 mod n).
TEST(DoctorProbes, SlowRanksAreThoseWhoseBothPairsAreSlow) {
  EXPECT_EQ(slow_ranks({10, 2, 3}, 5), std::vector<int>{2}) << "pairs (1,2) and (2,0) slow: rank 2";
  EXPECT_EQ(slow_ranks({2, 10, 10, 3}, 5), std::vector<int>{0}) << "pairs (0,1) and (3,0) slow: rank 0";
  EXPECT_EQ(slow_ranks({2, 2, 10, 10, 10}, 5), std::vector<int>{1});
  EXPECT_EQ(slow_ranks({2, 10, 2, 10}, 5), std::vector<int>{}) << "two slow links, no node on both";
  EXPECT_TRUE(slow_ranks({1, 2, 3}, 5).empty()) << "every pair slow: the network, not a node";
  EXPECT_TRUE(slow_ranks({6, 7, 8}, 5).empty());
}

TEST(DoctorProbes, BusBandwidthIsNcclTestsDefinition) {
  EXPECT_DOUBLE_EQ(allreduce_bus_bandwidth(10, 2), 10);    // 2(n-1)/n = 1
  EXPECT_DOUBLE_EQ(allreduce_bus_bandwidth(10, 8), 17.5);  // 2 * 7 / 8
  EXPECT_DOUBLE_EQ(allreduce_bus_bandwidth(10, 1), 0);
  EXPECT_GT(memory_bandwidth_gb_s(8u << 20, 2), 0);
}

TEST(DoctorReport, TableJsonAndDrainLinesNameTheFailingNode) {
  DoctorReport report;
  NodeReport good, bad, silent;
  good.node = "node1", good.rank = 0, good.answered = true, good.memory_gb_s = 5;
  good.checks = {{"shared_fs", true, "/fsx: write 900 MB/s, read 1200 MB/s"}};
  bad.node = "node2", bad.rank = 1, bad.answered = true, bad.memory_gb_s = 5;
  bad.checks = {{"shared_fs", false, "cannot create '/fsx/.pcdino-doctor-x': Read-only file system"}};
  silent.node = "node3", silent.rank = 2;
  report.nodes = {good, bad, silent};
  report.allreduce_ok = false;
  report.allreduce_note = "not measured: a node did not answer within 30 s";
  EXPECT_FALSE(report.healthy());

  const std::string table = format_table(report);
  EXPECT_NE(table.find("node2        FAIL"), std::string::npos) << table;
  EXPECT_NE(table.find("node3        NO ANSWER"), std::string::npos) << table;
  EXPECT_NE(table.find("Read-only file system"), std::string::npos) << table;
  EXPECT_NE(table.find("UNHEALTHY"), std::string::npos) << table;

  const auto drains = drain_commands(report);
  ASSERT_EQ(drains.size(), 2U);
  EXPECT_EQ(drains[0],
            (std::vector<std::string>{
                "scontrol", "update", "NodeName=node2", "State=DRAIN",
                "Reason=pcdino doctor: shared_fs: cannot create '/fsx/.pcdino-doctor-x': Read-only "
                "file system"}));
  EXPECT_EQ(drains[1][2], "NodeName=node3");
  EXPECT_NE(drains[1][4].find("did not answer"), std::string::npos);

  const auto j = nlohmann::json::parse(format_json(report));
  EXPECT_FALSE(j.at("healthy").get<bool>());
  EXPECT_TRUE(j.at("nodes")[0].at("drain").is_null());
  EXPECT_NE(j.at("nodes")[1].at("drain").get<std::string>().find("NodeName=node2"), std::string::npos);
  EXPECT_FALSE(j.at("nodes")[2].at("answered").get<bool>());
  EXPECT_EQ(j.at("allreduce").at("note").get<std::string>(), report.allreduce_note);

  EXPECT_EQ(summary(report),
            "unhealthy: node2 (shared_fs: cannot create '/fsx/.pcdino-doctor-x': Read-only file system); "
            "node3 (did not answer (stopped, hung or dead)); allreduce: " +
                report.allreduce_note);

  // NCCL's sweep below the instance type's floor fails the report and is named in the summary.
  report.nodes = {good};
  report.allreduce_ok = true;
  report.nccl = {{1u << 30, 0.1, 10.737, 20.13}};
  report.nccl_gpus = 16;
  report.nccl_ok = false;
  report.min_nccl_busbw_gb_s = 26;
  report.nccl_note = "busbw 20.13 GB/s at 1073741824 bytes over 16 GPUs < the floor 26 GB/s";
  EXPECT_FALSE(report.healthy());
  EXPECT_EQ(summary(report), "unhealthy: nccl allreduce: " + report.nccl_note);
  const std::string nccl_table = format_table(report);
  EXPECT_NE(nccl_table.find("NCCL allreduce over 16 GPUs"), std::string::npos) << nccl_table;
  EXPECT_NE(nccl_table.find("nccl allreduce: FAIL: busbw 20.13"), std::string::npos) << nccl_table;
  const auto nccl_json = nlohmann::json::parse(format_json(report)).at("nccl");
  EXPECT_FALSE(nccl_json.at("ok").get<bool>());
  EXPECT_EQ(nccl_json.at("gpus").get<int>(), 16);
  EXPECT_EQ(nccl_json.at("min_busbw_gb_s").get<double>(), 26);
  EXPECT_EQ(nccl_json.at("points")[0].at("bytes").get<std::size_t>(), 1u << 30);

  report.nccl_ok = true;
  report.nccl.clear();
  EXPECT_TRUE(report.healthy());
  EXPECT_EQ(summary(report), "healthy");
  EXPECT_TRUE(drain_commands(report).empty());
  EXPECT_NE(format_table(report).find("healthy"), std::string::npos);
}

// The pipeline's doctor: section sets what the doctor stage checks: the run folder when no shared directory
// is named, the training's exported variables beside the section's own, and the floors.
TEST(DoctorConfig, ThePipelineSectionSetsTheChecks) {
  const PipelineConfig c = parse_config(
      "meta:\n  output_dir: /fsx/out\n  name_of_run: r1\n"
      "slurm:\n  environment: {FI_PROVIDER: efa, NCCL_DEBUG: WARN}\n"
      "doctor:\n  probe_mb: 8\n  min_busbw_gbps: 12.5\n  expect_env: [FI_PROVIDER, PROFILE]\n"
      "  expect_providers: [efa]\n  scratch: /scratch\n  min_scratch_gib: 100\n  min_write_mb_s: 500\n"
      "  nccl: false\n  min_nccl_busbw_gbps: 30\n",
      "p.yaml");
  DoctorOptions o;
  o.answer_seconds = 7;  // not the section's: kept
  apply_config(c, o);
  EXPECT_EQ(o.shared_dir, "/fsx/out/r1");
  EXPECT_EQ(o.probe_bytes, 8'000'000U);
  EXPECT_EQ(o.min_busbw_gb_s, 12.5);
  EXPECT_EQ(o.expect_variables, (std::vector<std::string>{"FI_PROVIDER", "PROFILE", "NCCL_DEBUG"}));
  EXPECT_EQ(o.expect_providers, std::vector<std::string>{"efa"});
  EXPECT_EQ(o.scratch_dir, "/scratch");
  EXPECT_EQ(o.min_scratch_gib, 100);
  EXPECT_EQ(o.min_write_mb_s, 500);
  EXPECT_EQ(o.answer_seconds, 7);
  EXPECT_FALSE(o.nccl);
  EXPECT_EQ(o.min_nccl_busbw_gb_s, 30);
  apply_config(parse_config("doctor:\n  shared_dir: /lustre/probe\n", "p.yaml"), o);
  EXPECT_EQ(o.shared_dir, "/lustre/probe");
  EXPECT_THROW(parse_config("doctor:\n  shared_dir: relative\n", "p.yaml"), ConfigError);
  EXPECT_THROW(parse_config("doctor:\n  expect_env: [\"A B\"]\n", "p.yaml"), ConfigError);
}

// The settings a doctor: section shares with the command line are the schema's doctor keys (all but
// doctor.enabled, which turns the stage on) and monitoring.textfile_dir, each once; the ranks get them as
// options.
TEST(DoctorConfig, TheSectionOptionsAreTheSchemasDoctorKeys) {
  std::vector<std::string> schema = {"monitoring.textfile_dir"}, rows;
  for (const auto& k : config_schema())
    if (k.path.rfind("doctor.", 0) == 0 && k.path != "doctor.enabled") schema.push_back(k.path);
  for (const auto& row : section_options()) rows.push_back(row.key);
  std::sort(schema.begin(), schema.end());
  std::sort(rows.begin(), rows.end());
  EXPECT_EQ(rows, schema);
  DoctorOptions o;
  o.expect_variables.clear();
  o.probe_bytes = 8'000'000;
  const auto args = section_arguments(o);
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + 4),
            (std::vector<std::string>{"--shared-dir", "", "--probe-mb", "8"}));
  EXPECT_EQ(std::find(args.begin(), args.end(), "--expect-env"), args.end()) << "an empty list is left out";
  EXPECT_EQ(std::find(args.begin(), args.end(), "--drain"), args.end()) << "a flag: the launch's";
  EXPECT_NE(std::find(args.begin(), args.end(), "true"), args.end()) << "--nccl true";
}

// Slurm's encoding (slurm_version.h: SLURM_VERSION_NUM(a, b, c) = a << 16 | b << 8 | c) and its loader's
// rule: a SPANK plugin loads only in a Slurm of its own major.minor.
TEST(SpankPluginVersion, EncodingAndTheLoadersRule) {
  const auto pc311 = spank::SlurmVersion::from_number(0x170b0a);
  EXPECT_EQ(pc311.str(), "23.11.10");
  const auto debian = spank::SlurmVersion::from_number(0x160508);
  EXPECT_EQ(debian.str(), "22.05.8");
  EXPECT_EQ(debian.major_minor(), "22.05");
  EXPECT_EQ(spank::SlurmVersion::parse("23.11").str(), "23.11.0");
  EXPECT_THROW(spank::SlurmVersion::parse("23"), std::invalid_argument);
  EXPECT_EQ(spank::parse_slurm_version_line("slurm 23.11.10\n").str(), "23.11.10");
  EXPECT_EQ(spank::parse_slurm_version_line("slurm-wlm 22.05.8").str(), "22.05.8");
  EXPECT_TRUE(pc311.loads_in(spank::SlurmVersion::parse("23.11.7")));  // micro releases share plugins
  EXPECT_FALSE(debian.loads_in(pc311));

  const Check ok = judge_spank_plugin("/p/spank_pcdino.so", pc311, spank::SlurmVersion::parse("23.11.7"));
  EXPECT_TRUE(ok.ok) << ok.detail;
  const Check bad = judge_spank_plugin("/p/spank_pcdino.so", debian, pc311);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.detail.find("built for Slurm 22.05.8 but the node runs Slurm 23.11.10"), std::string::npos)
      << bad.detail;
}

TEST(SpankPluginVersion, ANonPluginFileIsNamed) {
  test::TempDir dir;
  test::write_text(dir / "x.so", "not an ELF file at all, but long enough to hold a header ............");
  try {
    spank::plugin_slurm_version(dir / "x.so");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir / "x.so"), std::string::npos) << e.what();
  }
  EXPECT_THROW(spank::plugin_slurm_version(dir / "missing.so"), std::runtime_error);
}

// A CPU-only trainer on a node with GPUs is a broken image; on a CPU node it is what the node needs.
TEST(Trainer, ACpuLibTorchFailsOnlyOnAGpuNode) {
  const BuildFacts cpu{"1.13.0", false, "none", "none", "22.05.8", "4.1.4"};
  const BuildFacts gpu{"2.5.1", true, "12.4.131", "2.21.5", "23.11.10", "4.1.6"};
  EXPECT_TRUE(judge_trainer(cpu, 0).ok);
  const Check broken = judge_trainer(cpu, 8);
  EXPECT_FALSE(broken.ok);
  EXPECT_NE(broken.detail.find("LibTorch 1.13.0 without CUDA on a node with 8 GPU(s)"), std::string::npos)
      << broken.detail;
  EXPECT_TRUE(judge_trainer(gpu, 8).ok);
}

}  // namespace
}  // namespace pcdino::doctor

namespace pcdino::doctor {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(PCDINO_SOURCE_DIR) + "/tests/doctor/fixtures/" + name);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A node with the stack installed and the tool's output given.
VendorNode installed(const std::string& output, int device_files) {
  VendorNode n;
  n.device_files = device_files;
  n.module_loaded = true;
  n.tool_found = true;
  n.tool_output = output;
  return n;
}

TEST(DoctorAccelerators, HlSmiAndNeuronLsOutputsParse) {
  const auto cards = parse_hl_smi(fixture("hl-smi-dl1.csv"));
  ASSERT_EQ(cards.size(), 8u);
  EXPECT_EQ(cards[2].index, 2);
  EXPECT_EQ(cards[2].name, "HL-205");
  EXPECT_EQ(cards[2].driver, "1.21.0-ee698fb");
  EXPECT_EQ(cards[2].temperature_c, 35);
  const std::string header = "index, name, driver_version, temperature.aip\n";
  EXPECT_THROW(parse_hl_smi(header + "0, HL-205, 1.21.0-ee698fb\n"), DataError);
  try {
    parse_hl_smi(header + "0, HL-205, 1.21.0-ee698fb, 33 C\nN/A, HL-205, 1.21.0-ee698fb, hot\n");
    ADD_FAILURE() << "a card without an index must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("hl-smi output line 3"), std::string::npos) << e.what();
  }
  // Recorded outputs of other queries: the columns are found by the header, units in brackets dropped;
  // Intel's own sample has no name or temperature and says so.
  const auto recorded = parse_hl_smi(fixture("hl-smi-dl1-nounits.csv"));
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].name, "HL-205");
  EXPECT_EQ(recorded[0].temperature_c, 29);
  EXPECT_EQ(recorded[0].driver, "") << "not queried";
  try {
    parse_hl_smi(fixture("hl-smi-index-module.csv"));
    ADD_FAILURE() << "no name column";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no 'name' column in its header 'index, module_id'"),
              std::string::npos)
        << e.what();
  }
  const auto devices = parse_neuron_ls(fixture("neuron-ls-trn2.json"));
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].cores, 4);
  EXPECT_EQ(devices[0].memory_bytes, 103079215104ULL);
  EXPECT_THROW(parse_neuron_ls("+--------+ NEURON DEVICE"), DataError) << "the table, not the JSON";
  EXPECT_THROW(parse_neuron_ls(R"([{"bdf": "cc:00.0"}])"), DataError);
}

TEST(DoctorAccelerators, NotPresentIsHealthyAndEachFaultIsNamed) {
  // An NVIDIA or CPU node: neither stack, healthy.
  const VendorNode none;
  EXPECT_EQ(judge_gaudi(none, "p5.48xlarge", "").detail, "not present");
  EXPECT_TRUE(judge_gaudi(none, "", "").ok);
  EXPECT_TRUE(judge_neuron(none, "").ok);
  EXPECT_EQ(judge_neuron(none, "").detail, "not present");

  // A DL1 without its driver, without hl-smi, with a card short, cold, or another release.
  Check c = judge_gaudi(none, "dl1.24xlarge", "1.21.0-555");
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.detail,
            "dl1.24xlarge has 8 Gaudi cards; the habanalabs kernel module is not loaded (0 device files)");
  VendorNode no_tool = installed("", 8);
  no_tool.tool_found = false;
  no_tool.tool_error = "cannot start hl-smi";
  EXPECT_NE(judge_gaudi(no_tool, "dl1.24xlarge", "").detail.find("hl-smi is not installed"),
            std::string::npos);
  const std::string csv = fixture("hl-smi-dl1.csv");
  c = judge_gaudi(installed(csv, 8), "dl1.24xlarge", "1.21.0-555");
  EXPECT_TRUE(c.ok) << c.detail;
  EXPECT_EQ(c.detail, "8 HL-205 card(s), driver 1.21.0-ee698fb, 29-35 C");
  const std::string seven = csv.substr(0, csv.rfind("7, HL-205"));
  EXPECT_EQ(judge_gaudi(installed(fixture("hl-smi-dl1-nounits.csv"), 8), "dl1.24xlarge", "1.21.0-555").detail,
            "hl-smi shows 1 of dl1.24xlarge's 8 cards")
      << "a recorded DL1 output of one card";
  EXPECT_EQ(judge_gaudi(installed(seven, 7), "dl1.24xlarge", "").detail,
            "hl-smi shows 7 of dl1.24xlarge's 8 cards");
  std::string cold = csv;
  cold.replace(cold.find("31 C"), 4, "0 C");
  EXPECT_EQ(judge_gaudi(installed(cold, 8), "dl1.24xlarge", "").detail,
            "card 1 reports 0 C: it did not initialise");
  EXPECT_EQ(judge_gaudi(installed(csv, 8), "dl1.24xlarge", "1.19.0-561")
                .detail.rfind("card 0 driver 1.21.0-ee698fb, image 1.19.0-561, card 1", 0),
            0u);

  // A trn2.48xlarge whose neuron-ls shows one of its 16 devices; all 16 are healthy.
  const std::string one = fixture("neuron-ls-trn2.json");
  c = judge_neuron(installed(one, 16), "trn2.48xlarge");
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.detail, "neuron-ls shows 1 of trn2.48xlarge's 16 devices");
  auto all = nlohmann::json::parse(one);
  for (int i = 1; i < 16; ++i) {
    auto d = all[0];
    d["neuron_device"] = i;
    all.push_back(d);
  }
  c = judge_neuron(installed(all.dump(), 16), "trn2.48xlarge");
  EXPECT_TRUE(c.ok) << c.detail;
  EXPECT_EQ(c.detail, "16 device(s), 64 NeuronCores");
  all[3]["nc_count"] = 2;
  EXPECT_EQ(judge_neuron(installed(all.dump(), 16), "trn2.48xlarge").detail,
            "device 3 shows 2 of 4 NeuronCores");
  // A neuron-ls before 2.22 prints its table: the device files stand for the devices.
  const std::string table = "+--------+--------+\n| NEURON | NEURON |\n";
  EXPECT_EQ(
      judge_neuron(installed(table, 16), "trn1.32xlarge").detail,
      "16 Neuron device file(s) (neuron-ls gave no JSON: --json-output is documented from Neuron 2.22)");
  EXPECT_FALSE(judge_neuron(installed(table, 15), "trn1.32xlarge").ok);
  // --nccl on such a node: nccom-test is not run (its core count is unknown), and says so.
  const auto& kinds = vendor_probes();
  const auto neuron = std::find_if(kinds.begin(), kinds.end(),
                                   [](const VendorProbe& v) { return std::string(v.check) == "neuron"; });
  ASSERT_NE(neuron, kinds.end());
  ASSERT_NE(neuron->collectives, nullptr);
  const auto nccom = neuron->collectives(installed(table, 16), 5);
  ASSERT_TRUE(nccom.has_value());
  EXPECT_EQ(nccom->name, "nccom");
  EXPECT_NE(nccom->detail.find("not run: neuron-ls gave no JSON"), std::string::npos) << nccom->detail;
  VendorNode failing = installed("", 16);
  failing.tool_exit = 1;
  failing.tool_error = "neuron-ls: failed to open /dev/neuron0\n";
  EXPECT_EQ(judge_neuron(failing, "trn1.32xlarge").detail,
            "neuron-ls failed with exit code 1: neuron-ls: failed to open /dev/neuron0");

  // On this machine (no Gaudi, no Neuron): both say "not present".
  EXPECT_EQ(judge_gaudi(probe_gaudi(30), "", "").detail, "not present");
  EXPECT_EQ(judge_neuron(probe_neuron(30), "").detail, "not present");
}

TEST(DoctorAccelerators, AFaultyGaudiNodeIsDrainedByName) {
  DoctorReport report;
  NodeReport good, bad;
  good.node = "dl1-st-1", good.answered = true;
  good.checks = {judge_gaudi(installed(fixture("hl-smi-dl1.csv"), 8), "dl1.24xlarge", "1.21.0-555")};
  std::string cold = fixture("hl-smi-dl1.csv");
  cold.replace(cold.find("30 C"), 4, "0 C");
  bad.node = "dl1-st-2", bad.rank = 1, bad.answered = true;
  bad.checks = {judge_gaudi(installed(cold, 8), "dl1.24xlarge", "1.21.0-555")};
  report.nodes = {good, bad};
  const auto drains = drain_commands(report);
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0],
            (std::vector<std::string>{"scontrol", "update", "NodeName=dl1-st-2", "State=DRAIN",
                                      "Reason=pcdino doctor: gaudi: card 4 reports 0 C: it did not "
                                      "initialise"}));
}

TEST(DoctorAccelerators, AFaultyNeuronNodeIsDrainedByName) {
  DoctorReport report;
  NodeReport bad;
  bad.node = "trn1-st-3", bad.answered = true;
  VendorNode unloaded = installed("", 16);
  unloaded.module_loaded = false;
  bad.checks = {judge_neuron(unloaded, "trn1.32xlarge")};
  report.nodes = {bad};
  const auto drains = drain_commands(report);
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0][2], "NodeName=trn1-st-3");
  EXPECT_EQ(drains[0][4],
            "Reason=pcdino doctor: neuron: trn1.32xlarge has 16 Neuron devices; the neuron kernel module is "
            "not loaded "
            "(16 device files)");
}

// NCCL's sweep asked for on Gaudi or Neuron nodes does not start; the note says why and what tests those.
TEST(DoctorAccelerators, NcclIsNotRunOnGaudiOrNeuronNodes) {
  NodeReport gpu, gaudi, neuron;
  gpu.node = "p5-st-1", gpu.cuda_gpus = 8;
  gpu.checks = {{"gaudi", true, "not present"}, {"neuron", true, "not present"}};
  EXPECT_EQ(nccl_blocker({gpu}), "");
  gaudi.node = "dl1-st-1";
  gaudi.checks = {judge_gaudi(installed(fixture("hl-smi-dl1.csv"), 8), "dl1.24xlarge", ""),
                  {"neuron", true, "not present"}};
  EXPECT_EQ(
      nccl_blocker({gaudi}),
      "not measured: NCCL runs on NVIDIA GPUs; dl1-st-1 has Intel Gaudi cards (HCCL's test: hccl_demo)");
  neuron.node = "trn1-st-1";
  neuron.checks = {{"neuron", false, "neuron-ls shows 3 of trn1.32xlarge's 16 devices"}};
  EXPECT_NE(nccl_blocker({gpu, neuron})
                .find("trn1-st-1 has AWS Neuron devices (their collectives' test: nccom-test)"),
            std::string::npos);
  NodeReport cpu;
  cpu.node = "c6i-st-1";
  EXPECT_EQ(nccl_blocker({gpu, cpu}), "not measured: the CUDA runtime shows no GPU on c6i-st-1");
}

// nccom-test's documented output (aws-neuron-sdk nccom-test.rst, the example of `nccom-test -r 2 allr`).
TEST(DoctorAccelerators, NccomTestBusBandwidth) {
  const std::string documented =
      "     size(B)    count(elems)     type    time(us)    algbw(GB/s)    busbw(GB/s)\n"
      "    33554432        33554432    uint8         768          40.69          40.69\n"
      "Avg bus bandwidth:      40.6901GB/s\n";
  EXPECT_DOUBLE_EQ(parse_nccom_busbw(documented), 40.6901);
  EXPECT_DOUBLE_EQ(parse_nccom_busbw(documented.substr(0, documented.find("Avg"))), 40.69)
      << "the table alone";
  EXPECT_THROW(parse_nccom_busbw("nccom-test: error: -r is required\n"), DataError);
  EXPECT_FALSE(check_nccom(32, 10).has_value()) << "no Neuron device here: optional, not a failure";
}

TEST(DoctorAccelerators, DeviceFilesAndModules) {
  test::TempDir dev;
  std::filesystem::create_directories(dev.path() / "accel");
  for (const char* f :
       {"accel/accel0", "accel/accel1", "accel/accel2", "hl2", "neuron0", "neuron1", "neuron12", "nvidia0"})
    test::write_text(dev.path() / f, "");
  // sysfs: accel0 and accel1 are habanalabs', accel2 another vendor's.
  const auto sys = dev.path() / "sys";
  for (const auto& [accel, driver] :
       {std::pair{"accel0", "habanalabs"}, std::pair{"accel1", "habanalabs"}, std::pair{"accel2", "ivpu"}}) {
    std::filesystem::create_directories(sys / accel / "device");
    std::filesystem::create_symlink(std::string("../../../bus/pci/drivers/") + driver,
                                    sys / accel / "device" / "driver");
  }
  EXPECT_EQ(gaudi_device_files(dev.path().string(), sys.string()), 3) << "accel0, accel1 and hl2";
  EXPECT_EQ(neuron_device_files(dev.path().string()), 3);
  const auto modules = dev.path() / "modules";
  test::write_text(modules, "habanalabs_en 61440 8 - Live 0x0\nhabanalabs 1572864 0 - Live 0x0\n");
  EXPECT_TRUE(module_loaded("habanalabs", modules.string()));
  EXPECT_FALSE(module_loaded("neuron", modules.string()));
  EXPECT_FALSE(module_loaded("habanalabs_cn", modules.string()));
}

}  // namespace
}  // namespace pcdino::doctor
