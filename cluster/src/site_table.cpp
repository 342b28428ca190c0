#include "site_table.hpp"

#include <utility>

namespace pcdino::cluster::site_rows {
namespace {

// "head_node.key_name" -> {"head_node", "key_name"}; "name" -> {"", "name"}.
std::pair<std::string, std::string> split_key(const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return {"", path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

}  // namespace

// The keys the table knows in `section`, for "unknown key" errors.
std::set<std::string> keys_in(const Table& table, const std::string& section) {
  std::set<std::string> keys;
  for (const Row& row : table) {
    const auto [outer, key] = split_key(row.info.path);
    if (!row.info.path.empty() && outer == section) keys.insert(key);
  }
  return keys;
}

// Reads the scope's mapping with its table: no key the table does not know, then each row in order.
void read_table(Scope& scope, SiteSpec& s) {
  scope.reader.only(scope.at(""), scope.path(""), keys_in(scope.table, ""));
  for (const Row& row : scope.table) {
    const auto [section, key] = split_key(row.info.path);
    row.read(scope,
             {row.info.path.empty() ? YAML::Node() : scope.at(section), key, scope.path(row.info.path)}, s);
  }
}

// A spec of defaults with one queue and one S3 access: the default column of the table (only read).
SiteSpec& defaults() {
  static SiteSpec spec = [] {
    SiteSpec d;
    d.queues.emplace_back();
    d.s3_access.emplace_back();
    return d;
  }();
  return spec;
}

bool always(const SiteSpec&) {
  return true;
}
bool never(const SiteSpec&) {
  return false;
}

// A string matching `pattern`; absent, the member keeps its default. `then` runs after it is read.
Row text(const char* path, Member<std::string> member, const char* pattern, const std::string& expected,
         Required required, const char* doc, Read then) {
  Row row{{path, "string", expected, member(defaults()), required(defaults()), doc}, nullptr};
  row.read = [=](Scope& scope, const At& at, SiteSpec& s) {
    const std::string value = scope.reader.text(at.parent, at.key, at.path, required(s), pattern, expected);
    if (!value.empty()) member(s) = value;
    if (then) then(scope, at, s);
  };
  return row;
}

// An integer in [low, high]; absent, `fallback` (default: the member's default).
Row integer(const char* path, Member<int> member, int low, int high, const char* doc, Read then,
            int (*fallback)(const SiteSpec&)) {
  Row row{{path, "integer", "[" + std::to_string(low) + ", " + std::to_string(high) + "]",
           std::to_string(member(defaults())), false, doc},
          nullptr};
  row.read = [=](Scope& scope, const At& at, SiteSpec& s) {
    member(s) =
        scope.reader.integer(at.parent, at.key, at.path, low, high, fallback ? fallback(s) : member(s));
    if (then) then(scope, at, s);
  };
  return row;
}

Row boolean(const char* path, Member<bool> member, const char* doc) {
  Row row{{path, "bool", "true or false", member(defaults()) ? "true" : "false", false, doc}, nullptr};
  row.read = [=](Scope& scope, const At& at, SiteSpec& s) {
    member(s) = scope.reader.boolean(at.parent, at.key, at.path, member(s));
  };
  return row;
}

// A mapping of keys (the rows below it whose paths it starts); `entered` runs once it is checked.
Row section(const char* path, Need need, const char* doc, Read entered) {
  Row row{{path, "mapping", "", "", need == Need::required, doc}, nullptr};
  row.read = [=](Scope& scope, const At& at, SiteSpec& s) {
    const bool required =
        need == Need::required || (need == Need::mapping_if_given && at.value().IsDefined());
    const YAML::Node node = scope.reader.map(at.parent, at.key, at.path, required);
    scope.reader.only(node, at.path, keys_in(scope.table, path));
    scope.enter(path, node);
    if (entered) entered(scope, at, s);
  };
  return row;
}

// A key read its own way (lists, a mapping's form).
Row other(SiteKey info, Read read, const Table* items, const char* item_path) {
  return {std::move(info), std::move(read), items, item_path};
}

// A check of keys read before it, reporting at whichever it names.
Row rule(std::function<void(Scope&, SiteSpec&)> check) {
  return {{}, [check](Scope& scope, const At&, SiteSpec& s) { check(scope, s); }};
}

// An s3://bucket/prefix without trailing '/' (commands.sh appends "/head-node.sh").
Read trim_slashes(Member<std::string> member) {
  return [member](Scope&, const At&, SiteSpec& s) {
    while (!member(s).empty() && member(s).back() == '/') member(s).pop_back();
  };
}

// One slurm.conf line: a mapping of Slurm parameters (their case as Slurm documents it) to scalar values.
SlurmLine slurm_line(const YamlReader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap() || node.size() == 0)
    r.fail(node, path, "expected a mapping of slurm.conf parameters to values (Key: value)");
  SlurmLine line;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    if (!kv.second.IsScalar() || kv.second.Scalar().empty())
      r.fail(kv.second, YamlReader::join(path, key), "expected a value for the slurm.conf parameter");
    line.emplace_back(key, kv.second.Scalar());
  }
  return line;
}

// Each element of a list of mappings, read with `items` after `each` has made its place in the spec.
void read_items(Scope& scope, const YAML::Node& list, const std::string& path, const Table& items,
                const std::string& not_a_mapping, const std::function<void(SiteSpec&)>& each, SiteSpec& s) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    Scope item(scope.reader, list[i], path + "[" + std::to_string(i) + "]", items);
    if (!list[i].IsMap()) item.fail(list[i], "", not_a_mapping);
    each(s);
    read_table(item, s);
  }
}

}  // namespace pcdino::cluster::site_rows
