// How the pages of a TIFF form one image. One page: its samples are the channels. Several pages: the
// file's metadata must say, in one of the formats of kFormats; each row restates that format's rule
// with its source, and the workshop's reading of it ([C, H, W] as its loader indexes the array).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <sstream>

#include "pcdino/core/error.hpp"
#include "tiff.hpp"

namespace pcdino::tiff {
namespace {

std::vector<Axis> page_axes(const PageShape& page) {
  const Axis y{std::size_t(page.height), Role::kY}, x{std::size_t(page.width), Role::kX},
      s{std::size_t(page.samples), Role::kChannel};
  if (page.planar) return {s, y, x};
  return {y, x, s};
}

std::vector<std::size_t> identity(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::string join(const std::vector<long long>& values) {
  std::string s = "[";
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

// --- tifffile's shaped series ---------------------------------------------------------------------
// tifffile (Debian 12: 2023.2.3) writes an array of any shape as pages of its last two dimensions (three
// when the last is RGB or the data is planar), and the whole shape as JSON in the first page's
// ImageDescription: {"shape": [50, 50, 5]}, with "axes" when the writer named them (tifffile.py,
// TiffWriter.write and shaped_description; read back by TiffFile._series_shaped). The pages' data in
// order is the array in C order. Axis letters are tifffile's TIFF.AXES: Y height, X width, C channel,
// S sample; others (Z depth, T time, Q unknown, ...) must have length 1 here. Without "axes" the
// workshop's loader decides: scDINO's dataset reads `tifffile.imread(path)` and indexes
// `image[:, :, selected_channels]`, channels last, so an array of three axes longer than 1 is [H, W, C].
bool is_tifffile_shaped(const std::string& description) {
  if (description.empty() || description.front() != '{') return false;
  const auto j = nlohmann::json::parse(description, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("shape") && j["shape"].is_array();
}

Role tifffile_axis_role(char letter) {
  switch (letter) {
    case 'Y':
      return Role::kY;
    case 'X':
      return Role::kX;
    case 'C':
    case 'S':
      return Role::kChannel;
    default:
      return Role::kOne;
  }
}

Stacking tifffile_shaped(const std::string& path, const PageShape& page, std::size_t count,
                         const std::string& description) {
  const auto j = nlohmann::json::parse(description);
  std::vector<long long> shape;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<long long>() < 1)
      throw DataError(path + ": tifffile's description has a malformed shape: " + j["shape"].dump());
    shape.push_back(d.get<long long>());
  }
  std::string axes_letters;
  if (j.contains("axes") && j["axes"].is_string()) axes_letters = j["axes"].get<std::string>();

  const unsigned long long held = count * static_cast<unsigned long long>(page.height) *
                                  static_cast<unsigned long long>(page.width) *
                                  static_cast<unsigned long long>(page.samples);
  unsigned long long values = 1;
  for (long long d : shape) {
    // Checked: a crafted shape must not wrap around to the pages' count.
    if (static_cast<unsigned long long>(d) > held / values) {
      values = held + 1;
      break;
    }
    values *= static_cast<unsigned long long>(d);
  }
  if (values != held) {
    throw DataError(path + ": tifffile's description gives shape " + join(shape) + " (" +
                    std::to_string(values) + " values) but the file's " + std::to_string(count) +
                    " pages of " + page.text() + " hold " + std::to_string(held) +
                    ": a file of several series or a truncated series is not read");
  }

  Stacking s;
  s.pages = identity(count);
  if (!axes_letters.empty()) {
    if (axes_letters.size() != shape.size()) {
      throw DataError(path + ": tifffile's description names axes '" + axes_letters + "' for shape " +
                      join(shape));
    }
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const Role role = tifffile_axis_role(axes_letters[i]);
      if (role == Role::kOne && shape[i] > 1) {
        throw DataError(path + ": tifffile's axes '" + axes_letters + "' of shape " + join(shape) +
                        " give axis " + axes_letters[i] + " " + std::to_string(shape[i]) +
                        " elements; pcdino reads one 2-D image with channels (axes Y, X, C or S) per file");
      }
      s.axes.push_back({std::size_t(shape[i]), role});
    }
    const auto count_role = [&s](Role r) {
      return std::count_if(s.axes.begin(), s.axes.end(), [r](const Axis& a) { return a.role == r; });
    };
    if (count_role(Role::kY) != 1 || count_role(Role::kX) != 1) {
      throw DataError(path + ": tifffile's axes '" + axes_letters + "' do not name one Y and one X axis");
    }
    s.layout = "tifffile shaped series " + join(shape) + ", axes " + axes_letters + ", " +
               std::to_string(count) + " pages";
    return s;
  }
  // No axes. Pages of several samples: the samples are the channels, as tifffile names them (S), and the
  // file must be that one page. Pages of one sample: the workshop's reading of tifffile.imread's array,
  // [H, W] or [H, W, C] channels last; leading length-1 axes beyond three are dropped.
  if (page.samples > 1) {
    if (count != 1) {
      throw DataError(
          path + ": tifffile's description gives shape " + join(shape) + " over " + std::to_string(count) +
          " pages of " + page.text() +
          " and names no axes: several images of several samples each; pcdino reads one 2-D image "
          "per file (name the axes with metadata={'axes': ...})");
    }
    s.axes = page_axes(page);
    s.layout = "tifffile shaped series " + join(shape) + ", one page, " + std::to_string(page.samples) +
               (page.planar ? " planar samples" : " contiguous samples");
    return s;
  }
  std::size_t first = 0;
  while (shape.size() - first > 3 && shape[first] == 1) ++first;
  const std::size_t rank = shape.size() - first;
  if (rank < 2 || rank > 3) {
    throw DataError(path + ": tifffile's description gives shape " + join(shape) +
                    " and names no axes; pcdino "
                    "reads [H, W] or [H, W, C] (channels last, as the workshop indexes tifffile.imread's "
                    "array), or axes named by the writer (tifffile.imwrite(path, data, metadata={'axes': "
                    "'CYX'}))");
  }
  s.axes = {{std::size_t(shape[first]), Role::kY}, {std::size_t(shape[first + 1]), Role::kX}};
  if (rank == 3) s.axes.push_back({std::size_t(shape[first + 2]), Role::kChannel});
  s.layout = "tifffile shaped series " + join(shape) + ", channels last (the workshop's [:, :, c]), " +
             std::to_string(count) + (count == 1 ? " page" : " pages");
  return s;
}

// --- ImageJ hyperstacks ---------------------------------------------------------------------------
// ImageJ's description starts "ImageJ=" and gives images=, channels=, slices=, frames= (1 when absent);
// its pages hold the planes with the channel varying fastest, then the slice, then the frame
// (ij/ImagePlus.java, getStackIndex: (frame-1)*channels*slices + (slice-1)*channels + channel). When
// channels*slices*frames is not images, ImageJ opens the file as a stack of images slices
// (ij/io/FileOpener.java). One 2-D image per file: slices and frames must be 1; the channel index is
// the page's (times the page's samples, for RGB pages).
bool is_imagej(const std::string& description) {
  return description.rfind("ImageJ=", 0) == 0;
}

Stacking imagej(const std::string& path, const PageShape& page, std::size_t count,
                const std::string& description) {
  std::map<std::string, long long> keys{
      {"images", static_cast<long long>(count)}, {"channels", 1}, {"slices", 1}, {"frames", 1}};
  std::istringstream in(description);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq);
    if (keys.count(key) == 0) continue;
    char* end = nullptr;
    const long long v = std::strtoll(line.c_str() + eq + 1, &end, 10);
    if (end == line.c_str() + eq + 1 || v < 1)
      throw DataError(path + ": ImageJ description has a malformed line '" + line + "'");
    keys[key] = v;
  }
  const long long images = keys["images"];
  long long channels = keys["channels"], slices = keys["slices"], frames = keys["frames"];
  if (channels * slices * frames != images) {
    channels = frames = 1;
    slices = images;
  }
  if (slices > 1 || frames > 1) {
    throw DataError(path + ": an ImageJ stack of " + std::to_string(channels) + " channel(s), " +
                    std::to_string(slices) + " slice(s) and " + std::to_string(frames) +
                    " frame(s); pcdino reads one 2-D image per file (channels=N with slices and frames 1)");
  }
  if (static_cast<unsigned long long>(images) != count) {
    throw DataError(path + ": its ImageJ description gives images=" + std::to_string(images) +
                    " but the file has " + std::to_string(count) +
                    " pages (ImageJ's one-IFD files of contiguous planes are not read)");
  }
  Stacking s;
  s.pages = identity(count);
  s.axes.push_back({count, Role::kChannel});
  for (const Axis& a : page_axes(page)) s.axes.push_back(a);
  s.layout = "ImageJ hyperstack, channels=" + std::to_string(channels) + ", one page per channel";
  return s;
}

