// Strict reading of small YAML specs (image specs, site specs): every key is known, every value checked
// where it enters, and every error names the file, line, column and key path, e.g.
//   site.yaml:7:17: queues[0].max_count: expected an integer in [0, 1000], got 'many'
#pragma once

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>
#include <vector>

namespace pcdino {

/// Where `node` is, as compilers print it: "source:line:col" (1-based), or `source` alone when the node
/// has no position (absent, or built in code). Every YAML message of the project starts with it.
std::string yaml_location(const std::string& source, const YAML::Node& node);

/// Parses `text` (yaml-cpp). Throws ConfigError "source:line:col: YAML syntax error: ..." for malformed
/// YAML, and "source:line:col: key 'k' appears twice in this mapping (first at line N)" for a key written
/// twice in one mapping (yaml-cpp would silently use the first, other readers the last): the one error
/// type of every YAML file pcdino reads.
YAML::Node load_yaml(const std::string& text, const std::string& source);

/// `s` with ASCII letters in lower case: for keys compared without case (Slurm's parameter names).
std::string ascii_lower(std::string s);

/// The candidate an unknown key was probably meant to be, for "did you mean" hints: one equal to `word`
/// ignoring case ("instanceType" -> "InstanceType"), else the nearest within an edit distance of 2
/// (Levenshtein); "" when none is that close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

class YamlReader {
 public:
  /// `source` names the file in messages.
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  /// Parses `text`; a syntax error becomes a ConfigError with line and column.
  YAML::Node load(const std::string& text) const;

  /// Throws ConfigError "source:line:col: path: what" (the node's position when it has one).
  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& what) const;

  /// Fails on the first key of `map` not in `keys`, listing the known ones.
  void only(const YAML::Node& map, const std::string& path, const std::set<std::string>& keys) const;

  /// The mapping at `key` (an empty mapping if absent and not `required`).
  YAML::Node map(const YAML::Node& parent, const std::string& key, const std::string& path,
                 bool required) const;

  /// A scalar matching the ECMAScript regex `pattern` ("" if absent and not `required`); `expected`
  /// describes it in messages.
  std::string text(const YAML::Node& parent, const std::string& key, const std::string& path, bool required,
                   const std::string& pattern, const std::string& expected) const;

  /// An integer in [low, high], or `fallback` if absent.
  int integer(const YAML::Node& parent, const std::string& key, const std::string& path, int low, int high,
              int fallback) const;

  /// true/false, or `fallback` if absent.
  bool boolean(const YAML::Node& parent, const std::string& key, const std::string& path,
               bool fallback) const;

  /// "path.key", or "key" at the top.
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace pcdino
