// libFuzzer target of features.h5 (pipelines/src/features.cpp), structure-aware: the input is a recipe for
// a valid HDF5 file, written with HDF5's own API, and read_features() reads it as the kNN, labels and plots
// stages do. The recipe chooses, for each dataset the reader expects (features, labels, class_names, paths,
// indices), whether it is there, its element type, its rank and dimensions (small, or claims of up to 2^40
// elements stored as chunks nobody wrote, which cost a few bytes), its values, and each attribute's type;
// then the file may be cut short. HDF5's parser of arbitrary bytes is fuzzed by OSS-Fuzz; what is fuzzed here
// is pcdino's reading of a well-formed file of the wrong shape, which is what another program's file, or an
// old pcdino's, is. The reader may refuse only with a pcdino::Error naming the file; another exception, a
// crash or a sanitizer report (an allocation over -malloc_limit_mb) is a bug. Run by scripts/fuzz features.
#include <H5Cpp.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "pcdino/core/error.hpp"
#include "pcdino/core/hdf5.hpp"
#include "pcdino/pipelines/features.hpp"

namespace {

// Dimensions a recipe draws from: the sizes a file of features has, and claims beyond any real file.
constexpr std::array<hsize_t, 10> kSizes = {0, 1, 2, 3, 5, 8, 1ull << 20, 1ull << 31, 1ull << 32, 1ull << 40};

// The element types a dataset or attribute may have; kVlen is the one pcdino writes for strings.
enum class Kind { kFloat, kDouble, kInt32, kInt64, kUint8, kVlen, kFixed8, kCount };

H5::DataType h5_type(Kind kind) {
  switch (kind) {
    case Kind::kFloat:
      return H5::PredType::NATIVE_FLOAT;
    case Kind::kDouble:
      return H5::PredType::NATIVE_DOUBLE;
    case Kind::kInt32:
      return H5::PredType::NATIVE_INT32;
    case Kind::kInt64:
      return H5::PredType::NATIVE_INT64;
    case Kind::kUint8:
      return H5::PredType::NATIVE_UINT8;
    case Kind::kVlen:
      return H5::StrType(H5::PredType::C_S1, H5T_VARIABLE);
    default:
      return H5::StrType(H5::PredType::C_S1, 8);
  }
}

std::size_t element_bytes(Kind kind) {
  switch (kind) {
    case Kind::kDouble:
    case Kind::kInt64:
      return 8;
    case Kind::kInt32:
    case Kind::kFloat:
      return 4;
    case Kind::kVlen:
      return sizeof(char*);
    case Kind::kFixed8:
      return 8;
    default:
      return 1;
  }
}

Kind draw_kind(FuzzedDataProvider& in) {
  return static_cast<Kind>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(Kind::kCount) - 1));
}

hsize_t draw_size(FuzzedDataProvider& in) {
  return in.ConsumeBool() ? kSizes[in.ConsumeIntegralInRange<std::size_t>(0, kSizes.size() - 1)]
                          : in.ConsumeIntegralInRange<hsize_t>(0, 64);
}

// One dataset of the recipe: written whole when small (its values from the input), else chunked and left
// unwritten (HDF5 stores no chunk; reading gives the fill value).
void write_dataset(H5::H5File& file, const std::string& name, FuzzedDataProvider& in) {
  const Kind kind = draw_kind(in);
  const int rank = in.ConsumeIntegralInRange<int>(0, 3);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), chunk(static_cast<std::size_t>(rank));
  long double elements = 1;
  for (int d = 0; d < rank; ++d) {
    dims[d] = draw_size(in);
    chunk[d] = std::max<hsize_t>(1, std::min<hsize_t>(dims[d], 8));
    elements *= static_cast<long double>(dims[d]);
  }
  const H5::DataType type = h5_type(kind);
  const H5::DataSpace space = rank == 0 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(rank, dims.data());
  if (elements > 4096) {
    H5::DSetCreatPropList props;
    props.setChunk(rank, chunk.data());
    file.createDataSet(name, type, space, props);
    return;
  }
  H5::DataSet ds = file.createDataSet(name, type, space);
  const auto n = static_cast<std::size_t>(elements);
  if (n == 0) return;
  if (kind == Kind::kVlen) {
    std::vector<std::string> values(n);
    std::vector<const char*> pointers(n);
    for (std::size_t i = 0; i < n; ++i) {
      values[i] = in.ConsumeRandomLengthString(32);
      pointers[i] = values[i].c_str();
    }
    ds.write(pointers.data(), type);
  } else {
    std::vector<std::uint8_t> bytes = in.ConsumeBytes<std::uint8_t>(n * element_bytes(kind));
    bytes.resize(n * element_bytes(kind));
    ds.write(bytes.data(), type);
  }
}

// One root attribute of the recipe: a string, an int, a float or a list of two ints.
void write_attribute(H5::H5File& file, const std::string& name, FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0:
      return;  // absent
    case 1: {
      const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
      const std::string value = in.ConsumeRandomLengthString(64);
      const char* p = value.c_str();
      file.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, &p);
      return;
    }
    case 2: {
      const auto value = in.ConsumeIntegral<std::int64_t>();
      file.createAttribute(name, H5::PredType::NATIVE_INT64, H5::DataSpace(H5S_SCALAR))
          .write(H5::PredType::NATIVE_INT64, &value);
      return;
    }
    case 3: {
      const double value = in.ConsumeFloatingPoint<double>();
      file.createAttribute(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(H5S_SCALAR))
          .write(H5::PredType::NATIVE_DOUBLE, &value);
      return;
    }
    default: {
      const hsize_t two = 2;
      const std::int32_t values[2] = {in.ConsumeIntegral<std::int32_t>(), in.ConsumeIntegral<std::int32_t>()};
      file.createAttribute(name, H5::PredType::NATIVE_INT32, H5::DataSpace(1, &two))
          .write(H5::PredType::NATIVE_INT32, values);
    }
  }
}

std::string path() {
  static const std::string p = (std::filesystem::temp_directory_path() /
                                ("pcdino-fuzz-features." + std::to_string(::getpid()) + ".h5"))
                                   .string();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string file_path = path();
  try {
    std::lock_guard<std::mutex> lock(pcdino::hdf5_mutex());
    H5::H5File file(file_path, H5F_ACC_TRUNC);
    for (const char* name : {"features", "labels", "class_names", "paths", "indices"})
      if (in.ConsumeIntegralInRange<int>(0, 7) != 0) write_dataset(file, name, in);
    for (const char* name :
         {"checkpoint", "checkpoint_key", "arch", "channels", "epoch", "patch_size", "normalized"})
      write_attribute(file, name, in);
  } catch (const H5::Exception&) {
    return 0;  // a recipe HDF5 will not write (e.g. a chunk of a size it refuses): nothing to read
  }
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {  // a file cut short, as by a job killed mid-write
    const auto bytes = std::filesystem::file_size(file_path);
    std::filesystem::resize_file(file_path, in.ConsumeIntegralInRange<std::uintmax_t>(0, bytes));
  }
  try {
    pcdino::pipelines::read_features(file_path);
  } catch (const pcdino::Error&) {
  }
  return 0;
}
