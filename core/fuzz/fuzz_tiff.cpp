// libFuzzer target of the TIFF reader (core/src/tiff.cpp, tiff_layout.cpp): any bytes as an image file, read
// as every stage reads one (pages stacked by their metadata's layout into [H, W, C]). The reader may refuse
// an input only with pcdino's DataError; another exception, a crash, a sanitizer report, a leak or an image
// whose bytes are not its shape's is a bug. Run by scripts/fuzz tiff.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "pcdino/core/error.hpp"
#include "tiff.hpp"  // core/src: the reader inside read_image(), from memory

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::string layout;
    const pcdino::RawImage image = pcdino::tiff::read_bytes(bytes, "fuzz.tif", &layout);
    const std::size_t expected = std::size_t(image.height) * std::size_t(image.width) *
                                 std::size_t(image.channels) * pcdino::pixel_size(image.type);
    if (image.bytes.size() != expected || image.height <= 0 || image.width <= 0 || image.channels <= 0)
      std::abort();
  } catch (const pcdino::DataError&) {
  }
  return 0;
}
