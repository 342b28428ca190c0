// TIFF through libtiff: every page read in its own storage order, the pages stacked as plan_stacking()
// says, and the stacked axes transposed to [H, W, C].
#include "tiff.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

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

// A file read whole into memory, for libtiff through TIFFClientOpen: its map procedure hands libtiff the
// buffer, so that every directory and strip is read from memory. A tifffile-written [H, W, C] cell is H
// pages of W x C: read from the file, each page's directory cost a seek and several reads (bench/loader.sh:
// 60% of a 50-page cell's loading time went to those system calls).
struct MemoryFile {
  std::vector<std::uint8_t> bytes;
  toff_t position = 0;
};

MemoryFile& memory_file(thandle_t handle) {
  return *static_cast<MemoryFile*>(handle);
}
tmsize_t memory_read(thandle_t handle, void* buffer, tmsize_t size) {
  MemoryFile& f = memory_file(handle);
  if (size < 0 || f.position >= f.bytes.size()) return 0;
  const auto n = std::min<toff_t>(static_cast<toff_t>(size), f.bytes.size() - f.position);
  std::memcpy(buffer, f.bytes.data() + f.position, n);
  f.position += n;
  return static_cast<tmsize_t>(n);
}
tmsize_t memory_write(thandle_t, void*, tmsize_t) {
  return 0;  // opened for reading only
}
toff_t memory_seek(thandle_t handle, toff_t offset, int whence) {
  MemoryFile& f = memory_file(handle);
  const toff_t base = whence == SEEK_CUR ? f.position : whence == SEEK_END ? f.bytes.size() : 0;
  f.position = base + offset;  // past the end is allowed, as for a file: reads there return nothing
  return f.position;
}
int memory_close(thandle_t) {
  return 0;
}
toff_t memory_size(thandle_t handle) {
  return memory_file(handle).bytes.size();
}
int memory_map(thandle_t handle, void** base, toff_t* size) {
  MemoryFile& f = memory_file(handle);
  *base = f.bytes.data();
  *size = f.bytes.size();
  return 1;
}
void memory_unmap(thandle_t, void*, toff_t) {}

// Files up to this size are read whole (one read); larger ones are memory-mapped by libtiff.
constexpr off_t kReadWholeBytes = off_t{64} << 20;

TIFF* open_memory(const std::string& name, MemoryFile& memory) {
  return TIFFClientOpen(name.c_str(), "r", &memory, memory_read, memory_write, memory_seek, memory_close,
                        memory_size, memory_map, memory_unmap);
}

