// TIFF reading behind read_image(): the pages of a file stacked into the one image they form (tiff.cpp),
// as the file's own metadata says (tiff_layout.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "pcdino/core/image.hpp"

namespace pcdino::tiff {

/// One page (IFD) as libtiff describes it.
struct PageShape {
  int height = 0;
  int width = 0;
  int samples = 1;      ///< samples per pixel
  bool planar = false;  ///< PlanarConfiguration 2: the page's data is [S, H, W], else [H, W, S]
  PixelType type = PixelType::kUint8;

  bool operator==(const PageShape& other) const {
    return height == other.height && width == other.width && samples == other.samples &&
           planar == other.planar && type == other.type;
  }
  /// "50x5, 1 sample, uint16" (height x width), for messages.
  std::string text() const;
};

/// What an axis of the stacked data is, in the image pcdino makes of it.
enum class Role { kY, kX, kChannel, kOne };

/// One axis of the pages' data read one after the other (page order, then each page's own storage
/// order), as a C-order array: its length and its role.
struct Axis {
  std::size_t extent = 1;
  Role role = Role::kOne;
};

/// How the pages of one file form one image.
struct Stacking {
  std::vector<std::size_t> pages;  ///< the file's pages (IFD indices) in the order their data is stacked
  std::vector<Axis> axes;          ///< the stacked data's axes, outermost first; channel axes combine major
                                   ///< first into the image's channel index
  std::string layout;              ///< what decided it, for `pcdino dataset check`
};

/// The stacking of a file with `page_count` pages all of shape `page`, whose first page's
/// ImageDescription is `description` ("" when absent). One page: its own samples are the channels.
/// Several pages: the first metadata format (tifffile's shaped series, ImageJ's hyperstack, OME-XML)
/// whose description this is decides; each format's rule and source are in tiff_layout.cpp.
/// Throws DataError naming `path` when no format describes the pages, or when the description
/// contradicts them or describes more than one 2-D image (a z-stack, a time series, several series).
Stacking plan_stacking(const std::string& path, const PageShape& page, std::size_t page_count,
                       const std::string& description);

/// Reads a TIFF file into [H, W, C] (see read_image()); `layout`, when given, receives how its pages
/// were stacked. Throws NoInputError if it cannot be opened, DataError (naming the file) otherwise.
RawImage read(const std::string& path, std::string* layout);

/// read() of a TIFF held in memory (`bytes`, named `name` in messages): the fuzz target's way in. Throws
/// DataError naming `name`.
RawImage read_bytes(const std::string& bytes, const std::string& name, std::string* layout);

}  // namespace pcdino::tiff
