// A packed dataset staged on a node's local disk (`train_scDINO.stage_dataset`): the training and CLS-feature
// jobs read a copy there instead of the shared filesystem, so that FSx for Lustre serves each node the
// dataset once per job instead of each rank its share once per epoch.
//
// On each node, under the scratch folder:
//   {scratch}/pcdino-{uid}/                  the user's, mode 0700 (one made or owned by another user is
//   refused)
//     {node}-{id}/                           the copy: pack.json, the shards, stage.json (what was verified)
//     {node}-{id}.copy.lock                  held exclusively by the one process that copies or checks the
//     copy {node}-{id}.use.lock                   held shared by every process that reads the copy
//     {node}-{id}.tmp.{pid}/                 a copy in progress (a killed copier's is removed by the next)
// {node} is SLURMD_NODENAME (else the host name): nodes that share a scratch folder keep apart copies. {id}
// is the first 16 hex digits of the SHA-256 of the source's real path, its pack.json and each shard's size
// and modification time, so a dataset packed again is copied again, and a requeued job on the same node finds
// the copy of the one it read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pcdino {

struct MetaConfig;
struct PipelineConfig;

/// What stage_dataset() did on this node.
struct StageReport {
  std::string source;       ///< the packed dataset on the shared filesystem
  std::string dir;          ///< the copy every stage reads
  std::string node;         ///< {node} in the copy's name
  bool copied = false;      ///< this process copied it (false: it reused a copy already verified)
  std::uint64_t bytes = 0;  ///< bytes of the dataset's files (pack.json and its shards)
  double copy_seconds = 0;  ///< time to copy and verify (0 when reused)
  double wait_seconds = 0;  ///< time spent waiting for another process's copy
  /// The user's folder in the scratch folder belongs to another user (who made it first): nothing is
  /// staged, `dir` is the source, read in place (a warning says so).
  bool in_place = false;
};

/// A copy of a packed dataset on this node, held (shared) while the object lives. Move-only.
class StagedDataset {
 public:
  /// Stages the packed dataset `source_dir` (a folder with pack.json) into `scratch`, or takes the copy that
  /// a process of this or an earlier job made of the same dataset on this node. One process per node
  /// copies; the others wait for it (a lock, so any launcher and any number of ranks per node work). A copy
  /// reads each source file once, computing its SHA-256, writes it, flushes it to disk, drops it from the
  /// page cache and reads it back: a copy whose SHA-256 differs from the source's is removed and refused.
  /// Throws ConfigError if `source_dir` is not a packed dataset (class folders are not staged: `pcdino
  /// dataset pack` them) or `scratch` is not an absolute path; CantCreateError if `scratch` does not exist,
  /// others can write it and it has no sticky bit, the user's folder there is open to others, or the free
  /// space there is less than the dataset (both sizes and the node named); NoInputError for a source file
  /// that cannot be read; DataError for a copy that does not match its source, or a source that changed
  /// while it was copied (naming the file). Processes that waited for a copier that failed throw its error.
  /// The locks are flock(2)s: the scratch folder must be a local filesystem (NFS emulates them per
  /// process, Lustre mounted without -o flock refuses them).
  static StagedDataset stage(const std::string& source_dir, const std::string& scratch);

  StagedDataset(StagedDataset&& other) noexcept;
  StagedDataset& operator=(StagedDataset&& other) noexcept;
  StagedDataset(const StagedDataset&) = delete;
  StagedDataset& operator=(const StagedDataset&) = delete;
  /// Releases this process's hold and keeps the copy (a job that stops to be requeued leaves it for its
  /// next start).
  ~StagedDataset();

  const StageReport& report() const { return report_; }
  /// The folder to open instead of the source (report().dir).
  const std::string& dir() const { return report_.dir; }

  /// The end of this process's use, after its stage succeeded: releases the hold and, when `remove`, removes
  /// the copy if no other process (of this job or another) still holds it. The last process of a node to
  /// call it removes the copy. Returns true if this call removed it.
  bool release(bool remove);

 private:
  StagedDataset() = default;
  StageReport report_;
  std::string use_lock_, copy_lock_;
  int use_fd_ = -1;
};

/// The pipeline's `meta` as the training and CLS-feature stages read it: with train_scDINO.stage_dataset set,
/// meta.dataset_dir is this node's copy (StagedDataset::stage(), held in `staged`, which the stage releases
/// with train_scDINO.keep_staged_dataset when it succeeds); else `config.meta` as it is. Throws as stage().
MetaConfig meta_with_staged_dataset(const PipelineConfig& config, std::optional<StagedDataset>& staged);

/// The SHA-256 of `path`'s bytes as 64 lowercase hex digits. Throws NoInputError naming the file.
std::string sha256_of_file(const std::string& path);

}  // namespace pcdino
