// pcdino-extract: the CLS feature stage as its own program (it loads LibTorch); `pcdino extract` runs it.
// One process per MPI rank, launched by srun --mpi=pmix or mpirun, or alone.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "pcdino/app/app.hpp"
#include "pcdino/core/error.hpp"
#include "pcdino/core/mpi_world.hpp"
#include "pcdino/pipelines/extract.hpp"
#include "pcdino/train/process.hpp"

int main(int argc, char** argv) {
  pcdino::train::tune_process(argv);
  using pcdino::ExitCode;
  using pcdino::to_int;
  CLI::App app{
      "pcdino extract: CLS features of the held-out split with a trained ViT, to "
      "{run_dir}/CLS_features/features.h5 and the workshop's CSV files (MPI: launch with srun "
      "--mpi=pmix or mpirun)",
      "pcdino extract"};
  pcdino::app::ConfigOptions config;
  pcdino::pipelines::ExtractOptions options;
  bool no_csv = false;
  pcdino::app::add_config_options(&app, config);
  app.add_option("--checkpoint", options.checkpoint,
                 "Checkpoint to embed with (default {run_dir}/scDINO_ViTs/{dino_vit_name}/checkpoint.pth)");
  app.add_flag("--random-init", options.random_init,
               "Embed with a randomly initialised ViT of train_scDINO's arch (seeded by meta.seed): the "
               "baseline a trained model must beat")
      ->excludes("--checkpoint");
  app.add_flag("--raw-pixels", options.raw_pixels,
               "No model: the normalised pixels (C x H x W values) are the features, the baseline a "
               "representation must beat")
      ->excludes("--checkpoint")
      ->excludes("--random-init");
  app.add_option("--threads", options.threads,
                 "LibTorch intra-op threads per rank, also the most OpenBLAS threads (0: LibTorch's default)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option(
         "--loader-threads", options.loader_threads,
         "Decoding threads per rank (0: downstream_analyses.compute_cls_features.num_workers, at least 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--output", options.output, "Features file (default {run_dir}/CLS_features/features.h5)");
  app.add_option("--device", options.device,
                 "auto (a GPU per local rank if LibTorch sees one), cpu, cuda or cuda:N")
      ->capture_default_str();
  app.add_flag("--no-csv", no_csv, "Write only the HDF5 file, not the workshop's CSV exports");
  return pcdino::app::run_command_line(app, argc, argv, [&] {
    options.write_csv = !no_csv;
    pcdino::app::run_mpi_stage(config, [&](const pcdino::PipelineConfig& pipeline,
                                           const pcdino::MpiWorld& world) {
      const auto r = pcdino::pipelines::run_extract_stage(pipeline, world, options);
      if (world.rank() == 0) {
        spdlog::info(
            "{} held-out images embedded ({} dimensions) by {} rank(s) from {}{}: {:.1f} images/s; wrote {}",
            r.images, r.dim, world.size(),
            options.raw_pixels    ? "the raw pixels"
            : options.random_init ? "a randomly initialised ViT"
                                  : r.checkpoint,
            r.epoch >= 0 ? " (epoch " + std::to_string(r.epoch) + ")" : "", r.images_per_second, r.output);
      }
    });
    return to_int(ExitCode::kOk);
  });
}
