// libFuzzer target of the PNG and JPEG reader (core/src/image.cpp: read_image() through OpenCV, as a
// dataset of PNG or JPEG files is read): any bytes as x.png, or as x.jpg when the input starts with JPEG's
// SOI marker (FF D8), then preprocessed as a stage preprocesses an image. The reader may refuse only with a
// pcdino::Error naming the file; another exception, a crash or a sanitizer report (an allocation over
// -malloc_limit_mb) is a bug. OpenCV, libpng and libjpeg are not instrumented: their own faults show only
// as crashes. Run by scripts/fuzz image.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "pcdino/core/error.hpp"
#include "pcdino/core/image.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string stem =
      (std::filesystem::temp_directory_path() / ("pcdino-fuzz-image." + std::to_string(::getpid()))).string();
  const bool jpeg = size >= 2 && data[0] == 0xFF && data[1] == 0xD8;
  const std::string path = stem + (jpeg ? ".jpg" : ".png");
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    const pcdino::RawImage raw = pcdino::read_image(path);
    pcdino::preprocess(raw, pcdino::ImageTransform{}, path);
  } catch (const pcdino::Error&) {
  }
  return 0;
}
