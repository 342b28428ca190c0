#include "pcdino/core/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/stages.hpp"
#include "pcdino/core/yaml_reader.hpp"

namespace pcdino {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

std::string join(const std::string& a, const std::string& b) {
  return a.empty() ? b : a + "." + b;
}

// Reads typed values out of the YAML tree by key path, saying where a bad value came from. `keys` are
// the schema's paths: everything else in the tree is an unknown key.
class Reader {
 public:
  Reader(std::string file, std::vector<ConfigOverride> overrides, const std::vector<std::string>& keys)
      : file_(std::move(file)), overrides_(std::move(overrides)) {
    for (const auto& path : keys) {
      leaves_.insert(path);
      for (auto dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) {
        known_.insert(path.substr(0, dot));
      }
      known_.insert(path);
    }
  }

  // "file:line:col: path" or "--set path=value: path".
  std::string where(const YAML::Node& node, const std::string& path) const {
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
      if (path == it->path || path.rfind(it->path + ".", 0) == 0) return it->origin + ": " + path;
    }
    return yaml_location(file_, node) + ": " + path;
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& what) const {
    throw ConfigError(where(node, path) + ": " + what);
  }

  // The node at `path` below `root`; a null node when it or a section above it is absent or null.
  // A section that is not a mapping is an error.
  YAML::Node find(const YAML::Node& root, const std::string& path) const {
    YAML::Node node = root;
    std::string walked;
    for (const auto& part : split_path(path)) {
      if (!walked.empty() && !node.IsMap()) fail(node, walked, "expected a mapping of keys");
      walked = join(walked, part);
      // A missing key yields an invalid node in yaml-cpp; hand out an undefined-but-valid one instead.
      const YAML::Node child = std::as_const(node)[part];
      if (!child.IsDefined() || child.IsNull()) return YAML::Node();
      node.reset(child);
    }
    return node;
  }

  // Reads `path` into `out` if present (leaves the default otherwise); `check` validates it.
  template <class T>
  void read(const YAML::Node& root, const std::string& path, T& out,
            const std::function<std::string(const T&)>& check) const {
    const YAML::Node node = find(root, path);
    if (node.IsNull()) return;
    T value = convert<T>(node, path);
    if (check) {
      const std::string problem = check(value);
      if (!problem.empty()) fail(node, path, problem + ", got '" + render(node) + "'");
    }
    out = std::move(value);
  }

  // Every key in the tree that the schema does not know is an error.
  void reject_unknown(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap() || leaves_.count(path) != 0) return;
    for (const auto& kv : node) {
      // A complex key ("? " followed by a mapping or a list) names no setting.
      if (!kv.first.IsScalar()) fail(kv.first, path, "a key must be a name, got '" + render(kv.first) + "'");
      const std::string key = kv.first.Scalar();
      const std::string child = join(path, key);
      if (known_.count(child) == 0) {
        fail(kv.first, child, "unknown key" + suggestion(child));
      }
      reject_unknown(kv.second, child);
    }
  }

  template <class T>
  T convert(const YAML::Node& node, const std::string& path) const;

 private:
  static std::string render(const YAML::Node& node) {
    if (node.IsScalar()) return node.Scalar();
    YAML::Emitter out;
    out << YAML::Flow << node;
    return out.c_str();
  }

  // A known key in the same section within edit distance 2: "did you mean 'epochs'?"
  std::string suggestion(const std::string& unknown) const {
    const auto dot = unknown.rfind('.');
    const std::string prefix = dot == std::string::npos ? "" : unknown.substr(0, dot + 1);
    std::vector<std::string> siblings;
    for (const auto& known : known_) {
      if (known.rfind(prefix, 0) != 0 || known.find('.', prefix.size()) != std::string::npos) continue;
      siblings.push_back(known.substr(prefix.size()));
    }
    const std::string best = did_you_mean(unknown.substr(prefix.size()), siblings);
    return best.empty() ? "" : " (did you mean '" + prefix + best + "'?)";
  }

  std::string file_;
  std::vector<ConfigOverride> overrides_;
  std::set<std::string> known_;   // every key path and every section above one
  std::set<std::string> leaves_;  // the key paths (a mapping value below one is the key's own)
};

template <>
std::string Reader::convert<std::string>(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) fail(node, path, "expected a string, got '" + render(node) + "'");
  return node.Scalar();
}

template <>
long long Reader::convert<long long>(const YAML::Node& node, const std::string& path) const {
  try {
    if (node.IsScalar()) return node.as<long long>();
  } catch (const YAML::Exception&) {
  }
  fail(node, path, "expected an integer, got '" + render(node) + "'");
}

template <>
int Reader::convert<int>(const YAML::Node& node, const std::string& path) const {
  const long long v = convert<long long>(node, path);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(node, path, "integer out of range, got '" + render(node) + "'");
  }
  return static_cast<int>(v);
}

template <>
std::uint32_t Reader::convert<std::uint32_t>(const YAML::Node& node, const std::string& path) const {
  const long long v = convert<long long>(node, path);
  if (v < 0 || v > 0xffffffffLL)
    fail(node, path, "expected an integer in [0, 4294967295], got '" + render(node) + "'");
  return static_cast<std::uint32_t>(v);
}

template <>
double Reader::convert<double>(const YAML::Node& node, const std::string& path) const {
  try {
    if (node.IsScalar()) {
      const double v = node.as<double>();
      if (std::isfinite(v)) return v;
    }
  } catch (const YAML::Exception&) {
  }
  fail(node, path, "expected a finite number, got '" + render(node) + "'");
}

template <>
bool Reader::convert<bool>(const YAML::Node& node, const std::string& path) const {
  // The workshop's file writes some flags as 0/1 (`images_are_RGB: 0`).
  if (node.IsScalar()) {
    if (node.Scalar() == "0") return false;
    if (node.Scalar() == "1") return true;
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
    }
  }
  fail(node, path, "expected true or false, got '" + render(node) + "'");
}

template <>
std::array<double, 2> Reader::convert<std::array<double, 2>>(const YAML::Node& node,
                                                             const std::string& path) const {
  // `!!python/tuple [0.14, 1.0]` in the workshop's file is a plain sequence to yaml-cpp.
  if (!node.IsSequence() || node.size() != 2) {
    fail(node, path, "expected a pair [low, high], got '" + render(node) + "'");
  }
  return {convert<double>(node[0], path + "[0]"), convert<double>(node[1], path + "[1]")};
}

template <>
std::vector<int> Reader::convert<std::vector<int>>(const YAML::Node& node, const std::string& path) const {
  if (!node.IsSequence()) fail(node, path, "expected a list of integers, got '" + render(node) + "'");
  std::vector<int> values;
  for (std::size_t i = 0; i < node.size(); ++i) {
    values.push_back(convert<int>(node[i], path + "[" + std::to_string(i) + "]"));
  }
  return values;
}

template <>
std::vector<std::string> Reader::convert<std::vector<std::string>>(const YAML::Node& node,
                                                                   const std::string& path) const {
  if (!node.IsSequence()) fail(node, path, "expected a list of strings, got '" + render(node) + "'");
  std::vector<std::string> values;
  for (std::size_t i = 0; i < node.size(); ++i) {
    values.push_back(convert<std::string>(node[i], path + "[" + std::to_string(i) + "]"));
  }
  return values;
}

