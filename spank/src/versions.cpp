#include "pcdino/spank/versions.hpp"

#include <dlfcn.h>
#include <sys/utsname.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

namespace pcdino::spank {

namespace {

// Calls `symbol` of `library` through dlopen, so the plugin depends on neither at link time.
template <class Fn, class Call>
bool with_symbol(const char* library, const char* symbol, Call call) {
  void* handle = dlopen(library, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(library, RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  bool ok = false;
  if (auto* fn = reinterpret_cast<Fn>(dlsym(handle, symbol))) ok = call(fn);
  dlclose(handle);
  return ok;
}

}  // namespace

std::map<std::string, Version> node_versions() {
  std::map<std::string, Version> found;
  struct utsname u {};
  if (uname(&u) == 0) {
    try {
      found["kernel"] = Version::parse(u.release);
    } catch (const std::exception&) {
    }
  }
  with_symbol<std::uint32_t (*)()>("libfabric.so.1", "fi_version", [&](auto fn) {
    const std::uint32_t v = fn();  // FI_VERSION(major, minor) = major << 16 | minor
    found["libfabric"] = Version{{static_cast<long>(v >> 16), static_cast<long>(v & 0xffff)}};
    return true;
  });
  with_symbol<int (*)(int*)>("libnccl.so.2", "ncclGetVersion", [&](auto fn) {
    int code = 0;
    if (fn(&code) != 0 || code <= 0) return false;
    // NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
    const bool new_scheme = code >= 20900;
    const long major = new_scheme ? code / 10000 : code / 1000;
    const long minor = new_scheme ? (code % 10000) / 100 : (code % 1000) / 100;
    found["nccl"] = Version{{major, minor, static_cast<long>(code % 100)}};
    return true;
  });
  return found;
}

std::map<std::string, Version> detect_versions(const std::string& manifest_path,
                                               const std::map<std::string, Version>& pinned,
                                               std::vector<std::string>* notes) {
  std::map<std::string, Version> found = node_versions();
  std::ifstream manifest(manifest_path);
  if (manifest) {
    try {
      const auto j = nlohmann::json::parse(manifest);
      for (const auto& [name, value] : j.at("components").items()) {
        if (!value.is_string() || found.count(name) != 0) continue;  // what the node reports wins
        try {
          found[name] = Version::parse(value.get<std::string>());
        } catch (const std::invalid_argument&) {
          // "openmpi": "from efa_installer 1.36.0" names no version.
        }
      }
    } catch (const std::exception& e) {
      if (notes != nullptr) notes->push_back("ignoring manifest " + manifest_path + ": " + e.what());
    }
  }
  for (const auto& [name, version] : pinned) found[name] = version;
  return found;
}

}  // namespace pcdino::spank
