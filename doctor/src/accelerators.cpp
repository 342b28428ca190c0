#include "pcdino/doctor/accelerators.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "pcdino/ami/accelerators.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/probes.hpp"

namespace pcdino::doctor {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// "33 C" -> 33; "33" -> 33. Throws std::invalid_argument when it does not start with a number.
double leading_number(const std::string& field) {
  std::size_t used = 0;
  const double v = std::stod(field, &used);
  const std::string rest = trim(field.substr(used));
  if (!rest.empty() && rest.find(' ') != std::string::npos) throw std::invalid_argument(field);
  return v;
}

int count_matching(const std::string& dir, const std::regex& name) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (std::regex_match(entry.path().filename().string(), name)) ++n;
  }
  return n;
}

// The release part of a version: "1.21.0-555" and "1.21.0-ee698fb" -> "1.21.0".
std::string release_of(const std::string& version) {
  return version.substr(0, version.find('-'));
}

const ami::AcceleratorInstance* expected_of(const std::string& instance_type, const char* accelerator) {
  const ami::AcceleratorInstance* t = ami::accelerator_instance(instance_type);
  return t != nullptr && std::string(t->accelerator) == accelerator ? t : nullptr;
}

// "not present" when the node shows nothing of the stack and its type carries none; the failure naming
// what is missing otherwise, or "" when the stack is there and the tool's output can be judged.
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

VendorNode probe(const std::vector<std::string>& argv, int device_files, const char* module, double seconds) {
  VendorNode n;
  n.device_files = device_files;
  n.module_loaded = module_loaded(module);
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

}  // namespace

std::vector<std::string> hl_smi_query() {
  return {"hl-smi", "-Q", "index,name,driver_version,temperature.aip", "-f", "csv,noheader"};
}

std::vector<GaudiCard> parse_hl_smi(const std::string& csv) {
  std::vector<GaudiCard> cards;
  std::istringstream in(csv);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (trim(line).empty()) continue;
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string f; std::getline(parts, f, ',');) fields.push_back(trim(f));
    const auto bad = [&](const std::string& why) {
      return DataError("hl-smi output line " + std::to_string(number) + " '" + trim(line) + "': " + why +
                       " (expected index, name, driver_version, temperature.aip)");
    };
    if (fields.size() != 4) throw bad(std::to_string(fields.size()) + " fields");
    GaudiCard c;
    try {
      std::size_t used = 0;
      c.index = std::stoi(fields[0], &used);
      if (used != fields[0].size()) throw std::invalid_argument(fields[0]);
      c.temperature_c = leading_number(fields[3]);
    } catch (const std::exception&) {
      throw bad("the index or the temperature is not a number");
    }
    c.name = fields[1];
    c.driver = fields[2];
    cards.push_back(c);
  }
  return cards;
}

std::vector<NeuronDevice> parse_neuron_ls(const std::string& json) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("neuron-ls --json-output: not JSON: ") + e.what());
  }
  if (!doc.is_array()) throw DataError("neuron-ls --json-output: expected an array of devices");
  std::vector<NeuronDevice> devices;
  for (const auto& d : doc) {
    if (!d.is_object() || !d.contains("neuron_device") || !d.contains("nc_count") ||
        !d["neuron_device"].is_number_integer() || !d["nc_count"].is_number_integer()) {
      throw DataError("neuron-ls --json-output: a device without integer neuron_device and nc_count: " +
                      d.dump().substr(0, 120));
    }
    NeuronDevice n;
    n.index = d["neuron_device"].get<int>();
    n.cores = d["nc_count"].get<int>();
    if (d.contains("memory_size") && d["memory_size"].is_number_unsigned())
      n.memory_bytes = d["memory_size"].get<std::uint64_t>();
    devices.push_back(n);
  }
  return devices;
}

int gaudi_device_files(const std::string& dev) {
  static const std::regex accel("accel[0-9]+"), hl("hl[0-9]+");
  return count_matching(dev + "/accel", accel) + count_matching(dev, hl);
}

int neuron_device_files(const std::string& dev) {
  static const std::regex neuron("neuron[0-9]+");
  return count_matching(dev, neuron);
}

bool module_loaded(const std::string& module, const std::string& proc_modules) {
  std::ifstream in(proc_modules);
  std::string line;
  while (std::getline(in, line)) {
    if (line.substr(0, line.find(' ')) == module) return true;
  }
  return false;
}

