#include "pcdino/core/image.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"

namespace pcdino {
namespace {

// libtiff reports through a global handler; keep the last message per thread for our exceptions.
thread_local std::string tiff_last_error;

void tiff_error_handler(const char* module, const char* fmt, va_list args) {
  char buffer[512];
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  tiff_last_error = (module != nullptr ? std::string(module) + ": " : std::string()) + buffer;
}

void tiff_warning_handler(const char*, const char*, va_list) {}  // unknown tags etc. are not our business

struct TiffHandlers {
  TiffHandlers() {
    TIFFSetErrorHandler(tiff_error_handler);
    TIFFSetWarningHandler(tiff_warning_handler);
  }
};
const TiffHandlers tiff_handlers;

struct TiffCloser {
  void operator()(TIFF* t) const { TIFFClose(t); }
};
using TiffPtr = std::unique_ptr<TIFF, TiffCloser>;

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

[[noreturn]] void tiff_fail(const std::string& path, const std::string& what) {
  std::string msg = path + ": " + what;
  if (!tiff_last_error.empty()) msg += " (" + tiff_last_error + ")";
  throw DataError(msg);
}

RawImage read_tiff(const std::string& path) {
  tiff_last_error.clear();
  // "m": no memory mapping; for small files mmap/munmap cost more than a read.
  TiffPtr tif(TIFFOpen(path.c_str(), "rm"));
  if (!tif) {
    if (access(path.c_str(), R_OK) != 0)
      throw NoInputError(path + ": cannot open image: " + std::strerror(errno));
    tiff_fail(path, "not a readable TIFF file");
  }
  uint32_t width = 0, height = 0;
  uint16_t spp = 1, bps = 8, format = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG;
  if (!TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &width) ||
      !TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &height)) {
    tiff_fail(path, "TIFF without image width or length");
  }
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif.get(), TIFFTAG_PLANARCONFIG, &planar);

  RawImage img;
  img.width = static_cast<int>(width);
  img.height = static_cast<int>(height);
  img.channels = spp;
  if (bps == 8 && format == SAMPLEFORMAT_UINT) {
    img.type = PixelType::kUint8;
  } else if (bps == 16 && format == SAMPLEFORMAT_UINT) {
    img.type = PixelType::kUint16;
  } else if (bps == 32 && format == SAMPLEFORMAT_IEEEFP) {
    img.type = PixelType::kFloat32;
  } else {
    tiff_fail(path, "unsupported TIFF sample format: " + std::to_string(bps) + "-bit " +
                        (format == SAMPLEFORMAT_INT      ? "signed integer"
                         : format == SAMPLEFORMAT_IEEEFP ? "float"
                                                         : "unsigned integer") +
                        " (supported: 8/16-bit unsigned, 32-bit float)");
  }
  if (width == 0 || height == 0 || spp == 0) tiff_fail(path, "empty image");
  // A corrupt header must not make us allocate gigabytes: 1 GiB of pixels is far beyond any image here.
  if (static_cast<double>(width) * height * spp * (bps / 8) > static_cast<double>(1u << 30)) {
    tiff_fail(path, "implausible image size " + std::to_string(width) + "x" + std::to_string(height) + "x" +
                        std::to_string(spp) + " (more than 1 GiB of pixels)");
  }
  const std::size_t ps = pixel_size(img.type);
  const std::size_t row_bytes = std::size_t(width) * spp * ps;
  img.bytes.assign(row_bytes * height, 0);

  if (TIFFIsTiled(tif.get())) {
    if (planar != PLANARCONFIG_CONTIG) tiff_fail(path, "tiled TIFF with separate planes is not supported");
    uint32_t tw = 0, th = 0;
    TIFFGetField(tif.get(), TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif.get(), TIFFTAG_TILELENGTH, &th);
    std::vector<std::uint8_t> tile(static_cast<std::size_t>(std::max<tmsize_t>(0, TIFFTileSize(tif.get()))));
    if (tw == 0 || th == 0 || tile.size() < std::size_t(tw) * th * spp * pixel_size(img.type)) {
      tiff_fail(path, "unsupported tile layout (subsampled or malformed tiles)");
    }
    for (uint32_t y0 = 0; y0 < height; y0 += th) {
      for (uint32_t x0 = 0; x0 < width; x0 += tw) {
        if (TIFFReadTile(tif.get(), tile.data(), x0, y0, 0, 0) < 0)
          tiff_fail(path, "truncated or corrupt tile");
        const std::size_t tile_row = std::size_t(tw) * spp * ps;
        const std::size_t copy = std::size_t(std::min(tw, width - x0)) * spp * ps;
        for (uint32_t y = y0; y < std::min(y0 + th, height); ++y) {
          std::memcpy(img.bytes.data() + y * row_bytes + std::size_t(x0) * spp * ps,
                      tile.data() + (y - y0) * tile_row, copy);
        }
      }
    }
  } else if (planar == PLANARCONFIG_CONTIG || spp == 1) {
    const tstrip_t strips = TIFFNumberOfStrips(tif.get());
    std::size_t offset = 0;
    for (tstrip_t s = 0; s < strips && offset < img.bytes.size(); ++s) {
      const tmsize_t n = TIFFReadEncodedStrip(tif.get(), s, img.bytes.data() + offset,
                                              static_cast<tmsize_t>(img.bytes.size() - offset));
      if (n < 0) tiff_fail(path, "truncated or corrupt strip " + std::to_string(s));
      offset += static_cast<std::size_t>(n);
    }
    if (offset < img.bytes.size()) tiff_fail(path, "truncated: image data ends early");
  } else {
    // Separate planes: read each plane, then interleave to channels last.
    const tstrip_t strips = TIFFNumberOfStrips(tif.get());
    const tstrip_t per_plane = strips / spp;
    std::vector<std::uint8_t> plane(std::size_t(width) * height * ps);
    for (uint16_t c = 0; c < spp; ++c) {
      std::size_t offset = 0;
      for (tstrip_t s = 0; s < per_plane && offset < plane.size(); ++s) {
        const tmsize_t n = TIFFReadEncodedStrip(tif.get(), c * per_plane + s, plane.data() + offset,
                                                static_cast<tmsize_t>(plane.size() - offset));
        if (n < 0) tiff_fail(path, "truncated or corrupt strip of plane " + std::to_string(c));
        offset += static_cast<std::size_t>(n);
      }
      if (offset < plane.size()) tiff_fail(path, "truncated: plane " + std::to_string(c) + " ends early");
      for (std::size_t p = 0; p < std::size_t(width) * height; ++p) {
        std::memcpy(img.bytes.data() + (p * spp + c) * ps, plane.data() + p * ps, ps);
      }
    }
  }
  return img;
}

