#include "schema.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "pcdino/core/error.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::cluster {

// The data file's text, compiled in by CMake (schema_data.cpp.in).
extern const char* const kParallelClusterSchemaYaml;

namespace {

const char* const kDataName = "parallelcluster-cluster-schema.yaml";

// "Scheduling.SlurmQueues[].Name" -> "Scheduling.SlurmQueues[]"; "Image" -> "".
std::string parent_of(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::vector<std::string> strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n.IsDefined() && n.IsSequence())
    for (const auto& v : n) out.push_back(v.Scalar());
  return out;
}

// "CS:HeadNodeSchema, CONST:X" with the data's abbreviations spelled as file names.
std::string expand_source(const std::string& source, const std::map<std::string, std::string>& files,
                          const std::string& release) {
  std::string out;
  std::size_t start = 0;
  while (start < source.size()) {
    std::size_t end = source.find(", ", start);
    if (end == std::string::npos) end = source.size();
    std::string part = source.substr(start, end - start);
    const auto colon = part.find(':');
    if (colon != std::string::npos && files.count(part.substr(0, colon)))
      part = files.at(part.substr(0, colon)) + " " + part.substr(colon + 1);
    else if (part.rfind("V/", 0) == 0)
      part = "validators/" + part.substr(2);
    out += (out.empty() ? "" : ", ") + part;
    start = end + 2;
  }
  return "ParallelCluster v" + release + " " + out;
}

std::regex compile(const std::string& pattern, const std::string& path) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(ExitCode::kSoftware, std::string(kDataName) + ": " + path + ": pattern '" + pattern +
                                         "' does not compile: " + e.what());
  }
}

}  // namespace

ParallelClusterSchema::ParallelClusterSchema() {
  const YAML::Node data = load_yaml(kParallelClusterSchemaYaml, kDataName);
  const std::string tag = data["meta"]["tag"].Scalar();
  release_ = tag.rfind('v', 0) == 0 ? tag.substr(1) : tag;
  commit_ = data["meta"]["commit"].Scalar();
  std::map<std::string, std::string> files;
  for (const auto& kv : data["meta"]["source_abbreviations"]) {
    const std::string file = kv.second.Scalar();
    files[kv.first.Scalar()] = file.substr(file.rfind('/') + 1);
  }
  const YAML::Node regexes = data["shared_regexes"];
  const auto regex_text = [&](const YAML::Node& n) {
    const std::string text = n.Scalar();
    return regexes[text].IsDefined() ? regexes[text].Scalar() : text;  // a named shared regex
  };
  const auto read = [&](const std::string& path, const YAML::Node& e) {
    SchemaKey k;
    k.path = path;
    k.type = e["type"].Scalar();
    k.items = e["items"] ? e["items"].Scalar() : "";
    k.required = (e["required"] && e["required"].as<bool>()) ||
                 (e["effectively_required"] && e["effectively_required"].as<bool>());
    k.values = strings(e["enum"]);
    k.item_values = strings(e["item_enum"]);
    if (e["min"]) k.min = e["min"].as<double>();
    if (e["max"]) k.max = e["max"].as<double>();
    if (e["min_length"]) k.min_length = e["min_length"].as<std::size_t>();
    if (e["max_length"]) k.max_length = e["max_length"].as<std::size_t>();
    if (e["min_items"]) k.min_items = e["min_items"].as<std::size_t>();
    if (e["max_items"]) k.max_items = e["max_items"].as<std::size_t>();
    if (e["pattern"]) k.pattern_text = regex_text(e["pattern"]), k.pattern = compile(k.pattern_text, path);
    if (e["item_pattern"]) {
      k.item_pattern_text = regex_text(e["item_pattern"]);
      k.item_pattern = compile(k.item_pattern_text, path);
    }
    for (const auto& other : strings(e["exclusive_with"])) k.exclusive_with.push_back(other);
    k.exactly_one_of = strings(e["exactly_one_of"]);
    k.source = expand_source(e["source"] ? e["source"].Scalar() : "", files, release_);
    return k;
  };
  for (const auto& kv : data["keys"]) {
    const std::string path = kv.first.Scalar();
    keys_[path] = read(path, kv.second);
  }
  // A shape (the custom action events) gives the keys below every key that names it.
  for (const auto& kv : data["keys"]) {
    if (!kv.second["shape"]) continue;
    const std::string path = kv.first.Scalar();
    const YAML::Node shape = data["shapes"][kv.second["shape"].Scalar()];
    const std::string below = keys_[path].type == "list" ? path + "[]" : path;
    for (const auto& child : shape["keys"]) {
      const std::string cp = YamlReader::join(below, child.first.Scalar());
      if (!keys_.count(cp)) keys_[cp] = read(cp, child.second), keys_[cp].source = keys_[path].source;
    }
    if (shape["exactly_one_of"]) keys_[path].exactly_one_of = strings(shape["exactly_one_of"]);
  }
  for (const auto& v : data["validators"]) {
    for (const auto& limit : v["limits"])
      if (limit.second.IsSequence() && (limit.second.size() == 0 || limit.second[0].IsScalar()))
        validator_limits_[{v["class"].Scalar(), limit.first.Scalar()}] = strings(limit.second);
  }
  for (const auto& [path, key] : keys_) {
    if (key.type.empty())
      throw Error(ExitCode::kSoftware, std::string(kDataName) + ": " + path + " has no type");
    children_[parent_of(path)].push_back(path.substr(path.rfind('.') + 1));  // npos + 1 == 0
  }
}

