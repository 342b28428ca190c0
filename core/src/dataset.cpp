#include "pcdino/core/dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "pcdino/core/config.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/core/packed.hpp"

namespace pcdino {

namespace fs = std::filesystem;

struct Dataset::Impl {
  std::string dir;
  std::vector<std::string> classes;
  std::vector<std::string> labels;
  std::vector<std::string> paths;  // relative
  std::vector<int> class_index;
  std::vector<int> label_index;
  std::unique_ptr<PackedReader> packed;
};

namespace {

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".tif" || ext == ".tiff" || ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// The files of one class folder in the order of Python's sorted(os.walk(folder)): folders by path, files
// by name within each folder.
std::vector<std::string> walk_sorted(const fs::path& class_dir, const fs::path& root) {
  std::vector<std::pair<std::string, std::string>> found;  // (folder, file name)
  std::error_code ec;
  for (fs::recursive_directory_iterator it(class_dir, fs::directory_options::follow_directory_symlink, ec),
       end;
       it != end; it.increment(ec)) {
    if (ec) throw NoInputError("cannot list '" + it->path().string() + "': " + ec.message());
    // is_regular_file() uses the type readdir() reported: no stat() per file unless it is a link.
    if (it->is_regular_file(ec) && is_image_file(it->path())) {
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
    }
  }
  if (ec) throw NoInputError("cannot list '" + class_dir.string() + "': " + ec.message());
  std::sort(found.begin(), found.end());
  // Every folder lies under root: the relative path is a suffix, no path arithmetic per file needed.
  const std::size_t prefix = root.string().size() + (root.string().back() == '/' ? 0 : 1);
  std::vector<std::string> relative;
  relative.reserve(found.size());
  for (const auto& [folder, name] : found) relative.push_back(folder.substr(prefix) + "/" + name);
  return relative;
}

void assign_labels(Dataset::Impl& d, int depth) {
  std::vector<std::string> names(d.paths.size());
  for (std::size_t i = 0; i < d.paths.size(); ++i) {
    std::vector<std::string> parts;
    for (const auto& part : fs::path(d.paths[i])) parts.push_back(part.string());
    // parts = [class, sub..., file]; the parent folder is parts[size - 2].
    const int parent = static_cast<int>(parts.size()) - 2;
    if (parent - depth < 0) {
      throw ConfigError("meta.folder_depth_for_labels is " + std::to_string(depth) + " but '" + d.paths[i] +
                        "' has only " + std::to_string(parent + 1) + " folder(s) above it in '" + d.dir +
                        "'");
    }
    names[i] = parts[static_cast<std::size_t>(parent - depth)];
  }
  std::set<std::string> unique(names.begin(), names.end());
  d.labels.assign(unique.begin(), unique.end());
  std::map<std::string, int> index;
  for (std::size_t k = 0; k < d.labels.size(); ++k) index[d.labels[k]] = static_cast<int>(k);
  d.label_index.resize(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) d.label_index[i] = index[names[i]];
}

}  // namespace

Dataset Dataset::open(const std::string& dataset_dir, int folder_depth_for_labels) {
  auto d = std::make_shared<Impl>();
  d->dir = dataset_dir;
  std::error_code ec;
  if (dataset_dir.empty()) throw ConfigError("meta.dataset_dir is not set");
  if (!fs::is_directory(dataset_dir, ec)) {
    throw NoInputError("meta.dataset_dir '" + dataset_dir + "' is not a directory" +
                       (fs::exists(dataset_dir, ec) ? "" : " (it does not exist)"));
  }
  if (fs::exists(fs::path(dataset_dir) / kPackManifest, ec)) {
    d->packed = std::make_unique<PackedReader>(dataset_dir);
    d->classes = d->packed->classes();
    d->paths = d->packed->paths();
    d->class_index = d->packed->class_indices();
  } else {
    for (fs::directory_iterator it(dataset_dir, ec), end; it != end; it.increment(ec)) {
      if (it->is_directory(ec)) d->classes.push_back(it->path().filename().string());
    }
    if (ec) throw NoInputError("cannot list '" + dataset_dir + "': " + ec.message());
    std::sort(d->classes.begin(), d->classes.end());
    if (d->classes.empty()) {
      throw DataError("'" + dataset_dir + "' has no class folders: expected one sub-folder per class " +
                      "with .tif/.tiff/.png/.jpg images, or a packed dataset (" + kPackManifest + ")");
    }
    for (std::size_t c = 0; c < d->classes.size(); ++c) {
      const fs::path class_dir = fs::path(dataset_dir) / d->classes[c];
      auto files = walk_sorted(class_dir, dataset_dir);
      if (files.empty()) {
        throw DataError("class folder '" + class_dir.string() +
                        "' holds no image (.tif, .tiff, .png, .jpg, .jpeg)");
      }
      for (auto& f : files) {
        d->paths.push_back(std::move(f));
        d->class_index.push_back(static_cast<int>(c));
      }
    }
  }
  assign_labels(*d, folder_depth_for_labels);
  Dataset dataset;
  dataset.impl_ = std::move(d);
  return dataset;
}

Dataset Dataset::open(const MetaConfig& meta) {
  return open(meta.dataset_dir, meta.folder_depth_for_labels);
}

Dataset Dataset::open(const MetaConfig& meta, const MpiWorld& world) {
  return open(meta.dataset_dir, meta.folder_depth_for_labels, world);
}

Dataset Dataset::open(const std::string& dataset_dir, int folder_depth_for_labels, const MpiWorld& world) {
  if (world.size() == 1) return open(dataset_dir, folder_depth_for_labels);
  // Rank 0 decides the layout for all: ranks whose view of the shared filesystem lags must not take
  // another branch (and another set of collectives).
  int packed = 0;
  if (world.rank() == 0) {
    std::error_code ec;
    packed = fs::exists(fs::path(dataset_dir) / kPackManifest, ec) ? 1 : 0;
  }
  world.broadcast(packed);
  if (packed != 0) return open(dataset_dir, folder_depth_for_labels);
  // Index as text: classes, then (class index, path) pairs, every field ended by '\0'.
  std::string blob;
  int code = 0;
  Dataset mine;
  if (world.rank() == 0) {
    try {
      mine = open(dataset_dir, folder_depth_for_labels);
      blob = std::to_string(mine.impl_->classes.size()) + '\0';
      for (const auto& c : mine.impl_->classes) blob += c + '\0';
      for (std::size_t i = 0; i < mine.size(); ++i) {
        blob += std::to_string(mine.impl_->class_index[i]) + '\0' + mine.impl_->paths[i] + '\0';
      }
    } catch (const Error& e) {
      code = to_int(e.code());
      blob = e.what();
    } catch (const std::exception& e) {
      // Whatever it is, the other ranks are waiting in the broadcast below: tell them.
      code = to_int(ExitCode::kSoftware);
      blob = std::string("cannot index '") + dataset_dir + "': " + e.what();
    }
  }
  world.broadcast(code);
  world.broadcast(blob);
  if (code != 0) throw Error(static_cast<ExitCode>(code), blob);
  if (world.rank() == 0) return mine;

  auto d = std::make_shared<Impl>();
  d->dir = dataset_dir;
  std::size_t pos = 0;
  const auto field = [&] {
    const std::size_t end = blob.find('\0', pos);
    std::string f = blob.substr(pos, end - pos);
    pos = end + 1;
    return f;
  };
  const std::size_t classes = std::stoul(field());
  for (std::size_t c = 0; c < classes; ++c) d->classes.push_back(field());
  while (pos < blob.size()) {
    d->class_index.push_back(std::stoi(field()));
    d->paths.push_back(field());
  }
  assign_labels(*d, folder_depth_for_labels);
  Dataset dataset;
  dataset.impl_ = std::move(d);
  return dataset;
}

std::size_t Dataset::size() const {
  return impl_->paths.size();
}
const std::vector<std::string>& Dataset::classes() const {
  return impl_->classes;
}
const std::vector<std::string>& Dataset::labels() const {
  return impl_->labels;
}
const std::string& Dataset::relative_path(std::size_t i) const {
  return impl_->paths.at(i);
}
int Dataset::class_index(std::size_t i) const {
  return impl_->class_index.at(i);
}
int Dataset::label_index(std::size_t i) const {
  return impl_->label_index.at(i);
}
bool Dataset::packed() const {
  return impl_->packed != nullptr;
}
const std::string& Dataset::directory() const {
  return impl_->dir;
}

std::string Dataset::source(std::size_t i) const {
  if (impl_->packed) return impl_->packed->source(i);
  return (fs::path(impl_->dir) / impl_->paths.at(i)).string();
}

RawImage Dataset::read(std::size_t i) const {
  if (impl_->packed) return impl_->packed->read(i);
  return read_image(source(i));
}

Image Dataset::load(std::size_t i, const ImageTransform& transform) const {
  return preprocess(read(i), transform, source(i));
}

}  // namespace pcdino
