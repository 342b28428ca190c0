#include "pcdino/pipelines/dataset_check.hpp"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <optional>
#include <tuple>

#include "pcdino/core/error.hpp"
#include "pcdino/core/prefetch.hpp"

namespace pcdino::pipelines {

namespace {

struct Decoded {
  std::optional<RawImage> image;  // nullopt: failed, `error` says why
  std::string layout;
  std::string error;
};

constexpr std::size_t kUnreadableShown = 10;

}  // namespace

DatasetCheck check_dataset(const Dataset& dataset, int threads) {
  const auto start = std::chrono::steady_clock::now();
  DatasetCheck check;
  check.images = dataset.size();
  std::map<int, std::size_t> per_class;
  for (std::size_t i = 0; i < dataset.size(); ++i) ++per_class[dataset.class_index(i)];
  for (const auto& [c, n] : per_class) check.classes.emplace_back(dataset.classes().at(std::size_t(c)), n);

  Prefetcher<Decoded> images(
      dataset.size(),
      [&dataset](std::size_t i) {
        Decoded d;
        try {
          if (dataset.packed()) {
            d.image = dataset.read(i);
            d.layout = "packed HDF5";
          } else {
            d.image = read_image(dataset.source(i), &d.layout);
          }
        } catch (const Error& e) {
          d.error = e.what();
        }
        return d;
      },
      std::max(1, threads), static_cast<std::size_t>(64 * std::max(1, threads)), 16);

  using Key = std::tuple<int, int, int, PixelType, std::string>;
  std::map<Key, std::size_t> group_of;
  int first_channels = 0;
  std::string first_path;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const auto item = images.next();
    if (!item->image) {
      check.unreadable.push_back(item->error);
      continue;
    }
    const RawImage& img = *item->image;
    const Key key{img.height, img.width, img.channels, img.type, item->layout};
    auto [it, added] = group_of.emplace(key, check.groups.size());
    if (added) {
      check.groups.push_back(
          {img.height, img.width, img.channels, img.type, item->layout, 0, dataset.relative_path(i)});
    }
    ++check.groups[it->second].count;
    if (first_path.empty()) {
      first_channels = img.channels;
      first_path = dataset.relative_path(i);
    } else if (img.channels != first_channels && check.channel_mismatch.empty()) {
      check.channel_mismatch = dataset.relative_path(i) + " has " + std::to_string(img.channels) +
                               " channel(s), the first image " + first_path + " " +
                               std::to_string(first_channels);
    }
  }
  check.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return check;
}

std::string format_dataset_check(const DatasetCheck& check, const std::string& dataset_dir) {
  std::string out = fmt::format("dataset {}: {} images in {} classes, decoded in {:.1f} s\n", dataset_dir,
                                check.images, check.classes.size(), check.seconds);
  out += "  classes:";
  for (std::size_t c = 0; c < check.classes.size(); ++c) {
    out += fmt::format("{} {} {}", c ? "," : "", check.classes[c].first, check.classes[c].second);
  }
  out += "\n\n";
  out += fmt::format("  {:>8}  {:>11}  {:>8}  {:<7}  {:<30}  {}\n", "images", "H x W", "channels", "type",
                     "example", "layout");
  bool channels_first_hint = false;
  for (const ImageGroup& g : check.groups) {
    out += fmt::format("  {:>8}  {:>11}  {:>8}  {:<7}  {:<30}  {}\n", g.count,
                       fmt::format("{}x{}", g.height, g.width), g.channels, pixel_type_name(g.type),
                       g.example, g.layout);
    channels_first_hint = channels_first_hint || (g.channels > g.height && g.channels > g.width);
  }
  if (channels_first_hint) {
    out +=
        "\n  note: some images have more channels than rows and columns. An array written channels first "
        "without named axes (tifffile.imwrite(path, chw)) is read channels last, as the workshop's "
        "tifffile.imread(path)[:, :, c] reads it; write [H, W, C] or name the axes "
        "(metadata={'axes': 'CYX'}).\n";
  }
  out += "\n";
  if (!check.unreadable.empty()) {
    out += fmt::format("  {} image(s) cannot be read:\n", check.unreadable.size());
    for (std::size_t i = 0; i < check.unreadable.size() && i < kUnreadableShown; ++i)
      out += "    " + check.unreadable[i] + "\n";
    if (check.unreadable.size() > kUnreadableShown)
      out += fmt::format("    ... and {} more\n", check.unreadable.size() - kUnreadableShown);
  }
  if (!check.channel_mismatch.empty()) out += "  channel counts differ: " + check.channel_mismatch + "\n";
  if (check.ok()) {
    out += fmt::format("  ok: every image decodes, all with {} channel(s)\n",
                       check.groups.empty() ? 0 : check.groups.front().channels);
  }
  return out;
}

}  // namespace pcdino::pipelines
