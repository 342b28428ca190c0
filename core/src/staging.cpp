#include "pcdino/core/staging.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunkBytes = std::size_t{8} << 20;  // reads and writes of the copy
constexpr const char* kStageRecord = "stage.json";
constexpr const char* kFailed = ".failed";  // beside a copy: why the last attempt failed
constexpr const char* kKey = "train_scDINO.stage_dataset";

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string system_error() {
  return std::strerror(errno);
}

std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.2f} GiB ({} bytes)", static_cast<double>(bytes) / (1 << 30), bytes);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// SHA-256 through OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw Error(ExitCode::kSoftware, "OpenSSL cannot start a SHA-256");
  }
  void update(const void* data, std::size_t size) { EVP_DigestUpdate(ctx_.get(), data, size); }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &size);
    std::string out;
    for (unsigned int i = 0; i < size; ++i) out += fmt::format("{:02x}", digest[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

// Every byte of `fd` into `sink`, in chunks. Returns false with errno set on a read error.
template <class Sink>
bool read_all(int fd, std::vector<char>& buffer, Sink&& sink) {
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    sink(buffer.data(), static_cast<std::size_t>(n));
  }
}

// The node's name as the copy's name holds it: SLURMD_NODENAME, else the host name; characters outside
// [A-Za-z0-9._-] become '_'.
std::string node_name() {
  std::string name;
  if (const char* slurm = std::getenv("SLURMD_NODENAME"); slurm && *slurm) {
    name = slurm;
  } else {
    char host[HOST_NAME_MAX + 1] = {};
    name = ::gethostname(host, sizeof host - 1) == 0 ? host : "node";
  }
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return name;
}

struct SourceFile {
  std::string name;  // in the dataset folder
  std::uint64_t bytes = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint64_t inode = 0;
};

std::int64_t nanoseconds(const struct timespec& t) {
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// pack.json's text and the files a copy holds: pack.json and its shards, with their sizes and times.
std::vector<SourceFile> source_files(const std::string& dir, std::string& manifest) {
  const std::string manifest_path = dir + "/" + kPackManifest;
  if (!fs::is_regular_file(manifest_path)) {
    throw ConfigError(std::string(kKey) + ": meta.dataset_dir '" + dir + "' is not a packed dataset (no " +
                      kPackManifest + "); only a packed one is staged: `pcdino dataset pack` makes it");
  }
  manifest = read_file(manifest_path, "the packed dataset's manifest");
  std::vector<std::string> names{kPackManifest};
  try {
    const auto parsed = nlohmann::json::parse(manifest);
    for (const auto& shard : parsed.at("shards")) {
      const std::string file = shard.at("file").get<std::string>();
      // A shard lies in the dataset's folder: a name with a folder in it is not copied anywhere else.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == ".." ||
          file == kStageRecord || std::find(names.begin(), names.end(), file) != names.end())
        throw DataError(manifest_path + ": shard file '" + file +
                        "' is not a file name of its own in its folder");
      names.push_back(file);
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(manifest_path + ": not a pcdino pack manifest: " + e.what());
  }
  std::vector<SourceFile> files;
  for (const auto& name : names) {
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (::stat(path.c_str(), &st) != 0) throw NoInputError("cannot read '" + path + "': " + system_error());
    files.push_back({name, static_cast<std::uint64_t>(st.st_size), nanoseconds(st.st_mtim),
                     nanoseconds(st.st_ctim), static_cast<std::uint64_t>(st.st_ino)});
  }
  return files;
}

std::string dataset_id(const std::string& real_dir, const std::string& manifest,
                       const std::vector<SourceFile>& files) {
  Sha256 h;
  h.update(real_dir.data(), real_dir.size() + 1);
  h.update(manifest.data(), manifest.size());
  for (const auto& f : files) {
    const std::string line =
        fmt::format("\n{} {} {} {} {}", f.name, f.bytes, f.mtime_ns, f.ctime_ns, f.inode);
    h.update(line.data(), line.size());
  }
  return h.hex().substr(0, 16);
}

// {scratch}/pcdino-{uid}: made 0700, or refused when it is a link or open to others (a folder another user
// can write could hold a copy they changed). "" when another user made it first: the caller reads in place.
// A scratch folder others can write needs the sticky bit, without which another user could rename ours away
// and put theirs in its place between our check and our use.
std::string user_folder(const std::string& scratch, const std::string& node) {
  if (scratch.empty() || scratch.front() != '/')
    throw ConfigError(std::string(kKey) + ": '" + scratch + "' is not an absolute path");
  struct stat st {};
  const bool found = ::stat(scratch.c_str(), &st) == 0;
  if (!found || !S_ISDIR(st.st_mode)) {
    throw CantCreateError(std::string(kKey) + ": '" + scratch + "' is not a folder on " + node + ": " +
                          (found ? std::string("not a directory") : system_error()) +
                          " (the site's local_scratch is where ParallelCluster mounts the instance store)");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    throw CantCreateError(fmt::format(
        "{}: '{}' on {} can be written by other users (mode {:04o}) and has no sticky bit, so one could "
        "replace a copy there: stage in a folder with mode 1777 (as /tmp) or one only this user can write",
        kKey, scratch, node, st.st_mode & 07777));
  }
  const std::string dir = scratch + "/pcdino-" + std::to_string(::geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw CantCreateError("cannot create '" + dir + "' on " + node + ": " + system_error());
  if (::lstat(dir.c_str(), &st) != 0) throw CantCreateError("cannot stat '" + dir + "': " + system_error());
  if (S_ISDIR(st.st_mode) && st.st_uid != ::geteuid()) {
    spdlog::warn(
        "{}: '{}' on {} belongs to uid {}, not this user (uid {}): the dataset is read in place; "
        "an administrator can remove it",
        kKey, dir, node, st.st_uid, ::geteuid());
    return "";
  }
  if (!S_ISDIR(st.st_mode) || (st.st_mode & 077) != 0) {
    throw CantCreateError(fmt::format(
        "{}: '{}' on {} is {} (mode {:04o}): staged copies are kept in a folder only their user can enter; "
        "remove it",
        kKey, dir, node, !S_ISDIR(st.st_mode) ? "not a folder" : "open to other users", st.st_mode & 07777));
  }
  return dir;
}

// Opens (creating) `path` and takes flock `operation` on it, waiting. Returns the descriptor.
int lock(const std::string& path, int operation) {
  FileDescriptor fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) throw CantCreateError("cannot open the lock '" + path + "': " + system_error());
  while (::flock(fd.get(), operation) != 0) {
    if (errno != EINTR) throw CantCreateError("cannot lock '" + path + "': " + system_error());
  }
  return fd.release();
}

// Copies `from` to the new file `to` (0600), flushed to disk and dropped from the page cache. Returns the
// SHA-256 of what was read. Throws DataError when the file is not the one the copy's name was made of (its
// size, times or inode changed: the dataset was packed again meanwhile) or ended early.
std::string copy_file(const std::string& from, const SourceFile& expected, const std::string& to,
                      std::vector<char>& buffer) {
  FileDescriptor in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) throw NoInputError("cannot read '" + from + "': " + system_error());
  const auto changed = [&] {
    return DataError(
        fmt::format("{}: '{}' changed while it was staged (packed again?): start the job again", kKey, from));
  };
  struct stat st {};
  if (::fstat(in.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != expected.bytes ||
      nanoseconds(st.st_mtim) != expected.mtime_ns || static_cast<std::uint64_t>(st.st_ino) != expected.inode)
    throw changed();
  std::uint64_t copied = 0;
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  FileDescriptor out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0) throw CantCreateError("cannot create '" + to + "': " + system_error());
  Sha256 digest;
  const bool read_ok = read_all(in.get(), buffer, [&](const char* data, std::size_t size) {
    digest.update(data, size);
    copied += size;
    while (size > 0) {
      const ssize_t n = ::write(out.get(), data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw CantCreateError("cannot write '" + to + "': " + system_error());
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  });
  if (!read_ok) throw NoInputError("cannot read '" + from + "': " + system_error());
  if (copied != expected.bytes) throw changed();
  if (::fsync(out.get()) != 0) throw CantCreateError("cannot flush '" + to + "': " + system_error());
  // So that the check reads the disk, not the pages just written; the source's pages are not needed again.
  ::posix_fadvise(out.get(), 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_DONTNEED);
  return digest.hex();
}

// Whether `dir` holds a complete copy of `files`: its stage record names them with their sizes, and the
// files there have those sizes.
bool complete_copy(const std::string& dir, const std::vector<SourceFile>& files) {
  std::error_code ec;
  if (!fs::is_regular_file(dir + "/" + kStageRecord, ec)) return false;
  try {
    const auto record = nlohmann::json::parse(read_regular_file(dir + "/" + kStageRecord, 1 << 20));
    const auto& listed = record.at("files");
    if (listed.size() != files.size()) return false;
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (listed[i].at("name").get<std::string>() != files[i].name ||
          listed[i].at("bytes").get<std::uint64_t>() != files[i].bytes ||
          fs::file_size(dir + "/" + files[i].name, ec) != files[i].bytes || ec)
        return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;  // a record that cannot be read is no copy: it is made again
  }
}

// Removes `base` and what killed copiers of it left (`base`.tmp.*).
void remove_copies(const std::string& base) {
  std::error_code ec;
  fs::remove_all(base, ec);
  const fs::path parent = fs::path(base).parent_path();
  const std::string prefix = fs::path(base).filename().string() + ".tmp.";
  for (const auto& entry : fs::directory_iterator(parent, ec))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path(), ec);
}

// The SHA-256 of `path`, read through `buffer`. Throws NoInputError naming the file.
std::string sha256_of_file(const std::string& path, std::vector<char>& buffer) {
  FileDescriptor in(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) throw NoInputError("cannot read '" + path + "': " + system_error());
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 digest;
  if (!read_all(in.get(), buffer, [&](const char* data, std::size_t size) { digest.update(data, size); }))
    throw NoInputError("cannot read '" + path + "': " + system_error());
  return digest.hex();
}

// Copies `files` of the dataset r.source into r.dir (a new copy under a temporary name, renamed when
// verified), with the copy lock held. Throws as StagedDataset::stage() says.
void copy_dataset(StageReport& r, const std::string& scratch, const std::string& folder,
                  const std::vector<SourceFile>& files) {
  const std::string& base = r.dir;
  const std::string& source_dir = r.source;
  std::error_code ec;
  remove_copies(base);
  struct statvfs vfs {};
  if (::statvfs(folder.c_str(), &vfs) != 0)
    throw CantCreateError("cannot read the free space of '" + folder + "': " + system_error());
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes < r.bytes) {
    throw CantCreateError(
        fmt::format("{}: {} on {} has {} free, the dataset {} needs {}: stage it on a "
                    "larger disk or leave the key unset to read it in place",
                    kKey, scratch, r.node, gib(free_bytes), source_dir, gib(r.bytes)));
  }
  const auto started = Clock::now();
  const std::string tmp = base + ".tmp." + std::to_string(::getpid());
  if (::mkdir(tmp.c_str(), 0700) != 0)
    throw CantCreateError("cannot create '" + tmp + "': " + system_error());
  try {
    std::vector<char> buffer(kChunkBytes);
    nlohmann::json record = {{"source", source_dir}, {"node", r.node}, {"files", nlohmann::json::array()}};
    for (const auto& f : files) {
      const std::string from = source_dir + "/" + f.name, to = tmp + "/" + f.name;
      const std::string read = copy_file(from, f, to, buffer);
      const std::string written = sha256_of_file(to, buffer);
      if (written != read) {
        throw DataError(
            fmt::format("{}: the copy of '{}' on {} reads back with SHA-256 {}, the source "
                        "read {}: the local disk is not keeping what is written to it",
                        kKey, from, r.node, written, read));
      }
      record["files"].push_back({{"name", f.name}, {"bytes", f.bytes}, {"sha256", read}});
    }
    r.copy_seconds = seconds_since(started);
    record["seconds"] = r.copy_seconds;
    write_file_atomic(tmp + "/" + kStageRecord, record.dump(1) + "\n");
    rename_into_place(tmp, base);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  r.copied = true;
  spdlog::info("dataset: staged {} on {}: {} in {:.1f} s ({:.0f} MB/s), SHA-256 verified: reading {}",
               source_dir, r.node, gib(r.bytes), r.copy_seconds,
               static_cast<double>(r.bytes) / 1e6 / std::max(r.copy_seconds, 1e-9), base);
}

}  // namespace

std::string sha256_of_file(const std::string& path) {
  std::vector<char> buffer(kChunkBytes);
  return sha256_of_file(path, buffer);
}

StagedDataset StagedDataset::stage(const std::string& source_dir, const std::string& scratch) {
  StagedDataset staged;
  StageReport& r = staged.report_;
  r.source = source_dir;
  r.node = node_name();
  std::string manifest;
  const std::vector<SourceFile> files = source_files(source_dir, manifest);
  for (const auto& f : files) r.bytes += f.bytes;
  const std::string folder = user_folder(scratch, r.node);
  if (folder.empty()) {  // another user's folder is in the way: no copy, and no failed job
    r.dir = source_dir;
    r.in_place = true;
    return staged;
  }
  std::error_code ec;
  const fs::path real = fs::canonical(source_dir, ec);
  const std::string base =
      folder + "/" + r.node + "-" + dataset_id(ec ? source_dir : real.string(), manifest, files);
  r.dir = base;
  staged.copy_lock_ = base + ".copy.lock";
  staged.use_lock_ = base + ".use.lock";

  const auto waited = Clock::now();
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  FileDescriptor copy_lock(lock(staged.copy_lock_, LOCK_EX));
  r.wait_seconds = seconds_since(waited);
  // The copier this process waited for failed: its error, not another read of the whole dataset each.
  const std::string failed = base + kFailed;
  if (struct stat fst{}; ::stat(failed.c_str(), &fst) == 0 &&
                         nanoseconds(fst.st_mtim) >= std::chrono::nanoseconds(wall).count()) {
    const std::string why = read_regular_file(failed, 1 << 16);
    const int code = std::atoi(why.c_str());
    throw Error(code > 0 ? static_cast<ExitCode>(code) : ExitCode::kCantCreate,
                "another process's copy on " + r.node + " failed while this one waited for it: " +
                    why.substr(std::min(why.size(), why.find(' ') + 1)));
  }
  if (complete_copy(base, files)) {
    spdlog::info("dataset: the copy of {} on {} is already here ({}): reading {}", source_dir, r.node,
                 gib(r.bytes), base);
  } else {
    try {
      copy_dataset(r, scratch, folder, files);
    } catch (const Error& e) {
      try {
        write_file_atomic(failed, std::to_string(to_int(e.code())) + " " + e.what());
      } catch (const Error&) {
      }
      throw;
    }
    ::unlink(failed.c_str());
  }
  // Held before the copy lock is let go: a process that would remove the copy takes the copy lock first.
  staged.use_fd_ = lock(staged.use_lock_, LOCK_SH);
  return staged;
}

StagedDataset::StagedDataset(StagedDataset&& other) noexcept
    : report_(std::move(other.report_)),
      use_lock_(std::move(other.use_lock_)),
      copy_lock_(std::move(other.copy_lock_)),
      use_fd_(std::exchange(other.use_fd_, -1)) {}

StagedDataset& StagedDataset::operator=(StagedDataset&& other) noexcept {
  if (this != &other) {
    if (use_fd_ >= 0) ::close(use_fd_);
    report_ = std::move(other.report_);
    use_lock_ = std::move(other.use_lock_);
    copy_lock_ = std::move(other.copy_lock_);
    use_fd_ = std::exchange(other.use_fd_, -1);
  }
  return *this;
}

StagedDataset::~StagedDataset() {
  if (use_fd_ >= 0) ::close(use_fd_);
}

bool StagedDataset::release(bool remove) {
  if (use_fd_ < 0) return false;
  FileDescriptor use(std::exchange(use_fd_, -1));
  if (!remove) return false;
  // The stage succeeded: nothing here may fail it; what cannot be removed is said and left.
  try {
    FileDescriptor copy_lock(lock(copy_lock_, LOCK_EX));
    // Only when no other process holds the copy shared; a failed attempt lets ours go before the copy lock,
    // so the last holder of the node always succeeds.
    if (::flock(use.get(), LOCK_EX | LOCK_NB) != 0) {
      ::close(use.release());
      return false;
    }
    std::error_code ec;
    fs::remove_all(report_.dir, ec);
    if (ec) {
      spdlog::warn("dataset: cannot remove the staged copy {} on {}: {}", report_.dir, report_.node,
                   ec.message());
      return false;
    }
    spdlog::info("dataset: removed the staged copy {} on {}", report_.dir, report_.node);
    return true;
  } catch (const Error& e) {
    spdlog::warn("dataset: the staged copy {} on {} is left: {}", report_.dir, report_.node, e.what());
    return false;
  }
}

MetaConfig meta_with_staged_dataset(const PipelineConfig& config, std::optional<StagedDataset>& staged) {
  MetaConfig meta = config.meta;
  if (!config.train.stage_dataset.empty()) {
    staged.emplace(StagedDataset::stage(meta.dataset_dir, config.train.stage_dataset));
    meta.dataset_dir = staged->dir();
  }
  return meta;
}

}  // namespace pcdino