template <>
std::map<int, std::string> Reader::convert<std::map<int, std::string>>(const YAML::Node& node,
                                                                       const std::string& path) const {
  if (!node.IsMap()) fail(node, path, "expected a mapping {index: name}, got '" + render(node) + "'");
  std::map<int, std::string> values;
  for (const auto& kv : node) {
    const int index = convert<int>(kv.first, path);
    const std::string name = convert<std::string>(kv.second, path + "." + std::to_string(index));
    if (index < 0) fail(kv.first, path, "channel index must be >= 0, got '" + std::to_string(index) + "'");
    if (name.empty() || name.find_first_of("_/") != std::string::npos) {
      fail(kv.second, path + "." + std::to_string(index),
           "channel names must be non-empty without '_' or '/' (they become parts of file names), got '" +
               name + "'");
    }
    values[index] = name;
  }
  return values;
}

template <>
std::map<std::string, std::string> Reader::convert<std::map<std::string, std::string>>(
    const YAML::Node& node, const std::string& path) const {
  if (!node.IsMap()) fail(node, path, "expected a mapping {name: value}, got '" + render(node) + "'");
  std::map<std::string, std::string> values;
  for (const auto& kv : node) {
    const std::string key = convert<std::string>(kv.first, path);
    values[key] = convert<std::string>(kv.second, path + "." + key);
  }
  return values;
}

// One combination: "01234" (a digit per channel, as scDINO writes it), "0,1,2,10", or [0, 1, 2].
std::vector<int> parse_combination(const Reader& reader, const YAML::Node& node, const std::string& path) {
  std::vector<int> channels;
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      try {
        channels.push_back(node[i].as<int>());
      } catch (const YAML::Exception&) {
        reader.fail(node[i], path, "expected a channel index, got '" + node[i].Scalar() + "'");
      }
    }
  } else if (node.IsScalar()) {
    const std::string text = node.Scalar();
    if (text.find(',') != std::string::npos) {
      std::stringstream in(text);
      std::string part;
      while (std::getline(in, part, ',')) {
        try {
          std::size_t used = 0;
          channels.push_back(std::stoi(part, &used));
          if (part.find_first_not_of(" ", used) != std::string::npos) throw std::invalid_argument(part);
        } catch (const std::exception&) {
          reader.fail(node, path, "expected channel indices like '0,1,2', got '" + text + "'");
        }
      }
    } else {
      for (char c : text) {
        if (c < '0' || c > '9')
          reader.fail(node, path, "expected channel digits like '01234', got '" + text + "'");
        channels.push_back(c - '0');
      }
    }
  }
  if (channels.empty()) reader.fail(node, path, "a channel combination needs at least one channel");
  std::set<int> unique(channels.begin(), channels.end());
  if (unique.size() != channels.size()) reader.fail(node, path, "a channel is selected twice");
  for (int c : channels) {
    if (c < 0) reader.fail(node, path, "channel indices must be >= 0");
  }
  return channels;
}

template <>
std::vector<std::vector<int>> Reader::convert<std::vector<std::vector<int>>>(const YAML::Node& node,
                                                                             const std::string& path) const {
  // Each element is one combination: "01234" (scDINO's form), "0,1,10" or [0, 1, 10]; a bare string is
  // a single combination.
  std::vector<std::vector<int>> combos;
  if (node.IsScalar()) {
    combos.push_back(parse_combination(*this, node, path));
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      combos.push_back(parse_combination(*this, node[i], path + "[" + std::to_string(i) + "]"));
    }
  } else {
    fail(node, path, "expected a list of channel combinations like [\"01234\", \"0\"]");
  }
  return combos;
}

template <>
std::optional<bool> Reader::convert<std::optional<bool>>(const YAML::Node& node,
                                                         const std::string& path) const {
  return convert<bool>(node, path);  // null never gets here: an absent or null key keeps "unset"
}

// --- Checks: what a key accepts beyond its type, as a rule for the schema's table and a test. ---

template <class T>
struct Check {
  std::string rule;                           // "> 0", "one of srun, mpirun"
  std::function<std::string(const T&)> test;  // "" when the value is accepted, else what was expected
};

