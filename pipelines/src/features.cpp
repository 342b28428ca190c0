#include "pcdino/pipelines/features.hpp"

#include <H5Cpp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/hdf5.hpp"
#include "pcdino/core/image.hpp"
#include "pcdino/core/run_files.hpp"

namespace pcdino::pipelines {

namespace fs = std::filesystem;

namespace {

// A root attribute `name` of `path`: absent, or one value (a list would be read past its one-value buffer).
std::optional<H5::Attribute> single_attribute(H5::H5File& file, const std::string& path,
                                              const std::string& name) {
  if (!file.attrExists(name)) return std::nullopt;
  H5::Attribute a = file.openAttribute(name);
  if (a.getSpace().getSimpleExtentNpoints() != 1)
    throw DataError(path + ": attribute '" + name + "' holds " +
                    std::to_string(a.getSpace().getSimpleExtentNpoints()) + " values, not one");
  return a;
}

std::string read_string_attribute(H5::H5File& file, const std::string& path, const std::string& name) {
  std::optional<H5::Attribute> a = single_attribute(file, path, name);
  if (!a) return "";
  if (a->getTypeClass() != H5T_STRING) throw DataError(path + ": attribute '" + name + "' is not a string");
  std::string value;
  a->read(a->getStrType(), value);
  return value;
}

// The most values a dataset may claim, with why: checked before anything of that size is allocated or read
// (a well-formed file can claim 2^40 values in a few bytes of chunks never written).
struct ValueLimit {
  std::uint64_t values;
  std::string why;
};

// Numbers: kMaxCompressionRatio times the file's size in bytes.
ValueLimit number_limit(std::uint64_t file_bytes, std::uint64_t element_bytes) {
  return {file_bytes * kMaxCompressionRatio / element_bytes,
          std::to_string(kMaxCompressionRatio) + " times the file's size in bytes of values"};
}

// Variable-length strings: one a byte of the file. A written string takes 16 bytes of the dataset (its
// global heap ID) and one object of 16 bytes or more in the global heap, which no filter compresses; only
// unwritten chunks (null strings) hold more, and reading a million of them took 2.7 s under ASan (the
// features fuzzer's 4,640-byte file whose /class_names claimed 1,048,576).
ValueLimit string_limit(std::uint64_t file_bytes) {
  return {file_bytes, "one string a byte of the file"};
}

// The dimensions of dataset `name` of `path`, which must have `rank` of them and claim at most
// `limit.values` values.
std::vector<hsize_t> checked_dims(const H5::DataSet& ds, const std::string& path, const std::string& name,
                                  int rank, const ValueLimit& limit) {
  const H5::DataSpace space = ds.getSpace();
  if (space.getSimpleExtentNdims() != rank)
    throw DataError(path + ": /" + name + " has " + std::to_string(space.getSimpleExtentNdims()) +
                    " dimensions, not " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  space.getSimpleExtentDims(dims.data());
  std::uint64_t values = 1;
  for (hsize_t d : dims) {
    if (d != 0 && values > limit.values / d) {
      throw DataError(path + ": /" + name + " claims more than " + std::to_string(limit.values) +
                      " values, " + limit.why);
    }
    values *= d;
  }
  return dims;
}

void write_int_attribute(H5::H5File& file, const std::string& name, int value) {
  file.createAttribute(name, H5::PredType::NATIVE_INT32, H5::DataSpace(H5S_SCALAR))
      .write(H5::PredType::NATIVE_INT32, &value);
}

int read_int_attribute(H5::H5File& file, const std::string& path, const std::string& name, int fallback) {
  std::optional<H5::Attribute> a = single_attribute(file, path, name);
  if (!a) return fallback;
  int value = fallback;
  a->read(H5::PredType::NATIVE_INT32, &value);
  return value;
}

std::string csv_field(const std::string& s) {  // RFC 4180 quoting, only where needed
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

void FeatureSet::check(const std::string& source) const {
  const auto fail = [&](const std::string& what) { throw DataError(source + ": " + what); };
  if (features.size() != rows * dim) {
    fail("features hold " + std::to_string(features.size()) +
         " values, not rows x dim = " + std::to_string(rows) + " x " + std::to_string(dim));
  }
  if (labels.size() != rows)
    fail("labels has " + std::to_string(labels.size()) + " rows, features " + std::to_string(rows));
  if (paths.size() != rows)
    fail("paths has " + std::to_string(paths.size()) + " rows, features " + std::to_string(rows));
  if (indices.size() != rows)
    fail("indices has " + std::to_string(indices.size()) + " rows, features " + std::to_string(rows));
  for (std::size_t i = 0; i < rows; ++i) {
    if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= class_names.size()) {
      fail("label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
           " is not an index into the " + std::to_string(class_names.size()) + " class_names");
    }
  }
}

void write_features(const std::string& path, const FeatureSet& set) {
  set.check(path);
  make_directories(fs::path(path).parent_path().string());
  const std::string tmp = temporary_name(path);
  try {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    H5::H5File file(tmp, H5F_ACC_TRUNC);
    const hsize_t dims[2] = {set.rows, set.dim};
    file.createDataSet("features", H5::PredType::NATIVE_FLOAT, H5::DataSpace(2, dims))
        .write(set.features.data(), H5::PredType::NATIVE_FLOAT);
    file.createDataSet("labels", H5::PredType::NATIVE_INT32, H5::DataSpace(1, dims))
        .write(set.labels.data(), H5::PredType::NATIVE_INT32);
    file.createDataSet("indices", H5::PredType::NATIVE_INT64, H5::DataSpace(1, dims))
        .write(set.indices.data(), H5::PredType::NATIVE_INT64);
    write_string_dataset(file, "class_names", set.class_names);
    write_string_dataset(file, "paths", set.paths);
    write_string_attribute(file, "checkpoint", set.checkpoint);
    write_string_attribute(file, "checkpoint_key", set.checkpoint_key);
    write_string_attribute(file, "arch", set.arch);
    write_string_attribute(file, "channels", set.channels);
    write_int_attribute(file, "epoch", set.epoch);
    write_int_attribute(file, "patch_size", set.patch_size);
    write_int_attribute(file, "normalized", set.normalized ? 1 : 0);
  } catch (const H5::Exception& e) {
    std::remove(tmp.c_str());
    throw CantCreateError("cannot write '" + path + "': " + e.getDetailMsg());
  }
  rename_into_place(tmp, path);
}

FeatureSet read_features(const std::string& path) {
  if (!fs::exists(path)) {
    throw NoInputError("'" + path + "' does not exist (run `pcdino extract` first)");
  }
  FeatureSet set;
  std::error_code size_error;
  const std::uint64_t file_bytes = std::max<std::uint64_t>(fs::file_size(path, size_error), 1);
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  std::string current = "features";
  try {
    H5::H5File file(path, H5F_ACC_RDONLY, H5::FileCreatPropList::DEFAULT, no_file_locking());
    for (const char* name : {"features", "labels", "class_names", "paths", "indices"}) {
      current = name;
      if (!file.nameExists(name)) throw DataError(path + ": has no dataset '/" + current + "'");
    }
    current = "features";
    H5::DataSet f = file.openDataSet("features");
    const std::vector<hsize_t> dims =
        checked_dims(f, path, "features", 2, number_limit(file_bytes, sizeof(float)));
    set.rows = dims[0], set.dim = dims[1];
    // Every 1-D dataset checked before any is read; those of one value a row hold rows values.
    const auto one_dim = [&](const char* name, const ValueLimit& limit, bool one_per_row) {
      current = name;
      H5::DataSet ds = file.openDataSet(name);
      const hsize_t n = checked_dims(ds, path, name, 1, limit)[0];
      if (one_per_row && n != set.rows)
        throw DataError(path + ": /" + name + " has " + std::to_string(n) + " rows, /features " +
                        std::to_string(set.rows));
      return ds;
    };
    H5::DataSet labels = one_dim("labels", number_limit(file_bytes, sizeof(std::int32_t)), true),
                indices = one_dim("indices", number_limit(file_bytes, sizeof(std::int64_t)), true);
    one_dim("paths", string_limit(file_bytes), true);
    one_dim("class_names", string_limit(file_bytes), false);
    current = "features";
    set.features.resize(set.rows * set.dim);
    if (!set.features.empty()) f.read(set.features.data(), H5::PredType::NATIVE_FLOAT);
    current = "labels";
    set.labels.resize(set.rows);
    if (set.rows > 0) labels.read(set.labels.data(), H5::PredType::NATIVE_INT32);
    current = "indices";
    set.indices.resize(set.rows);
    if (set.rows > 0) indices.read(set.indices.data(), H5::PredType::NATIVE_INT64);
    current = "class_names";
    set.class_names = read_string_dataset(file, "class_names");
    current = "paths";
    set.paths = read_string_dataset(file, "paths");
    current = "attributes";
    set.checkpoint = read_string_attribute(file, path, "checkpoint");
    set.checkpoint_key = read_string_attribute(file, path, "checkpoint_key");
    set.arch = read_string_attribute(file, path, "arch");
    set.channels = read_string_attribute(file, path, "channels");
    set.epoch = read_int_attribute(file, path, "epoch", -1);
    set.patch_size = read_int_attribute(file, path, "patch_size", 0);
    set.normalized = read_int_attribute(file, path, "normalized", 0) != 0;
  } catch (const H5::Exception& e) {
    throw DataError(path + ": cannot read '/" + current + "': " + e.getDetailMsg());
  }
  set.check(path);
  return set;
}

std::string write_feature_csvs(const std::string& dir, const FeatureSet& set,
                               const std::string& channel_names, const std::string& model) {
  set.check(dir);
  make_directories(dir);
  // Written in pieces of ~4 MiB: the whole CSV in memory was 1 GB at 200,000 rows of 384 (bench/stages.sh
  // at a million cells: extract's peak 3.3 GB).
  const std::string name = features_csv(dir, channel_names, model);
  AtomicFile out(name);
  std::string piece;
  char buf[32];
  for (std::size_t i = 0; i < set.rows; ++i) {
    for (std::size_t j = 0; j < set.dim; ++j) {
      std::snprintf(buf, sizeof buf, j == 0 ? "%.9g" : ",%.9g",
                    static_cast<double>(set.features[i * set.dim + j]));
      piece += buf;
    }
    piece += '\n';
    if (piece.size() >= (std::size_t{4} << 20) || i + 1 == set.rows) {
      out.write(piece.data(), piece.size());
      piece.clear();
    }
  }
  out.commit();
  std::vector<std::string> labels;
  for (int l : set.labels) labels.push_back(set.class_names[static_cast<std::size_t>(l)]);
  write_label_csvs(dir, labels, set.paths);
  return name;
}

void write_label_csvs(const std::string& dir, const std::vector<std::string>& class_names,
                      const std::vector<std::string>& paths) {
  make_directories(dir);
  std::ostringstream labels, files;
  for (const auto& c : class_names) labels << csv_field(c) << '\n';
  for (const auto& p : paths) files << csv_field(p) << '\n';
  write_file_atomic(class_labels_csv(dir), labels.str());
  write_file_atomic(image_paths_csv(dir), files.str());
}

}  // namespace pcdino::pipelines