RawImage read_with_opencv(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0)
    throw NoInputError(path + ": cannot open image: " + std::strerror(errno));
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

RawImage read_image(const std::string& path) {
  const std::string ext = lower_extension(path);
  if (ext == ".tif" || ext == ".tiff") return read_tiff(path);
  return read_with_opencv(path);
}

void write_tiff(const std::string& path, const RawImage& image) {
  const std::string tmp = temporary_name(path);
  tiff_last_error.clear();
  {
    TiffPtr tif(TIFFOpen(tmp.c_str(), "w"));
    if (!tif) throw CantCreateError(path + ": cannot create TIFF file (" + tiff_last_error + ")");
    const uint16_t bps = static_cast<uint16_t>(8 * pixel_size(image.type));
    TIFFSetField(tif.get(), TIFFTAG_IMAGEWIDTH, static_cast<uint32_t>(image.width));
    TIFFSetField(tif.get(), TIFFTAG_IMAGELENGTH, static_cast<uint32_t>(image.height));
    TIFFSetField(tif.get(), TIFFTAG_SAMPLESPERPIXEL, static_cast<uint16_t>(image.channels));
    TIFFSetField(tif.get(), TIFFTAG_BITSPERSAMPLE, bps);
    TIFFSetField(tif.get(), TIFFTAG_SAMPLEFORMAT,
                 image.type == PixelType::kFloat32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
    TIFFSetField(tif.get(), TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif.get(), TIFFTAG_PHOTOMETRIC,
                 image.channels == 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif.get(), TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    TIFFSetField(tif.get(), TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(tif.get(), 0));
    const std::size_t row_bytes = std::size_t(image.width) * image.channels * pixel_size(image.type);
    for (int y = 0; y < image.height; ++y) {
      // libtiff takes a non-const buffer but does not modify it for uncompressed data.
      auto* row = const_cast<std::uint8_t*>(image.bytes.data() + y * row_bytes);
      if (TIFFWriteScanline(tif.get(), row, static_cast<uint32_t>(y), 0) < 0) {
        std::remove(tmp.c_str());
        throw CantCreateError(path + ": cannot write TIFF row (" + tiff_last_error + ")");
      }
    }
  }
  rename_into_place(tmp, path);
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