// Opens `path` for reading: small regular files from memory (`memory` keeps their bytes), others mapped.
// `file_bytes` receives the file's size. Returns null when libtiff cannot read it (the caller says why).
TIFF* open_for_reading(const std::string& path, MemoryFile& memory, double& file_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  const bool known = ::fstat(fd, &st) == 0;
  file_bytes = known ? static_cast<double>(st.st_size) : 0;
  bool whole = known && S_ISREG(st.st_mode) && st.st_size <= kReadWholeBytes;
  if (whole) {
    memory.bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < memory.bytes.size()) {
      const ssize_t n = ::read(fd, memory.bytes.data() + done, memory.bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    memory.bytes.resize(done);  // a file cut while we read: libtiff finds it short and says so
  }
  ::close(fd);
  if (!whole) return TIFFOpen(path.c_str(), "r");
  file_bytes = static_cast<double>(memory.bytes.size());
  return open_memory(path, memory);
}

[[noreturn]] void tiff_fail(const std::string& path, const std::string& what) {
  std::string msg = path + ": " + what;
  if (!tiff_last_error.empty()) msg += " (" + tiff_last_error + ")";
  throw DataError(msg);
}

// A corrupt header must not make us allocate gigabytes: 1 GiB of pixels is far beyond any image here.
constexpr double kMaxImageBytes = static_cast<double>(1u << 30);
// Nor a small file claim a large image: uncompressed, a file holds its pixels; compressed, at most
// kMaxCompressionRatio (image.hpp) times them.

// The most pixel bytes the current page of a file of `file_bytes` can hold.
double max_pixel_bytes(TIFF* tif, double file_bytes) {
  uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
  return std::min(
      kMaxImageBytes,
      file_bytes * (compression == COMPRESSION_NONE ? 1.0 : static_cast<double>(kMaxCompressionRatio)));
}

// "page N: " before what is wrong with a page other than the first (a one-page file's messages stay as they
// were).
std::string page_prefix(std::size_t index) {
  return index == 0 ? "" : "page " + std::to_string(index) + ": ";
}

tiff::PageShape page_shape(TIFF* tif, const std::string& path, std::size_t index) {
  const std::string where = page_prefix(index);
  uint32_t width = 0, height = 0;
  uint16_t spp = 1, bps = 8, format = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height)) {
    tiff_fail(path, where + "TIFF without image width or length");
  }
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  tiff::PageShape page;
  page.width = static_cast<int>(width);
  page.height = static_cast<int>(height);
  page.samples = spp;
  page.planar = planar == PLANARCONFIG_SEPARATE && spp > 1;
  if (bps == 8 && format == SAMPLEFORMAT_UINT) {
    page.type = PixelType::kUint8;
  } else if (bps == 16 && format == SAMPLEFORMAT_UINT) {
    page.type = PixelType::kUint16;
  } else if (bps == 32 && format == SAMPLEFORMAT_IEEEFP) {
    page.type = PixelType::kFloat32;
  } else {
    tiff_fail(path, where + "unsupported TIFF sample format: " + std::to_string(bps) + "-bit " +
                        (format == SAMPLEFORMAT_INT      ? "signed integer"
                         : format == SAMPLEFORMAT_IEEEFP ? "float"
                                                         : "unsigned integer") +
                        " (supported: 8/16-bit unsigned, 32-bit float)");
  }
  if (width == 0 || height == 0 || spp == 0) tiff_fail(path, where + "empty image");
  if (static_cast<double>(width) * height * spp * (bps / 8) > kMaxImageBytes) {
    tiff_fail(path, where + "implausible image size " + std::to_string(width) + "x" + std::to_string(height) +
                        "x" + std::to_string(spp) + " (more than 1 GiB of pixels)");
  }
  return page;
}

std::size_t page_bytes(const tiff::PageShape& p) {
  return std::size_t(p.height) * std::size_t(p.width) * std::size_t(p.samples) * pixel_size(p.type);
}

