#include "pcdino/doctor/probes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <rdma/fabric.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/version.hpp"
#include "pcdino/spank/versions.hpp"

namespace pcdino::doctor {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string system_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// Closes the descriptor and removes the probe's file whatever happened.
struct ProbeFile {
  std::string path;
  int fd = -1;
  ~ProbeFile() {
    if (fd >= 0) ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Removes the files that earlier probes of this host left in `dir` (a probe killed at its time limit): names
// `{base}.tmp.{pid}.{n}` of a process that no longer runs, regular files of this user. A live probe's file
// (a prolog and a health check at once) is left alone, and so is anything another user made.
void remove_leftovers(const std::string& dir, const std::string& base) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = base + ".tmp.";
  for (const dirent* e = ::readdir(d); e != nullptr; e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != ::geteuid())
      continue;
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

}  // namespace

bool filesystem_wide_error(int error_number) {
  // A full filesystem, a user's or group's quota, root squashed to nobody: the same on every node.
  return error_number == ENOSPC || error_number == EDQUOT || error_number == EACCES || error_number == EPERM;
}

FilesystemProbe probe_filesystem(const std::string& dir, std::size_t bytes) {
  FilesystemProbe r;
  const auto failed = [&r](const std::string& what, const std::string& path) {
    r.error_number = errno;
    r.error = system_error(what, path);
    return r;
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (errno != 0) return failed("no directory", dir);
    r.error = "not a directory '" + dir + "'";
    return r;
  }
  r.exists = true;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string base = dir + "/.pcdino-doctor-" + host;
  remove_leftovers(dir, ".pcdino-doctor-" + std::string(host));
  ProbeFile file;
  try {  // a random name, O_EXCL|O_NOFOLLOW: no user can plant a link or take the name first
    file.fd = create_temporary(base, file.path, 0600);
  } catch (const Error&) {
    file.path.clear();
    return failed("cannot create", base + ".tmp.*");
  }
  // A pattern that differs per block, so that a filesystem that deduplicates or compresses still moves it.
  std::vector<unsigned char> block(1 << 20);
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<unsigned char>((i * 131 + 7) & 0xff);
  const std::size_t blocks = std::max<std::size_t>(1, bytes / block.size());
  const auto write_start = std::chrono::steady_clock::now();
  for (std::size_t b = 0; b < blocks; ++b) {
    block[0] = static_cast<unsigned char>(b);
    const ssize_t n = ::write(file.fd, block.data(), block.size());
    if (n != static_cast<ssize_t>(block.size())) {
      if (n >= 0) errno = ENOSPC;  // a short write: the filesystem filled up
      return failed("cannot write", file.path);
    }
  }
  if (::fsync(file.fd) != 0) return failed("cannot sync", file.path);
  r.write_mb_s =
      static_cast<double>(blocks * block.size()) / 1e6 / std::max(seconds_since(write_start), 1e-9);
  ::close(file.fd);
  file.fd = ::open(file.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (file.fd < 0) return failed("cannot reopen", file.path);
  ::posix_fadvise(file.fd, 0, 0, POSIX_FADV_DONTNEED);
  std::vector<unsigned char> back(block.size());
  const auto read_start = std::chrono::steady_clock::now();
  for (std::size_t b = 0; b < blocks; ++b) {
    block[0] = static_cast<unsigned char>(b);
    if (::read(file.fd, back.data(), back.size()) != static_cast<ssize_t>(back.size()) || back != block) {
      r.error = "read back other bytes than were written to '" + file.path + "'";
      return r;
    }
  }
  r.read_mb_s = static_cast<double>(blocks * block.size()) / 1e6 / std::max(seconds_since(read_start), 1e-9);
  r.writable = true;
  return r;
}

std::optional<std::uint64_t> free_bytes(const std::string& path) {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
}

HostResources host_resources(const std::string& dev) {
  HostResources r;
  r.cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  r.memory_mib = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                 static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / (1024 * 1024);
  static const std::regex gpu_device("nvidia[0-9]+");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev, ec)) {
    if (std::regex_match(entry.path().filename().string(), gpu_device)) ++r.gpus;
  }
  return r;
}

std::string instance_type_feature(const std::vector<std::string>& features) {
  const auto it = std::find_if(features.begin(), features.end(),
                               [](const std::string& f) { return f.find('.') != std::string::npos; });
  return it == features.end() ? "" : *it;
}

SlurmNodeView parse_scontrol_node(const std::string& line) {
  SlurmNodeView v;
  bool cpus = false;
  std::istringstream words(line);
  for (std::string word; words >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    try {
      if (key == "NodeName") {
        v.name = value;
      } else if (key == "CPUTot") {
        v.cpus = std::stoi(value);
        cpus = true;
      } else if (key == "RealMemory") {
        v.real_memory_mib = std::stoull(value);
      } else if (key == "Gres") {
        // gpu:4, gpu:a100:8(S:0-1), several entries separated by commas; (null) when none.
        static const std::regex entry(R"((?:^|,)gpu(?::[A-Za-z0-9_.-]+)?:([0-9]+))");
        for (auto it = std::sregex_iterator(value.begin(), value.end(), entry); it != std::sregex_iterator();
             ++it)
          v.gpus += std::stoi((*it)[1]);
      } else if (key == "State") {
        v.state = value;
      } else if ((key == "AvailableFeatures" || key == "Partitions") && value != "(null)") {
        std::istringstream list(value);
        auto& into = key == "Partitions" ? v.partitions : v.features;
        for (std::string item; std::getline(list, item, ',');)
          if (!item.empty()) into.push_back(item);
      }
    } catch (const std::exception&) {
      throw DataError("scontrol show node: " + key + " is not a number in '" + line + "'");
    }
  }
  if (v.name.empty() || !cpus) throw DataError("scontrol show node: no NodeName or CPUTot in '" + line + "'");
  // The Reason holds spaces and ends with who set it and when: "Reason=pcdino: ...
  // [root@2026-11-28T03:00:00]".
  static const std::regex reason(R"((?:^| )Reason=(.*?) \[[^\]@]*@[^\]]*\])");
  if (std::smatch m; std::regex_search(line, m, reason)) v.reason = m[1].str();
  return v;
}

bool drained(const SlurmNodeView& node) {
  return ("+" + node.state + "+").find("+DRAIN") != std::string::npos;
}

std::vector<std::string> efa_devices() {
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("efa");
  hints->ep_attr->type = FI_EP_RDM;
  fi_info* info = nullptr;
  const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);  // frees prov_name too
  if (rc == -FI_ENODATA) return {};
  if (rc != 0) return {std::string("error: fi_getinfo: ") + fi_strerror(-rc)};
  std::vector<std::string> domains;
  for (const fi_info* i = info; i != nullptr; i = i->next) {
    const std::string name = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
    if (!name.empty() && std::find(domains.begin(), domains.end(), name) == domains.end())
      domains.push_back(name);
  }
  fi_freeinfo(info);
  return domains;
}

