#include <gtest/gtest.h>

#include <map>

#include "pcdino/spank/args.hpp"
#include "pcdino/spank/environment.hpp"

namespace pcdino::spank {
namespace {

std::map<std::string, std::string> as_map(const std::vector<std::pair<std::string, std::string>>& env) {
  return {env.begin(), env.end()};
}

TEST(Environment, FirstHostOfASlurmHostList) {
  EXPECT_EQ(first_host("node1"), "node1");
  EXPECT_EQ(first_host("node[1-2]"), "node1");
  EXPECT_EQ(first_host("queue-st-p4d-[07-09,12],gpu1"), "queue-st-p4d-07");
  EXPECT_EQ(first_host("a,b[1-3]"), "a");
  EXPECT_EQ(first_host("rack[3,5]-n[1-2]"), "rack3-n[1-2]") << "only the first bracket is expanded";
  EXPECT_THROW(first_host(""), std::invalid_argument);
  EXPECT_THROW(first_host("node[1-2"), std::invalid_argument);
  EXPECT_THROW(first_host("node[x]"), std::invalid_argument);
}

TEST(Environment, MasterPortFromJobIdWithinRange) {
  EXPECT_EQ(master_port(0, 0, {29500, 29999}), 29500);
  EXPECT_EQ(master_port(1234, 0, {29500, 29999}), 29500 + 1234 % 500);
  EXPECT_NE(master_port(1234, 1, {29500, 29999}), master_port(1234, 0, {29500, 29999}))
      << "steps side by side";
  EXPECT_EQ(master_port(7, 3, {30000, 30000}), 30000);
}

TEST(Environment, RankVariablesFollowTorchrunsContract) {
  TaskInfo t;
  t.job_id = 42;
  t.global_rank = 5;
  t.local_rank = 1;
  t.world_size = 8;
  t.local_world_size = 4;
  t.step_nodelist = "node[3-4]";
  const auto env = as_map(task_environment(t, nullptr, {}, false, {29500, 29999}));
  EXPECT_EQ(env.at("RANK"), "5");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "8");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("MASTER_ADDR"), "node3");
  EXPECT_EQ(env.at("MASTER_PORT"), "29542");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1") << "several tasks per node and no --cpus-per-task";
  t.step_nodelist = "node[1-";  // malformed: everything but MASTER_ADDR
  const auto partial = as_map(task_environment(t, nullptr, {}, false, {29500, 29999}));
  EXPECT_EQ(partial.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(partial.at("RANK"), "5");
}

TEST(Environment, OmpThreadsFromCpusPerTaskUnlessTheJobSetsIt) {
  TaskInfo t;
  t.local_world_size = 4;
  t.cpus_per_task = 6;
  EXPECT_EQ(as_map(task_environment(t, nullptr, {}, false, {})).at("OMP_NUM_THREADS"), "6");
  t.omp_num_threads_set = true;
  EXPECT_EQ(as_map(task_environment(t, nullptr, {}, false, {})).count("OMP_NUM_THREADS"), 0u);
  TaskInfo alone;  // one task per node, nothing asked: all the node's cores, so leave it unset
  EXPECT_EQ(as_map(task_environment(alone, nullptr, {}, false, {})).count("OMP_NUM_THREADS"), 0u);
}

TEST(Environment, ProfileVariablesAndPerTaskDevices) {
  Profile p;
  p.devices = pcdino::accelerator_kind("nvidia");
  p.env.push_back({"NCCL_SOCKET_IFNAME", "^docker,lo,veth", {}, {}, ""});
  p.env.push_back({"FI_PROVIDER", "efa", {Condition::parse("aws-ofi-nccl <= 1.5")}, {}, ""});
  TaskInfo t;
  t.local_rank = 5;
  t.visible_devices = "0,1,2,3";
  const std::map<std::string, Version> v = {{"aws-ofi-nccl", Version::parse("1.7")}};
  auto env = as_map(task_environment(t, &p, v, true, {}));
  EXPECT_EQ(env.at("NCCL_SOCKET_IFNAME"), "^docker,lo,veth");
  EXPECT_EQ(env.count("FI_PROVIDER"), 0u);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1") << "local rank 5 of 4 devices";
  EXPECT_EQ(as_map(task_environment(t, &p, v, false, {})).count("CUDA_VISIBLE_DEVICES"), 0u)
      << "no binding asked";
  p.devices = pcdino::accelerator_kind("habana");
  t.visible_devices = "4,5";
  EXPECT_EQ(as_map(task_environment(t, &p, v, true, {})).at("HABANA_VISIBLE_MODULES"), "5");
  EXPECT_EQ(as_map(task_environment(t, &p, v, true, {})).count("HCCL_COMM_ID"), 0u)
      << "no address resolved: left to the job";
  // Gaudi's and Neuron's collectives find rank 0 at the first node's address, on the port after
  // MASTER_PORT (wrapping inside the range).
  t.master_ip = "10.0.1.7";
  t.job_id = 41;
  PortRange ports{29500, 29509};
  env = as_map(task_environment(t, &p, v, true, ports));
  EXPECT_EQ(env.at("MASTER_PORT"), "29501");
  EXPECT_EQ(env.at("HCCL_COMM_ID"), "10.0.1.7:29506")
      << "half the range away: not the next job's MASTER_PORT";
  t.job_id = 49;
  p.devices = pcdino::accelerator_kind("neuron");
  t.visible_devices = "0-3";
  env = as_map(task_environment(t, &p, v, true, ports));
  EXPECT_EQ(env.at("MASTER_PORT"), "29509");
  EXPECT_EQ(env.at("NEURON_RT_ROOT_COMM_ID"), "10.0.1.7:29504") << "wrapping inside the range";
  EXPECT_EQ(env.count("HCCL_COMM_ID"), 0u);
  EXPECT_EQ(env.at("NEURON_RT_VISIBLE_CORES"), "1") << "local rank 5 of the range's 4 cores";
  EXPECT_EQ(as_map(task_environment(t, &p, v, true, {29500, 29500})).count("NEURON_RT_ROOT_COMM_ID"), 0u)
      << "a one-port range has no second port";
  p.devices = pcdino::accelerator_kind("nvidia");
  EXPECT_EQ(as_map(task_environment(t, &p, v, true, ports)).count("NEURON_RT_ROOT_COMM_ID"), 0u);
  EXPECT_EQ(device_list("0-2,7"), (std::vector<std::string>{"0", "1", "2", "7"}));
  EXPECT_EQ(device_list("GPU-8f0e1c2a,3"), (std::vector<std::string>{"GPU-8f0e1c2a", "3"}));
  EXPECT_EQ(device_list("99999999999-1,,5"), (std::vector<std::string>{"99999999999-1", "5"}));
  p.devices = pcdino::accelerator_kind("habana");
  t.batch_step = true;  // the batch script: profile only, no ranks, no binding
  env = as_map(task_environment(t, &p, v, true, {}));
  EXPECT_EQ(env.size(), 1u);
  EXPECT_EQ(env.count("NCCL_SOCKET_IFNAME"), 1u);
}

TEST(Args, PlugstackArguments) {
  const PluginArgs a = parse_plugin_args({"config=/etc/slurm/accel.yaml", "default=nvidia-efa",
                                          "master_port_range=20000-20999", "manifest=/opt/m.json"});
  EXPECT_EQ(a.config, "/etc/slurm/accel.yaml");
  EXPECT_EQ(a.default_profile, "nvidia-efa");
  EXPECT_EQ(a.ports.low, 20000);
  EXPECT_EQ(a.ports.high, 20999);
  EXPECT_EQ(a.manifest, "/opt/m.json");
  EXPECT_THROW(parse_plugin_args({}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=relative.yaml"}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=/a", "config=/b"}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=/a", "colour=red"}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=/a", "master_port_range=80-90"}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=/a", "master_port_range=30000-20000"}), std::invalid_argument);
  EXPECT_THROW(parse_plugin_args({"config=/a", "default=Not Valid"}), std::invalid_argument);
}

TEST(Args, UserOptions) {
  EXPECT_EQ(parse_profile_option("nvidia-efa"), "nvidia-efa");
  EXPECT_EQ(parse_profile_option("none"), "none");
  EXPECT_THROW(parse_profile_option("../../etc/passwd"), std::invalid_argument);
  EXPECT_THROW(parse_profile_option(std::string(300, 'a').c_str()), std::invalid_argument);
  EXPECT_EQ(parse_bind_option(nullptr), BindMode::kPerTask);
  EXPECT_EQ(parse_bind_option("(null)"), BindMode::kPerTask);  // the bare option, back from the job's env
  EXPECT_EQ(parse_bind_option("none"), BindMode::kNone);
  EXPECT_THROW(parse_bind_option("closest"), std::invalid_argument);
}

}  // namespace
}  // namespace pcdino::spank