// Any value of the type: the YAML converter's own check is the only one.
Check<std::string> any_string() {
  return {};
}
Check<bool> any_bool() {
  return {};
}
Check<int> at_least(int low) {
  return {">= " + std::to_string(low),
          [low](const int& v) { return v >= low ? "" : "expected an integer >= " + std::to_string(low); }};
}
Check<double> in_range(double low, bool low_open, double high, bool high_open) {
  const std::string rule = fmt::format("{}{}, {}{}", low_open ? "(" : "[", low, high, high_open ? ")" : "]");
  return {rule, [=](const double& v) {
            const bool ok = (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
            return ok ? std::string() : "expected a number in " + rule;
          }};
}
Check<double> positive() {
  return {"> 0", [](const double& v) { return v > 0 ? "" : std::string("expected a number > 0"); }};
}
Check<double> non_negative() {
  return {">= 0", [](const double& v) { return v >= 0 ? "" : std::string("expected a number >= 0"); }};
}
Check<std::array<double, 2>> scale_pair() {
  return {"0 < low <= high <= 1", [](const std::array<double, 2>& v) {
            return v[0] > 0 && v[0] <= v[1] && v[1] <= 1 ? "" : std::string("expected 0 < low <= high <= 1");
          }};
}
Check<std::string> one_of(const std::vector<std::string>& allowed) {
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  return {"one of " + list, [allowed, list](const std::string& v) {
            return std::find(allowed.begin(), allowed.end(), v) != allowed.end() ? ""
                                                                                 : "expected one of " + list;
          }};
}
// A key pcdino has no implementation for: only `supported` (the reference's default) is accepted, so that
// a key that is set never does nothing. `what` says what is missing.
template <class T>
Check<T> only(T supported, const std::string& shown, const std::string& what) {
  return {"only " + shown + " (" + what + ")", [=](const T& v) {
            return v == supported
                       ? std::string()
                       : "not implemented in pcdino (" + what + "): only " + shown + " is accepted";
          }};
}
// --- What a value written into a batch script cannot hold. ---

// A character that a reader of the generated batch script takes for syntax, not as itself. sbatch splits each
// #SBATCH line into words with get_argument() (Slurm's src/sbatch/opt.c, line 473 at slurm-25-11-1-1; alike
// in 22.05): whitespace ends a word, quotes group words and are taken out, a backslash escapes the next
// character and is taken out, and an unquoted '#' ends the line's options. --output and --error are filename
// patterns (sbatch(1) "filename pattern"; expand_stdio_fields() in src/common/print_fields.c, line 608): '%'
// begins one, and a backslash anywhere turns them all off (the scripts' %j with them). The last row is the
// shell's: `pcdino submit --dry-run` prints sbatch commands that leave words holding '$' to it (shell_join()
// in sbatch/src/submitter.cpp).
struct ScriptSyntax {
  const char* characters;
  const char* named;    // in "without whitespace, quotes, ..."
  const char* read_as;  // after "holds '#', which "
  bool paths_only;      // read only in the file names of --output and --error, not in every word
};
const ScriptSyntax kScriptSyntax[] = {
    {" \t\n\v\f\r", "whitespace", "ends a word of an #SBATCH line (sbatch splits the line at whitespace)",
     false},
    {"'\"", "quotes", "sbatch takes out of an #SBATCH word (quotes group words)", false},
    {"\\", "'\\'",
     "sbatch takes out of an #SBATCH word (it escapes the next character); in --output it also turns off "
     "the filename patterns (%j)",
     false},
    {"#", "'#'", "begins a comment in an #SBATCH line (sbatch ignores the rest of the line)", false},
    {"%", "'%'", "begins a filename pattern in --output and --error (%j, %x, %%: Slurm replaces it)", true},
    {"$`", "'$' or '`'", "a shell expands in the commands pcdino prints (pcdino submit --dry-run)", false},
};

// `c` as a message names it.
std::string shown(char c) {
  switch (c) {
    case ' ':
      return "a space";
    case '\t':
      return "a tab";
    case '\n':
      return "a line break";
    case '\'':
      return "\"'\"";
    default:
      return std::isprint(static_cast<unsigned char>(c)) ? fmt::format("'{}'", c)
                                                         : fmt::format("the character {:#04x}", c);
  }
}

// The first character of `v` that a row of kScriptSyntax names (in a path every row, else those read in any
// word) as "holds '#', which begins a comment ...", or "" when there is none.
std::string script_syntax_in(const std::string& v, bool path) {
  for (char c : v) {
    for (const auto& row : kScriptSyntax) {
      if ((path || !row.paths_only) && c != '\0' && std::strchr(row.characters, c) != nullptr) {
        return "holds " + shown(c) + ", which " + row.read_as;
      }
    }
  }
  return "";
}

// What script_syntax_in() looks for: "whitespace, quotes, ..." (in a path every row, else those read in any
// word).
std::string script_syntax_named(bool path) {
  std::string named;
  for (const auto& row : kScriptSyntax) {
    if (path || !row.paths_only) named += (named.empty() ? "" : ", ") + std::string(row.named);
  }
  return named;
}

// A value that goes into an #SBATCH line: one word that sbatch reads as it is.
Check<std::string> sbatch_word() {
  return {"one word", [](const std::string& v) {
            const std::string problem = script_syntax_in(v, false);
            return problem.empty() ? problem
                                   : problem + "; expected one word without " + script_syntax_named(false);
          }};
}
// meta.name_of_run: a folder's name in the run folder's path (#SBATCH --output, --chdir) and the jobs' name
// (--job-name).
Check<std::string> run_name() {
  const std::string rule = "a name without '/', " + script_syntax_named(true);
  return {rule, [rule](const std::string& v) {
            if (v.empty()) return std::string("expected a non-empty name");
            const std::string problem = v.find('/') != std::string::npos ? "holds '/', which makes it a path"
                                                                         : script_syntax_in(v, true);
            return problem.empty() ? problem : problem + "; expected " + rule;
          }};
}

// srun's --mpi plugins (`srun --mpi=list`; Slurm's doc/html/mpi_guide.shtml), by where Slurm builds them, at
// the tags slurm-22-05-1-1 (Debian 12's Slurm, the local test cluster's) to slurm-25-11-1-1
// (ParallelCluster 3.15's and 3.16's), lines at the latter. A cluster has the pmix_vN of the PMIx versions it
// was built with, and pmix, a link to the newest of them. (pmix_v1 ended with 21.08; srun takes "openmpi" as
// none, unlisted.)
struct MpiPlugin {
  const char* name;
  const char* releases;
  const char* source;
};
const MpiPlugin kMpiPlugins[] = {
    {"none", "22.05 on",
     "src/plugins/mpi/none to 23.02; from 23.11 src/interfaces/mpi.c:271 (_is_none_plugin(), no plugin)"},
    {"pmi2", "22.05 on", "src/plugins/mpi/Makefile.am:3 (SUBDIRS)"},
    {"pmix", "22.05 on", "src/plugins/mpi/pmix/Makefile.am:116 (mpi_pmix.so, a link to the newest pmix_vN)"},
    {"pmix_v2", "22.05 on", "src/plugins/mpi/pmix/Makefile.am:36 (PMIx 2)"},
    {"pmix_v3", "22.05 on", "src/plugins/mpi/pmix/Makefile.am:47 (PMIx 3)"},
    {"pmix_v4", "22.05 on", "src/plugins/mpi/pmix/Makefile.am:58 (PMIx 4)"},
    {"pmix_v5", "22.05 on", "src/plugins/mpi/pmix/Makefile.am:69 (PMIx 5)"},
    {"pmix_v6", "25.05.2 on", "src/plugins/mpi/pmix/Makefile.am:80 (PMIx 6; commit 483f5f29a7)"},
    {"cray_shasta", "22.05 on", "src/plugins/mpi/Makefile.am:3 (SUBDIRS)"},
};

// slurm.mpi: a name from kMpiPlugins; it is a word of the srun line.
Check<std::string> mpi_plugin() {
  std::string list;
  for (const auto& plugin : kMpiPlugins) list += (list.empty() ? "" : ", ") + std::string(plugin.name);
  return {"one of " + list, [list](const std::string& v) {
            const bool known = std::any_of(std::begin(kMpiPlugins), std::end(kMpiPlugins),
                                           [&](const MpiPlugin& plugin) { return v == plugin.name; });
            return known ? std::string() : "expected one of Slurm's MPI plugins (" + list + ")";
          }};
}

bool is_variable_name(const std::string& v) {
  static const std::regex name("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(v, name);
}
Check<std::vector<std::string>> variable_names() {
  return {"variable names", [](const std::vector<std::string>& v) {
            for (const auto& name : v) {
              if (!is_variable_name(name)) return "'" + name + "' is not an environment variable name";
            }
            return std::string();
          }};
}
// Words that go onto a command line: each a non-empty sbatch_word().
Check<std::vector<std::string>> sbatch_words() {
  return {"words without spaces or quotes", [](const std::vector<std::string>& v) {
            for (const auto& word : v) {
              const std::string problem =
                  word.empty() ? "expected a non-empty word" : sbatch_word().test(word);
              if (!problem.empty()) return problem + " ('" + word + "')";
            }
            return std::string();
          }};
}
// Pyxis's --container-image: an image file by its absolute path, or a reference to import.
Check<std::string> container_image() {
  return {"\"\", an absolute .sqsh path or [USER@][REGISTRY#]IMAGE[:TAG]", [](const std::string& v) {
            if (v.empty()) return std::string();
            // The registry's '#' goes onto the srun line (quoted there), never into an #SBATCH line.
            if (std::count(v.begin(), v.end(), '#') > 1)
              return std::string("expected one '#' (after REGISTRY)");
            std::string word = v;
            if (const auto hash = word.find('#'); hash != std::string::npos) word[hash] = '/';
            const std::string problem = sbatch_word().test(word);
            if (!problem.empty()) return problem;
            if (v.find(',') != std::string::npos) return std::string("expected one image, not a list");
            if (v.front() == '.')
              return std::string("expected an absolute path (the job's folder is not this one)");
            return std::string();
          }};
}
// Pyxis's --container-mounts, one mount an entry: SRC[:DST[:FLAGS]], both paths absolute.
Check<std::vector<std::string>> container_mounts() {
  return {"SRC[:DST[:FLAGS]] entries", [](const std::vector<std::string>& v) {
            static const std::regex mount("(/[^:,\\s'\"]*)(:(/[^:,\\s'\"]*)(:[a-z+]+)?)?");
            for (const auto& m : v) {
              if (!std::regex_match(m, mount)) {
                return "expected SRC[:DST[:FLAGS]] with absolute paths and no commas ('" + m + "')";
              }
            }
            return std::string();
          }};
}
// A path every node resolves alike, whatever the job's working directory.
Check<std::string> absolute_path() {
  return {"\"\" or an absolute path", [](const std::string& v) {
            return v.empty() || v.front() == '/' ? "" : std::string("expected an absolute path (or \"\")");
          }};
}

// --- Emitting a value as the dump writes it. ---

void emit(YAML::Emitter& out, const std::string& v) {
  out << YAML::DoubleQuoted << v;
}
void emit(YAML::Emitter& out, int v) {
  out << v;
}
void emit(YAML::Emitter& out, std::uint32_t v) {
  out << v;
}
void emit(YAML::Emitter& out, double v) {
  out << fmt::format("{}", v);  // the shortest text that reads back to the same double: 0.35
}
void emit(YAML::Emitter& out, bool v) {
  out << v;
}
void emit(YAML::Emitter& out, const std::optional<bool>& v) {
  if (v) {
    out << *v;
  } else {
    out << YAML::Null;
  }
}
void emit(YAML::Emitter& out, const std::array<double, 2>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (double x : v) emit(out, x);
  out << YAML::EndSeq;
}
void emit(YAML::Emitter& out, const std::vector<int>& v) {
  out << YAML::Flow << v;
}
void emit(YAML::Emitter& out, const std::vector<std::string>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& x : v) emit(out, x);
  out << YAML::EndSeq;
}
void emit(YAML::Emitter& out, const std::vector<std::vector<int>>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& combo : v) out << YAML::Flow << combo;
  out << YAML::EndSeq;
}
void emit(YAML::Emitter& out, const std::map<int, std::string>& v) {
  out << YAML::Flow << YAML::BeginMap;
  for (const auto& [index, name] : v) out << YAML::Key << index << YAML::Value << YAML::DoubleQuoted << name;
  out << YAML::EndMap;
}
void emit(YAML::Emitter& out, const std::map<std::string, std::string>& v) {
  out << YAML::Flow << YAML::BeginMap;
  for (const auto& [name, value] : v) out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
  out << YAML::EndMap;
}

