// For schema-driven tests: a value of each configuration key that its schema accepts and that differs from
// the default, found by trying candidates of the key's type through a real `--set` override.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"

namespace pcdino::test {

/// Candidate YAML values by schema type; the first one the key accepts and that changes it is used.
inline const std::map<std::string, std::vector<std::string>>& candidate_values() {
  static const std::map<std::string, std::vector<std::string>> values = {
      {"integer", {"7", "3", "2", "1", "0", "12"}},
      {"number", {"0.37", "0.5", "2.5"}},
      {"bool", {"true", "false"}},
      {"bool or null", {"true", "false"}},
      {"string",
       {"vit_tiny", "student", "cosine", "mpirun", "nvidia", "x7", "64G", "/tmp/elsewhere", "pmi2"}},
      {"[low, high]", {"[0.3, 0.6]"}},
      {"list of integers", {"[3, 7]"}},
      {"list of channel combinations", {"[\"01\", \"2\"]"}},
      {"{index: name}", {"{0: a, 1: b}"}},
      {"{name: value}", {"{train: \"30:00\"}", "{FOO: \"1\"}"}},
      {"list of strings", {"[efa]", "[/fsx]"}},
  };
  return values;
}

/// `path` set to a non-default value it accepts, as "path=value" for parse_override(); nullopt when the
/// key accepts no value but its default (a key pcdino does not implement).
inline std::optional<std::string> non_default_assignment(const ConfigKey& key) {
  const std::string default_value = config_value(PipelineConfig{}, key.path);
  for (const auto& value : candidate_values().at(key.type)) {
    const std::string assignment = key.path + "=" + value;
    try {
      const PipelineConfig c = parse_config("", "p.yaml", {parse_override(assignment)});
      if (config_value(c, key.path) != default_value) return assignment;
    } catch (const ConfigError&) {
    }
  }
  return std::nullopt;
}

}  // namespace pcdino::test
