// A fresh directory per test, removed afterwards, and small helpers to write test datasets.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "pcdino/core/image.hpp"

namespace pcdino::test {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("pcdino_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// The whole of the file at `path`, as bytes ("" if it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

/// A [H, W, C] image of `type` whose samples are given as doubles (converted exactly).
inline RawImage make_image(int h, int w, int c, PixelType type, const std::vector<double>& samples) {
  RawImage img;
  img.height = h;
  img.width = w;
  img.channels = c;
  img.type = type;
  img.bytes.resize(std::size_t(h) * w * c * pixel_size(type));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    switch (type) {
      case PixelType::kUint8:
        img.bytes[i] = static_cast<std::uint8_t>(samples[i]);
        break;
      case PixelType::kUint16:
        reinterpret_cast<std::uint16_t*>(img.bytes.data())[i] = static_cast<std::uint16_t>(samples[i]);
        break;
      case PixelType::kFloat32:
        reinterpret_cast<float*>(img.bytes.data())[i] = static_cast<float>(samples[i]);
        break;
    }
  }
  return img;
}

}  // namespace pcdino::test
