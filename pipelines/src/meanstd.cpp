#include "pcdino/pipelines/meanstd.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <optional>

#include "pcdino/core/error.hpp"
#include "pcdino/core/fs.hpp"
#include "pcdino/core/prefetch.hpp"
#include "pcdino/core/run_files.hpp"
#include "pcdino/core/split.hpp"
#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::pipelines {

void Moments::add(const float* values, std::size_t n) {
  if (n == 0) return;
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += values[i];
  const double mean_b = sum / static_cast<double>(n);
  double m2_b = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = values[i] - mean_b;
    m2_b += d * d;
  }
  merge(Moments{static_cast<double>(n), mean_b, m2_b});
}

void Moments::merge(const Moments& other) {
  if (other.count == 0) return;
  if (count == 0) {
    *this = other;
    return;
  }
  const double n = count + other.count;
  const double delta = other.mean - mean;
  mean += delta * other.count / n;
  m2 += other.m2 + delta * delta * count * other.count / n;
  count = n;
}

double Moments::variance() const {
  return count > 0 ? m2 / count : 0.0;
}

std::vector<Moments> accumulate_moments(const Dataset& dataset, const std::vector<std::size_t>& indices,
                                        const ImageTransform& transform, int threads, bool skip_corrupt,
                                        std::vector<std::string>* skipped,
                                        const std::function<void()>& on_image) {
  struct Item {
    std::size_t k = 0;
    std::optional<Image> image;  // nullopt: skipped
  };
  std::vector<std::string> local_skipped;
  std::mutex skipped_mutex;
  Prefetcher<Item> images(
      indices.size(),
      [&](std::size_t k) -> Item {
        try {
          return {k, dataset.load(indices[k], transform)};
        } catch (const DataError& e) {
          if (!skip_corrupt) throw;
          std::lock_guard<std::mutex> lock(skipped_mutex);
          local_skipped.push_back(e.what());
          return {k, std::nullopt};
        }
      },
      threads, static_cast<std::size_t>(64 * std::max(1, threads)), 16);

  std::vector<Moments> moments;
  std::string first;  // the image that set the channel count
  while (auto item = images.next()) {
    if (!item->image) continue;
    const Image& img = *item->image;
    if (moments.empty()) {
      moments.resize(static_cast<std::size_t>(img.channels));
      first = dataset.source(indices[item->k]);
    }
    if (static_cast<std::size_t>(img.channels) != moments.size()) {
      throw DataError(
          "images with different channel counts: " + dataset.source(indices[item->k]) + " has " +
          std::to_string(img.channels) + ", " + first + " has " + std::to_string(moments.size()) +
          " (after meta.selected_channel_combination_per_run; `pcdino dataset check` lists them all)");
    }
    const std::size_t plane = static_cast<std::size_t>(img.height) * static_cast<std::size_t>(img.width);
    for (std::size_t c = 0; c < moments.size(); ++c) moments[c].add(img.data.data() + c * plane, plane);
    if (on_image) on_image();
  }
  if (skipped != nullptr) skipped->insert(skipped->end(), local_skipped.begin(), local_skipped.end());
  return moments;
}

MeanStdReport run_meanstd_stage(const PipelineConfig& config, const MpiWorld& world, int threads) {
  MeanStdReport report;
  const Dataset dataset = Dataset::open(config.meta, world);
  const auto sample =
      mean_std_sample(dataset.size(), config.train.fraction_for_mean_std_calc, config.meta.seed);
  if (sample.empty()) {
    throw ConfigError(config.source + ": train_scDINO.fraction_for_mean_std_calc " +
                      std::to_string(config.train.fraction_for_mean_std_calc) + " of " +
                      std::to_string(dataset.size()) + " images selects no image");
  }
  const auto mine = shard(sample, world.rank(), world.size());
  const ImageTransform transform{config.selected_channels(), config.meta.center_crop};

  const auto start = std::chrono::steady_clock::now();
  monitoring::MetricsFile metrics({config.monitoring.textfile_dir, config.monitoring.interval_seconds},
                                  monitoring::labels_from_environment("meanstd", world.rank()));
  std::size_t counted = 0;
  const auto on_image = [&] {
    metrics.add("pcdino_meanstd_images_total", 1);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics.set("pcdino_meanstd_images_per_second", static_cast<double>(++counted) / std::max(seconds, 1e-9));
  };
  std::vector<std::string> skipped;
  const auto moments =
      accumulate_moments(dataset, mine, transform, threads, config.meta.skip_corrupt, &skipped, on_image);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.images = mine.size() - skipped.size();

  // Every rank sends the same number of values: the channel count of what the ranks read (a rank that
  // read nothing, or skipped everything, has none of its own).
  const auto width = static_cast<std::size_t>(world.allreduce_max(static_cast<long long>(moments.size())));
  if (!moments.empty() && moments.size() != width) {
    throw DataError("images with different channel counts across ranks: rank " +
                    std::to_string(world.rank()) + "'s have " + std::to_string(moments.size()) + " (from " +
                    dataset.source(mine.front()) + " on), another rank's " + std::to_string(width) +
                    " (`pcdino dataset check` lists the images by channel count)");
  }
  std::vector<double> flat(3 * width + 1, 0.0);
  flat[0] = static_cast<double>(report.images);
  for (std::size_t c = 0; c < moments.size() && c < width; ++c) {
    flat[1 + 3 * c] = moments[c].count;
    flat[2 + 3 * c] = moments[c].mean;
    flat[3 + 3 * c] = moments[c].m2;
  }
  const auto all = world.gather(flat);
  std::string skipped_text;
  for (const auto& s : skipped) skipped_text += s + "\n";
  const auto all_skipped = world.gather(skipped_text);

  if (world.rank() != 0) return report;

  std::vector<Moments> total(width);
  for (int r = 0; r < world.size(); ++r) {
    const double* f = all.data() + static_cast<std::size_t>(r) * flat.size();
    report.total_images += static_cast<std::size_t>(f[0]);
    for (std::size_t c = 0; c < width; ++c) total[c].merge(Moments{f[1 + 3 * c], f[2 + 3 * c], f[3 + 3 * c]});
  }
  if (report.total_images == 0) throw DataError("no image of the sample could be read (all were skipped)");
  for (const auto& m : total) {
    report.values.mean.push_back(m.mean);
    report.values.std.push_back(std::sqrt(m.variance()));
  }

  const RunLayout layout(config);
  report.output_file = layout.mean_std;
  std::string skipped_report;
  for (const auto& s : all_skipped) skipped_report += s;
  if (!skipped_report.empty()) {
    for (char ch : skipped_report) report.skipped += ch == '\n' ? 1 : 0;
    write_file_atomic(layout.skipped_images, skipped_report);
  }
  write_file_atomic(layout.config_dump, dump_config(config));
  write_file_atomic(report.output_file, format_mean_std(report.values));
  return report;
}

}  // namespace pcdino::pipelines