// The type column of the schema's table.
template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, std::string>) return "string";
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::uint32_t>) return "integer";
  if constexpr (std::is_same_v<T, double>) return "number";
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, std::optional<bool>>) return "bool or null";
  if constexpr (std::is_same_v<T, std::array<double, 2>>) return "[low, high]";
  if constexpr (std::is_same_v<T, std::vector<int>>) return "list of integers";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "list of strings";
  if constexpr (std::is_same_v<T, std::vector<std::vector<int>>>) return "list of channel combinations";
  if constexpr (std::is_same_v<T, std::map<int, std::string>>) return "{index: name}";
  if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) return "{name: value}";
}

// --- The schema: each key once. ---

struct Entry {
  ConfigKey info;  // default_value filled in from a default PipelineConfig
  std::function<void(const Reader&, const YAML::Node&, PipelineConfig&)> read;
  std::function<void(YAML::Emitter&, const PipelineConfig&)> write;
};

template <class T>
Entry key(const char* path, T& (*member)(PipelineConfig&), Check<T> check, const char* doc,
          bool locates = false) {
  Entry e;
  e.info = {path, type_name<T>(), check.rule, "", doc, locates};
  e.read = [path = std::string(path), member, test = check.test](const Reader& r, const YAML::Node& root,
                                                                 PipelineConfig& c) {
    r.read<T>(root, path, member(c), test);
  };
  // The member function hands out a mutable reference; writing only reads through it.
  e.write = [member](YAML::Emitter& out, const PipelineConfig& c) {
    emit(out, member(const_cast<PipelineConfig&>(c)));
  };
  return e;
}

// The member a key reads, as a function pointer the table can hold.
#define PCDINO_MEMBER(expr)          \
  +[](PipelineConfig & c) -> auto& { \
    return c.expr;                   \
  }

// `meta`: the run's folder, its images and their channels.
std::vector<Entry> meta_keys() {
  return {
      key("meta.name_of_run", PCDINO_MEMBER(meta.name_of_run), run_name(),
          "the run's folder under output_dir: every stage writes into {output_dir}/{name_of_run}/", true),
      key("meta.output_dir", PCDINO_MEMBER(meta.output_dir), any_string(), "where runs' folders are made",
          true),
      key("meta.dataset_dir", PCDINO_MEMBER(meta.dataset_dir), any_string(),
          "the images: class folders (`{class}/{image}.tif`) or a packed dataset (pack.json)"),
      key("meta.folder_depth_for_labels", PCDINO_MEMBER(meta.folder_depth_for_labels), at_least(0),
          "which folder names an image's class: 0 its parent, 1 the one above, ..."),
      key("meta.train_datasetsplit_fraction", PCDINO_MEMBER(meta.train_datasetsplit_fraction),
          in_range(0, true, 1, false),
          "share of the images that training sees; the rest is held out for kNN"),
      key("meta.seed", PCDINO_MEMBER(meta.seed), {"[0, 4294967295]", nullptr},  // the converter checks it
          "seed of the split (numpy's permutation), the initial weights and the augmentations"),
      key("meta.images_are_RGB", PCDINO_MEMBER(meta.images_are_RGB), any_bool(),
          "3-channel photographs: DINO's colour augmentations instead of scDINO's per-channel brightness"),
      key("meta.channel_dict", PCDINO_MEMBER(meta.channel_dict),
          {"index >= 0; names without '_' or '/'", nullptr},  // the converter checks it
          "channel index -> name (no '_' or '/': names become parts of file names)"),
      key("meta.selected_channel_combination_per_run",
          PCDINO_MEMBER(meta.selected_channel_combination_per_run),
          {"indices >= 0, each once per combination", nullptr},
          "channel combinations (\"01234\", \"0,1,10\" or [0, 1]); stages use the first; empty = all"),
      key("meta.center_crop", PCDINO_MEMBER(meta.center_crop), at_least(0),
          "side in pixels of a centre crop taken from every image first; 0 = none"),
      key("meta.skip_corrupt", PCDINO_MEMBER(meta.skip_corrupt), any_bool(),
          "mean/std and training go on past an unreadable image, naming it (mean/std leaves it out; training "
          "takes another training image in its place) instead of stopping"),
  };
}

