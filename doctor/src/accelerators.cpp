#include "pcdino/doctor/accelerators.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pcdino/core/fs.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/probes.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

int count_matching(const std::string& dir, const std::regex& name) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (std::regex_match(entry.path().filename().string(), name)) ++n;
  }
  return n;
}

bool executable(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

VendorNode probe_tool(const std::vector<std::string>& argv, int device_files, const char* module,
                      double seconds) {
  VendorNode n;
  n.device_files = device_files;
  n.module_loaded = module_loaded(module);
  if (!executable(argv.front())) {
    n.tool_error = argv.front() + " not found";
    return n;
  }
  try {
    const auto result = within<ProcessResult>(seconds, [argv] { return run_process(argv); });
    n.tool_found = true;
    if (!result) {
      n.tool_exit = 124;
      n.tool_error = "did not finish within " + std::to_string(static_cast<int>(seconds)) + " s";
    } else {
      n.tool_exit = result->exit_code;
      n.tool_output = result->out;
      n.tool_error = result->err;
    }
  } catch (const std::exception& e) {  // not installed
    n.tool_error = e.what();
  }
  return n;
}

const ami::AcceleratorInstance* expected_of(const std::string& instance_type, const char* accelerator) {
  const ami::AcceleratorInstance* t = ami::accelerator_instance(instance_type);
  return t != nullptr && std::string(t->accelerator) == accelerator ? t : nullptr;
}

std::string presence(const VendorNode& node, const ami::AcceleratorInstance* expected, const char* what,
                     const char* module, const char* tool, bool* absent) {
  *absent = node.device_files == 0 && !node.module_loaded && !node.tool_found && expected == nullptr;
  if (*absent) return "";
  const std::string has = expected != nullptr ? std::string(expected->type) + " has " +
                                                    std::to_string(expected->devices) + " " + what + "; "
                                              : std::string();
  if (!node.module_loaded) {
    return has + "the " + module + " kernel module is not loaded (" + std::to_string(node.device_files) +
           " device files)";
  }
  if (!node.tool_found) return has + tool + " is not installed or not in PATH: " + node.tool_error;
  if (node.tool_exit != 0) {
    return std::string(tool) + " failed with exit code " + std::to_string(node.tool_exit) + ": " +
           trim(node.tool_error.substr(0, 200));
  }
  return "";
}

std::string manifest_component(const std::string& manifest, const std::string& name) {
  std::error_code error;
  if (manifest.empty() || !std::filesystem::exists(manifest, error)) return "";
  try {
    const auto parsed = nlohmann::json::parse(read_file(manifest, "image manifest"));
    return parsed.at("components").value(name, "");
  } catch (const std::exception&) {
    return "";  // check_image() reports a malformed manifest
  }
}

bool module_loaded(const std::string& module, const std::string& proc_modules) {
  std::ifstream in(proc_modules);
  std::string line;
  while (std::getline(in, line)) {
    if (line.substr(0, line.find(' ')) == module) return true;
  }
  return false;
}

}  // namespace pcdino::doctor
