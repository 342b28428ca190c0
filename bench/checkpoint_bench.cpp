// A checkpoint's write and read at the workshop's model (sbatch/examples/workshop.yaml: vit_small/16, 5
// channels, out_dim 65536, AdamW: about 700 MB): pcdino's save_checkpoint, read_checkpoint_state (what every
// epoch's write and every resume reads first) and load_checkpoint, each the median of REPEATS runs, in
// seconds. bench/checkpoint.sh runs PyTorch's torch.save / torch.load of the same file beside it.
//
//   build/bench/pcdino_checkpoint_bench DIR [REPEATS]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "pcdino/core/run_files.hpp"
#include "pcdino/train/checkpoint.hpp"

namespace {

using pcdino::train::DinoHead;
using pcdino::train::MultiCropWrapper;
using pcdino::train::VisionTransformer;
using pcdino::train::VitOptions;

MultiCropWrapper workshop_model() {
  const VitOptions o = VitOptions::preset("vit_small", 16, 5, 224);
  return MultiCropWrapper(VisionTransformer(o), DinoHead(384, 65536));
}

// The median seconds of `repeats` calls of `f`.
double median_seconds(int repeats, const std::function<void()>& f) {
  std::vector<double> s;
  for (int i = 0; i < repeats; ++i) {
    const auto t = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: %s DIR [REPEATS]: times a workshop-sized checkpoint's write and reads in DIR\n",
                 argv[0]);
    return argc < 2 ? 64 : 0;
  }
  const std::string path = pcdino::ModelFiles{argv[1]}.checkpoint();
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  torch::manual_seed(0);
  MultiCropWrapper student = workshop_model(), teacher = workshop_model();
  torch::optim::AdamW optimizer(student->parameters(), torch::optim::AdamWOptions(1e-4));
  // One step, so that the optimizer holds its two moments per parameter, as after an epoch.
  for (auto& p : student->parameters()) p.mutable_grad() = torch::randn_like(p);
  optimizer.step();
  pcdino::train::DinoLoss loss(65536, 10, 0.04, 0.04, 0, 100);
  pcdino::train::CheckpointState state;
  state.epoch = 1;
  const double save = median_seconds(
      repeats, [&] { pcdino::train::save_checkpoint(path, student, teacher, optimizer, loss, state); });
  const double peek = median_seconds(repeats, [&] { pcdino::train::read_checkpoint_state(path); });
  const double load = median_seconds(
      repeats, [&] { pcdino::train::load_checkpoint(path, student, teacher, optimizer, loss); });
  std::printf("bytes %ju\nsave_checkpoint %.3f\nread_checkpoint_state %.3f\nload_checkpoint %.3f\n",
              static_cast<std::uintmax_t>(std::filesystem::file_size(path)), save, peek, load);
  return 0;
}