// `train_scDINO`: the training job's size, data and checkpoints.
std::vector<Entry> train_keys() {
  return {
      key("train_scDINO.dino_vit_name", PCDINO_MEMBER(train.dino_vit_name), any_string(),
          "the model's folder: scDINO_ViTs/{dino_vit_name}/ holds checkpoints and logs"),
      key("train_scDINO.fraction_for_mean_std_calc", PCDINO_MEMBER(train.fraction_for_mean_std_calc),
          in_range(0, true, 1, false), "share of the training images sampled for the mean/std stage"),
      key("train_scDINO.epochs", PCDINO_MEMBER(train.epochs), at_least(1), "training epochs"),
      key("train_scDINO.time_budget_minutes", PCDINO_MEMBER(train.time_budget_minutes), non_negative(),
          "pcdino: > 0 trains the steps that fit this many minutes, estimated after a measured stretch of "
          "the first epoch and finally at its end (never more than epochs); every schedule ends at the last "
          "of them; 0 = all epochs"),
      key("train_scDINO.saveckp_freq", PCDINO_MEMBER(train.saveckp_freq), at_least(1),
          "keep checkpoint{epoch:04}.pth every this many epochs (checkpoint.pth is written every epoch)"),
      key("train_scDINO.nnodes", PCDINO_MEMBER(train.nnodes), at_least(1), "nodes of the training job"),
      key("train_scDINO.num_gpus", PCDINO_MEMBER(train.num_gpus), at_least(0),
          "GPUs (ranks) per training node; ranks per node when slurm.gpus is false"),
      key("train_scDINO.batch_size_per_gpu", PCDINO_MEMBER(train.batch_size_per_gpu), at_least(1),
          "images per rank and step; the learning rate scales with the global batch"),
      key("train_scDINO.num_workers", PCDINO_MEMBER(train.num_workers), at_least(0),
          "loader threads per rank (--loader-threads overrides)"),
      key("train_scDINO.dist_url", PCDINO_MEMBER(train.dist_url),
          only<std::string>("env://", "env://", "ranks come from the launcher's environment"),
          "how ranks find each other"),
      key("train_scDINO.stage_dataset", PCDINO_MEMBER(train.stage_dataset), absolute_path(),
          "pcdino: a folder on each node's local disk (the site's local_scratch) where the training and "
          "CLS-feature jobs copy the packed dataset once per node and job, SHA-256 verified, and read it "
          "there instead of the shared filesystem every epoch; \"\" = read in place",
          true),
      key("train_scDINO.keep_staged_dataset", PCDINO_MEMBER(train.keep_staged_dataset), any_bool(),
          "keep the staged copy after the job's stage succeeds (the next stage or job on the node reuses "
          "it); "
          "false removes it then (a job that stops to be requeued always keeps it)",
          true),
  };
}

// `train_scDINO.hyperparameters`: the model, the teacher, the optimiser and the crops.
std::vector<Entry> hyperparameter_keys() {
  return {
      key("train_scDINO.hyperparameters.arch", PCDINO_MEMBER(train.hyperparameters.arch),
          one_of({"vit_tiny", "vit_small", "vit_base"}), "the ViT (DINO's vision_transformer.py)"),
      key("train_scDINO.hyperparameters.patch_size", PCDINO_MEMBER(train.hyperparameters.patch_size),
          at_least(1), "side of a patch in pixels"),
      key("train_scDINO.hyperparameters.out_dim", PCDINO_MEMBER(train.hyperparameters.out_dim), at_least(1),
          "dimension of the DINO head's output (prototypes)"),
      key("train_scDINO.hyperparameters.norm_last_layer",
          PCDINO_MEMBER(train.hyperparameters.norm_last_layer), any_bool(),
          "weight-normalise the head's last layer with its norm fixed at 1"),
      key("train_scDINO.hyperparameters.momentum_teacher",
          PCDINO_MEMBER(train.hyperparameters.momentum_teacher), in_range(0, false, 1, false),
          "start of the teacher's EMA momentum, raised to 1 on a cosine"),
      key("train_scDINO.hyperparameters.use_bn_in_head", PCDINO_MEMBER(train.hyperparameters.use_bn_in_head),
          only(false, "false", "no batch norm in the head"), "batch norm in the DINO head's MLP"),
      key("train_scDINO.hyperparameters.warmup_teacher_temp",
          PCDINO_MEMBER(train.hyperparameters.warmup_teacher_temp), positive(),
          "teacher temperature at the start of its warm-up"),
      key("train_scDINO.hyperparameters.teacher_temp", PCDINO_MEMBER(train.hyperparameters.teacher_temp),
          positive(), "teacher temperature after the warm-up"),
      key("train_scDINO.hyperparameters.warmup_teacher_temp_epochs",
          PCDINO_MEMBER(train.hyperparameters.warmup_teacher_temp_epochs), at_least(0),
          "epochs of the teacher temperature's linear warm-up"),
      key("train_scDINO.hyperparameters.use_fp16", PCDINO_MEMBER(train.hyperparameters.use_fp16), any_bool(),
          "mixed precision: on GPUs bfloat16 from compute capability 8.0, else float16 with loss scaling; "
          "on CPUs with AMX or AVX512_BF16 bfloat16 autocast (others stay in float32)"),
      key("train_scDINO.hyperparameters.weight_decay", PCDINO_MEMBER(train.hyperparameters.weight_decay),
          non_negative(), "AdamW weight decay at the start, cosine to weight_decay_end"),
      key("train_scDINO.hyperparameters.weight_decay_end",
          PCDINO_MEMBER(train.hyperparameters.weight_decay_end), non_negative(), "weight decay at the end"),
      key("train_scDINO.hyperparameters.clip_grad", PCDINO_MEMBER(train.hyperparameters.clip_grad),
          non_negative(), "per-parameter gradient norm clip; 0 = none"),
      key("train_scDINO.hyperparameters.freeze_last_layer",
          PCDINO_MEMBER(train.hyperparameters.freeze_last_layer), at_least(0),
          "epochs in which the head's last layer is not updated"),
      key("train_scDINO.hyperparameters.lr", PCDINO_MEMBER(train.hyperparameters.lr), positive(),
          "peak learning rate at a global batch of 256 (scaled linearly with the global batch)"),
      key("train_scDINO.hyperparameters.warmup_epochs", PCDINO_MEMBER(train.hyperparameters.warmup_epochs),
          at_least(0), "epochs of the learning rate's linear warm-up"),
      key("train_scDINO.hyperparameters.min_lr", PCDINO_MEMBER(train.hyperparameters.min_lr), non_negative(),
          "learning rate at the end of the cosine"),
      key("train_scDINO.hyperparameters.optimizer", PCDINO_MEMBER(train.hyperparameters.optimizer),
          only<std::string>("adamw", "adamw", "sgd and lars: pcdino trains with AdamW, DINO's default"),
          "the optimiser"),
      key("train_scDINO.hyperparameters.drop_path_rate", PCDINO_MEMBER(train.hyperparameters.drop_path_rate),
          in_range(0, false, 1, true), "stochastic depth of the student"),
      key("train_scDINO.hyperparameters.global_crops_scale",
          PCDINO_MEMBER(train.hyperparameters.global_crops_scale), scale_pair(),
          "area share of the image a global crop takes"),
      key("train_scDINO.hyperparameters.local_crops_number",
          PCDINO_MEMBER(train.hyperparameters.local_crops_number), at_least(0), "local crops per image"),
      key("train_scDINO.hyperparameters.local_crops_scale",
          PCDINO_MEMBER(train.hyperparameters.local_crops_scale), scale_pair(),
          "area share of the image a local crop takes"),
      key("train_scDINO.hyperparameters.global_crops_size",
          PCDINO_MEMBER(train.hyperparameters.global_crops_size), at_least(1),
          "pcdino: side of a global crop in pixels (DINO: 224)"),
      key("train_scDINO.hyperparameters.local_crops_size",
          PCDINO_MEMBER(train.hyperparameters.local_crops_size), at_least(1),
          "pcdino: side of a local crop in pixels (DINO: 96)"),
      key("train_scDINO.hyperparameters.scale_augmentation_to_crop",
          PCDINO_MEMBER(train.hyperparameters.scale_augmentation_to_crop), any_bool(),
          "pcdino: multiply augmentation parameters given in pixels (the blur's sigma and kernel) by crop "
          "size / 224 (global) or / 96 (local), so small crops are blurred as much, relative to their size, "
          "as DINO's; nothing changes at 224/96 px"),
      key("train_scDINO.hyperparameters.vflip", PCDINO_MEMBER(train.hyperparameters.vflip), {},
          "pcdino: vertical flips with p 0.5; null = the pipeline's reference (scDINO's channel-wise "
          "pipeline flips, DINO's RGB pipeline does not); false for images with an up and a down"),
      key("train_scDINO.hyperparameters.depth", PCDINO_MEMBER(train.hyperparameters.depth), at_least(0),
          "pcdino: transformer blocks; 0 = the arch's 12 (fewer train more steps per hour on CPUs)"),
      key("train_scDINO.hyperparameters.online_knn_every",
          PCDINO_MEMBER(train.hyperparameters.online_knn_every), at_least(0),
          "pcdino: every N epochs (and before the first, after the last) DINO's weighted kNN (k 20, T 0.07) "
          "on the teacher's CLS features of online_knn_images held-out images; 0 = off"),
      key("train_scDINO.hyperparameters.online_knn_images",
          PCDINO_MEMBER(train.hyperparameters.online_knn_images), at_least(10),
          "pcdino: held-out images of the online kNN (80% bank, 20% queries)"),
  };
}

