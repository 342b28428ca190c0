// How the site spec is read (cluster/src/site.cpp): a table of rows, each a key with its type, default and
// documentation, a section, or a rule that checks keys read before it; a Scope reads one mapping with its
// table. site.cpp holds the tables, site_checks.cpp the rules that check keys against each other.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pcdino/cluster/site.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino::cluster::site_rows {

struct Row;
using Table = std::vector<Row>;

/// One mapping read with its table (the spec, a queue, an S3 access, monitoring.prometheus), and the
/// sections of it entered so far.
class Scope {
 public:
  Scope(const YamlReader& r, const YAML::Node& node, std::string path, const Table& table)
      : reader(r), table(table), path_(std::move(path)) {
    sections_.emplace("", node);
  }

  const YamlReader& reader;
  const Table& table;

  /// The mapping at `section` ("" = the scope's own), once its row has entered it.
  YAML::Node at(const std::string& section) const { return sections_.at(section); }
  void enter(const std::string& section, const YAML::Node& node) { sections_.emplace(section, node); }
  /// The key path of `rel` in messages: "queues[0].name".
  std::string path(const std::string& rel) const {
    return rel.empty() ? path_ : YamlReader::join(path_, rel);
  }
  /// Throws ConfigError "file:line:col: path: what" at `node`.
  [[noreturn]] void fail(const YAML::Node& node, const std::string& rel, const std::string& what) const {
    reader.fail(node, path(rel), what);
  }

 private:
  std::string path_;
  std::map<std::string, YAML::Node> sections_;
};

/// Where a row's key is: the mapping holding it, the key, its path in messages.
struct At {
  YAML::Node parent;
  std::string key;
  std::string path;
  YAML::Node value() const { return parent[key]; }
};

/// Reads a row's key and lands it in the spec; or, for a section, enters it; or, for a rule, checks keys.
using Read = std::function<void(Scope&, const At&, SiteSpec&)>;

/// A key or section of the table's mapping (info.path relative to it), or a rule (info.path "") that checks
/// the keys read before it. Rows are read in order: a key's default may depend on a key above it.
struct Row {
  SiteKey info;
  Read read;
  const Table* items = nullptr;  ///< the table of each element of a list (or of a mapping's form)
  const char* item_path = "";    ///< "[]" for a list's elements
};

/// The keys the table knows in `section`, for "unknown key" errors.
std::set<std::string> keys_in(const Table& table, const std::string& section);

/// Reads the scope's mapping with its table: no key the table does not know, then each row in order.
/// Throws ConfigError naming the file, line and key.
void read_table(Scope& scope, SiteSpec& s);

/// A spec of defaults with one queue and one S3 access: the default column of the table (only read).
SiteSpec& defaults();

template <class T>
using Member = T& (*)(SiteSpec&);
/// The member a key lands in, as a function pointer the table can hold.
#define PCDINO_SITE(expr)      \
  +[](SiteSpec & s) -> auto& { \
    return s.expr;             \
  }
using Required = bool (*)(const SiteSpec&);
bool always(const SiteSpec&);
bool never(const SiteSpec&);

/// A string matching `pattern`; absent, the member keeps its default. `then` runs after it is read.
Row text(const char* path, Member<std::string> member, const char* pattern, const std::string& expected,
         Required required, const char* doc, Read then = nullptr);

/// An integer in [low, high]; absent, `fallback` (default: the member's default).
Row integer(const char* path, Member<int> member, int low, int high, const char* doc, Read then = nullptr,
            int (*fallback)(const SiteSpec&) = nullptr);

/// true or false; absent, the member's default.
Row boolean(const char* path, Member<bool> member, const char* doc);

enum class Need { optional, required, mapping_if_given };

/// A mapping of keys (the rows below it whose paths it starts); `entered` runs once it is checked.
Row section(const char* path, Need need, const char* doc, Read entered = nullptr);

/// A key read its own way (lists, a mapping's form).
Row other(SiteKey info, Read read, const Table* items = nullptr, const char* item_path = "");

/// A check of keys read before it, reporting at whichever it names.
Row rule(std::function<void(Scope&, SiteSpec&)> check);

/// An s3://bucket/prefix without trailing '/' (commands.sh appends "/head-node.sh").
Read trim_slashes(Member<std::string> member);

/// One slurm.conf line: a mapping of Slurm parameters (their case as Slurm documents it) to scalar values.
/// Throws ConfigError at `path` for anything else.
SlurmLine slurm_line(const YamlReader& r, const YAML::Node& node, const std::string& path);

/// Each element of a list of mappings, read with `items` after `each` has made its place in the spec.
void read_items(Scope& scope, const YAML::Node& list, const std::string& path, const Table& items,
                const std::string& not_a_mapping, const std::function<void(SiteSpec&)>& each, SiteSpec& s);

}  // namespace pcdino::cluster::site_rows
