// Files on the shared filesystem: outputs appear under their final name only when complete.
#pragma once

#include <string>
#include <vector>

namespace pcdino {

/// Writes `content` to `path` atomically: to a temporary file in the same directory (so the rename does
/// not cross filesystems), flushed to disk, then renamed over `path`. A reader never sees a partial file
/// and a killed writer leaves at most a `*.tmp.*` file behind. Creates missing parent directories.
/// Throws CantCreateError naming the path and the system error.
void write_file_atomic(const std::string& path, const std::string& content);

/// A name in the same directory as `path` for a temporary file of this process and thread.
std::string temporary_name(const std::string& path);

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
