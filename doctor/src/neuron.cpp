#include "pcdino/doctor/neuron.hpp"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/process.hpp"
#include "pcdino/doctor/probes.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

namespace {

// The Neuron packages install their tools in /opt/aws/neuron/bin, which is not in PATH by default.
std::string neuron_tool(const std::string& name) {
  const std::string installed = "/opt/aws/neuron/bin/" + name;
  return std::filesystem::exists(installed) ? installed : name;
}

// nccom-test across the NeuronCores neuron-ls showed, where judge_neuron() found the devices healthy. A
// neuron-ls before 2.22 (no JSON; judge_neuron() then counts the device files) does not say how many
// cores there are to test.
std::optional<Check> nccom_on(const VendorNode& node, double seconds) {
  int cores = 0;
  try {
    for (const auto& d : parse_neuron_ls(node.tool_output)) cores += d.cores;
  } catch (const DataError&) {
    return Check{"nccom", true,
                 "not run: neuron-ls gave no JSON (--json-output is documented from Neuron 2.22), so the "
                 "NeuronCores to test are not known"};
  }
  return check_nccom(cores, seconds);
}

}  // namespace

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

int neuron_device_files(const std::string& dev) {
  static const std::regex neuron("neuron[0-9]+");
  return count_matching(dev, neuron);
}

Check judge_neuron(const VendorNode& node, const std::string& instance_type) {
  const ami::AcceleratorInstance* expected = expected_of(instance_type, "neuron");
  bool absent = false;
  const std::string missing = presence(node, expected, "Neuron devices", "neuron", "neuron-ls", &absent);
  if (absent) return {"neuron", true, kNotPresent};
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
    const std::string detail = join(problems);
    return {"neuron", false, detail};
  }
  return {"neuron", true,
          std::to_string(devices.size()) + " device(s), " + std::to_string(cores) + " NeuronCores"};
}

double parse_nccom_busbw(const std::string& output) {
  static const std::regex average(R"(Avg bus bandwidth:\s*([0-9.]+)\s*GB/s)");
  std::smatch m;
  if (std::regex_search(output, m, average)) {
    try {
      return std::stod(m[1]);
    } catch (const std::exception&) {  // "1e999": out of range; a lone ".": no number
      throw DataError("nccom-test printed a bus bandwidth that is not a number: '" + m[1].str() + "'");
    }
  }
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

VendorNode probe_neuron(double seconds) {
  const std::string tool = neuron_tool("neuron-ls");
  return probe_tool({tool, "--json-output"}, neuron_device_files(), "neuron", seconds);
}

VendorProbe neuron_probe() {
  return {"neuron", "has AWS Neuron devices (their collectives' test: nccom-test)", probe_neuron,
          [](const VendorNode& node, const std::string& instance_type, const std::string&) {
            return judge_neuron(node, instance_type);
          },
          nccom_on};
}

}  // namespace pcdino::doctor
