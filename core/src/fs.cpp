#include "pcdino/core/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "pcdino/core/error.hpp"

namespace pcdino {

std::string temporary_name(const std::string& path) {
  // The second number is random: a name nobody can take first for a writer that opens it O_EXCL.
  static thread_local std::mt19937_64 draw(std::random_device{}() ^
                                           std::hash<std::thread::id>()(std::this_thread::get_id()));
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(draw() % 1000000000000ULL);
}

int create_temporary(const std::string& path, std::string& tmp, mode_t mode) {
  for (int attempt = 0;; ++attempt) {
    tmp = temporary_name(path);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    if (errno != EEXIST || attempt == 8)
      throw CantCreateError("cannot create '" + tmp + "': " + std::strerror(errno));
  }
}

std::string read_regular_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO returns at once (and it is then refused); O_NOFOLLOW: a link is refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const std::string why = errno == ELOOP ? "a symbolic link" : std::strerror(errno);
    throw NoInputError("cannot read '" + path + "': " + why);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw NoInputError("cannot read '" + path + "': not a regular file");
  }
  std::string text(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

namespace {

// Whether `name` ends in temporary_name's ".tmp.{pid}.{n}".
bool is_temporary_name(const std::string& name) {
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  const auto tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos) return false;
  const std::string rest = name.substr(tmp + 5);
  const auto dot = rest.find('.');
  return dot != std::string::npos && digits(rest.substr(0, dot)) && digits(rest.substr(dot + 1));
}

}  // namespace

std::vector<std::string> remove_temporaries(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !is_temporary_name(name)) continue;
    if (!std::filesystem::remove(entry.path(), ec) && ec) {
      throw CantCreateError("cannot remove '" + entry.path().string() + "': " + ec.message());
    }
    removed.push_back(entry.path().string());
  }
  return removed;
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NoInputError("cannot read " + what + " '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void make_directories(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw CantCreateError("cannot create directory '" + dir + "': " + ec.message());
}

void rename_into_place(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(from.c_str());
    throw CantCreateError("cannot rename '" + from + "' to '" + to + "': " + why);
  }
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  make_directories(std::filesystem::path(path_).parent_path().string());
  fd_ = create_temporary(path_, tmp_, 0644);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::remove(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) throw CantCreateError("cannot write '" + path_ + "': already committed");
  const char* bytes = static_cast<const char*>(data);
  std::size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd_, bytes + written, size - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CantCreateError("cannot write '" + path_ + "' (as '" + tmp_ + "'): " + std::strerror(errno));
    }
    written += static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw CantCreateError("cannot write '" + path_ + "': already committed");
  // Lustre and NFS report some write errors only at fsync/close.
  const bool synced = ::fsync(fd_) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) {
    const std::string why = std::strerror(synced ? errno : sync_errno);
    std::remove(tmp_.c_str());
    throw CantCreateError("cannot write '" + path_ + "': " + why);
  }
  rename_into_place(tmp_, path_);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.write(content.data(), content.size());
  file.commit();
}

}  // namespace pcdino