std::vector<std::string> fabric_providers() {
  fi_info* hints = fi_allocinfo();
  fi_info* info = nullptr;
  const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0) return {std::string("error: fi_getinfo: ") + fi_strerror(-rc)};
  std::vector<std::string> names;
  for (const fi_info* i = info; i != nullptr; i = i->next) {
    const std::string name = i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "";
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  fi_freeinfo(info);
  return names;
}

namespace {

// The first line of `path` that holds `marker`, or "".
std::string line_with(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(marker) != std::string::npos) return line;
  }
  return "";
}

// The first version-like word ("550.127.05") of `text` after position `from`, or "".
std::string first_version(const std::string& text, std::size_t from = 0) {
  static const std::regex version("[0-9]+(\\.[0-9]+)+");
  std::smatch m;
  const std::string rest = from < text.size() ? text.substr(from) : "";
  return std::regex_search(rest, m, version) ? m.str() : "";
}

// Each component the node can report: how many leading parts of its version the node's source gives (0:
// all of the manifest's), and whether only a node with GPUs needs it.
struct Compared {
  std::size_t parts;
  bool gpu;
};
const std::map<std::string, Compared>& compared_components() {
  static const std::map<std::string, Compared> table = {
      {"nvidia_driver", {0, true}},  {"cuda", {0, true}},       {"nccl", {3, true}},
      {"efa_installer", {0, false}}, {"libfabric", {2, false}}, {"openmpi", {3, false}},
      {"pcdino", {0, false}},
  };
  return table;
}

}  // namespace

