// The trainer's checkpoints between starts of one run (trainer.cpp's private interface): which start of
// a Slurm job wrote one, writing the latest without losing the one before it, and loading the newest
// that is this run's.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/checkpoint.hpp"
#include "pcdino/train/dino.hpp"

namespace pcdino::train {

/// The start of the Slurm job this process belongs to, as a checkpoint's tags name it ("" outside Slurm).
struct JobStart {
  std::string job_id;
  long restart = 0;  ///< SLURM_RESTART_COUNT: 0 for the first start, +1 for each requeue
};

/// SLURM_JOB_ID and SLURM_RESTART_COUNT of this process.
JobStart this_job_start();

/// Several ranks: every rank's generator states into `state` on the writer (each rank's drop path draws
/// its own), so that a resumed run continues every rank's random stream. Called by all ranks together.
void gather_generator_states(const MpiWorld* world, const torch::Device& device, CheckpointState& state);

/// Keeps the checkpoint just written at `path` also as `copy` (checkpoint{epoch}.pth): a hard link under a
/// temporary name renamed over `copy`, not a second write of the same hundreds of MB (the next write of
/// `path` is a new file, so `copy` keeps this epoch's); a copy of the file where the filesystem has no hard
/// links. Throws CantCreateError naming both.
void keep_checkpoint_as(const std::string& path, const std::string& copy);

/// Writes `path` keeping the checkpoint it replaces as `previous` (a hard link first, so that `path` never
/// goes missing), unless `path` was written by a later start of the same Slurm job: a rank of an earlier
/// start that was stopped (SIGSTOP, a hung node) and resumed after the requeue is stale, and throws
/// DataError instead of replacing the newer run's checkpoint.
void save_latest_checkpoint(const std::string& path, const std::string& previous, MultiCropWrapper& student,
                            MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                            const DinoLoss& loss, const CheckpointState& state);

/// Loads the newest checkpoint of `candidates` (checkpoint.pth, then the one before it) that can be read
/// and is this run's (`args`: arch, patch_size, out_dim, in_chans and seed must match; the epochs, the
/// batch and the world size may change between starts): a torn, unreadable or foreign one is skipped with
/// the reason. All ranks load the same file. Returns its path, "" when none exists; throws the first one's
/// error (DataError) when none can be loaded.
std::string load_newest_checkpoint(const std::vector<std::string>& candidates,
                                   const std::map<std::string, std::string>& args, MultiCropWrapper& student,
                                   MultiCropWrapper& teacher, torch::optim::Optimizer& optimizer,
                                   DinoLoss& loss, const MpiWorld* world, int rank, int ranks,
                                   CheckpointState& state);

}  // namespace pcdino::train
