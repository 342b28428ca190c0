#include "pcdino/core/image.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>

#include "pcdino/core/error.hpp"
#include "tiff.hpp"

namespace pcdino {
namespace {

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

std::uint32_t big_endian(const std::string& b, std::size_t at, int bytes) {
  std::uint32_t v = 0;
  for (int k = 0; k < bytes; ++k)
    v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(k)]);
  return v;
}

// The width x height a PNG's IHDR chunk or a JPEG's start-of-frame marker in `head` claims; 0 for a JPEG
// whose frame is not in `head` (libjpeg then decides); nullopt when `head` is neither a PNG nor a JPEG. PNG:
// the 8-byte signature, then IHDR's length, type, width, height (PNG 1.2, section 11.2.2). JPEG: markers FF
// xx from SOI on, each but the standalone ones with a 2-byte length, until a SOFn (C0-CF but DHT C4, JPG C8,
// DAC CC) whose height and width follow its precision (ITU T.81, B.2.2). Between markers, as libjpeg's
// next_marker() (jdmarker.c) does, bytes other than FF and a stuffed FF 00 are skipped, not taken as the end:
// libjpeg decodes past such garbage (a 263-byte file whose frame followed it decoded to 7.2 M pixels).
// The signatures are those OpenCV 4.6's imread matches for libpng and libjpeg (grfmt_png.cpp's 8 bytes,
// grfmt_jpeg.cpp's FF D8 FF): its decoders are tried in a fixed order (loadsave.cpp), PNG and JPEG before
// DICOM, whose signature is "DICM" at byte 128; a file of FF D8 00 passed a 2-byte check, went to GDCM
// and crashed it (the image fuzzer's core/fuzz/corpus/image/crash-dicom-behind-a-jpeg-soi.jpg).
std::optional<std::uint64_t> claimed_pixels(const std::string& head) {
  if (head.size() >= 24 && head.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0 && head.compare(12, 4, "IHDR") == 0)
    return std::uint64_t{big_endian(head, 16, 4)} * big_endian(head, 20, 4);
  if (head.size() < 4 || head.compare(0, 3, "\xFF\xD8\xFF") != 0) return std::nullopt;
  for (std::size_t i = 2; i + 4 <= head.size();) {
    const auto marker = static_cast<unsigned char>(head[i + 1]);
    if (static_cast<unsigned char>(head[i]) != 0xFF || marker == 0xFF) {  // garbage, or a fill byte
      ++i;
      continue;
    }
    if (marker == 0x00) {  // a stuffed zero: no marker
      i += 2;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD9)) {  // TEM, RSTn, SOI, EOI: no length
      i += 2;
      continue;
    }
    const bool sof = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof)
      return i + 9 <= head.size() ? std::uint64_t{big_endian(head, i + 5, 2)} * big_endian(head, i + 7, 2)
                                  : 0;
    i += 2 + big_endian(head, i + 2, 2);
  }
  return 0;
}

// A PNG or JPEG whose header claims more pixels than its file could hold compressed is refused before
// OpenCV allocates them (a 1 KiB file claiming 30000 x 30000 px): at most kMaxCompressionRatio times the
// file's size, with 4 channels of 2 bytes a pixel. Any other content is refused too: OpenCV picks its
// decoder by a file's bytes, not its name, and a .png holding BMP, PNM, JPEG 2000 or WebP would otherwise
// be decoded with no claim checked (a 20-byte PNM header claims 400 MB).
void check_claimed_size(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return;  // OpenCV says why it cannot read it
  std::string head(static_cast<std::size_t>(std::min<std::uintmax_t>(size, 1u << 20)), '\0');
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    head.resize(std::fread(head.data(), 1, head.size(), f));
    std::fclose(f);
  }
  const std::optional<std::uint64_t> claim = claimed_pixels(head);
  if (!claim)
    throw DataError(path + ": neither a PNG nor a JPEG by its first bytes (pcdino reads .png as PNG and " +
                    ".jpg/.jpeg as JPEG; TIFFs need .tif/.tiff)");
  const std::uint64_t pixels = *claim;
  if (pixels > std::max<std::uint64_t>(size, 1) * kMaxCompressionRatio / 8) {
    throw DataError(path + ": its header claims " + std::to_string(pixels) + " pixels, more than a file of " +
                    std::to_string(size) + " bytes can hold (truncated or corrupt)");
  }
}