const std::vector<std::string>& ParallelClusterSchema::validator_limit(const std::string& validator,
                                                                       const std::string& name) const {
  const auto it = validator_limits_.find({validator, name});
  if (it == validator_limits_.end())
    throw Error(ExitCode::kSoftware,
                std::string(kDataName) + ": validators: " + validator + " has no limit list " + name);
  return it->second;
}

const ParallelClusterSchema& ParallelClusterSchema::get() {
  static const ParallelClusterSchema schema;
  return schema;
}

const SchemaKey* ParallelClusterSchema::find(const std::string& path) const {
  const auto it = keys_.find(path);
  return it == keys_.end() ? nullptr : &it->second;
}

const std::vector<std::string>& ParallelClusterSchema::children(const std::string& path) const {
  static const std::vector<std::string> none;
  const auto it = children_.find(path);
  return it == children_.end() ? none : it->second;
}

std::string yaml11_kind(const YAML::Node& n) {
  if (n.IsNull()) return "null";
  if (!n.IsScalar() || n.Tag() != "?") return "str";  // quoted, or explicitly tagged
  // PyYAML's implicit resolvers (resolver.py, YAML 1.1).
  static const std::regex null_re("~|null|Null|NULL|");
  static const std::regex bool_re(
      "yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF");
  static const std::regex int_re(
      "[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(:[0-5]?[0-9]"
      ")+");
  static const std::regex float_re(
      "[-+]?([0-9][0-9_]*)\\.[0-9_]*([eE][-+][0-9]+)?|\\.[0-9][0-9_]*([eE][-+][0-9]+)?|"
      "[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  static const std::regex timestamp_re("[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?");
  const std::string& s = n.Scalar();
  if (std::regex_match(s, null_re)) return "null";
  if (std::regex_match(s, bool_re)) return "bool";
  if (std::regex_match(s, int_re)) return "int";
  if (std::regex_match(s, float_re)) return "float";
  if (std::regex_match(s, timestamp_re)) return "timestamp";
  return "str";
}

namespace {

std::string describe(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  const std::string kind = yaml11_kind(n);
  static const std::map<std::string, std::string> names = {
      {"str", "the string"},   {"int", "the integer"}, {"float", "the number"},
      {"bool", "the boolean"}, {"null", "no value"},   {"timestamp", "the date"}};
  return kind == "null" ? "no value" : names.at(kind) + " '" + n.Scalar() + "'";
}

// marshmallow's Boolean field: booleans, 1/0, and these strings.
bool boolean_like(const YAML::Node& n) {
  const std::string kind = yaml11_kind(n);
  if (kind == "bool") return true;
  if (kind == "int") return n.Scalar() == "1" || n.Scalar() == "0";
  if (kind != "str") return false;
  static const std::set<std::string> words = {
      "t", "T", "true",  "True",  "TRUE",  "on",  "On",  "ON",  "y", "Y", "yes", "Yes", "YES", "1",
      "f", "F", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N", "no",  "No",  "NO",  "0"};
  return words.count(n.Scalar()) > 0;
}

// Set in ParallelCluster's sense of a key that excludes another: present with a truthy value.
bool set_truthy(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return false;
  if (n.IsSequence() || n.IsMap()) return n.size() > 0;
  const std::string kind = yaml11_kind(n);
  if (kind == "bool") return n.as<bool>();
  if (kind == "int" || kind == "float") return number_of(n).value_or(1) != 0;
  return !n.Scalar().empty();
}

bool is_placeholder(const std::string& s) {
  static const std::regex placeholder("\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}");
  return std::regex_match(s, placeholder);
}

class Walker {
 public:
  Walker(bool template_placeholders, const SchemaReport& report)
      : template_(template_placeholders), report_(report), schema_(ParallelClusterSchema::get()) {}

  void map(const YAML::Node& node, const std::string& schema_path, const std::string& path) {
    const auto& known = schema_.children(schema_path);
    std::set<std::string> present;
    for (const auto& kv : node) {
      const std::string key = kv.first.Scalar();
      present.insert(key);
      const std::string key_path = YamlReader::join(path, key);
      const SchemaKey* k = schema_.find(YamlReader::join(schema_path, key));
      if (k == nullptr) {
        const std::string hint = did_you_mean(key, known);
        report_(kv.first, key_path,
                "unknown key '" + key + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"),
                schema_source(schema_path));
        continue;
      }
      value(kv.second, *k, key_path);
      for (const auto& other : k->exclusive_with) {
        const std::string name = other.substr(other.rfind('.') + 1);
        // Reported once, at the later of the two keys.
        if (present.count(name) && set_truthy(kv.second) && set_truthy(node[name])) {
          report_(kv.first, key_path, "'" + key + "' and '" + name + "' cannot both be set", k->source);
        }
      }
    }
    const SchemaKey* self = schema_.find(schema_path);
    for (const auto& child : known) {
      const SchemaKey* k = schema_.find(YamlReader::join(schema_path, child));
      // One of an exactly-one-of pair (a custom action's Script or Sequence) is required only as the pair.
      const bool one_of =
          self != nullptr && std::find(self->exactly_one_of.begin(), self->exactly_one_of.end(), child) !=
                                 self->exactly_one_of.end();
      if (k->required && !one_of && !present.count(child)) {
        report_(node, YamlReader::join(path, child), "missing required key '" + child + "'", k->source);
      }
    }
    if (self != nullptr && !self->exactly_one_of.empty()) {
      std::size_t n = 0;
      std::string names;
      for (const auto& c : self->exactly_one_of) {
        n += set_truthy(node[c]) ? 1 : 0;
        names += (names.empty() ? "" : " or ") + c;
      }
      if (n != 1)
        report_(node, path, "needs exactly one of " + names + ", got " + std::to_string(n), self->source);
    }
  }

 private:
  std::string schema_source(const std::string& schema_path) const {
    const SchemaKey* parent = schema_.find(schema_path);
    return parent != nullptr ? parent->source
                             : "ParallelCluster v" + schema_.release() + " cluster_schema.py ClusterSchema";
  }

  void value(const YAML::Node& v, const SchemaKey& k, const std::string& path) {
    if (v.IsNull()) {
      report_(v, path, "has no value (leave the key out instead)", k.source);
      return;
    }
    if (k.type == "map" || k.type == "dict") {
      if (!v.IsMap()) return report_(v, path, "expected a mapping of keys, got " + describe(v), k.source);
      if (k.type == "map") map(v, k.path, path);  // a dict's keys are free
      return;
    }
    if (k.type == "list") {
      if (!v.IsSequence()) return report_(v, path, "expected a list, got " + describe(v), k.source);
      if (k.min_items && v.size() < *k.min_items)
        report_(v, path, "needs at least " + std::to_string(*k.min_items) + " item(s)", k.source);
      if (k.max_items && v.size() > *k.max_items) {
        report_(v, path,
                "has " + std::to_string(v.size()) + " items, at most " + std::to_string(*k.max_items) +
                    " are allowed",
                k.source);
      }
      // The key every element of a list of strings answers to.
      SchemaKey item;
      if (k.items == "string") {
        item.path = k.path + "[]";
        item.type = "string";
        item.values = k.item_values;
        item.pattern = k.item_pattern;
        item.pattern_text = k.item_pattern_text;
        item.source = k.source;
      }
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string ip = path + "[" + std::to_string(i) + "]";
        if (k.items == "map") {
          if (!v[i].IsMap())
            report_(v[i], ip, "expected a mapping of keys, got " + describe(v[i]), k.source);
          else
            map(v[i], k.path + "[]", ip);
        } else if (k.items == "dict") {
          if (!v[i].IsMap()) report_(v[i], ip, "expected a mapping of keys, got " + describe(v[i]), k.source);
        } else if (k.items == "string") {
          scalar(v[i], item, ip);
        }
      }
      return;
    }
    scalar(v, k, path);
  }

  void scalar(const YAML::Node& v, const SchemaKey& k, const std::string& path) {
    if (!v.IsScalar()) return report_(v, path, "expected a single value, got " + describe(v), k.source);
    const std::string kind = yaml11_kind(v);
    const std::string& s = v.Scalar();
    bool placeholder = false;
    if (s.find("${") != std::string::npos) {
      if (!template_ || !is_placeholder(s)) {
        report_(v, path,
                "'" + s + "' is an unrendered template placeholder: render the file first (commands.sh does)",
                k.source);
        return;
      }
      placeholder = true;
    }
    std::optional<double> number;
    if (k.type == "string") {
      if (kind != "str")
        return report_(v, path, "expected a string, got " + describe(v) + " (quote it)", k.source);
    } else if (k.type == "integer") {
      number = kind == "bool" ? std::nullopt : number_of(v);
      if (!number || (kind == "str" && std::floor(*number) != *number))
        return report_(v, path, "expected an integer, got " + describe(v), k.source);
      number = std::trunc(*number);
    } else if (k.type == "number") {
      number = kind == "bool" ? std::nullopt : number_of(v);
      if (!number) return report_(v, path, "expected a number, got " + describe(v), k.source);
    } else if (k.type == "boolean") {
      if (!boolean_like(v)) return report_(v, path, "expected true or false, got " + describe(v), k.source);
    }
    if (!k.values.empty()) {
      const bool ok = std::any_of(k.values.begin(), k.values.end(), [&](const std::string& allowed) {
        return number ? number_of(YAML::Node(allowed)) == number : allowed == s;
      });
      if (!ok) {
        std::string list;
        for (const auto& a : k.values) list += (list.empty() ? "" : ", ") + a;
        const std::string hint = did_you_mean(s, k.values);
        report_(v, path,
                "'" + s + "' is not one of " + list + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"),
                k.source);
      }
    }
    const auto bound = [](double x) {
      return std::floor(x) == x ? std::to_string(static_cast<long long>(x)) : std::to_string(x);
    };
    if (number && ((k.min && *number < *k.min) || (k.max && *number > *k.max))) {
      report_(v, path,
              s + " is out of range: " + (k.min ? "at least " + bound(*k.min) : "") +
                  (k.min && k.max ? " and " : "") + (k.max ? "at most " + bound(*k.max) : ""),
              k.source);
    }
    if (k.type != "string") return;
    if (k.max_length && s.size() > *k.max_length)
      report_(v, path, "longer than " + std::to_string(*k.max_length) + " characters", k.source);
    if (k.min_length && s.size() < *k.min_length)
      report_(v, path, "shorter than " + std::to_string(*k.min_length) + " character(s)", k.source);
    // Python's re.match: anchored at the start only.
    if (k.pattern && !placeholder &&
        !std::regex_search(s, *k.pattern, std::regex_constants::match_continuous)) {
      report_(v, path, "'" + s + "' does not match the pattern " + k.pattern_text, k.source);
    }
  }

  bool template_;
  const SchemaReport& report_;
  const ParallelClusterSchema& schema_;
};

}  // namespace

std::optional<double> number_of(const YAML::Node& n) {
  const std::string kind = yaml11_kind(n);
  if (kind != "int" && kind != "float" && kind != "str") return std::nullopt;
  std::string s = n.Scalar();
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  static const std::regex decimal("\\s*[-+]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][-+]?[0-9]+)?\\s*");
  if (!std::regex_match(s, decimal)) return std::nullopt;
  return std::stod(s);
}

void walk_schema(const YAML::Node& root, bool template_placeholders, const SchemaReport& report) {
  Walker(template_placeholders, report).map(root, "", "");
}

}  // namespace pcdino::cluster