// --- OME-TIFF -------------------------------------------------------------------------------------
// OME-XML in the first page's ImageDescription (OME-TIFF specification, OME Data Model 2016-06): the
// first Image's Pixels element gives SizeX, SizeY, SizeC (samples included), SizeZ, SizeT; its
// TiffData elements map planes to IFDs: IFD (default 0), PlaneCount (default 1 when IFD is given, else
// every IFD), FirstC/FirstZ/FirstT (default 0), planes counted in DimensionOrder; a UUID child's
// FileName names another file. One 2-D image per file: SizeZ and SizeT must be 1, so the planes are the
// channels in order whatever the DimensionOrder.
bool is_ome(const std::string& description) {
  return description.find("<OME") != std::string::npos || description.find(":OME") != std::string::npos;
}

std::string local_name(const pugi::xml_node& n) {
  const std::string name = n.name();
  const auto colon = name.find(':');
  return colon == std::string::npos ? name : name.substr(colon + 1);
}

pugi::xml_node find_local(const pugi::xml_node& parent, const std::string& name) {
  for (pugi::xml_node n : parent.children()) {
    if (local_name(n) == name) return n;
  }
  return {};
}

Stacking ome(const std::string& path, const PageShape& page, std::size_t count,
             const std::string& description) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_string(description.c_str());
  if (!parsed) throw DataError(path + ": its OME-XML does not parse: " + parsed.description());
  const pugi::xml_node root = find_local(doc, "OME");
  const pugi::xml_node pixels = find_local(find_local(root, "Image"), "Pixels");
  if (!pixels) throw DataError(path + ": its OME-XML has no Image with Pixels");
  const auto size = [&](const char* key) { return pixels.attribute(key).as_llong(1); };
  const long long size_c = size("SizeC"), size_z = size("SizeZ"), size_t_ = size("SizeT");
  if (size_z != 1 || size_t_ != 1) {
    throw DataError(path + ": its OME-XML describes SizeZ " + std::to_string(size_z) + " and SizeT " +
                    std::to_string(size_t_) + "; pcdino reads one 2-D image per file (SizeZ and SizeT 1)");
  }
  if (size("SizeX") != page.width || size("SizeY") != page.height || size_c % page.samples != 0) {
    throw DataError(path + ": its OME-XML gives SizeX " + std::to_string(size("SizeX")) + ", SizeY " +
                    std::to_string(size("SizeY")) + ", SizeC " + std::to_string(size_c) +
                    " but its pages are " + page.text());
  }
  if (size_c < 1 || static_cast<unsigned long long>(size_c / page.samples) != count) {
    throw DataError(path + ": its first OME image has SizeC " + std::to_string(size_c) + " (" +
                    std::to_string(size_c / page.samples) + " planes of " + std::to_string(page.samples) +
                    " samples) but the file has " + std::to_string(count) +
                    " pages; files of several images are not read");
  }
  const std::size_t planes = std::size_t(size_c / page.samples);
  // A TiffData's UUID names the file that holds its planes: this one when it is the root's UUID (the file
  // may have been renamed since), or when its FileName is this file's name.
  const std::string own_uuid = root.attribute("UUID").as_string();
  std::vector<long long> ifd_of(planes, -1);
  bool any_tiffdata = false;
  const std::string own_name = std::filesystem::path(path).filename().string();
  for (pugi::xml_node td : pixels.children()) {
    if (local_name(td) != "TiffData") continue;
    any_tiffdata = true;
    const pugi::xml_node uuid = find_local(td, "UUID");
    const bool own = !uuid || (!own_uuid.empty() && own_uuid == uuid.text().as_string()) ||
                     !uuid.attribute("FileName") || own_name == uuid.attribute("FileName").as_string();
    if (!own) {
      throw DataError(path + ": its OME-XML puts planes in another file ('" +
                      std::string(uuid.attribute("FileName").as_string()) +
                      "'); multi-file OME-TIFF datasets are not read");
    }
    const bool has_ifd = static_cast<bool>(td.attribute("IFD"));
    const long long first_ifd = td.attribute("IFD").as_llong(0);
    // PlaneCount, or NumPlanes in files of the 2008 schema, which tifffile also reads.
    const pugi::xml_attribute planes_attribute =
        td.attribute("PlaneCount") ? td.attribute("PlaneCount") : td.attribute("NumPlanes");
    const long long plane_count =
        planes_attribute ? planes_attribute.as_llong(0) : (has_ifd ? 1 : static_cast<long long>(count));
    const long long first_c = td.attribute("FirstC").as_llong(0);
    for (long long k = 0; k < plane_count; ++k) {
      const long long c = first_c + k;
      if (c < 0 || c >= static_cast<long long>(planes) || first_ifd + k >= static_cast<long long>(count)) {
        throw DataError(path + ": its OME-XML maps plane " + std::to_string(c) + " to IFD " +
                        std::to_string(first_ifd + k) + ", outside its " + std::to_string(planes) +
                        " channel planes or its " + std::to_string(count) + " pages");
      }
      ifd_of[std::size_t(c)] = first_ifd + k;
    }
  }
  if (!any_tiffdata) {
    for (std::size_t c = 0; c < planes; ++c) ifd_of[c] = static_cast<long long>(c);
  }
  Stacking s;
  for (std::size_t c = 0; c < planes; ++c) {
    if (ifd_of[c] < 0)
      throw DataError(path + ": its OME-XML maps no page to channel plane " + std::to_string(c));
    s.pages.push_back(std::size_t(ifd_of[c]));
  }
  s.axes.push_back({planes, Role::kChannel});
  for (const Axis& a : page_axes(page)) s.axes.push_back(a);
  s.layout = "OME-XML, SizeC " + std::to_string(size_c) + " (DimensionOrder " +
             pixels.attribute("DimensionOrder").as_string("?") + "), one page per channel plane";
  return s;
}

