#include "pcdino/core/packed.hpp"

#include <H5Cpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/hdf5.hpp"
#include "pcdino/core/image.hpp"
#include "pcdino/core/prefetch.hpp"

namespace pcdino {

namespace fs = std::filesystem;

namespace {

H5::PredType h5_type(PixelType t) {
  switch (t) {
    case PixelType::kUint8:
      return H5::PredType::NATIVE_UINT8;
    case PixelType::kUint16:
      return H5::PredType::NATIVE_UINT16;
    case PixelType::kFloat32:
      return H5::PredType::NATIVE_FLOAT;
  }
  return H5::PredType::NATIVE_UINT8;
}

PixelType parse_pixel_type(const std::string& name, const std::string& file) {
  if (name == "uint8") return PixelType::kUint8;
  if (name == "uint16") return PixelType::kUint16;
  if (name == "float32") return PixelType::kFloat32;
  throw DataError(file + ": unknown pixel_type '" + name + "'");
}

std::string shard_name(std::size_t shard, std::size_t shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "shard-%05zu-of-%05zu.h5", shard, shards);
  return buf;
}

template <class T>
void write_attribute(H5::H5Object& obj, const std::string& name, const T& value, const H5::PredType& type) {
  obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, &value);
}

// Declared after the HDF5 objects of a scope, re-takes the HDF5 lock when the scope is left (also by an
// exception), so that those objects are closed while it is held.
class RelockOnExit {
 public:
  explicit RelockOnExit(std::unique_lock<std::mutex>& lock) : lock_(lock) {}
  ~RelockOnExit() {
    if (!lock_.owns_lock()) lock_.lock();
  }
  RelockOnExit(const RelockOnExit&) = delete;
  RelockOnExit& operator=(const RelockOnExit&) = delete;

 private:
  std::unique_lock<std::mutex>& lock_;
};

// What every shard of a pack shares.
struct PackShape {
  const Dataset& source;
  const RawImage& first;  // every image has its height, width, channels and pixel type
  const std::vector<std::string>& channel_names;
  std::size_t shards;
};

// Every image of a pack has the first one's shape and pixel type.
void check_same_shape(const Dataset& source, const RawImage& first, const RawImage& img, std::size_t i) {
  if (img.height != first.height || img.width != first.width || img.channels != first.channels ||
      img.type != first.type) {
    std::ostringstream msg;
    msg << "images of different shapes cannot be packed: '" << source.source(0) << "' is " << first.height
        << "x" << first.width << "x" << first.channels << " " << pixel_type_name(first.type) << " but '"
        << source.source(i) << "' is " << img.height << "x" << img.width << "x" << img.channels << " "
        << pixel_type_name(img.type);
    throw DataError(msg.str());
  }
}

// A shard's labels, dataset indices and paths, and the attributes that describe its images (under the
// HDF5 lock).
void write_shard_metadata(H5::H5File& file, const PackShape& pack, std::size_t s, std::size_t count,
                          const std::vector<int>& classes, const std::vector<long long>& indices,
                          const std::vector<std::string>& paths) {
  const RawImage& first = pack.first;
  const hsize_t n1[1] = {count};
  H5::DataSpace space1(1, n1);
  file.createDataSet("class_index", H5::PredType::NATIVE_INT32, space1)
      .write(classes.data(), H5::PredType::NATIVE_INT32);
  file.createDataSet("indices", H5::PredType::NATIVE_INT64, space1)
      .write(indices.data(), H5::PredType::NATIVE_INT64);
  write_string_dataset(file, "paths", paths);
  H5::Group root = file.openGroup("/");
  write_string_attribute(root, "pixel_type", pixel_type_name(first.type));
  write_attribute(root, "height", first.height, H5::PredType::NATIVE_INT);
  write_attribute(root, "width", first.width, H5::PredType::NATIVE_INT);
  write_attribute(root, "channels", first.channels, H5::PredType::NATIVE_INT);
  {
    std::vector<const char*> names(pack.channel_names.size());
    for (std::size_t c = 0; c < names.size(); ++c) names[c] = pack.channel_names[c].c_str();
    const hsize_t nc[1] = {names.size()};
    H5::StrType str_type(H5::PredType::C_S1, H5T_VARIABLE);
    root.createAttribute("channel_names", str_type, H5::DataSpace(1, nc)).write(str_type, names.data());
  }
  const long long shard_attr = static_cast<long long>(s), shards_attr = static_cast<long long>(pack.shards);
  write_attribute(root, "shard", shard_attr, H5::PredType::NATIVE_INT64);
  write_attribute(root, "num_shards", shards_attr, H5::PredType::NATIVE_INT64);
}

