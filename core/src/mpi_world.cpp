#include "pcdino/core/mpi_world.hpp"

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/launch_env.hpp"

namespace pcdino {
namespace {

// How long a failing rank waits, its output flushed, before MPI_Abort (see abort()).
constexpr std::chrono::milliseconds kOutputDrain{1000};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(parsed) : fallback;
}

}  // namespace

MpiWorld::MpiWorld() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    // MPI can be initialised once per process: finalise at exit, not when this object goes away, so
    // that a test (or a program running two stages) can create several worlds.
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  local_rank_ = launch_env().local_rank;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  if (node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  host_ = host;

  const int step_tasks = env_int("SLURM_STEP_NUM_TASKS", 1);
  if (size_ == 1 && step_tasks > 1 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    throw Error(ExitCode::kConfig, "this Slurm step has " + std::to_string(step_tasks) +
                                       " tasks but MPI sees a world of 1: launch with `srun --mpi=pmix` "
                                       "(or mpirun) so that the tasks form one MPI job");
  }
}

MpiWorld::~MpiWorld() = default;

void MpiWorld::barrier() const {
  MPI_Barrier(MPI_COMM_WORLD);
}

std::vector<double> MpiWorld::gather(const std::vector<double>& values) const {
  std::vector<double> all(rank_ == 0 ? values.size() * static_cast<std::size_t>(size_) : 0);
  MPI_Gather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, all.data(),
             static_cast<int>(values.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return all;
}

namespace {

// Where each rank's string starts in the joined buffer of all of them.
std::vector<int> offsets_of(const std::vector<int>& lengths) {
  std::vector<int> offsets(lengths.size());
  for (std::size_t r = 1; r < lengths.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  return offsets;
}

std::vector<std::string> split(const std::string& joined, const std::vector<int>& lengths,
                               const std::vector<int>& offsets) {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    out.push_back(joined.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  }
  return out;
}

}  // namespace

std::vector<std::string> MpiWorld::gather(const std::string& value) const {
  int length = static_cast<int>(value.size());
  std::vector<int> lengths(rank_ == 0 ? size_ : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::vector<int> offsets = offsets_of(lengths);
  std::string joined(lengths.empty() ? 0 : static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  MPI_Gatherv(value.data(), length, MPI_CHAR, joined.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  return split(joined, lengths, offsets);
}

std::vector<std::string> MpiWorld::allgather(const std::string& value) const {
  int length = static_cast<int>(value.size());
  std::vector<int> lengths(static_cast<std::size_t>(size_));
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
  const std::vector<int> offsets = offsets_of(lengths);
  std::string joined(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
  MPI_Allgatherv(value.data(), length, MPI_CHAR, joined.data(), lengths.data(), offsets.data(), MPI_CHAR,
                 MPI_COMM_WORLD);
  return split(joined, lengths, offsets);
}

long long MpiWorld::allreduce_max(long long value) const {
  long long out = value;
  MPI_Allreduce(&value, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return out;
}

double MpiWorld::allreduce_sum(double value) const {
  double out = value;
  MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return out;
}

void MpiWorld::broadcast(int& value) const {
  MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
}

void MpiWorld::broadcast(std::string& value) const {
  // Strings beyond 2 GiB would overflow MPI's int count; dataset indices are far below that.
  int length = static_cast<int>(value.size());
  broadcast(length);
  value.resize(static_cast<std::size_t>(length));
  MPI_Bcast(value.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
}

void MpiWorld::abort(int exit_code) const {
  // Under srun, MPI_Abort cancels the step through PMIx, and slurmstepd stops forwarding a task's output
  // when it does: the lines written just before (the error saying why) were lost in about one run in three
  // (tests/doctor/test_doctor.sh's stopped node). A moment for the forwarder to read them first.
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  std::this_thread::sleep_for(kOutputDrain);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace pcdino
