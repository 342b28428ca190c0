// Unit tests of rank discovery from the launchers' environments (Open MPI, Slurm, torchrun).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "pcdino/core/error.hpp"
#include "pcdino/core/launch_env.hpp"

namespace pcdino {
namespace {

LaunchEnv read(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, EachLauncher) {
  const LaunchEnv none = read({});
  EXPECT_EQ(none.launcher, "none");
  EXPECT_EQ(none.size, 1);

  const LaunchEnv ompi = read({{"OMPI_COMM_WORLD_RANK", "3"},
                               {"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_PROCID", "0"}});
  EXPECT_EQ(ompi.launcher, "openmpi") << "mpirun inside an allocation: mpirun's variables win";
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.local_rank, 1);

  const LaunchEnv slurm = read({{"SLURM_STEP_ID", "0"},
                                {"SLURM_PROCID", "5"},
                                {"SLURM_STEP_NUM_TASKS", "8"},
                                {"SLURM_LOCALID", "1"},
                                {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.size, 8);
  EXPECT_EQ(slurm.local_size, 4);

  const LaunchEnv batch = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(batch.launcher, "none") << "a batch script's variables describe the allocation, not a rank";

  const LaunchEnv torchrun = read({{"RANK", "1"},
                                   {"WORLD_SIZE", "2"},
                                   {"LOCAL_RANK", "1"},
                                   {"LOCAL_WORLD_SIZE", "2"},
                                   {"MASTER_ADDR", "node1"},
                                   {"MASTER_PORT", "29500"}});
  EXPECT_EQ(torchrun.launcher, "torchrun");
  EXPECT_EQ(torchrun.master_addr, "node1");
  EXPECT_EQ(torchrun.master_port, 29500);
}

TEST(LaunchEnv, BadValuesNameTheVariable) {
  try {
    read({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
    FAIL() << "a rank that is not a number must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='one'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), ConfigError);
}

}  // namespace
}  // namespace pcdino