// `downstream_analyses`: the CLS features, attention maps, kNN and UMAP.
std::vector<Entry> downstream_keys() {
  return {
      key("downstream_analyses.compute_cls_features.normalize",
          PCDINO_MEMBER(downstream.compute_cls_features.normalize), any_bool(),
          "L2-normalise the CLS features before writing them"),
      key("downstream_analyses.compute_cls_features.num_gpus",
          PCDINO_MEMBER(downstream.compute_cls_features.num_gpus), at_least(0),
          "GPUs (ranks) of the feature job; ranks when slurm.gpus is false"),
      key("downstream_analyses.compute_cls_features.batch_size_per_gpu",
          PCDINO_MEMBER(downstream.compute_cls_features.batch_size_per_gpu), at_least(1),
          "images per forward"),
      key("downstream_analyses.compute_cls_features.num_workers",
          PCDINO_MEMBER(downstream.compute_cls_features.num_workers), at_least(0),
          "loader threads per rank (--loader-threads overrides)"),
      key("downstream_analyses.compute_cls_features.checkpoint_key",
          PCDINO_MEMBER(downstream.compute_cls_features.checkpoint_key), one_of({"teacher", "student"}),
          "which network of the checkpoint embeds"),
      key("downstream_analyses.compute_cls_features.resize",
          PCDINO_MEMBER(downstream.compute_cls_features.resize), any_bool(),
          "resize images to resize_length before embedding"),
      key("downstream_analyses.compute_cls_features.resize_length",
          PCDINO_MEMBER(downstream.compute_cls_features.resize_length), at_least(1), "side in pixels"),
      key("downstream_analyses.compute_cls_features.use_weighted_sampler",
          PCDINO_MEMBER(downstream.compute_cls_features.use_weighted_sampler),
          only(false, "false", "features embed every held-out image once"), "class-balanced sampling"),
      key("downstream_analyses.attention_visualisation.num_images_per_class",
          PCDINO_MEMBER(downstream.attention_visualisation.num_images_per_class),
          only(1, "1", "no attention-map stage yet"), "attention maps drawn per class"),
      key("downstream_analyses.attention_visualisation.resize_attention_image",
          PCDINO_MEMBER(downstream.attention_visualisation.resize_attention_image),
          only(true, "true", "no attention-map stage yet"), "resize the image behind the attention map"),
      key("downstream_analyses.attention_visualisation.image_size",
          PCDINO_MEMBER(downstream.attention_visualisation.image_size),
          only(480, "480", "no attention-map stage yet"), "side of the attention map's image"),
      key("downstream_analyses.kNN.global.n_neighbors", PCDINO_MEMBER(downstream.knn.n_neighbors),
          {"every k >= 1",
           [](const std::vector<int>& v) {
             if (v.empty()) return std::string("expected at least one k");
             for (int x : v) {
               if (x < 1) return std::string("expected every k >= 1");
             }
             return std::string();
           }},
          "the k of DINO's weighted kNN, each evaluated"),
      key("downstream_analyses.kNN.global.temperature", PCDINO_MEMBER(downstream.knn.temperature), positive(),
          "temperature T of the votes exp(similarity / T)"),
      key("downstream_analyses.umap_eval.n_neighbors", PCDINO_MEMBER(downstream.umap_eval.n_neighbors),
          at_least(2), "UMAP's neighbourhood size"),
      key("downstream_analyses.umap_eval.min_dist", PCDINO_MEMBER(downstream.umap_eval.min_dist),
          non_negative(), "UMAP's minimum distance"),
      key("downstream_analyses.umap_eval.n_components", PCDINO_MEMBER(downstream.umap_eval.n_components),
          at_least(1), "UMAP's output dimensions (the plots stage draws 2)"),
      key("downstream_analyses.umap_eval.metric", PCDINO_MEMBER(downstream.umap_eval.metric),
          one_of({"euclidean", "cosine"}), "distance of the kNN graph"),
      key("downstream_analyses.umap_eval.spread", PCDINO_MEMBER(downstream.umap_eval.spread), positive(),
          "UMAP's spread"),
      key("downstream_analyses.umap_eval.epochs", PCDINO_MEMBER(downstream.umap_eval.epochs), at_least(1),
          "UMAP's optimisation epochs"),
      key("downstream_analyses.umap_eval.topometry_plots",
          PCDINO_MEMBER(downstream.umap_eval.topometry_plots), only(false, "false", "no TopOMetry"),
          "TopOMetry's plots"),
      key("downstream_analyses.umap_eval.random_state", PCDINO_MEMBER(downstream.umap_eval.random_state),
          at_least(0), "seed of UMAP's layout"),
  };
}

