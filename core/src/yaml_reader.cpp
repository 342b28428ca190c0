#include "pcdino/core/yaml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>

#include "pcdino/core/error.hpp"

namespace pcdino {

namespace {

std::string location(const std::string& source, const YAML::Mark& m) {
  if (m.is_null()) return source;
  return source + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// A document's nesting and size as the walks below meet it. An alias that names an enclosing anchor makes
// yaml-cpp's tree a cycle (`a: &a [*a]`), and aliases of aliases grow it exponentially (the "billion
// laughs"): neither is a configuration, and a walk over either would not end.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxNodes = 100000;

// yaml-cpp keeps both entries of a key written twice and answers lookups with the first, while other
// readers (PyYAML, hence ParallelCluster) take the last: a file that says a key twice is refused.
void refuse_duplicate_keys(const YAML::Node& node, const std::string& source, int depth, std::size_t& nodes) {
  if (depth > kMaxDepth || ++nodes > kMaxNodes) {
    throw ConfigError(location(source, node.Mark()) + ": nested deeper than " + std::to_string(kMaxDepth) +
                      " levels or more than " + std::to_string(kMaxNodes) +
                      " values with its aliases expanded (an alias inside its own anchor?)");
  }
  if (node.IsSequence()) {
    for (const auto& item : node) refuse_duplicate_keys(item, source, depth + 1, nodes);
  } else if (node.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (const auto& kv : node) {
      if (kv.first.IsScalar()) {
        const auto [first, inserted] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
        if (!inserted) {
          throw ConfigError(location(source, kv.first.Mark()) + ": key '" + kv.first.Scalar() +
                            "' appears twice in this mapping (first at line " +
                            std::to_string(first->second.line + 1) + ")");
        }
      } else {
        refuse_duplicate_keys(kv.first, source, depth + 1, nodes);
      }
      refuse_duplicate_keys(kv.second, source, depth + 1, nodes);
    }
  }
}

void refuse_duplicate_keys(const YAML::Node& node, const std::string& source) {
  std::size_t nodes = 0;
  refuse_duplicate_keys(node, source, 0, nodes);
}

}  // namespace

std::string yaml_location(const std::string& source, const YAML::Node& node) {
  return location(source, node.IsDefined() ? node.Mark() : YAML::Mark::null_mark());
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  for (const auto& c : candidates)
    if (ascii_lower(c) == ascii_lower(word)) return c;
  std::string best;
  std::size_t best_distance = 3;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance) best_distance = d, best = c;
  }
  return best;
}

YAML::Node load_yaml(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(location(source, e.mark) + ": YAML syntax error: " + e.msg);
  }
  refuse_duplicate_keys(root, source);
  return root;
}

YAML::Node YamlReader::load(const std::string& text) const {
  return load_yaml(text, source_);
}

void YamlReader::fail(const YAML::Node& node, const std::string& path, const std::string& what) const {
  throw ConfigError(yaml_location(source_, node) + ": " + path + ": " + what);
}

void YamlReader::only(const YAML::Node& map, const std::string& path,
                      const std::set<std::string>& keys) const {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (keys.count(key) == 0) {
      std::string known;
      for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
      fail(kv.first, join(path, key), "unknown key (known: " + known + ")");
    }
  }
}

YAML::Node YamlReader::map(const YAML::Node& parent, const std::string& key, const std::string& path,
                           bool required) const {
  const YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) {
    if (required) fail(parent, path, "missing");
    return YAML::Node(YAML::NodeType::Map);
  }
  if (!n.IsMap()) fail(n, path, "expected a mapping");
  return n;
}

std::string YamlReader::text(const YAML::Node& parent, const std::string& key, const std::string& path,
                             bool required, const std::string& pattern, const std::string& expected) const {
  const YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) {
    if (required) fail(parent, path, "missing (expected " + expected + ")");
    return "";
  }
  if (!n.IsScalar()) fail(n, path, "expected " + expected);
  if (!std::regex_match(n.Scalar(), std::regex(pattern))) {
    fail(n, path, "expected " + expected + ", got '" + n.Scalar() + "'");
  }
  return n.Scalar();
}

int YamlReader::integer(const YAML::Node& parent, const std::string& key, const std::string& path, int low,
                        int high, int fallback) const {
  const YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  try {
    const int v = n.as<int>();
    if (v >= low && v <= high) return v;
  } catch (const YAML::Exception&) {
  }
  fail(n, path,
       "expected an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "], got '" +
           (n.IsScalar() ? n.Scalar() : std::string("?")) + "'");
}

bool YamlReader::boolean(const YAML::Node& parent, const std::string& key, const std::string& path,
                         bool fallback) const {
  const YAML::Node n = parent[key];
  if (!n.IsDefined() || n.IsNull()) return fallback;
  try {
    if (n.IsScalar()) return n.as<bool>();
  } catch (const YAML::Exception&) {
  }
  fail(n, path, "expected true or false, got '" + (n.IsScalar() ? n.Scalar() : std::string("?")) + "'");
}

}  // namespace pcdino