Check judge_gaudi(const VendorNode& node, const std::string& instance_type,
                  const std::string& gaudi_software) {
  const ami::AcceleratorInstance* expected = expected_of(instance_type, "habana");
  bool absent = false;
  const std::string missing = presence(node, expected, "Gaudi cards", "habanalabs", "hl-smi", &absent);
  if (absent) return {"gaudi", true, "not present"};
  if (!missing.empty()) return {"gaudi", false, missing};
  std::vector<GaudiCard> cards;
  try {
    cards = parse_hl_smi(node.tool_output);
  } catch (const DataError& e) {
    return {"gaudi", false, e.what()};
  }
  std::vector<std::string> problems;
  if (expected != nullptr && static_cast<int>(cards.size()) < expected->devices) {
    problems.push_back("hl-smi shows " + std::to_string(cards.size()) + " of " + instance_type + "'s " +
                       std::to_string(expected->devices) + " cards");
  }
  if (cards.empty() && expected == nullptr) problems.push_back("hl-smi shows no card");
  double low = 1e9, high = -1e9;
  for (const auto& c : cards) {
    low = std::min(low, c.temperature_c);
    high = std::max(high, c.temperature_c);
    if (c.temperature_c <= 0) {
      problems.push_back("card " + std::to_string(c.index) + " reports 0 C: it did not initialise");
    } else if (c.temperature_c >= kGaudiHotC) {
      problems.push_back("card " + std::to_string(c.index) + " at " +
                         std::to_string(static_cast<int>(c.temperature_c)) + " C");
    }
    if (!gaudi_software.empty() && release_of(c.driver) != release_of(gaudi_software)) {
      problems.push_back("card " + std::to_string(c.index) + " driver " + c.driver + ", image " +
                         gaudi_software);
    }
  }
  if (!problems.empty()) {
    std::string detail;
    for (const auto& p : problems) detail += (detail.empty() ? "" : ", ") + p;
    return {"gaudi", false, detail};
  }
  std::ostringstream ok;
  ok << cards.size() << " " << cards.front().name << " card(s), driver " << cards.front().driver << ", "
     << static_cast<int>(low) << "-" << static_cast<int>(high) << " C";
  return {"gaudi", true, ok.str()};
}

Check judge_neuron(const VendorNode& node, const std::string& instance_type) {
  const ami::AcceleratorInstance* expected = expected_of(instance_type, "neuron");
  bool absent = false;
  const std::string missing = presence(node, expected, "Neuron devices", "neuron", "neuron-ls", &absent);
  if (absent) return {"neuron", true, "not present"};
  if (!missing.empty()) return {"neuron", false, missing};
  std::vector<NeuronDevice> devices;
  try {
    devices = parse_neuron_ls(node.tool_output);
  } catch (const DataError& e) {
    return {"neuron", false, e.what()};
  }
  std::vector<std::string> problems;
  if (expected != nullptr && static_cast<int>(devices.size()) < expected->devices) {
    problems.push_back("neuron-ls shows " + std::to_string(devices.size()) + " of " + instance_type + "'s " +
                       std::to_string(expected->devices) + " devices");
  }
  if (devices.empty() && expected == nullptr) problems.push_back("neuron-ls shows no device");
  int cores = 0;
  for (const auto& d : devices) {
    cores += d.cores;
    if (expected != nullptr && d.cores < expected->cores_per_device) {
      problems.push_back("device " + std::to_string(d.index) + " shows " + std::to_string(d.cores) + " of " +
                         std::to_string(expected->cores_per_device) + " NeuronCores");
    }
  }
  if (!problems.empty()) {
    std::string detail;
    for (const auto& p : problems) detail += (detail.empty() ? "" : ", ") + p;
    return {"neuron", false, detail};
  }
  return {"neuron", true,
          std::to_string(devices.size()) + " device(s), " + std::to_string(cores) + " NeuronCores"};
}

VendorNode probe_gaudi(double seconds) {
  return probe(hl_smi_query(), gaudi_device_files(), "habanalabs", seconds);
}

VendorNode probe_neuron(double seconds) {
  // The Neuron packages install their tools in /opt/aws/neuron/bin, which is not in PATH by default.
  const std::string tool = std::filesystem::exists("/opt/aws/neuron/bin/neuron-ls")
                               ? "/opt/aws/neuron/bin/neuron-ls"
                               : "neuron-ls";
  return probe({tool, "--json-output"}, neuron_device_files(), "neuron", seconds);
}

}  // namespace pcdino::doctor
