// ParallelCluster's v3 cluster configuration schema, as the data in
// cluster/upstream/parallelcluster-<release>-cluster-schema.yaml restates it (compiled into the library),
// and the walk that checks a configuration against it: unknown keys, types as ParallelCluster's loader
// reads them, required keys, allowed values, ranges, patterns, lengths and keys that exclude each other.
// Internal to the cluster library.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace pcdino::cluster {

/// One key path of the schema ("Scheduling.SlurmQueues[].ComputeResources[].MinCount"; "[]" stands for
/// every element of a list), with the facts the data gives for it.
struct SchemaKey {
  std::string path;
  std::string
      type;  ///< string | integer | number | boolean | list | map | dict (free keys) | string_or_boolean
  std::string items;  ///< a list's element type (map: elements follow PATH[].Key)
  bool required = false;
  std::vector<std::string> values;       ///< allowed values (enum), exact and case-sensitive
  std::vector<std::string> item_values;  ///< allowed values of a list's elements
  std::optional<double> min, max;        ///< inclusive bounds of a number
  std::optional<std::size_t> min_length, max_length, min_items, max_items;
  std::string pattern_text, item_pattern_text;  ///< Python re.match patterns (anchored at the start)
  std::optional<std::regex> pattern, item_pattern;
  std::vector<std::string> exclusive_with;  ///< sibling keys that may not be set with this one
  std::vector<std::string> exactly_one_of;  ///< of a mapping: child keys of which exactly one is set
  std::string source;                       ///< "ParallelCluster v3.11.1 cluster_schema.py HeadNodeSchema"
};

class ParallelClusterSchema {
 public:
  /// The compiled-in schema, parsed on first use. Throws Error (exit 70) if the data is malformed.
  static const ParallelClusterSchema& get();

  /// The key at `path` (schema form, with "[]"), or nullptr.
  const SchemaKey* find(const std::string& path) const;

  /// The names of the keys directly below `path` ("" = the top level).
  const std::vector<std::string>& children(const std::string& path) const;

  /// "3.11.1", and the upstream commit the data was read from.
  const std::string& release() const { return release_; }
  const std::string& commit() const { return commit_; }

  /// A list that the data's `validators` section gives as one of a validator's limits, lower case as
  /// written (CustomSlurmSettingsValidator's "Queue_CustomSlurmSettings" deny-list, say). Throws Error
  /// (exit 70) if the data has no such list.
  const std::vector<std::string>& validator_limit(const std::string& validator,
                                                  const std::string& name) const;

  /// Number of key paths.
  std::size_t size() const { return keys_.size(); }

 private:
  ParallelClusterSchema();
  std::map<std::string, SchemaKey> keys_;
  std::map<std::string, std::vector<std::string>> children_;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> validator_limits_;
  std::string release_, commit_;
};

/// Reports one finding: the node it is about, its key path as written ("HeadNode.Ssh.AllowedIps",
/// "Scheduling.SlurmQueues[0].Name"), what is wrong, and the upstream source.
using SchemaReport = std::function<void(const YAML::Node& at, const std::string& path,
                                        const std::string& message, const std::string& source)>;

/// Walks the configuration `root` against the schema and reports every key ParallelCluster's loader
/// would refuse. `template_placeholders`: a value written exactly as "${NAME}" (a template rendered
/// later, as commands.sh does) passes its pattern; otherwise any "${" in a value is reported as
/// unrendered.
void walk_schema(const YAML::Node& root, bool template_placeholders, const SchemaReport& report);

/// The number a scalar stands for where ParallelCluster's loader (marshmallow's Integer and Float) converts
/// it: an integer, a float or a numeric string; nothing for anything else (booleans included).
std::optional<double> number_of(const YAML::Node& scalar);

/// How PyYAML (YAML 1.1, the reader ParallelCluster uses) types a scalar: "str", "int", "float", "bool",
/// "null" or "timestamp". Quoted scalars are "str".
std::string yaml11_kind(const YAML::Node& scalar);

}  // namespace pcdino::cluster
