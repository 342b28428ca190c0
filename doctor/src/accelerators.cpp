#include "pcdino/doctor/accelerators.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The Neuron packages install their tools in /opt/aws/neuron/bin, which is not in PATH by default.
std::string neuron_tool(const std::string& name) {
  const std::string installed = "/opt/aws/neuron/bin/" + name;
  return std::filesystem::exists(installed) ? installed : name;
}

// Whether `program` (a path, or a name searched in PATH) is an executable file: a node without the vendor's
// tool costs no process (a starved node must still answer the doctor in time).
bool executable(const std::string& program) {
  if (program.find('/') != std::string::npos) return ::access(program.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

VendorNode probe(const std::vector<std::string>& argv, int device_files, const char* module, double seconds) {
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

}  // namespace

std::vector<std::string> hl_smi_query() {
  return {"hl-smi", "-Q", "index,name,driver_version,temperature.aip", "-f", "csv"};
}

std::vector<GaudiCard> parse_hl_smi(const std::string& csv) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::istringstream parts(line);
    for (std::string f; std::getline(parts, f, ',');) fields.push_back(trim(f));
    return fields;
  };
  std::istringstream in(csv);
  std::string line;
  int number = 0;
  // The header names the columns; "temperature.aip [C]" (csv,nounits) is the field temperature.aip.
  std::map<std::string, std::size_t> column;
  while (column.empty() && std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    const auto names = split(line);
    for (std::size_t i = 0; i < names.size(); ++i) column[names[i].substr(0, names[i].find(" ["))] = i;
  }
  for (const char* required : {"name", "temperature.aip"}) {
    if (column.count(required) == 0) {
      throw DataError("hl-smi output: no '" + std::string(required) + "' column in its header '" +
                      trim(line) + "' (query index, name, driver_version, temperature.aip with -f csv)");
    }
  }
  const auto field = [&](const std::vector<std::string>& f, const char* name) {
    const auto it = column.find(name);
    return it == column.end() || it->second >= f.size() ? std::string() : f[it->second];
  };
  std::vector<GaudiCard> cards;
  while (std::getline(in, line)) {
    ++number;
    if (trim(line).empty()) continue;
    const auto f = split(line);
    const auto bad = [&](const std::string& why) {
      return DataError("hl-smi output line " + std::to_string(number) + " '" + trim(line) + "': " + why);
    };
    if (f.size() != column.size()) {
      throw bad(std::to_string(f.size()) + " fields under a header of " + std::to_string(column.size()));
    }
    GaudiCard c;
    c.index = static_cast<int>(cards.size());
    try {
      if (column.count("index") != 0) {
        std::size_t used = 0;
        const std::string index = field(f, "index");
        c.index = std::stoi(index, &used);
        if (used != index.size()) throw std::invalid_argument(index);
      }
      c.temperature_c = leading_number(field(f, "temperature.aip"));
    } catch (const std::exception&) {
      throw bad("the index or the temperature is not a number");
    }
    c.name = field(f, "name");
    c.driver = field(f, "driver_version");
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

int gaudi_device_files(const std::string& dev, const std::string& sys_accel) {
  // /dev/accel is the kernel's accelerator subsystem, shared by other vendors' drivers: an entry counts
  // when sysfs names habanalabs as its driver. /dev/hl<N> is the driver's own name before it.
  static const std::regex accel("accel[0-9]+"), hl("hl[0-9]+");
  int n = count_matching(dev, hl);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dev + "/accel", ec)) {
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, accel)) continue;
    const auto driver = std::filesystem::read_symlink(sys_accel + "/" + name + "/device/driver", ec);
    if (!ec && driver.filename() == "habanalabs") ++n;
  }
  return n;
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
    if (!gaudi_software.empty() && !c.driver.empty() && release_of(c.driver) != release_of(gaudi_software)) {
      problems.push_back("card " + std::to_string(c.index) + " driver " + c.driver + ", image " +
                         gaudi_software);
    }
  }
  if (!problems.empty()) {
    const std::string detail = joined(problems);
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
    // neuron-ls --json-output is documented from Neuron 2.22; an older tool prints its table or usage.
    // The device files then stand for the devices (their cores are not known).
    if (expected != nullptr && node.device_files < expected->devices) {
      return {"neuron", false,
              std::to_string(node.device_files) + " of " + instance_type + "'s " +
                  std::to_string(expected->devices) + " Neuron device files (neuron-ls gave no JSON)"};
    }
    return {"neuron", true,
            std::to_string(node.device_files) + " Neuron device file(s) (neuron-ls gave no JSON: " +
                "--json-output is documented from Neuron 2.22)"};
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
    const std::string detail = joined(problems);
    return {"neuron", false, detail};
  }
  return {"neuron", true,
          std::to_string(devices.size()) + " device(s), " + std::to_string(cores) + " NeuronCores"};
}

double parse_nccom_busbw(const std::string& output) {
  static const std::regex average(R"(Avg bus bandwidth:\s*([0-9.]+)\s*GB/s)");
  std::smatch m;
  if (std::regex_search(output, m, average)) return std::stod(m[1]);
  // The table: size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s) [algorithm].
  std::istringstream in(output);
  std::string line;
  double last = -1;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() < 6 || !std::isdigit(static_cast<unsigned char>(w[0][0]))) continue;
    try {
      last = std::stod(w[5]);
    } catch (const std::exception&) {
    }
  }
  if (last < 0) throw DataError("nccom-test printed no bus bandwidth: " + trim(output.substr(0, 200)));
  return last;
}

std::optional<Check> check_nccom(int cores, double seconds) {
  const std::string tool = neuron_tool("nccom-test");
  if (neuron_device_files() == 0 || cores <= 0) return std::nullopt;
  if (!executable(tool)) return std::nullopt;  // not installed: the check is optional
  std::optional<ProcessResult> run;
  try {
    const std::vector<std::string> argv = {tool, "-r", std::to_string(cores), "allr"};
    run = within<ProcessResult>(seconds, [argv] { return run_process(argv); });
  } catch (const std::exception&) {
    return std::nullopt;  // not installed: the check is optional
  }
  if (!run)
    return Check{"nccom", false,
                 "nccom-test did not finish within " + std::to_string(static_cast<int>(seconds)) + " s"};
  if (run->exit_code != 0) {
    return Check{"nccom", false,
                 "nccom-test -r " + std::to_string(cores) + " allr failed with exit code " +
                     std::to_string(run->exit_code) + ": " + trim(run->err.substr(0, 200))};
  }
  try {
    const double busbw = parse_nccom_busbw(run->out);
    std::ostringstream detail;
    detail << "all-reduce over " << cores << " NeuronCores: bus bandwidth " << busbw << " GiB/s (not judged)";
    return Check{"nccom", true, detail.str()};
  } catch (const DataError& e) {
    return Check{"nccom", false, e.what()};
  }
}

VendorNode probe_gaudi(double seconds) {
  return probe(hl_smi_query(), gaudi_device_files(), "habanalabs", seconds);
}

VendorNode probe_neuron(double seconds) {
  const std::string tool = neuron_tool("neuron-ls");
  return probe({tool, "--json-output"}, neuron_device_files(), "neuron", seconds);
}

}  // namespace pcdino::doctor