// `slurm`: how each stage's job is asked for and launched.
std::vector<Entry> slurm_keys() {
  // The kinds pcdino cannot compute on, from core/accelerator.hpp's table.
  static const std::string accelerator_doc =
      "pcdino: the device of training and features: auto (CUDA if visible, else CPU), nvidia, cpu; " +
      unsupported_accelerator_names(" and ") + " are refused (no LibTorch backend)";
  return {
      key("slurm.partition", PCDINO_MEMBER(slurm.partition), sbatch_word(), "pcdino: sbatch --partition"),
      key("slurm.account", PCDINO_MEMBER(slurm.account), sbatch_word(), "pcdino: sbatch --account"),
      key("slurm.qos", PCDINO_MEMBER(slurm.qos), sbatch_word(), "pcdino: sbatch --qos"),
      key("slurm.constraint", PCDINO_MEMBER(slurm.constraint), sbatch_word(),
          "pcdino: sbatch --constraint (e.g. an instance type's node feature)"),
      key("slurm.gpus", PCDINO_MEMBER(slurm.gpus), any_bool(),
          "pcdino: ask for num_gpus GPUs per node (--gpus-per-node); false on CPU-only clusters"),
      key("slurm.exclusive", PCDINO_MEMBER(slurm.exclusive), any_bool(),
          "pcdino: --exclusive for training and features, as the workshop's scripts"),
      key("slurm.accelerator", PCDINO_MEMBER(slurm.accelerator),
          {"one of auto, nvidia, cpu",
           [](const std::string& v) {
             const std::string refused = unsupported_accelerator(v);
             if (!refused.empty()) return refused;
             return v == "auto" || v == "nvidia" || v == "cpu"
                        ? std::string()
                        : std::string("expected one of auto, nvidia, cpu");
           }},
          accelerator_doc.c_str()),
      key("slurm.cpus_per_task", PCDINO_MEMBER(slurm.cpus_per_task), at_least(0),
          "pcdino: --cpus-per-task, also each rank's --threads and OpenBLAS threads; 0 = Slurm's default"),
      key("slurm.mem", PCDINO_MEMBER(slurm.mem),
          {"a size like 64G",
           [](const std::string& v) {
             static const std::regex size("[0-9]+[KMGT]?");
             return v.empty() || std::regex_match(v, size)
                        ? ""
                        : std::string("expected a size like 0, 64G or 500M");
           }},
          "pcdino: --mem per node (\"0\" = all of the node's memory)"),
      key("slurm.cpu_tasks", PCDINO_MEMBER(slurm.cpu_tasks), at_least(1),
          "pcdino: MPI ranks of the mean/std stage"),
      key("slurm.launcher", PCDINO_MEMBER(slurm.launcher), one_of({"srun", "mpirun"}),
          "pcdino: srun --mpi={mpi}, or mpirun inside the allocation"),
      key("slurm.mpi", PCDINO_MEMBER(slurm.mpi), mpi_plugin(), "pcdino: srun's --mpi plugin"),
      key("slurm.container_image", PCDINO_MEMBER(slurm.container_image), container_image(),
          "Pyxis: srun --container-image of every stage but the doctor: an enroot .sqsh on the shared "
          "filesystem or [USER@][REGISTRY#]IMAGE[:TAG]; \"\" = the nodes' own pcdino"),
      key("slurm.container_mounts", PCDINO_MEMBER(slurm.container_mounts), container_mounts(),
          "Pyxis: --container-mounts, each SRC[:DST[:FLAGS]]; the data, run folder and configuration "
          "must be inside at their own paths"),
      key("slurm.requeue", PCDINO_MEMBER(slurm.requeue), any_bool(),
          "pcdino: training checkpoints and requeues itself on preemption or its time limit"),
      key("slurm.signal_seconds", PCDINO_MEMBER(slurm.signal_seconds), at_least(0),
          "pcdino: SIGUSR1 this many seconds before the time limit (--signal=USR1@N)"),
      key("slurm.max_restarts", PCDINO_MEMBER(slurm.max_restarts), at_least(0),
          "pcdino: restarts of the training job after a node or rank fault (requeue) before it fails "
          "for good"),
      key("slurm.time_limit", PCDINO_MEMBER(slurm.time_limit),
          {"stage: Slurm time",
           [](const std::map<std::string, std::string>& v) {
             // Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
             static const std::regex time("([0-9]+-)?[0-9]+(:[0-9]+){0,2}|UNLIMITED");
             for (const auto& [stage, limit] : v) {
               if (find_stage(stage) == nullptr) {
                 return "'" + stage + "' is not a stage (" + stage_names() + ")";
               }
               if (!std::regex_match(limit, time)) {
                 return "expected a Slurm time like 30:00, 04:00:00 or 2-00:00:00 for " + stage;
               }
             }
             return std::string();
           }},
          "pcdino: --time per stage, e.g. {train: \"2-00:00:00\"}"),
      key("slurm.environment", PCDINO_MEMBER(slurm.environment),
          {"variable names",
           [](const std::map<std::string, std::string>& v) {
             for (const auto& [key, value] : v) {
               if (!is_variable_name(key)) return "'" + key + "' is not an environment variable name";
               if (value.find_first_of("\r\n") != std::string::npos)
                 return "the value of " + key + " spans lines";
             }
             return std::string();
           }},
          "pcdino: exported in the training and feature jobs unless spank_pcdino.so is in the plugstack"),
  };
}

// `doctor`: the node health checks that run before training.
std::vector<Entry> doctor_keys() {
  return {
      key("doctor.enabled", PCDINO_MEMBER(doctor.enabled), any_bool(),
          "pcdino: `pcdino submit` runs `pcdino doctor` on train_scDINO.nnodes nodes first and training "
          "waits for it (afterok): an unhealthy node stops the chain before training starts"),
      key("doctor.shared_dir", PCDINO_MEMBER(doctor.shared_dir), absolute_path(),
          "pcdino: shared directory each node writes to and reads back; \"\" = the run folder"),
      key("doctor.probe_mb", PCDINO_MEMBER(doctor.probe_mb), positive(),
          "pcdino: MB each node writes to and reads from the shared directory"),
      key("doctor.min_write_mb_s", PCDINO_MEMBER(doctor.min_write_mb_s), non_negative(),
          "pcdino: floor of each node's write throughput to it (MB/s); 0 = not judged"),
      key("doctor.min_read_mb_s", PCDINO_MEMBER(doctor.min_read_mb_s), non_negative(),
          "pcdino: floor of each node's read throughput from it (MB/s); 0 = not judged"),
      key("doctor.scratch", PCDINO_MEMBER(doctor.scratch), absolute_path(),
          "pcdino: node-local scratch directory whose free space is checked; \"\" = not checked"),
      key("doctor.min_scratch_gib", PCDINO_MEMBER(doctor.min_scratch_gib), non_negative(),
          "pcdino: free space the scratch directory needs (GiB)"),
      key("doctor.expect_env", PCDINO_MEMBER(doctor.expect_env), variable_names(),
          "pcdino: variables every task must have (a SPANK profile's), beside slurm.environment's names"),
      key("doctor.expect_providers", PCDINO_MEMBER(doctor.expect_providers), sbatch_words(),
          "pcdino: libfabric providers fi_getinfo must report on every node ([efa] on EFA instance types)"),
      key("doctor.min_busbw_gbps", PCDINO_MEMBER(doctor.min_busbw_gbps), non_negative(),
          "pcdino: floor of the MPI allreduce bus bandwidth between the nodes at 16 MiB (GB/s); "
          "0 = not judged"),
      key("doctor.nccl", PCDINO_MEMBER(doctor.nccl), any_bool(),
          "pcdino: on nodes with NVIDIA devices, the CUDA runtime and NCCL must load and show the GPUs, and "
          "NCCL's allreduce over every GPU of every node is measured"),
      key("doctor.min_nccl_busbw_gbps", PCDINO_MEMBER(doctor.min_nccl_busbw_gbps), non_negative(),
          "pcdino: floor of the NCCL allreduce bus bandwidth at 1 GiB (GB/s); 0 = the published floor of the "
          "nodes' instance type (from Slurm's node features, as ParallelCluster sets them), if there is one"),
      key("doctor.manifest", PCDINO_MEMBER(doctor.manifest), absolute_path(),
          "pcdino: image manifest (`pcdino ami`'s) each node's versions must match (NVIDIA driver, CUDA, "
          "NCCL on GPU nodes; libfabric, EFA installer, pcdino; Open MPI when it gives a number); a node "
          "without it is not checked; \"\" = never"),
      key("doctor.drain", PCDINO_MEMBER(doctor.drain), any_bool(),
          "pcdino: drain each unhealthy node (scontrol update State=DRAIN; needs Slurm operator rights)"),
  };
}