std::map<std::string, std::string> image_versions(const VersionFiles& files) {
  std::map<std::string, std::string> found;
  for (const auto& [name, version] : spank::node_versions()) {
    if (name != "kernel") found[name] = version.str();
  }
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(mpi, &length) == MPI_SUCCESS) {
    const std::string text(mpi, static_cast<std::size_t>(length));
    if (text.find("Open MPI") != std::string::npos) found["openmpi"] = first_version(text);
  }
  const std::string nvrm = line_with(files.nvidia_driver, "NVRM version");
  if (!nvrm.empty()) found["nvidia_driver"] = first_version(nvrm, nvrm.find("Module"));
  std::ifstream cuda(files.cuda);
  if (cuda) {
    try {
      found["cuda"] = nlohmann::json::parse(cuda).at("cuda").at("version").get<std::string>();
    } catch (const std::exception&) {
    }
  }
  const std::string efa = line_with(files.efa_installer, "EFA installer version");
  if (!efa.empty()) found["efa_installer"] = first_version(efa);
  found["pcdino"] = version();
  for (auto it = found.begin(); it != found.end();) it = it->second.empty() ? found.erase(it) : std::next(it);
  return found;
}

ManifestComparison compare_manifest(const std::string& manifest_json, const std::string& path,
                                    const std::map<std::string, std::string>& node, bool has_gpus) {
  ManifestComparison result;
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(manifest_json);
    if (!manifest.at("components").is_object()) throw std::runtime_error("\"components\" is not an object");
    if (manifest.contains("name") && manifest["name"].is_string()) result.image = manifest["name"];
  } catch (const std::exception& e) {
    throw DataError(path + ": not an image manifest ({\"components\": {...}}): " + e.what());
  }
  for (const auto& [name, value] : manifest.at("components").items()) {
    const auto row = compared_components().find(name);
    if (row == compared_components().end() || !value.is_string() || (row->second.gpu && !has_gpus)) continue;
    const std::string text = value.get<std::string>();  // shown as the manifest writes it
    spank::Version image;
    try {
      image = spank::Version::parse(text);
    } catch (const std::invalid_argument&) {
      continue;  // "from efa_installer 1.36.0": no version to compare
    }
    const std::size_t parts = row->second.parts;
    if (parts > 0 && image.parts.size() > parts) image.parts.resize(parts);
    const auto here = node.find(name);
    if (here == node.end()) {
      result.mismatched.push_back(name + ": image " + text + ", node none");
      continue;
    }
    spank::Version mine;
    try {
      mine = spank::Version::parse(here->second);
    } catch (const std::invalid_argument&) {
    }
    if (mine.parts.size() > image.parts.size()) mine.parts.resize(image.parts.size());
    if (!mine.parts.empty() && mine.compare(image) == 0) {
      result.matched.push_back(name + " " + text);
    } else {
      result.mismatched.push_back(name + ": image " + text + ", node " + here->second);
    }
  }
  return result;
}

std::vector<std::string> missing_variables(const std::vector<std::string>& names,
                                           const std::function<const char*(const char*)>& getenv) {
  std::vector<std::string> missing;
  for (const auto& n : names) {
    const char* v = getenv(n.c_str());
    if (v == nullptr || *v == '\0') missing.push_back(n);
  }
  return missing;
}

std::optional<bool> slurm_job_has_gpus(const std::function<const char*(const char*)>& getenv) {
  const auto set = [&getenv](const char* name) {
    const char* v = getenv(name);
    return v != nullptr && *v != '\0';
  };
  if (!set("SLURM_JOB_ID")) return std::nullopt;
  const bool count = set("SLURM_GPUS_ON_NODE") && std::string(getenv("SLURM_GPUS_ON_NODE")) != "0";
  // The index lists: "0" is GPU 0.
  return count || set(set("SLURM_STEP_ID") ? "SLURM_STEP_GPUS" : "SLURM_JOB_GPUS");
}

}  // namespace pcdino::doctor
