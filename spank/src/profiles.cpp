#include "pcdino/spank/profiles.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>

namespace pcdino::spank {

namespace {

// The plugin runs inside slurmd and links none of pcdino_core, so it spells core's yaml_location() itself.
std::string where(const std::string& source, const YAML::Mark& m) {
  if (m.is_null()) return source;
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::string where(const std::string& source, const YAML::Node& node) {
  return where(source, node.Mark());
}

[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& what) {
  throw std::invalid_argument(where(source, node) + ": " + what);
}

std::string scalar(const std::string& source, const YAML::Node& node, const std::string& key,
                   std::size_t max_length) {
  if (!node.IsScalar()) fail(source, node, key + ": expected a string");
  const std::string& s = node.Scalar();
  if (s.size() > max_length)
    fail(source, node, key + ": longer than " + std::to_string(max_length) + " bytes");
  if (s.find('\0') != std::string::npos) fail(source, node, key + ": contains a NUL byte");
  return s;
}

void only_keys(const std::string& source, const YAML::Node& map, const std::set<std::string>& allowed,
               const std::string& what) {
  for (const auto& kv : map) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    if (allowed.count(key) == 0) fail(source, kv.first, "unknown key '" + key + "' in " + what);
  }
}

std::vector<Condition> conditions(const std::string& source, const YAML::Node& node, const std::string& key) {
  std::vector<Condition> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  const YAML::Node list = node.IsScalar() ? YAML::Node(std::vector<std::string>{node.Scalar()}) : node;
  if (!list.IsSequence())
    fail(source, node, key + ": expected a list of conditions like \"libfabric >= 1.18\"");
  if (list.size() > 16) fail(source, node, key + ": more than 16 conditions");
  for (const auto& c : list) {
    try {
      out.push_back(Condition::parse(scalar(source, c, key, 256)));
    } catch (const std::invalid_argument& e) {
      fail(source, node, key + ": " + e.what());
    }
  }
  return out;
}

bool valid_variable_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxNameLength) return false;
  // POSIX portable names; lower case is allowed because some are case-sensitive (OMPI_MCA_btl).
  if (!(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char c : n) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace

Version Version::parse(const std::string& text) {
  Version v;
  std::size_t i = 0;
  while (i < text.size() && v.parts.size() < 8) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) break;
    long part = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      part = part * 10 + (text[i] - '0');
      if (part > 1000000000L) throw std::invalid_argument("version component too large in '" + text + "'");
      ++i;
    }
    v.parts.push_back(part);
    if (i < text.size() && text[i] == '.' && i + 1 < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      ++i;
    } else {
      break;
    }
  }
  if (v.parts.empty())
    throw std::invalid_argument("'" + text + "' is not a version (expected digits like 1.18.0)");
  return v;
}

int Version::compare(const Version& other) const {
  const std::size_t n = std::max(parts.size(), other.parts.size());
  for (std::size_t i = 0; i < n; ++i) {
    const long a = i < parts.size() ? parts[i] : 0, b = i < other.parts.size() ? other.parts[i] : 0;
    if (a != b) return a < b ? -1 : 1;
  }
  return 0;
}

std::string Version::str() const {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i ? "." : "") + std::to_string(parts[i]);
  return s;
}

Condition Condition::parse(const std::string& text) {
  static const char* const ops[] = {"<=", ">=", "==", "!=", "<", ">"};
  for (const char* op : ops) {
    const auto pos = text.find(op);
    if (pos == std::string::npos) continue;
    Condition c;
    c.text = text;
    c.op = op;
    auto trim = [](std::string s) {
      const auto b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    c.component = trim(text.substr(0, pos));
    const std::string version = trim(text.substr(pos + std::strlen(op)));
    if (c.component.empty() || c.component.size() > 64) {
      throw std::invalid_argument("condition '" + text + "' names no component");
    }
    for (char ch : c.component) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.')) {
        throw std::invalid_argument("condition '" + text +
                                    "': component names are letters, digits, '-', '_', '.'");
      }
    }
    c.version = Version::parse(version);
    return c;
  }
  throw std::invalid_argument("condition '" + text + "' has no operator (<, <=, ==, !=, >=, >)");
}

bool Condition::holds(const std::map<std::string, Version>& versions) const {
  const auto it = versions.find(component);
  if (it == versions.end()) return false;
  const int c = it->second.compare(version);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == "==") return c == 0;
  if (op == "!=") return c != 0;
  if (op == ">=") return c >= 0;
  return c > 0;
}

bool EnvEntry::applies(const std::map<std::string, Version>& versions) const {
  for (const auto& c : when) {
    if (!c.holds(versions)) return false;
  }
  if (when_any.empty()) return true;
  for (const auto& c : when_any) {
    if (c.holds(versions)) return true;
  }
  return false;
}

const char* device_variable(const AcceleratorKind* kind) {
  return kind != nullptr ? kind->visible_devices_variable : "";
}

const char* root_comm_variable(const AcceleratorKind* kind) {
  return kind != nullptr ? kind->root_comm_variable : "";
}

bool valid_profile_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::islower(static_cast<unsigned char>(name[0])) ||
        std::isdigit(static_cast<unsigned char>(name[0])))) {
    return false;
  }
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
          c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