// `monitoring`: the Prometheus metrics every stage's processes write.
std::vector<Entry> monitoring_keys() {
  return {
      key("monitoring.textfile_dir", PCDINO_MEMBER(monitoring.textfile_dir), absolute_path(),
          "pcdino: the node exporter's textfile-collector directory where every stage's processes write "
          "their Prometheus metrics (pcdino_JOBID_RANK.prom); no metrics on a node without it; \"\" = none"),
      key("monitoring.interval_seconds", PCDINO_MEMBER(monitoring.interval_seconds), positive(),
          "pcdino: seconds between rewrites of each process's metrics file (its heartbeat)"),
  };
}

std::vector<Entry> make_schema() {
  // DINO's main_dino.py and scDINO's pipeline file define the keys and defaults of `meta`, `train_scDINO`
  // and `downstream_analyses`; the keys marked "pcdino" and the `slurm` section are this project's.
  // The dump, the hash and the docs walk the keys in this order.
  std::vector<Entry> keys;
  for (const auto section : {meta_keys, train_keys, hyperparameter_keys, downstream_keys, slurm_keys,
                             doctor_keys, monitoring_keys}) {
    std::vector<Entry> rows = section();
    keys.insert(keys.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  const PipelineConfig defaults;
  for (auto& e : keys) {
    YAML::Emitter out;
    e.write(out, defaults);
    e.info.default_value = out.c_str();
  }
  return keys;
}

#undef PCDINO_MEMBER

const std::vector<Entry>& schema() {
  static const std::vector<Entry> entries = make_schema();
  return entries;
}

const Entry& entry(const std::string& path) {
  for (const auto& e : schema()) {
    if (e.info.path == path) return e;
  }
  throw ConfigError("'" + path + "' is not a configuration key");
}

void apply_override(YAML::Node& root, const ConfigOverride& o) {
  YAML::Node value;
  try {
    value = o.literal ? YAML::Node(o.value) : YAML::Load(o.value);
  } catch (const YAML::Exception& e) {
    throw ConfigError(o.origin + ": cannot parse value '" + o.value + "': " + e.msg);
  }
  const auto parts = split_path(o.path);
  if (parts.empty()) throw ConfigError(o.origin + ": empty key path");
  // Walk down with fresh handles; YAML::Node assignment would otherwise alias nodes.
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(chain.back()[parts[i]]);  // operator= would write into the tree
    }
    if (!next.IsMap()) throw ConfigError(o.origin + ": '" + parts[i] + "' is not a section");
    chain.push_back(next);
  }
  chain.back()[parts.back()] = value;
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> k;
    for (const auto& e : schema()) k.push_back(e.info);
    return k;
  }();
  return keys;
}

const ConfigKey& config_key(const std::string& path) {
  return entry(path).info;
}

std::string config_value(const PipelineConfig& config, const std::string& path) {
  YAML::Emitter out;
  entry(path).write(out, config);
  return out.c_str();
}

std::string config_schema_markdown() {
  // A '|' inside a cell would end it.
  const auto cell = [](const std::string& text) {
    std::string escaped;
    for (char ch : text) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return escaped;
  };
  std::string table = "| key | type | default | accepts | what it does |\n|---|---|---|---|---|\n";
  for (const auto& k : config_schema()) {
    table += "| `" + k.path + "` | " + cell(k.type) + " | `" + cell(k.default_value) + "` | " +
             cell(k.allowed) + " | " + cell(k.doc) + " |\n";
  }
  return table;
}

std::string sbatch_path_problem(const std::string& path) {
  return script_syntax_in(path, true);
}

std::string PipelineConfig::run_dir() const {
  std::string dir = meta.output_dir;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + meta.name_of_run;
}

const std::vector<int>& PipelineConfig::selected_channels(std::size_t index) const {
  static const std::vector<int> all;
  const auto& combos = meta.selected_channel_combination_per_run;
  if (combos.empty() && index == 0) return all;
  if (index >= combos.size()) {
    throw ConfigError(source + ": meta.selected_channel_combination_per_run: no combination number " +
                      std::to_string(index) + " (the file lists " + std::to_string(combos.size()) + ")");
  }
  return combos[index];
}

std::string PipelineConfig::channel_combination_name(std::size_t index) const {
  const auto& channels = selected_channels(index);
  if (channels.empty()) return "all";
  const bool digits = std::all_of(channels.begin(), channels.end(), [](int c) { return c < 10; });
  std::string name;
  for (int c : channels) name += (digits || name.empty() ? "" : ",") + std::to_string(c);
  return name;
}

ConfigOverride parse_override(const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set " + assignment + ": expected KEY.PATH=VALUE, e.g. --set meta.seed=3");
  }
  return {assignment.substr(0, eq), assignment.substr(eq + 1), "--set " + assignment, false};
}

PipelineConfig parse_config(const std::string& yaml_text, const std::string& name,
                            const std::vector<ConfigOverride>& overrides) {
  YAML::Node root = load_yaml(yaml_text, name);
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError(name + ": expected a mapping with sections meta, train_scDINO, ...");
  for (const auto& o : overrides) apply_override(root, o);

  std::vector<std::string> paths;
  for (const auto& k : config_schema()) paths.push_back(k.path);
  const Reader reader(name, overrides, paths);
  PipelineConfig config;
  config.source = name;
  for (const auto& e : schema()) e.read(reader, root, config);
  reader.reject_unknown(root, "");  // after the values, so that a bad override is named first
  return config;
}

PipelineConfig load_config(const std::string& path, const std::vector<ConfigOverride>& overrides) {
  return parse_config(read_file(path, "pipeline configuration"), path, overrides);
}

std::string dump_config(const PipelineConfig& c) {
  YAML::Emitter out;
  out << YAML::Comment("Effective configuration of this run (defaults filled in), written by pcdino");
  out << YAML::BeginMap;
  std::vector<std::string> open;  // the sections the emitter is inside
  for (const auto& e : schema()) {
    std::vector<std::string> sections = split_path(e.info.path);
    const std::string leaf = sections.back();
    sections.pop_back();
    std::size_t shared = 0;
    while (shared < open.size() && shared < sections.size() && open[shared] == sections[shared]) ++shared;
    for (; open.size() > shared; open.pop_back()) out << YAML::EndMap;
    for (; open.size() < sections.size(); open.push_back(sections[open.size()])) {
      out << YAML::Key << sections[open.size()] << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << leaf << YAML::Value;
    e.write(out, c);
  }
  for (; !open.empty(); open.pop_back()) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace pcdino