RawImage read_with_opencv(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0)
    throw NoInputError(path + ": cannot open image: " + std::strerror(errno));
  check_claimed_size(path);
  cv::Mat mat = cv::imread(path, cv::IMREAD_UNCHANGED);
  if (mat.empty()) throw DataError(path + ": cannot decode image (truncated, corrupt or unknown format)");
  if (mat.channels() == 3) cv::cvtColor(mat, mat, cv::COLOR_BGR2RGB);
  if (mat.channels() == 4) cv::cvtColor(mat, mat, cv::COLOR_BGRA2RGBA);
  RawImage img;
  img.height = mat.rows;
  img.width = mat.cols;
  img.channels = mat.channels();
  switch (mat.depth()) {
    case CV_8U:
      img.type = PixelType::kUint8;
      break;
    case CV_16U:
      img.type = PixelType::kUint16;
      break;
    case CV_32F:
      img.type = PixelType::kFloat32;
      break;
    default:
      throw DataError(path + ": unsupported pixel depth (supported: 8/16-bit unsigned, 32-bit float)");
  }
  const std::size_t row_bytes = std::size_t(img.width) * img.channels * pixel_size(img.type);
  img.bytes.resize(row_bytes * img.height);
  for (int y = 0; y < img.height; ++y) std::memcpy(img.bytes.data() + y * row_bytes, mat.ptr(y), row_bytes);
  return img;
}

template <class T>
void scale_channels(const RawImage& raw, const std::vector<int>& channels, int top, int left, Image& out) {
  const T* src = reinterpret_cast<const T*>(raw.bytes.data());
  const std::size_t plane = std::size_t(out.height) * out.width;
  for (std::size_t k = 0; k < channels.size(); ++k) {
    const int c = channels[k];
    float* dst = out.data.data() + k * plane;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int y = 0; y < out.height; ++y) {
      const T* row = src + (std::size_t(y + top) * raw.width + left) * raw.channels + c;
      float* drow = dst + std::size_t(y) * out.width;
      for (int x = 0; x < out.width; ++x) {
        const float v = static_cast<float>(row[std::size_t(x) * raw.channels]);
        drow[x] = v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    // Zero range: scDINO's later code divides by 1, which gives an all-zero channel.
    // Divide (as numpy does) rather than multiply by 1/range: the maximum maps to exactly 1.
    const float range = hi > lo ? hi - lo : 1.0f;
    for (std::size_t i = 0; i < plane; ++i) dst[i] = (dst[i] - lo) / range;
  }
}

}  // namespace

std::size_t pixel_size(PixelType type) noexcept {
  switch (type) {
    case PixelType::kUint8:
      return 1;
    case PixelType::kUint16:
      return 2;
    case PixelType::kFloat32:
      return 4;
  }
  return 1;
}

const char* pixel_type_name(PixelType type) noexcept {
  switch (type) {
    case PixelType::kUint8:
      return "uint8";
    case PixelType::kUint16:
      return "uint16";
    case PixelType::kFloat32:
      return "float32";
  }
  return "unknown";
}

float RawImage::at(int y, int x, int c) const {
  const std::size_t i = (std::size_t(y) * width + x) * channels + c;
  switch (type) {
    case PixelType::kUint8:
      return bytes[i];
    case PixelType::kUint16:
      return reinterpret_cast<const std::uint16_t*>(bytes.data())[i];
    case PixelType::kFloat32:
      return reinterpret_cast<const float*>(bytes.data())[i];
  }
  return 0;
}

RawImage read_image(const std::string& path, std::string* layout) {
  const std::string ext = lower_extension(path);
  if (ext == ".tif" || ext == ".tiff") return tiff::read(path, layout);
  if (layout != nullptr) *layout = "decoded by OpenCV (" + ext.substr(ext.empty() ? 0 : 1) + ")";
  return read_with_opencv(path);
}

Image preprocess(const RawImage& raw, const ImageTransform& transform, const std::string& source) {
  std::vector<int> channels = transform.channels;
  if (channels.empty()) {
    for (int c = 0; c < raw.channels; ++c) channels.push_back(c);
  }
  for (int c : channels) {
    if (c < 0 || c >= raw.channels) {
      throw DataError(source + ": meta.selected_channel_combination_per_run selects channel " +
                      std::to_string(c) + " but the image has " + std::to_string(raw.channels) +
                      " channel(s) (0.." + std::to_string(raw.channels - 1) + ")");
    }
  }
  int top = 0, left = 0, h = raw.height, w = raw.width;
  if (transform.center_crop > 0) {
    if (transform.center_crop > raw.height || transform.center_crop > raw.width) {
      throw DataError(source + ": meta.center_crop " + std::to_string(transform.center_crop) +
                      " is larger than the image (" + std::to_string(raw.height) + "x" +
                      std::to_string(raw.width) + ")");
    }
    // torchvision's CenterCrop: int(round((H - crop) / 2)), Python's round-half-to-even.
    top = static_cast<int>(std::nearbyint((raw.height - transform.center_crop) / 2.0));
    left = static_cast<int>(std::nearbyint((raw.width - transform.center_crop) / 2.0));
    h = w = transform.center_crop;
  }
  Image out;
  out.channels = static_cast<int>(channels.size());
  out.height = h;
  out.width = w;
  out.data.resize(std::size_t(out.channels) * h * w);
  switch (raw.type) {
    case PixelType::kUint8:
      scale_channels<std::uint8_t>(raw, channels, top, left, out);
      break;
    case PixelType::kUint16:
      scale_channels<std::uint16_t>(raw, channels, top, left, out);
      break;
    case PixelType::kFloat32:
      scale_channels<float>(raw, channels, top, left, out);
      break;
  }
  return out;
}

}  // namespace pcdino
