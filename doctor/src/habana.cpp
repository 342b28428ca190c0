#include "pcdino/doctor/habana.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "vendor_tools.hpp"

namespace pcdino::doctor {

namespace {

// "33 C" -> 33; "33" -> 33. Throws std::invalid_argument when it does not start with a number.
double leading_number(const std::string& field) {
  std::size_t used = 0;
  const double v = std::stod(field, &used);
  const std::string rest = trim(field.substr(used));
  if (!rest.empty() && rest.find(' ') != std::string::npos) throw std::invalid_argument(field);
  return v;
}

// The release part of a version: "1.21.0-555" and "1.21.0-ee698fb" -> "1.21.0".
std::string release_of(const std::string& version) {
  return version.substr(0, version.find('-'));
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

Check judge_gaudi(const VendorNode& node, const std::string& instance_type,
                  const std::string& gaudi_software) {
  const ami::AcceleratorInstance* expected = expected_of(instance_type, "habana");
  bool absent = false;
  const std::string missing = presence(node, expected, "Gaudi cards", "habanalabs", "hl-smi", &absent);
  if (absent) return {"gaudi", true, kNotPresent};
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
    const std::string detail = join(problems);
    return {"gaudi", false, detail};
  }
  std::ostringstream ok;
  ok << cards.size() << " " << cards.front().name << " card(s), driver " << cards.front().driver << ", "
     << static_cast<int>(low) << "-" << static_cast<int>(high) << " C";
  return {"gaudi", true, ok.str()};
}

VendorNode probe_gaudi(double seconds) {
  return probe_tool(hl_smi_query(), gaudi_device_files(), "habanalabs", seconds);
}

VendorProbe habana_probe() {
  return {"gaudi", "has Intel Gaudi cards (HCCL's test: hccl_demo)", probe_gaudi,
          [](const VendorNode& node, const std::string& instance_type, const std::string& manifest) {
            return judge_gaudi(node, instance_type, manifest_component(manifest, "gaudi_software"));
          },
          nullptr};
}

}  // namespace pcdino::doctor
