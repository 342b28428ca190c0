// pcdino meanstd: the mean/std stage, one process per MPI rank.
#include "pcdino/pipelines/meanstd.hpp"

#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>

#include "commands.hpp"
#include "pcdino/app/app.hpp"
#include "pcdino/core/mpi_world.hpp"

namespace pcdino::cli {

namespace {
struct MeanStdArgs {
  app::ConfigOptions config;
  int threads = 0;
};
}  // namespace

void add_meanstd_command(CLI::App& app) {
  auto args = std::make_shared<MeanStdArgs>();
  CLI::App* sub = app.add_subcommand(
      "meanstd", "Per-channel mean and std of the dataset (MPI: launch with srun --mpi=pmix or mpirun)");
  app::add_config_options(sub, args->config);
  sub->add_option("--threads", args->threads, "Decoding threads per rank (0 = this node's cores / its ranks)")
      ->capture_default_str();
  sub->callback([args] {
    app::run_mpi_stage(args->config, [&](const PipelineConfig& config, const MpiWorld& world) {
      const int threads = app::default_threads(args->threads, world.local_size());
      const pipelines::MeanStdReport r = pipelines::run_meanstd_stage(config, world, threads);
      spdlog::info("{} images on {} in {:.2f} s: {:.0f} images/s with {} thread(s)", r.images, world.host(),
                   r.seconds, r.images / std::max(r.seconds, 1e-9), threads);
      if (world.rank() == 0) {
        std::string mean, std;
        for (std::size_t c = 0; c < r.values.mean.size(); ++c) {
          mean += fmt::format("{}{:.6f}", c ? ", " : "", r.values.mean[c]);
          std += fmt::format("{}{:.6f}", c ? ", " : "", r.values.std[c]);
        }
        spdlog::info("mean [{}] std [{}] over {} images ({} skipped) from {} rank(s): wrote {}", mean, std,
                     r.total_images, r.skipped, world.size(), r.output_file);
      }
    });
  });
}

}  // namespace pcdino::cli
