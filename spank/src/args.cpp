#include "pcdino/spank/args.hpp"

#include <cstring>
#include <set>
#include <stdexcept>

namespace pcdino::spank {

namespace {

int parse_port(const std::string& text, const std::string& arg) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("plugstack.conf: " + arg + ": expected LOW-HIGH ports in 1024-65535");
  }
  const int port = std::stoi(text);
  if (port < 1024 || port > 65535)
    throw std::invalid_argument("plugstack.conf: " + arg + ": ports must be in 1024-65535");
  return port;
}

std::string bounded(const char* value, const std::string& option) {
  if (value == nullptr) return "";
  const std::size_t n = strnlen(value, 256);
  if (n == 256) throw std::invalid_argument(option + ": value too long");
  return std::string(value, n);
}

}  // namespace

PluginArgs parse_plugin_args(const std::vector<std::string>& args) {
  PluginArgs out;
  std::set<std::string> seen;
  bool have_config = false;
  for (const auto& arg : args) {
    if (arg.size() > 1024)
      throw std::invalid_argument("plugstack.conf: argument longer than 1024 characters");
    const auto eq = arg.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("plugstack.conf: argument '" + arg + "' is not KEY=VALUE");
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    if (!seen.insert(key).second) throw std::invalid_argument("plugstack.conf: '" + key + "' given twice");
    if (key == "config" || key == "manifest") {
      if (value.empty() || value[0] != '/') {
        throw std::invalid_argument("plugstack.conf: " + key + "= needs an absolute path, got '" + value +
                                    "'");
      }
      (key == "config" ? out.config : out.manifest) = value;
      have_config = have_config || key == "config";
    } else if (key == "default") {
      if (value != "none" && !valid_profile_name(value)) {
        throw std::invalid_argument("plugstack.conf: default=" + value + " is not a profile name");
      }
      out.default_profile = value;
    } else if (key == "master_port_range") {
      const auto dash = value.find('-');
      if (dash == std::string::npos)
        throw std::invalid_argument("plugstack.conf: " + arg + ": expected LOW-HIGH");
      out.ports.low = parse_port(value.substr(0, dash), arg);
      out.ports.high = parse_port(value.substr(dash + 1), arg);
      if (out.ports.low > out.ports.high)
        throw std::invalid_argument("plugstack.conf: " + arg + ": LOW > HIGH");
    } else {
      throw std::invalid_argument("plugstack.conf: unknown argument '" + key +
                                  "' (known: config, default, master_port_range, manifest)");
    }
  }
  if (!have_config)
    throw std::invalid_argument("plugstack.conf: config=/path/to/accel-profiles.yaml is required");
  return out;
}

std::string parse_profile_option(const char* value) {
  const std::string v = bounded(value, "--accel-profile");
  if (v != "none" && !valid_profile_name(v)) {
    throw std::invalid_argument("--accel-profile=" + v +
                                ": not a profile name (lower-case letters, digits, '.', '_', '-')");
  }
  return v;
}

BindMode parse_bind_option(const char* value) {
  const std::string v = bounded(value, "--accel-device-bind");
  // "(null)": the bare option as an srun inside the job reads it back from the job's environment.
  if (v.empty() || v == "(null)" || v == "per-task") return BindMode::kPerTask;
  if (v == "none") return BindMode::kNone;
  throw std::invalid_argument("--accel-device-bind=" + v + ": expected per-task or none");
}

}  // namespace pcdino::spank