// Writes the next `count` images of `images`, dataset indices [begin, begin + count), and their metadata
// into shard `s` at `path`. Returns the pixel bytes written.
std::size_t write_shard(const std::string& path, const PackShape& pack, Prefetcher<RawImage>& images,
                        std::size_t s, std::size_t begin, std::size_t count) {
  const Dataset& source = pack.source;
  const RawImage& first = pack.first;
  std::size_t bytes = 0;
  std::unique_lock<std::mutex> lock(hdf5_mutex());
  H5::H5File file(path, H5F_ACC_TRUNC);
  const hsize_t dims[4] = {count, hsize_t(first.height), hsize_t(first.width), hsize_t(first.channels)};
  const hsize_t chunk[4] = {1, dims[1], dims[2], dims[3]};
  H5::DSetCreatPropList props;
  props.setChunk(4, chunk);
  H5::DataSpace space(4, dims);
  H5::DataSet ds = file.createDataSet("images", h5_type(first.type), space, props);
  std::vector<int> classes(count);
  std::vector<long long> indices(count);
  std::vector<std::string> paths(count);
  const RelockOnExit relock(lock);  // after the HDF5 objects: they close under the lock, however we leave
  lock.unlock();                    // decoding workers may need HDF5 (a packed source) meanwhile
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = begin + k;
    const RawImage img = *images.next();
    check_same_shape(source, first, img, i);
    classes[k] = source.class_index(i);
    indices[k] = static_cast<long long>(i);
    paths[k] = source.relative_path(i);
    lock.lock();
    {
      const hsize_t offset[4] = {k, 0, 0, 0};
      H5::DataSpace file_space = ds.getSpace();
      file_space.selectHyperslab(H5S_SELECT_SET, chunk, offset);
      H5::DataSpace mem_space(4, chunk);
      ds.write(img.bytes.data(), h5_type(first.type), mem_space, file_space);
    }  // the dataspaces close here, still under the lock
    lock.unlock();
    bytes += img.bytes.size();
  }
  lock.lock();
  write_shard_metadata(file, pack, s, count, classes, indices, paths);
  file.close();
  return bytes;
}

}  // namespace

// --- writing -----------------------------------------------------------------------------------------