std::string forbidden_variable(const std::string& name) {
  if (!valid_variable_name(name))
    return "not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters)";
  if (name.rfind("LD_", 0) == 0 || name.find("PRELOAD") != std::string::npos) {
    return "changes how programs are loaded; a profile may not set it";
  }
  if (name.rfind("RDMAV_", 0) == 0) return "AWS's EFA guidance is never to set RDMAV_* variables";
  // What the plugin sets itself: the launch's variables and every kind's device and rank-0 variables.
  static const char* const managed[] = {"RANK",        "LOCAL_RANK",  "WORLD_SIZE",     "LOCAL_WORLD_SIZE",
                                        "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"};
  bool set_by_plugin = std::find(std::begin(managed), std::end(managed), name) != std::end(managed);
  for (const auto& kind : accelerator_kinds())
    set_by_plugin = set_by_plugin || name == kind.visible_devices_variable || name == kind.root_comm_variable;
  if (set_by_plugin) return "is set by the plugin itself for each task; a profile may not set it";
  if (name == "PATH" || name == "HOME" || name == "USER" || name == "SHELL" || name.rfind("SLURM_", 0) == 0 ||
      name.rfind("SPANK_", 0) == 0) {
    return "belongs to the job's identity or to Slurm; a profile may not set it";
  }
  return "";
}

ProfileConfig parse_profiles(const std::string& text, const std::string& source) {
  if (text.size() > kMaxConfigBytes) throw std::invalid_argument(source + ": larger than 1 MiB");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument(where(source, e.mark) + ": YAML syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  try {
    if (!root.IsMap()) throw std::invalid_argument(source + ": expected a mapping with 'profiles:'");
    only_keys(source, root, {"profiles", "versions"}, "the file");
    ProfileConfig config;
    const YAML::Node versions = root["versions"];
    if (versions.IsDefined() && !versions.IsNull()) {
      if (!versions.IsMap()) fail(source, versions, "versions: expected a mapping component: version");
      for (const auto& kv : versions) {
        const std::string component = scalar(source, kv.first, "versions", 64);
        try {
          config.pinned_versions[component] =
              Version::parse(scalar(source, kv.second, "versions." + component, 64));
        } catch (const std::invalid_argument& e) {
          fail(source, kv.second, "versions." + component + ": " + e.what());
        }
      }
    }
    const YAML::Node profiles = root["profiles"];
    if (!profiles.IsDefined() || !profiles.IsMap())
      fail(source, root, "expected 'profiles:' with at least one profile");
    if (profiles.size() > kMaxProfiles) fail(source, profiles, "more than 64 profiles");
    for (const auto& kv : profiles) {
      Profile p;
      p.name = scalar(source, kv.first, "profiles", 64);
      if (!valid_profile_name(p.name) || p.name == "none") {
        fail(source, kv.first, "profile name '" + p.name + "': expected [a-z0-9][a-z0-9._-]*, not 'none'");
      }
      if (config.profiles.count(p.name) != 0)
        fail(source, kv.first, "profile '" + p.name + "' defined twice");
      const YAML::Node body = kv.second;
      if (!body.IsMap()) fail(source, body, "profiles." + p.name + ": expected a mapping");
      only_keys(source, body, {"description", "devices", "env"}, "profiles." + p.name);
      if (body["description"].IsDefined())
        p.description = scalar(source, body["description"], "description", 256);
      if (body["devices"].IsDefined()) {
        const std::string d = scalar(source, body["devices"], "devices", 16);
        for (const auto& kind : accelerator_kinds()) {
          if (d == kind.spank_devices) p.devices = &kind;
        }
        if (p.devices == nullptr && d != "none") {
          fail(source, body["devices"],
               "profiles." + p.name + ".devices: expected " +
                   accelerator_names(", ", &AcceleratorKind::spank_devices) + " or none");
        }
      }
      const YAML::Node env = body["env"];
      if (env.IsDefined() && !env.IsNull()) {
        if (!env.IsSequence())
          fail(source, env, "profiles." + p.name + ".env: expected a list of {name, value}");
        if (env.size() > kMaxEntries)
          fail(source, env, "profiles." + p.name + ".env: more than 256 variables");
        for (const auto& e : env) {
          if (!e.IsMap()) fail(source, e, "profiles." + p.name + ".env: expected {name: ..., value: ...}");
          only_keys(source, e, {"name", "value", "when", "when_any", "source"},
                    "profiles." + p.name + ".env");
          if (!e["name"].IsDefined() || !e["value"].IsDefined())
            fail(source, e, "every variable needs a name and a value");
          EnvEntry entry;
          entry.name = scalar(source, e["name"], "name", kMaxNameLength + 1);
          const std::string why = forbidden_variable(entry.name);
          if (!why.empty()) fail(source, e["name"], "variable '" + entry.name + "': " + why);
          entry.value = scalar(source, e["value"], "value", kMaxValueLength);
          entry.when = conditions(source, e["when"], "when");
          entry.when_any = conditions(source, e["when_any"], "when_any");
          if (e["source"].IsDefined()) entry.source = scalar(source, e["source"], "source", 512);
          p.env.push_back(std::move(entry));
        }
      }
      config.profiles.emplace(p.name, std::move(p));
    }
    return config;
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
}

ProfileConfig load_profiles(const std::string& path, bool require_root_owner) {
  // O_NONBLOCK: a FIFO at this path must not hang slurmstepd (it is refused as not a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (require_root_owner && st.st_uid != 0) {
    problem = "not owned by root (uid " + std::to_string(st.st_uid) + ")";
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    problem = "writable by group or others (mode " + std::to_string((st.st_mode >> 6) & 7) +
              std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) + ")";
  } else if (static_cast<std::size_t>(st.st_size) > kMaxConfigBytes) {
    problem = "larger than 1 MiB";
  }
  if (!problem.empty()) {
    ::close(fd);
    throw std::runtime_error("refusing " + path + ": " + problem);
  }
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw std::runtime_error("cannot read " + path + ": " + why);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != text.size()) throw std::runtime_error("cannot read " + path + ": it changed while being read");
  return parse_profiles(text, path);
}

}  // namespace pcdino::spank
