// Images as every stage sees them: decoded from TIFF (libtiff; any channel count, 8/16-bit unsigned or
// 32-bit float, multi-page files stacked as their metadata says) or PNG/JPEG (OpenCV), then cropped,
// channel-selected and min-max scaled to [0, 1] per channel as scDINO does before normalisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pcdino {

/// Pixel type of stored images.
enum class PixelType : std::uint8_t { kUint8, kUint16, kFloat32 };

/// Bytes per sample of `type` (1, 2 or 4).
std::size_t pixel_size(PixelType type) noexcept;

/// Name used in HDF5 attributes and messages: "uint8", "uint16", "float32".
const char* pixel_type_name(PixelType type) noexcept;

/// An image exactly as stored, channels last: `bytes` holds [H, W, C] samples of `type` in native byte
/// order (the layout of a contiguous multi-channel TIFF). Used for lossless packing.
struct RawImage {
  int height = 0;
  int width = 0;
  int channels = 0;
  PixelType type = PixelType::kUint8;
  std::vector<std::uint8_t> bytes;  ///< height * width * channels * pixel_size(type) bytes

  /// Sample (y, x, c) converted to float.
  float at(int y, int x, int c) const;
};

/// A decoded image for the models: float32, channels first, [C, H, W] in `data`.
struct Image {
  int channels = 0;
  int height = 0;
  int width = 0;
  std::vector<float> data;  ///< channels * height * width values
};

/// How many times its file's size the compressed data of an image or dataset may claim, checked before
/// anything of the claimed size is allocated: no codec pcdino meets makes more bytes than this of one
/// (PackBits 64, deflate about 1,032, LZW's 12-bit codes about 2,730, a one-colour JPEG about 200; zstd and
/// LZMA can on a constant image, which no microscope writes). The TIFF, PNG/JPEG and features.h5 readers'.
inline constexpr std::uint64_t kMaxCompressionRatio = 4096;

/// Reads an image file into [H, W, C]. TIFF (libtiff): strips or tiles, contiguous or separate planes,
/// 1..N samples per pixel of 8/16-bit unsigned integers or 32-bit floats. A one-page TIFF's samples are
/// its channels. A multi-page TIFF is the one image its pages form as the first page's ImageDescription
/// says, read as `tifffile.imread` gives it and the workshop indexes it (core/src/tiff_layout.cpp has the
/// rules and their sources): tifffile's shaped series (`{"shape": [H, W, C]}`, channels last, or its
/// named axes), an ImageJ hyperstack (`channels=`, one page per channel) or OME-XML (SizeC planes).
/// PNG/JPEG: through OpenCV, colour converted to RGB order. `layout`, when given, receives a line on how
/// the file was read ("tifffile shaped series [50, 50, 5], channels last ...").
/// Throws NoInputError if the file cannot be opened, DataError naming the file and what is wrong if it
/// is truncated, corrupt, of an unsupported sample format, or a multi-page TIFF whose pages differ in
/// shape, whose metadata does not say how they form one image, or that holds more than one 2-D image
/// (a z-stack, a time series, several series): never its first page alone.
RawImage read_image(const std::string& path, std::string* layout = nullptr);

/// Writes `image` as an uncompressed, contiguous TIFF (one strip per row block), atomically: a temporary
/// file in the same directory renamed into place. Throws CantCreateError if it cannot be written.
void write_tiff(const std::string& path, const RawImage& image);

/// Options of the per-image preprocessing shared by all stages.
struct ImageTransform {
  std::vector<int> channels;  ///< channel indices to keep, in this order; empty = all
  int center_crop = 0;        ///< side of the centred square crop in pixels; 0 = none
};

/// Centre-crops (as torchvision's CenterCrop: top = round((H - crop) / 2)), selects channels, and scales
/// each channel to [0, 1] by its own minimum and maximum over the image. A channel with zero range
/// becomes all zeros (range taken as 1, as scDINO's later code does), never NaN.
/// Result [C_selected, H', W']. Throws DataError naming `source` if a channel index is >= the image's
/// channel count or the crop is larger than the image.
Image preprocess(const RawImage& raw, const ImageTransform& transform, const std::string& source);

}  // namespace pcdino