PackReport pack_dataset(const Dataset& source, const std::string& output_dir, const PackOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path out(output_dir);
  make_directories(output_dir);
  if (fs::exists(out / kPackManifest) && !options.overwrite) {
    throw CantCreateError("'" + output_dir + "' already holds a packed dataset (" + kPackManifest +
                          "); choose another directory or pass --overwrite");
  }
  if (fs::exists(out / kPackManifest)) fs::remove(out / kPackManifest);  // the old pack is invalid from here
  const std::size_t n = source.size();
  if (n == 0) throw DataError("dataset '" + source.directory() + "' is empty");

  const RawImage first = source.read(0);
  const std::size_t image_bytes = first.bytes.size();
  std::size_t per_shard = options.images_per_shard;
  if (per_shard == 0) per_shard = std::max<std::size_t>(1, (std::size_t(1) << 30) / image_bytes);
  const std::size_t shards = (n + per_shard - 1) / per_shard;

  std::vector<std::string> channel_names = options.channel_names;
  for (int c = static_cast<int>(channel_names.size()); c < first.channels; ++c)
    channel_names.push_back(std::to_string(c));
  channel_names.resize(static_cast<std::size_t>(first.channels));

  Prefetcher<RawImage> images(
      n, [&](std::size_t i) { return source.read(i); }, options.threads, 64);
  const PackShape pack{source, first, channel_names, shards};
  nlohmann::json manifest_shards = nlohmann::json::array();
  PackReport report;
  for (std::size_t s = 0; s < shards; ++s) {
    const std::size_t begin = s * per_shard, count = std::min(per_shard, n - begin);
    const std::string name = shard_name(s, shards);
    const std::string final_path = (out / name).string();
    const std::string tmp = temporary_name(final_path);
    try {
      report.bytes += write_shard(tmp, pack, images, s, begin, count);
    } catch (const H5::Exception& e) {
      std::remove(tmp.c_str());
      throw CantCreateError(final_path + ": HDF5 error: " + e.getDetailMsg());
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
    rename_into_place(tmp, final_path);
    manifest_shards.push_back({{"file", name}, {"first", begin}, {"count", count}});
  }
  nlohmann::json manifest = {{"format", "pcdino-pack"},
                             {"version", 1},
                             {"num_images", n},
                             {"height", first.height},
                             {"width", first.width},
                             {"channels", first.channels},
                             {"pixel_type", pixel_type_name(first.type)},
                             {"classes", source.classes()},
                             {"channel_names", channel_names},
                             {"source", source.directory()},
                             {"shards", manifest_shards}};
  write_file_atomic((out / kPackManifest).string(), manifest.dump(2) + "\n");
  report.images = n;
  report.shards = shards;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

// --- reading -----------------------------------------------------------------------------------------

struct PackedReader::State {
  std::string dir;
  int height = 0, width = 0, channels = 0;
  PixelType type = PixelType::kUint8;
  std::vector<std::string> classes;
  std::vector<std::string> channel_names;
  std::vector<std::string> paths;
  std::vector<int> class_index;
  struct Shard {
    std::string file;
    std::size_t first = 0, count = 0;
    H5::H5File h5;
    H5::DataSet images;
  };
  std::vector<Shard> shards;
};

namespace {

// A manifest's counts and sides: whole JSON numbers in [low, high] (a number too large for its C++ type,
// or a fraction, is a corrupt manifest, not undefined behaviour in the conversion).
constexpr long long kMaxSide = 1 << 20;
constexpr long long kMaxRows = 1LL << 40;

long long whole_number(const nlohmann::json& object, const char* key, const std::string& manifest,
                       long long low, long long high) {
  const nlohmann::json& v = object.at(key);
  if (!v.is_number_integer() || v.get<long long>() < low || v.get<long long>() > high ||
      (v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(high))) {
    throw DataError(manifest + ": \"" + key + "\" is " + v.dump() + ", not a whole number in [" +
                    std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return v.get<long long>();
}

}  // namespace

PackedReader::PackedReader(const std::string& dir) : state_(std::make_unique<State>()) {
  State& st = *state_;
  st.dir = dir;
  const std::string manifest_path = (fs::path(dir) / kPackManifest).string();
  nlohmann::json m;
  try {
    std::ifstream in(manifest_path);
    if (!in) throw NoInputError("cannot read '" + manifest_path + "'");
    m = nlohmann::json::parse(in);
    if (m.at("format") != "pcdino-pack" || m.at("version") != 1) {
      throw DataError(manifest_path + ": not a pcdino pack manifest of version 1");
    }
    st.height = static_cast<int>(whole_number(m, "height", manifest_path, 1, kMaxSide));
    st.width = static_cast<int>(whole_number(m, "width", manifest_path, 1, kMaxSide));
    st.channels = static_cast<int>(whole_number(m, "channels", manifest_path, 1, kMaxSide));
    st.type = parse_pixel_type(m.at("pixel_type"), manifest_path);
    st.classes = m.at("classes").get<std::vector<std::string>>();
    st.channel_names = m.value("channel_names", std::vector<std::string>{});
    whole_number(m, "num_images", manifest_path, 0, kMaxRows);
    for (const auto& s : m.at("shards")) {
      s.at("file").get<std::string>();
      whole_number(s, "first", manifest_path, 0, kMaxRows);
      whole_number(s, "count", manifest_path, 0, kMaxRows);
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(manifest_path + ": malformed manifest: " + e.what());
  }
  const std::size_t n = m.at("num_images");
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  try {
    open_shards(dir, m.at("shards"));
  } catch (...) {
    st.shards.clear();  // close what was opened while the HDF5 lock is still held
    throw;
  }
  if (st.paths.size() != n) {
    st.shards.clear();
    throw DataError(manifest_path + ": shards hold " + std::to_string(st.paths.size()) +
                    " images, manifest says " + std::to_string(n));
  }
}

void PackedReader::open_shards(const std::string& dir, const nlohmann::json& shards) {
  State& st = *state_;
  const std::string manifest_path = (fs::path(dir) / kPackManifest).string();
  for (const auto& s : shards) {
    State::Shard shard;
    shard.file = (fs::path(dir) / s.at("file").get<std::string>()).string();
    shard.first = s.at("first");
    shard.count = s.at("count");
    if (shard.first != st.paths.size())
      throw DataError(manifest_path + ": shards are not contiguous at " + shard.file);
    // Its rows' class indices and paths are read whole: what the manifest claims must fit in what the file
    // can hold (4 bytes of class index a row, compressed at most kMaxCompressionRatio times), or a few
    // bytes of unwritten chunks would be allocated gigabytes.
    std::error_code size_error;
    const std::uint64_t file_bytes = std::max<std::uint64_t>(fs::file_size(shard.file, size_error), 1);
    if (!size_error && shard.count > file_bytes * kMaxCompressionRatio / 4) {
      throw DataError(manifest_path + ": " + shard.file + " is said to hold " + std::to_string(shard.count) +
                      " images in a file of " + std::to_string(file_bytes) + " bytes");
    }
    try {
      shard.h5.openFile(shard.file, H5F_ACC_RDONLY, no_file_locking());
      shard.images = shard.h5.openDataSet("images");
      hsize_t dims[4] = {0, 0, 0, 0};
      H5::DataSpace space = shard.images.getSpace();
      if (space.getSimpleExtentNdims() != 4) throw DataError(shard.file + ": /images is not 4-dimensional");
      space.getSimpleExtentDims(dims);
      if (dims[0] != shard.count || dims[1] != hsize_t(st.height) || dims[2] != hsize_t(st.width) ||
          dims[3] != hsize_t(st.channels)) {
        throw DataError(shard.file + ": /images shape does not match " + manifest_path);
      }
      // The index datasets must hold exactly `count` rows before anything is read into buffers of that size.
      for (const char* name : {"class_index", "paths"}) {
        const H5::DataSpace index_space = shard.h5.openDataSet(name).getSpace();
        if (index_space.getSimpleExtentNdims() != 1 ||
            static_cast<std::size_t>(index_space.getSimpleExtentNpoints()) != shard.count) {
          throw DataError(shard.file + ": /" + name + " does not hold " + std::to_string(shard.count) +
                          " rows");
        }
      }
      std::vector<int> classes(shard.count);
      shard.h5.openDataSet("class_index").read(classes.data(), H5::PredType::NATIVE_INT32);
      std::vector<std::string> names = read_string_dataset(shard.h5, "paths");
      for (std::size_t k = 0; k < shard.count; ++k) {
        if (classes[k] < 0 || classes[k] >= static_cast<int>(st.classes.size())) {
          throw DataError(shard.file + ": class_index out of range at row " + std::to_string(k));
        }
        st.class_index.push_back(classes[k]);
        st.paths.push_back(std::move(names[k]));
      }
    } catch (const H5::Exception& e) {
      throw DataError(shard.file + ": cannot read packed shard: " + e.getDetailMsg());
    }
    st.shards.push_back(std::move(shard));
  }
}

PackedReader::~PackedReader() {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  state_.reset();
}

std::size_t PackedReader::size() const {
  return state_->paths.size();
}
const std::vector<std::string>& PackedReader::classes() const {
  return state_->classes;
}
const std::vector<std::string>& PackedReader::paths() const {
  return state_->paths;
}
const std::vector<int>& PackedReader::class_indices() const {
  return state_->class_index;
}
const std::vector<std::string>& PackedReader::channel_names() const {
  return state_->channel_names;
}

std::string PackedReader::source(std::size_t i) const {
  for (const auto& s : state_->shards) {
    if (i >= s.first && i < s.first + s.count) return s.file + "[row " + std::to_string(i - s.first) + "]";
  }
  return state_->dir + "[index " + std::to_string(i) + "]";
}

RawImage PackedReader::read(std::size_t i) const {
  const State& st = *state_;
  const auto it = std::upper_bound(st.shards.begin(), st.shards.end(), i,
                                   [](std::size_t v, const State::Shard& s) { return v < s.first; });
  if (it == st.shards.begin() || i >= st.paths.size()) {
    throw DataError(st.dir + ": image index " + std::to_string(i) + " out of range");
  }
  const State::Shard& shard = *(it - 1);
  RawImage img;
  img.height = st.height;
  img.width = st.width;
  img.channels = st.channels;
  img.type = st.type;
  img.bytes.resize(std::size_t(st.height) * st.width * st.channels * pixel_size(st.type));
  const hsize_t offset[4] = {i - shard.first, 0, 0, 0};
  const hsize_t count[4] = {1, hsize_t(st.height), hsize_t(st.width), hsize_t(st.channels)};
  try {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    H5::DataSpace file_space = shard.images.getSpace();
    file_space.selectHyperslab(H5S_SELECT_SET, count, offset);
    H5::DataSpace mem_space(4, count);
    shard.images.read(img.bytes.data(), h5_type(st.type), mem_space, file_space);
  } catch (const H5::Exception& e) {
    throw DataError(source(i) + ": cannot read image: " + e.getDetailMsg());
  }
  return img;
}

}  // namespace pcdino
