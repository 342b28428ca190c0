// Files on the shared filesystem: outputs appear under their final name only when complete.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace pcdino {

/// Writes `content` to `path` atomically: to a temporary file in the same directory (so the rename does
/// not cross filesystems), flushed to disk, then renamed over `path`. A reader never sees a partial file
/// and a killed writer leaves at most a `*.tmp.*` file behind. Creates missing parent directories.
/// Throws CantCreateError naming the path and the system error.
void write_file_atomic(const std::string& path, const std::string& content);

/// write_file_atomic() for content written piece by piece (a checkpoint's archive, hundreds of MB, without a
/// copy of it in memory): the constructor creates the temporary file (and missing parent directories),
/// write() appends, commit() flushes it to disk and renames it over `path`. Destroyed without commit() (an
/// exception on the way), it removes the temporary file. Throws CantCreateError naming the path and the
/// system error.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Appends `size` bytes.
  void write(const void* data, std::size_t size);
  /// fsync, close and rename over the path; nothing is written after it.
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

/// A name in the same directory as `path` for a temporary file of this process: `{path}.tmp.{pid}.{n}`, `n`
/// random, so that no other user can take it first in a folder they can write.
std::string temporary_name(const std::string& path);

/// Creates a new temporary_name() of `path` with `mode`, opened write-only with O_CREAT|O_EXCL|O_NOFOLLOW
/// (never an existing file or a link someone left there; another name on EEXIST). Returns the descriptor
/// and sets `tmp` to its name. Throws CantCreateError naming the file and the system error.
int create_temporary(const std::string& path, std::string& tmp, mode_t mode);

/// At most `max_bytes` of `path`, for a file in a folder others can write that root or a stage reads:
/// opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW (a FIFO cannot block it, a link is not followed) and read only if
/// it is a regular file. Throws NoInputError "cannot read '{path}': {why}" (a symbolic link, not a regular
/// file, or the system error).
std::string read_regular_file(const std::string& path, std::size_t max_bytes);

/// Removes the temporary files that writers killed mid-write left in `dir`: names that begin with `prefix`
/// and end in temporary_name's `.tmp.{pid}.{n}`. Returns their paths (none when `dir` is missing). Only for
/// the one writer of those names, before it writes: a live writer's file would go too. Throws
/// CantCreateError naming a file it cannot remove.
std::vector<std::string> remove_temporaries(const std::string& dir, const std::string& prefix);

/// Renames `from` to `to` (same filesystem), throwing CantCreateError naming both on failure.
void rename_into_place(const std::string& from, const std::string& to);

/// The whole content of `path`. Throws NoInputError "cannot read {what} '{path}'" if it cannot be opened.
std::string read_file(const std::string& path, const std::string& what);

/// Creates `dir` and its parents if missing. Throws CantCreateError naming the directory.
void make_directories(const std::string& dir);

}  // namespace pcdino
