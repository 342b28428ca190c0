#include "resume.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino::train {

namespace fs = std::filesystem;

void gather_generator_states(const MpiWorld* world, const torch::Device& device, CheckpointState& state) {
  if (!world || world->size() <= 1) return;
  const auto to_bytes = [](const torch::Tensor& t) {
    const auto dense = t.contiguous();
    return std::string(static_cast<const char*>(dense.data_ptr()), static_cast<std::size_t>(dense.numel()));
  };
  const auto to_tensor = [](const std::string& bytes) {
    return torch::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())},
                            torch::kUInt8)
        .clone();
  };
  const auto cpu = world->gather(to_bytes(at::detail::getDefaultCPUGenerator().get_state()));
  const auto gpu = world->gather(
      device.is_cuda() ? to_bytes(at::globalContext().defaultGenerator(device).get_state()) : std::string());
  state.rank_rng_states.clear();
  state.rank_cuda_rng_states.clear();
  for (std::size_t r = 0; r < cpu.size(); ++r) {
    state.rank_rng_states.push_back(to_tensor(cpu[r]));
    if (device.is_cuda()) state.rank_cuda_rng_states.push_back(to_tensor(gpu[r]));
  }
}

JobStart this_job_start() {
  JobStart start;
  if (const char* id = std::getenv("SLURM_JOB_ID")) start.job_id = id;
  if (const char* count = std::getenv("SLURM_RESTART_COUNT")) start.restart = std::strtol(count, nullptr, 10);
  return start;
}

void keep_checkpoint_as(const std::string& path, const std::string& copy) {
  const std::string tmp = temporary_name(copy);
  std::error_code ec;
  fs::create_hard_link(path, tmp, ec);
  if (ec) fs::copy_file(path, tmp, ec);
  if (ec) {
    fs::remove(tmp);
    throw CantCreateError("cannot keep '" + path + "' as '" + copy + "': " + ec.message());
  }
  rename_into_place(tmp, copy);
}

void save_latest_checkpoint(const std::string& path, const std::string& previous, MultiCropWrapper& student,
                            MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                            const DinoLoss& loss, const CheckpointState& state) {
  if (fs::exists(path)) {
    const JobStart ours = this_job_start();
    if (!ours.job_id.empty()) {
      std::map<std::string, std::string> theirs;
      try {
        theirs = read_checkpoint_state(path).args;
      } catch (const Error&) {
        // A torn checkpoint is replaced.
      }
      const auto job = theirs.find("slurm_job_id"), restart = theirs.find("slurm_restart_count");
      if (job != theirs.end() && restart != theirs.end() && job->second == ours.job_id &&
          std::strtol(restart->second.c_str(), nullptr, 10) > ours.restart) {
        throw DataError(path + " was written by start " + std::to_string(std::stol(restart->second) + 1) +
                        " of job " + ours.job_id + " (" + theirs["writer"] + "); this process of start " +
                        std::to_string(ours.restart + 1) + " is stale and does not replace it");
      }
    }
    // Already the same file when a write was cut short after this step (rename() of two links to one
    // file does nothing and would leave the temporary link behind).
    if (!fs::exists(previous) || !fs::equivalent(path, previous)) {
      const std::string link = temporary_name(previous);
      fs::remove(link);  // a link left by a killed process of the same pid
      fs::create_hard_link(path, link);
      rename_into_place(link, previous);
    }
  }
  save_checkpoint(path, student, teacher, optimizer, loss, state);
}

namespace {

// The arguments that make a checkpoint this run's: a checkpoint written with other values is another
// run's (a copied or mixed-up folder), not one to resume. The epochs, the batch and the world size may
// change between starts.
constexpr const char* kRunArgs[] = {"arch", "patch_size", "out_dim", "in_chans", "seed"};

}  // namespace

std::string load_newest_checkpoint(const std::vector<std::string>& candidates,
                                   const std::map<std::string, std::string>& args, MultiCropWrapper& student,
                                   MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                                   DinoLoss& loss, const MpiWorld* world, int rank, int ranks,
                                   CheckpointState& state) {
  const auto try_load = [&](std::size_t i, std::string& error) {
    try {
      state = load_checkpoint(candidates[i], student, teacher, optimizer, loss, rank, ranks);
    } catch (const Error& e) {
      error = e.what();
      return false;
    }
    for (const char* key : kRunArgs) {
      const auto theirs = state.args.find(key);
      const auto ours = args.find(key);
      if (theirs == state.args.end() || ours == args.end() || theirs->second == ours->second) continue;
      error = candidates[i] + ": another run's checkpoint (" + key + " " + theirs->second + ", this run's " +
              ours->second + ")";
      return false;
    }
    return true;
  };
  long long chosen = -1;
  std::string first_error;
  for (std::size_t i = 0; i < candidates.size() && chosen < 0; ++i) {
    if (!fs::exists(candidates[i])) continue;
    std::string error;
    if (try_load(i, error)) {
      chosen = static_cast<long long>(i);
    } else {
      spdlog::warn("not resuming from {}: {}", candidates[i], error);
      if (first_error.empty()) first_error = error;
    }
  }
  // A rank that could read a newer file than another takes the other's (the one every rank can read).
  constexpr long long kNoneLoads = 1000;  // every file there refused: the largest, so that all ranks stop
  const long long mine = chosen < 0 && !first_error.empty() ? kNoneLoads : chosen;
  const long long agreed = world && ranks > 1 ? world->allreduce_max(mine) : mine;
  if (agreed == kNoneLoads) {
    throw DataError(first_error.empty() ? "another rank could not load any checkpoint" : first_error);
  }
  if (agreed < 0) return "";
  const auto index = static_cast<std::size_t>(agreed);
  if (agreed != chosen) {
    std::string error;
    if (!try_load(index, error)) throw DataError(error);
  }
  return candidates[index];
}

}  // namespace pcdino::train