// The metadata formats that can say how several pages form one image, tried in this order.
struct MultiPageFormat {
  const char* name;
  std::function<bool(const std::string& description)> describes;
  std::function<Stacking(const std::string&, const PageShape&, std::size_t, const std::string&)> plan;
};

const std::vector<MultiPageFormat>& formats() {
  static const std::vector<MultiPageFormat> table = {
      {"tifffile's shaped series ({\"shape\": [...]})", is_tifffile_shaped, tifffile_shaped},
      {"an ImageJ hyperstack (channels=)", is_imagej, imagej},
      {"OME-XML (SizeC)", is_ome, ome},
  };
  return table;
}

}  // namespace

std::string PageShape::text() const {
  return std::to_string(height) + "x" + std::to_string(width) + ", " + std::to_string(samples) +
         (samples == 1 ? " sample, " : " samples, ") + pixel_type_name(type) +
         (planar && samples > 1 ? ", planar" : "");
}

Stacking plan_stacking(const std::string& path, const PageShape& page, std::size_t page_count,
                       const std::string& description) {
  if (page_count == 1 && !is_tifffile_shaped(description)) {
    Stacking s;
    s.pages = {0};
    s.axes = page_axes(page);
    s.layout = "one page, " + std::to_string(page.samples) +
               (page.samples == 1 ? " sample per pixel"
                : page.planar     ? " planar samples"
                                  : " contiguous samples");
    return s;
  }
  for (const MultiPageFormat& f : formats()) {
    if (f.describes(description)) return f.plan(path, page, page_count, description);
  }
  std::string accepted;
  for (const MultiPageFormat& f : formats()) accepted += (accepted.empty() ? "" : ", ") + std::string(f.name);
  throw DataError(
      path + ": a TIFF of " + std::to_string(page_count) + " pages (" + page.text() +
      " each) whose metadata does not say how they form one image; pcdino reads one-page TIFFs (any "
      "samples per pixel, contiguous or planar) and multi-page TIFFs described in the first page's "
      "ImageDescription by " +
      accepted +
      ". Rewrite the image as one page, e.g. tifffile.imwrite(path, hwc, "
      "photometric='minisblack', planarconfig='contig')");
}

}  // namespace pcdino::tiff
