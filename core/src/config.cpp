#include "pcdino/core/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  std::string part;
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

// Reads typed values out of the YAML tree, remembering which keys the schema knows so that the rest can
// be reported as unknown, and saying where a bad value came from.
class Reader {
 public:
  Reader(std::string file, std::vector<ConfigOverride> overrides)
      : file_(std::move(file)), overrides_(std::move(overrides)) {}

  // "file:line:col: path" or "--set path=value: path".
  std::string where(const YAML::Node& node, const std::string& path) const {
    for (auto it = overrides_.rbegin(); it != overrides_.rend(); ++it) {
      if (path == it->path || path.rfind(it->path + ".", 0) == 0) return it->origin + ": " + path;
    }
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return file_ + ": " + path;
    return file_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": " + path;
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& what) const {
    throw ConfigError(where(node, path) + ": " + what);
  }

  // The sub-map `key` of `parent` (an undefined node if absent). Marks the section as known.
  YAML::Node section(const YAML::Node& parent, const std::string& parent_path, const std::string& key) {
    const std::string path = join(parent_path, key);
    known_.insert(path);
    if (!parent.IsDefined() || !parent.IsMap()) return YAML::Node();
    // A missing key yields an invalid node in yaml-cpp; hand out an undefined-but-valid one instead.
    const YAML::Node node = parent[key];
    if (!node.IsDefined() || node.IsNull()) return YAML::Node();
    if (!node.IsMap()) fail(node, path, "expected a mapping of keys");
    return node;
  }

  // Reads `key` of `parent` into `out` if present (leaves the default otherwise); `check` validates it.
  template <class T>
  void read(const YAML::Node& parent, const std::string& parent_path, const std::string& key, T& out,
            const std::function<std::string(const T&)>& check = nullptr) {
    const std::string path = join(parent_path, key);
    known_.insert(path);
    leaves_.insert(path);
    if (!parent.IsDefined() || !parent.IsMap()) return;
    const YAML::Node node = parent[key];
    if (!node.IsDefined() || node.IsNull()) return;
    T value = convert<T>(node, path);
    if (check) {
      const std::string problem = check(value);
      if (!problem.empty()) fail(node, path, problem + ", got '" + render(node) + "'");
    }
    out = std::move(value);
  }

  // Marks `path` as a key the schema reads itself (its value is not checked for unknown keys).
  void mark_leaf(const std::string& path) {
    known_.insert(path);
    leaves_.insert(path);
  }

