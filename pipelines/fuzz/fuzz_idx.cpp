// libFuzzer target of the IDX reader (pipelines/src/dataset_import.cpp, `pcdino dataset import`): any bytes
// as an IDX file, plain or (when the input starts with gzip's magic) compressed, read by read_idx() and
// checked as the import checks an images file. The reader may refuse only with a pcdino::Error naming the
// file; another exception, a crash or a sanitizer report (an allocation over -malloc_limit_mb) is a bug.
// Run by scripts/fuzz idx.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "pcdino/core/error.hpp"
#include "pcdino/pipelines/dataset_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("pcdino-fuzz-idx." + std::to_string(::getpid()))).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const pcdino::pipelines::IdxArray idx = pcdino::pipelines::read_idx(path);
    std::size_t total = idx.dims.empty() ? 0 : 1;
    for (std::uint32_t d : idx.dims) total *= d;
    if (total != idx.data.size()) __builtin_trap();  // read_idx returned fewer or more values than it claims
  } catch (const pcdino::Error&) {
  }
  return 0;
}