// The current page (page `index`) in its storage order ([H, W, S] contiguous, [S, H, W] planar) into `dst`.
void read_page(TIFF* tif, const std::string& path, const tiff::PageShape& page, std::size_t index,
               std::uint8_t* dst, double file_bytes) {
  const std::string where = page_prefix(index);
  const std::size_t ps = pixel_size(page.type), spp = std::size_t(page.samples);
  const auto width = static_cast<uint32_t>(page.width), height = static_cast<uint32_t>(page.height);
  const std::size_t total = page_bytes(page);
  if (TIFFIsTiled(tif)) {
    if (page.planar) tiff_fail(path, where + "tiled TIFF with separate planes is not supported");
    uint32_t tw = 0, th = 0;
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    const tmsize_t tile_bytes = TIFFTileSize(tif);
    if (static_cast<double>(tile_bytes) > max_pixel_bytes(tif, file_bytes))
      tiff_fail(path, where + "implausible tile size " + std::to_string(tw) + "x" + std::to_string(th) +
                          " for a file of " + std::to_string(static_cast<long long>(file_bytes)) + " bytes");
    std::vector<std::uint8_t> tile(static_cast<std::size_t>(std::max<tmsize_t>(0, tile_bytes)));
    if (tw == 0 || th == 0 || tile.size() < std::size_t(tw) * th * spp * ps) {
      tiff_fail(path, where + "unsupported tile layout (subsampled or malformed tiles)");
    }
    const std::size_t row_bytes = std::size_t(width) * spp * ps;
    for (uint32_t y0 = 0; y0 < height; y0 += th) {
      for (uint32_t x0 = 0; x0 < width; x0 += tw) {
        if (TIFFReadTile(tif, tile.data(), x0, y0, 0, 0) < 0)
          tiff_fail(path, where + "truncated or corrupt tile");
        const std::size_t tile_row = std::size_t(tw) * spp * ps;
        const std::size_t copy = std::size_t(std::min(tw, width - x0)) * spp * ps;
        for (uint32_t y = y0; y < std::min(y0 + th, height); ++y) {
          std::memcpy(dst + y * row_bytes + std::size_t(x0) * spp * ps, tile.data() + (y - y0) * tile_row,
                      copy);
        }
      }
    }
    return;
  }
  // Strips: a planar page's strips hold plane 0's rows, then plane 1's, ...: read in order, they are
  // [S, H, W]; a contiguous page's are [H, W, S].
  const tstrip_t strips = TIFFNumberOfStrips(tif);
  std::size_t offset = 0;
  for (tstrip_t s = 0; s < strips && offset < total; ++s) {
    const tmsize_t n = TIFFReadEncodedStrip(tif, s, dst + offset, static_cast<tmsize_t>(total - offset));
    if (n < 0) tiff_fail(path, where + "truncated or corrupt strip " + std::to_string(s));
    offset += static_cast<std::size_t>(n);
  }
  if (offset < total) tiff_fail(path, where + "truncated: image data ends early");
}

// The stacked data (C order over `axes`) as [H, W, C], channel axes combined major first.
RawImage to_hwc(const std::vector<tiff::Axis>& axes, PixelType type, std::vector<std::uint8_t> data) {
  RawImage img;
  img.type = type;
  img.height = img.width = img.channels = 1;
  std::vector<const tiff::Axis*> kept;  // the axes longer than 1 and their roles, in order
  for (const tiff::Axis& a : axes) {
    if (a.role == tiff::Role::kY) img.height = static_cast<int>(a.extent);
    if (a.role == tiff::Role::kX) img.width = static_cast<int>(a.extent);
    if (a.role == tiff::Role::kChannel) img.channels *= static_cast<int>(a.extent);
    if (a.extent > 1) kept.push_back(&a);
  }
  // Already [H, W, C] when the axes longer than 1 come Y, X, then channels in order.
  const auto rank = [](tiff::Role r) { return r == tiff::Role::kY ? 0 : r == tiff::Role::kX ? 1 : 2; };
  if (std::is_sorted(kept.begin(), kept.end(), [&](const tiff::Axis* a, const tiff::Axis* b) {
        return rank(a->role) < rank(b->role);
      })) {
    img.bytes = std::move(data);
    return img;
  }
  // Output stride of each kept axis, in samples.
  std::vector<std::size_t> out_stride(kept.size());
  std::size_t channel_stride = 1;
  for (std::size_t k = kept.size(); k-- > 0;) {
    switch (kept[k]->role) {
      case tiff::Role::kY:
        out_stride[k] = std::size_t(img.width) * img.channels;
        break;
      case tiff::Role::kX:
        out_stride[k] = std::size_t(img.channels);
        break;
      default:
        out_stride[k] = channel_stride;
        channel_stride *= kept[k]->extent;
    }
  }
  const std::size_t ps = pixel_size(type), n = data.size() / ps;
  img.bytes.resize(data.size());
  std::vector<std::size_t> index(kept.size(), 0);
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(img.bytes.data() + out * ps, data.data() + i * ps, ps);
    // Odometer over the input's C order, the output offset carried along.
    for (std::size_t k = kept.size(); k-- > 0;) {
      out += out_stride[k];
      if (++index[k] < kept[k]->extent) break;
      out -= out_stride[k] * kept[k]->extent;
      index[k] = 0;
    }
  }
  return img;
}

}  // namespace