  // Every key in the tree that the schema did not read is an error.
  void reject_unknown(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap() || leaves_.count(path) != 0) return;
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      const std::string child = join(path, key);
      if (known_.count(child) == 0) {
        fail(kv.first, child, "unknown key" + suggestion(child));
      }
      reject_unknown(kv.second, child);
    }
  }

  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

 private:
  static std::string render(const YAML::Node& node) {
    if (node.IsScalar()) return node.Scalar();
    YAML::Emitter out;
    out << YAML::Flow << node;
    return out.c_str();
  }

  // Edit distance <= 2 to a known key in the same section: "did you mean 'epochs'?"
  std::string suggestion(const std::string& unknown) const {
    const auto dot = unknown.rfind('.');
    const std::string prefix = dot == std::string::npos ? "" : unknown.substr(0, dot + 1);
    const std::string leaf = unknown.substr(prefix.size());
    std::string best;
    std::size_t best_distance = 3;
    for (const auto& known : known_) {
      if (known.rfind(prefix, 0) != 0 || known.find('.', prefix.size()) != std::string::npos) continue;
      const std::size_t d = edit_distance(leaf, known.substr(prefix.size()));
      if (d < best_distance) best_distance = d, best = known;
    }
    return best.empty() ? "" : " (did you mean '" + best + "'?)";
  }

  static std::size_t edit_distance(const std::string& a, const std::string& b) {
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

  template <class T>
  T convert(const YAML::Node& node, const std::string& path) const;

  std::string file_;
  std::vector<ConfigOverride> overrides_;
  std::set<std::string> known_;
  std::set<std::string> leaves_;
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

std::function<std::string(const int&)> at_least(int low) {
  return [low](const int& v) { return v >= low ? "" : "expected an integer >= " + std::to_string(low); };
}
std::function<std::string(const double&)> in_range(double low, bool low_open, double high, bool high_open) {
  return [=](const double& v) {
    const bool ok = (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
    if (ok) return std::string();
    std::ostringstream msg;
    msg << "expected a number in " << (low_open ? "(" : "[") << low << ", " << high
        << (high_open ? ")" : "]");
    return msg.str();
  };
}
std::function<std::string(const double&)> positive() {
  return [](const double& v) { return v > 0 ? "" : std::string("expected a number > 0"); };
}
std::function<std::string(const double&)> non_negative() {
  return [](const double& v) { return v >= 0 ? "" : std::string("expected a number >= 0"); };
}
std::function<std::string(const std::array<double, 2>&)> scale_pair() {
  return [](const std::array<double, 2>& v) {
    return v[0] > 0 && v[0] <= v[1] && v[1] <= 1 ? "" : std::string("expected 0 < low <= high <= 1");
  };
}
// A flag pcdino has no implementation for: only `supported` is accepted, so that a set key never does
// nothing.
std::function<std::string(const bool&)> not_implemented_unless(bool supported) {
  return [supported](const bool& v) {
    return v == supported ? std::string()
                          : std::string("not implemented in pcdino (only ") + (supported ? "true" : "false") +
                                " is supported)";
  };
}

std::function<std::string(const std::string&)> one_of(std::vector<std::string> allowed) {
  return [allowed](const std::string& v) {
    for (const auto& a : allowed) {
      if (v == a) return std::string();
    }
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return "expected one of " + list;
  };
}

void read_meta(Reader& r, const YAML::Node& root, MetaConfig& m) {
  const YAML::Node s = r.section(root, "", "meta");
  const std::string p = "meta";
  r.read<std::string>(s, p, "name_of_run", m.name_of_run, [](const std::string& v) {
    return !v.empty() && v.find('/') == std::string::npos
               ? ""
               : std::string("expected a non-empty name without '/'");
  });
  r.read<std::string>(s, p, "output_dir", m.output_dir);
  r.read<std::string>(s, p, "dataset_dir", m.dataset_dir);
  r.read<int>(s, p, "folder_depth_for_labels", m.folder_depth_for_labels, at_least(0));
  r.read<double>(s, p, "train_datasetsplit_fraction", m.train_datasetsplit_fraction,
                 in_range(0, true, 1, false));
  r.read<std::uint32_t>(s, p, "seed", m.seed);
  r.read<bool>(s, p, "images_are_RGB", m.images_are_RGB);
  r.read<std::map<int, std::string>>(s, p, "channel_dict", m.channel_dict);
  r.read<int>(s, p, "center_crop", m.center_crop, at_least(0));
  r.read<bool>(s, p, "skip_corrupt", m.skip_corrupt);

  // Each element is one combination: "01234" (scDINO's form), "0,1,10" or [0, 1, 10]; a bare string is
  // a single combination.
  const std::string key = "selected_channel_combination_per_run";
  const std::string path = p + "." + key;
  r.mark_leaf(path);
  if (!s.IsDefined() || !s.IsMap() || !s[key].IsDefined() || s[key].IsNull()) return;
  const YAML::Node node = s[key];
  std::vector<std::vector<int>> combos;
  if (node.IsScalar()) {
    combos.push_back(parse_combination(r, node, path));
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      combos.push_back(parse_combination(r, node[i], path + "[" + std::to_string(i) + "]"));
    }
  } else {
    r.fail(node, path, "expected a list of channel combinations like [\"01234\", \"0\"]");
  }
  m.selected_channel_combination_per_run = combos;
}

void read_train(Reader& r, const YAML::Node& root, TrainConfig& t) {
  const YAML::Node s = r.section(root, "", "train_scDINO");
  const std::string p = "train_scDINO";
  r.read<std::string>(s, p, "dino_vit_name", t.dino_vit_name);
  r.read<double>(s, p, "fraction_for_mean_std_calc", t.fraction_for_mean_std_calc,
                 in_range(0, true, 1, false));
  r.read<int>(s, p, "epochs", t.epochs, at_least(1));
  r.read<int>(s, p, "saveckp_freq", t.saveckp_freq, at_least(1));
  r.read<int>(s, p, "nnodes", t.nnodes, at_least(1));
  r.read<int>(s, p, "num_gpus", t.num_gpus, at_least(0));
  r.read<int>(s, p, "batch_size_per_gpu", t.batch_size_per_gpu, at_least(1));
  r.read<int>(s, p, "num_workers", t.num_workers, at_least(0));
  r.read<std::string>(s, p, "dist_url", t.dist_url);

  const YAML::Node h = r.section(s, p, "hyperparameters");
  const std::string hp = p + ".hyperparameters";
  DinoHyperparameters& d = t.hyperparameters;
  r.read<std::string>(h, hp, "arch", d.arch, one_of({"vit_tiny", "vit_small", "vit_base"}));
  r.read<int>(h, hp, "patch_size", d.patch_size, at_least(1));
  r.read<int>(h, hp, "out_dim", d.out_dim, at_least(1));
  r.read<bool>(h, hp, "norm_last_layer", d.norm_last_layer);
  r.read<double>(h, hp, "momentum_teacher", d.momentum_teacher, in_range(0, false, 1, false));
  r.read<bool>(h, hp, "use_bn_in_head", d.use_bn_in_head, not_implemented_unless(false));
  r.read<double>(h, hp, "warmup_teacher_temp", d.warmup_teacher_temp, positive());
  r.read<double>(h, hp, "teacher_temp", d.teacher_temp, positive());
  r.read<int>(h, hp, "warmup_teacher_temp_epochs", d.warmup_teacher_temp_epochs, at_least(0));
  r.read<bool>(h, hp, "use_fp16", d.use_fp16);
  r.read<double>(h, hp, "weight_decay", d.weight_decay, non_negative());
  r.read<double>(h, hp, "weight_decay_end", d.weight_decay_end, non_negative());
  r.read<double>(h, hp, "clip_grad", d.clip_grad, non_negative());
  r.read<int>(h, hp, "freeze_last_layer", d.freeze_last_layer, at_least(0));
  r.read<double>(h, hp, "lr", d.lr, positive());
  r.read<int>(h, hp, "warmup_epochs", d.warmup_epochs, at_least(0));
  r.read<double>(h, hp, "min_lr", d.min_lr, non_negative());
  r.read<std::string>(h, hp, "optimizer", d.optimizer, [](const std::string& v) {
    if (v == "adamw") return std::string();
    if (v == "sgd" || v == "lars") {
      return std::string("not implemented: pcdino trains with 'adamw' (DINO's default) only");
    }
    return std::string("expected 'adamw'");
  });
  r.read<double>(h, hp, "drop_path_rate", d.drop_path_rate, in_range(0, false, 1, true));
  r.read<std::array<double, 2>>(h, hp, "global_crops_scale", d.global_crops_scale, scale_pair());
  r.read<int>(h, hp, "local_crops_number", d.local_crops_number, at_least(0));
  r.read<std::array<double, 2>>(h, hp, "local_crops_scale", d.local_crops_scale, scale_pair());
  r.read<int>(h, hp, "global_crops_size", d.global_crops_size, at_least(1));
  r.read<int>(h, hp, "local_crops_size", d.local_crops_size, at_least(1));
  r.read<bool>(h, hp, "scale_augmentation_to_crop", d.scale_augmentation_to_crop);
  bool vflip = d.vflip == 1;
  const bool vflip_given = h.IsDefined() && h.IsMap() && h["vflip"].IsDefined() && !h["vflip"].IsNull();
  r.read<bool>(h, hp, "vflip", vflip);
  if (vflip_given) d.vflip = vflip ? 1 : 0;
  r.read<int>(h, hp, "depth", d.depth, at_least(0));
  r.read<int>(h, hp, "online_knn_every", d.online_knn_every, at_least(0));
  r.read<int>(h, hp, "online_knn_images", d.online_knn_images, at_least(10));
}

void read_downstream(Reader& r, const YAML::Node& root, DownstreamConfig& d) {
  const YAML::Node s = r.section(root, "", "downstream_analyses");
  const std::string p = "downstream_analyses";

  const YAML::Node c = r.section(s, p, "compute_cls_features");
  const std::string cp = p + ".compute_cls_features";
  auto& cls = d.compute_cls_features;
  r.read<bool>(c, cp, "normalize", cls.normalize);
  r.read<int>(c, cp, "num_gpus", cls.num_gpus, at_least(0));
  r.read<int>(c, cp, "batch_size_per_gpu", cls.batch_size_per_gpu, at_least(1));
  r.read<int>(c, cp, "num_workers", cls.num_workers, at_least(0));
  r.read<std::string>(c, cp, "checkpoint_key", cls.checkpoint_key, one_of({"teacher", "student"}));
  r.read<bool>(c, cp, "resize", cls.resize);
  r.read<int>(c, cp, "resize_length", cls.resize_length, at_least(1));
  r.read<bool>(c, cp, "use_weighted_sampler", cls.use_weighted_sampler);

  const YAML::Node a = r.section(s, p, "attention_visualisation");
  const std::string ap = p + ".attention_visualisation";
  auto& att = d.attention_visualisation;
  r.read<int>(a, ap, "num_images_per_class", att.num_images_per_class, at_least(0));
  r.read<bool>(a, ap, "resize_attention_image", att.resize_attention_image);
  r.read<int>(a, ap, "image_size", att.image_size, at_least(1));

  const YAML::Node k = r.section(r.section(s, p, "kNN"), p + ".kNN", "global");
  const std::string kp = p + ".kNN.global";
  r.read<std::vector<int>>(k, kp, "n_neighbors", d.knn.n_neighbors, [](const std::vector<int>& v) {
    if (v.empty()) return std::string("expected at least one k");
    for (int x : v) {
      if (x < 1) return std::string("expected every k >= 1");
    }
    return std::string();
  });
  r.read<double>(k, kp, "temperature", d.knn.temperature, positive());

  const YAML::Node u = r.section(s, p, "umap_eval");
  const std::string up = p + ".umap_eval";
  auto& umap = d.umap_eval;
  r.read<int>(u, up, "n_neighbors", umap.n_neighbors, at_least(2));
  r.read<double>(u, up, "min_dist", umap.min_dist, non_negative());
  r.read<int>(u, up, "n_components", umap.n_components, at_least(1));
  r.read<std::string>(u, up, "metric", umap.metric, one_of({"euclidean", "cosine"}));
  r.read<double>(u, up, "spread", umap.spread, positive());
  r.read<int>(u, up, "epochs", umap.epochs, at_least(1));
  r.read<bool>(u, up, "topometry_plots", umap.topometry_plots);
  r.read<int>(u, up, "random_state", umap.random_state, at_least(0));
}

// A value that goes into an #SBATCH line: one word, no quotes or comment signs.
std::function<std::string(const std::string&)> sbatch_word() {
  return [](const std::string& v) {
    return v.find_first_of(" \t\r\n'\"\\#$`") == std::string::npos
               ? ""
               : std::string("expected one word without spaces, quotes, '#', '$' or '`'");
  };
}

void read_slurm(Reader& r, const YAML::Node& root, SlurmConfig& s) {
  const YAML::Node n = r.section(root, "", "slurm");
  const std::string p = "slurm";
  r.read<std::string>(n, p, "partition", s.partition, sbatch_word());
  r.read<std::string>(n, p, "account", s.account, sbatch_word());
  r.read<std::string>(n, p, "qos", s.qos, sbatch_word());
  r.read<std::string>(n, p, "constraint", s.constraint, sbatch_word());
  r.read<bool>(n, p, "gpus", s.gpus);
  r.read<bool>(n, p, "exclusive", s.exclusive);
  r.read<int>(n, p, "cpus_per_task", s.cpus_per_task, at_least(0));
  r.read<std::string>(n, p, "mem", s.mem, [](const std::string& v) {
    static const std::regex size("[0-9]+[KMGT]?");
    return v.empty() || std::regex_match(v, size) ? "" : std::string("expected a size like 0, 64G or 500M");
  });
  r.read<int>(n, p, "cpu_tasks", s.cpu_tasks, at_least(1));
  r.read<std::string>(n, p, "launcher", s.launcher, one_of({"srun", "mpirun"}));
  r.read<std::string>(n, p, "mpi", s.mpi, sbatch_word());
  r.read<bool>(n, p, "requeue", s.requeue);
  r.read<int>(n, p, "signal_seconds", s.signal_seconds, at_least(0));
  r.read<std::map<std::string, std::string>>(
      n, p, "time_limit", s.time_limit, [](const std::map<std::string, std::string>& v) {
        // Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
        static const std::regex time("([0-9]+-)?[0-9]+(:[0-9]+){0,2}|UNLIMITED");
        for (const auto& [stage, limit] : v) {
          if (std::find_if(kPipelineStages.begin(), kPipelineStages.end(),
                           [&](const char* name) { return stage == name; }) == kPipelineStages.end()) {
            return "'" + stage + "' is not a stage (meanstd, train, extract, labels, knn, plots)";
          }
          if (!std::regex_match(limit, time)) {
            return "expected a Slurm time like 30:00, 04:00:00 or 2-00:00:00 for " + stage;
          }
        }
        return std::string();
      });
  r.read<std::map<std::string, std::string>>(n, p, "environment", s.environment,
                                             [](const std::map<std::string, std::string>& v) {
                                               static const std::regex name("[A-Za-z_][A-Za-z0-9_]*");
                                               for (const auto& [key, value] : v) {
                                                 if (!std::regex_match(key, name))
                                                   return "'" + key + "' is not an environment variable name";
                                                 if (value.find_first_of("\r\n") != std::string::npos)
                                                   return "the value of " + key + " spans lines";
                                               }
                                               return std::string();
                                             });
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
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError(name + ": expected a mapping with sections meta, train_scDINO, ...");
  for (const auto& o : overrides) apply_override(root, o);

  Reader reader(name, overrides);
  PipelineConfig config;
  config.source = name;
  read_meta(reader, root, config.meta);
  read_train(reader, root, config.train);
  read_downstream(reader, root, config.downstream);
  read_slurm(reader, root, config.slurm);
  reader.reject_unknown(root, "");
  return config;
}

PipelineConfig load_config(const std::string& path, const std::vector<ConfigOverride>& overrides) {
  return parse_config(read_file(path, "pipeline configuration"), path, overrides);
}

std::string dump_config(const PipelineConfig& c) {
  // Shortest text that reads back to the same double: 0.35, not 0.34999999999999998.
  const auto number = [](double v) { return fmt::format("{}", v); };
  YAML::Emitter out;
  out << YAML::Comment("Effective configuration of this run (defaults filled in), written by pcdino");
  out << YAML::BeginMap;

  const MetaConfig& m = c.meta;
  out << YAML::Key << "meta" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name_of_run" << YAML::Value << YAML::DoubleQuoted << m.name_of_run;
  out << YAML::Key << "output_dir" << YAML::Value << YAML::DoubleQuoted << m.output_dir;
  out << YAML::Key << "dataset_dir" << YAML::Value << YAML::DoubleQuoted << m.dataset_dir;
  out << YAML::Key << "folder_depth_for_labels" << YAML::Value << m.folder_depth_for_labels;
  out << YAML::Key << "train_datasetsplit_fraction" << YAML::Value << number(m.train_datasetsplit_fraction);
  out << YAML::Key << "seed" << YAML::Value << m.seed;
  out << YAML::Key << "images_are_RGB" << YAML::Value << m.images_are_RGB;
  out << YAML::Key << "channel_dict" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [index, name] : m.channel_dict) out << YAML::Key << index << YAML::Value << name;
  out << YAML::EndMap;
  out << YAML::Key << "selected_channel_combination_per_run" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& combo : m.selected_channel_combination_per_run) {
    out << YAML::Flow << combo;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "center_crop" << YAML::Value << m.center_crop;
  out << YAML::Key << "skip_corrupt" << YAML::Value << m.skip_corrupt;
  out << YAML::EndMap;

  const TrainConfig& t = c.train;
  out << YAML::Key << "train_scDINO" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dino_vit_name" << YAML::Value << t.dino_vit_name;
  out << YAML::Key << "fraction_for_mean_std_calc" << YAML::Value << number(t.fraction_for_mean_std_calc);
  out << YAML::Key << "epochs" << YAML::Value << t.epochs;
  out << YAML::Key << "saveckp_freq" << YAML::Value << t.saveckp_freq;
  out << YAML::Key << "nnodes" << YAML::Value << t.nnodes;
  out << YAML::Key << "num_gpus" << YAML::Value << t.num_gpus;
  out << YAML::Key << "batch_size_per_gpu" << YAML::Value << t.batch_size_per_gpu;
  out << YAML::Key << "num_workers" << YAML::Value << t.num_workers;
  out << YAML::Key << "dist_url" << YAML::Value << t.dist_url;
  const DinoHyperparameters& d = t.hyperparameters;
  out << YAML::Key << "hyperparameters" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "arch" << YAML::Value << d.arch;
  out << YAML::Key << "patch_size" << YAML::Value << d.patch_size;
  out << YAML::Key << "out_dim" << YAML::Value << d.out_dim;
  out << YAML::Key << "norm_last_layer" << YAML::Value << d.norm_last_layer;
  out << YAML::Key << "momentum_teacher" << YAML::Value << number(d.momentum_teacher);
  out << YAML::Key << "use_bn_in_head" << YAML::Value << d.use_bn_in_head;
  out << YAML::Key << "warmup_teacher_temp" << YAML::Value << number(d.warmup_teacher_temp);
  out << YAML::Key << "teacher_temp" << YAML::Value << number(d.teacher_temp);
  out << YAML::Key << "warmup_teacher_temp_epochs" << YAML::Value << d.warmup_teacher_temp_epochs;
  out << YAML::Key << "use_fp16" << YAML::Value << d.use_fp16;
  out << YAML::Key << "weight_decay" << YAML::Value << number(d.weight_decay);
  out << YAML::Key << "weight_decay_end" << YAML::Value << number(d.weight_decay_end);
  out << YAML::Key << "clip_grad" << YAML::Value << number(d.clip_grad);
  out << YAML::Key << "freeze_last_layer" << YAML::Value << d.freeze_last_layer;
  out << YAML::Key << "lr" << YAML::Value << number(d.lr);
  out << YAML::Key << "warmup_epochs" << YAML::Value << d.warmup_epochs;
  out << YAML::Key << "min_lr" << YAML::Value << number(d.min_lr);
  out << YAML::Key << "optimizer" << YAML::Value << d.optimizer;
  out << YAML::Key << "drop_path_rate" << YAML::Value << number(d.drop_path_rate);
  out << YAML::Key << "global_crops_scale" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << number(d.global_crops_scale[0]) << number(d.global_crops_scale[1]) << YAML::EndSeq;
  out << YAML::Key << "local_crops_number" << YAML::Value << d.local_crops_number;
  out << YAML::Key << "local_crops_scale" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << number(d.local_crops_scale[0]) << number(d.local_crops_scale[1]) << YAML::EndSeq;
  out << YAML::Key << "global_crops_size" << YAML::Value << d.global_crops_size;
  out << YAML::Key << "local_crops_size" << YAML::Value << d.local_crops_size;
  out << YAML::Key << "scale_augmentation_to_crop" << YAML::Value << d.scale_augmentation_to_crop;
  out << YAML::Key << "vflip" << YAML::Value;
  if (d.vflip < 0) {
    out << YAML::Null;
  } else {
    out << (d.vflip == 1);
  }
  out << YAML::Key << "depth" << YAML::Value << d.depth;
  out << YAML::Key << "online_knn_every" << YAML::Value << d.online_knn_every;
  out << YAML::Key << "online_knn_images" << YAML::Value << d.online_knn_images;
  out << YAML::EndMap << YAML::EndMap;

  const DownstreamConfig& ds = c.downstream;
  out << YAML::Key << "downstream_analyses" << YAML::Value << YAML::BeginMap;
  const auto& cls = ds.compute_cls_features;
  out << YAML::Key << "compute_cls_features" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "normalize" << YAML::Value << cls.normalize;
  out << YAML::Key << "num_gpus" << YAML::Value << cls.num_gpus;
  out << YAML::Key << "batch_size_per_gpu" << YAML::Value << cls.batch_size_per_gpu;
  out << YAML::Key << "num_workers" << YAML::Value << cls.num_workers;
  out << YAML::Key << "checkpoint_key" << YAML::Value << cls.checkpoint_key;
  out << YAML::Key << "resize" << YAML::Value << cls.resize;
  out << YAML::Key << "resize_length" << YAML::Value << cls.resize_length;
  out << YAML::Key << "use_weighted_sampler" << YAML::Value << cls.use_weighted_sampler;
  out << YAML::EndMap;
  const auto& att = ds.attention_visualisation;
  out << YAML::Key << "attention_visualisation" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "num_images_per_class" << YAML::Value << att.num_images_per_class;
  out << YAML::Key << "resize_attention_image" << YAML::Value << att.resize_attention_image;
  out << YAML::Key << "image_size" << YAML::Value << att.image_size;
  out << YAML::EndMap;
  out << YAML::Key << "kNN" << YAML::Value << YAML::BeginMap << YAML::Key << "global" << YAML::Value
      << YAML::BeginMap;
  out << YAML::Key << "n_neighbors" << YAML::Value << YAML::Flow << ds.knn.n_neighbors;
  out << YAML::Key << "temperature" << YAML::Value << number(ds.knn.temperature);
  out << YAML::EndMap << YAML::EndMap;
  const auto& u = ds.umap_eval;
  out << YAML::Key << "umap_eval" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "n_neighbors" << YAML::Value << u.n_neighbors;
  out << YAML::Key << "min_dist" << YAML::Value << number(u.min_dist);
  out << YAML::Key << "n_components" << YAML::Value << u.n_components;
  out << YAML::Key << "metric" << YAML::Value << u.metric;
  out << YAML::Key << "spread" << YAML::Value << number(u.spread);
  out << YAML::Key << "epochs" << YAML::Value << u.epochs;
  out << YAML::Key << "topometry_plots" << YAML::Value << u.topometry_plots;
  out << YAML::Key << "random_state" << YAML::Value << u.random_state;
  out << YAML::EndMap << YAML::EndMap;

  const SlurmConfig& sl = c.slurm;
  out << YAML::Key << "slurm" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "partition" << YAML::Value << YAML::DoubleQuoted << sl.partition;
  out << YAML::Key << "account" << YAML::Value << YAML::DoubleQuoted << sl.account;
  out << YAML::Key << "qos" << YAML::Value << YAML::DoubleQuoted << sl.qos;
  out << YAML::Key << "constraint" << YAML::Value << YAML::DoubleQuoted << sl.constraint;
  out << YAML::Key << "gpus" << YAML::Value << sl.gpus;
  out << YAML::Key << "exclusive" << YAML::Value << sl.exclusive;
  out << YAML::Key << "cpus_per_task" << YAML::Value << sl.cpus_per_task;
  out << YAML::Key << "mem" << YAML::Value << YAML::DoubleQuoted << sl.mem;
  out << YAML::Key << "cpu_tasks" << YAML::Value << sl.cpu_tasks;
  out << YAML::Key << "launcher" << YAML::Value << sl.launcher;
  out << YAML::Key << "mpi" << YAML::Value << sl.mpi;
  out << YAML::Key << "requeue" << YAML::Value << sl.requeue;
  out << YAML::Key << "signal_seconds" << YAML::Value << sl.signal_seconds;
  out << YAML::Key << "time_limit" << YAML::Value << YAML::BeginMap;
  for (const auto& [stage, limit] : sl.time_limit) out << YAML::Key << stage << YAML::Value << limit;
  out << YAML::EndMap;
  out << YAML::Key << "environment" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : sl.environment) {
    out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
  }
  out << YAML::EndMap << YAML::EndMap;

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace pcdino
