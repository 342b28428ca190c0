// libFuzzer target of the packed dataset's manifest (core/src/packed.cpp): any bytes as pack.json in a
// folder that holds one small valid shard (written once from the seed pack of core/fuzz/corpus/pack, when
// PCDINO_FUZZ_PACK_SHARD names it), opened as every stage opens a dataset. The reader may refuse it only
// with a pcdino::Error naming the file; another exception, a crash or a sanitizer report is a bug. Run by
// scripts/fuzz pack.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "pcdino/core/dataset.hpp"
#include "pcdino/core/error.hpp"

namespace {

std::string folder() {
  static const std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("pcdino-fuzz-pack." + std::to_string(::getpid())))
            .string();
    std::filesystem::create_directories(d);
    if (const char* shard = std::getenv("PCDINO_FUZZ_PACK_SHARD"))
      std::filesystem::copy_file(shard, d + "/shard-00000-of-00001.h5",
                                 std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = folder();
  std::ofstream(dir + "/pack.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const pcdino::Dataset dataset = pcdino::Dataset::open(dir, 0);
    for (std::size_t i = 0; i < dataset.size() && i < 4; ++i) dataset.read(i);
  } catch (const pcdino::Error&) {
  }
  return 0;
}