namespace tiff {

namespace {

// The image of an open TIFF of `file_bytes` bytes, named `path` in messages.
RawImage read_open(TIFF* tif_handle, const std::string& path, double file_bytes, std::string* layout) {
  TiffPtr tif(tif_handle);
  const PageShape page = page_shape(tif.get(), path, 0);
  char* text = nullptr;
  const std::string description =
      TIFFGetField(tif.get(), TIFFTAG_IMAGEDESCRIPTION, &text) && text != nullptr ? text : "";

  // Every page must have the first one's shape: list the shapes when they differ.
  std::size_t count = 1;
  std::string shapes = "page 0: " + page.text();
  bool differ = false;
  while (TIFFReadDirectory(tif.get()) == 1) {
    const PageShape other = page_shape(tif.get(), path, count);
    if (!(other == page)) {
      differ = true;
      if (std::count(shapes.begin(), shapes.end(), ';') < 8)
        shapes += "; page " + std::to_string(count) + ": " + other.text();
    }
    ++count;
  }
  // TIFFReadDirectory() also ends on a directory it cannot read: never take that for the last page.
  if (!tiff_last_error.empty()) tiff_fail(path, "cannot read the directory of page " + std::to_string(count));
  if (differ) {
    throw DataError(path + ": a TIFF of " + std::to_string(count) + " pages of differing shapes (" + shapes +
                    "); pcdino reads pages of one shape that form one image, or a one-page TIFF");
  }
  const Stacking stacking = plan_stacking(path, page, count, description);
  const double claimed = static_cast<double>(page_bytes(page)) * static_cast<double>(stacking.pages.size());
  if (claimed > kMaxImageBytes) {
    tiff_fail(path, "implausible image size: " + std::to_string(stacking.pages.size()) + " pages of " +
                        page.text() + " (more than 1 GiB of pixels)");
  }
  if (!TIFFSetDirectory(tif.get(), 0)) tiff_fail(path, "cannot read page 0");
  if (claimed > max_pixel_bytes(tif.get(), file_bytes)) {  // before allocating what the header claims
    tiff_fail(path, "implausible image size: " + std::to_string(stacking.pages.size()) + " page(s) of " +
                        page.text() + " in a file of " + std::to_string(static_cast<long long>(file_bytes)) +
                        " bytes (truncated, or a corrupt header)");
  }
  std::vector<std::uint8_t> data(page_bytes(page) * stacking.pages.size());
  for (std::size_t k = 0; k < stacking.pages.size(); ++k) {
    if (!TIFFSetDirectory(tif.get(), static_cast<tdir_t>(stacking.pages[k])))
      tiff_fail(path, "cannot read page " + std::to_string(stacking.pages[k]));
    read_page(tif.get(), path, page, stacking.pages[k], data.data() + k * page_bytes(page), file_bytes);
  }
  if (layout != nullptr) *layout = stacking.layout;
  return to_hwc(stacking.axes, page.type, std::move(data));
}

}  // namespace

RawImage read(const std::string& path, std::string* layout) {
  tiff_last_error.clear();
  MemoryFile memory;
  double file_bytes = 0;
  TIFF* tif = open_for_reading(path, memory, file_bytes);
  if (!tif) {
    if (access(path.c_str(), R_OK) != 0)
      throw NoInputError(path + ": cannot open image: " + std::strerror(errno));
    tiff_fail(path, "not a readable TIFF file");
  }
  return read_open(tif, path, file_bytes, layout);
}

RawImage read_bytes(const std::string& bytes, const std::string& name, std::string* layout) {
  tiff_last_error.clear();
  MemoryFile memory;
  memory.bytes.assign(bytes.begin(), bytes.end());
  TIFF* tif = open_memory(name, memory);
  if (!tif) tiff_fail(name, "not a readable TIFF file");
  return read_open(tif, name, static_cast<double>(bytes.size()), layout);
}

}  // namespace tiff

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

}  // namespace pcdino
