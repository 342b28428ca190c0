// Gradient allreduce over MPI ranks (or NCCL on GPUs) on the gradient tensors of DINO's vit_small student
// (~150 tensors: the backbone's ~21.7 M parameters and the head's ~22 M): (a) one allreduce per tensor,
// (b) fused buffers (GradientFusion: Horovod's 128 MiB threshold, and PyTorch DDP's 25 MiB buckets with a
// 1 MiB first one), (c) one allreduce of a single buffer of the same total size. Prints one table on rank
// 0: seconds per step (mean of --reps after one warm-up), algorithm bandwidth (bytes / time) and bus
// bandwidth in the nccl-tests convention (busbw = algbw x 2(n-1)/n).
//
// usage: mpirun -np N pcdino_allreduce_bench [--device cpu|cuda] [--reps R] [--out-dim D] [--arch A --patch P
//        --image PX --channels C] (the student: default vit_small/16, 3 channels, 224 px)
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "pcdino/core/mpi_world.hpp"
#include "pcdino/train/comm.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/dino.hpp"
#include "pcdino/train/fusion.hpp"

namespace {

using namespace pcdino::train;

double seconds_per_step(Communicator& comm, const torch::Device& device, int reps,
                        const std::function<void()>& step) {
  double total = 0;
  for (int r = 0; r <= reps; ++r) {
    comm.barrier();
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    step();
    if (device.is_cuda()) torch::cuda::synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) total += s;  // the first is a warm-up
  }
  // The slowest rank's time is the step's.
  double mean = total / reps, slowest = 0;
  MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_spec = "cpu";
  std::string arch = "vit_small";
  int reps = 5, out_dim = 65536, patch = 16, image = 224, channels = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--device")) device_spec = argv[i + 1];
    // The model whose gradients are reduced: bench/scale_model.py's check takes bench/train_ranks.sh's.
    if (!std::strcmp(argv[i], "--arch")) arch = argv[i + 1];
    if (!std::strcmp(argv[i], "--patch")) patch = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--image")) image = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--channels")) channels = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--out-dim")) out_dim = std::stoi(argv[i + 1]);
  }
  pcdino::MpiWorld world;
  const torch::Device device = select_device(device_spec, world.local_rank());
  torch::set_num_threads(1);
  const VitOptions vit = VitOptions::preset(arch, patch, channels, image);
  MultiCropWrapper student(VisionTransformer(vit), DinoHead(vit.embed_dim, out_dim));
  student->to(device);
  std::vector<torch::Tensor> params;
  std::size_t bytes = 0;
  for (auto& p : student->parameters()) {
    if (!p.requires_grad()) continue;
    p.mutable_grad() = torch::randn_like(p);
    params.push_back(p);
    bytes += static_cast<std::size_t>(p.numel()) * 4;
  }
  auto comm = make_communicator(world, device);
  const int n = world.size();
  std::vector<torch::Tensor> grads;
  for (auto& p : params) grads.push_back(p.grad());

  FusionOptions horovod;
  FusionOptions ddp;
  ddp.threshold_bytes = 25ULL << 20;
  ddp.first_bucket_bytes = 1ULL << 20;
  GradientFusion fused(*comm, params, horovod), bucketed(*comm, params, ddp);
  auto flat = torch::randn({static_cast<int64_t>(bytes / 4)}, torch::TensorOptions().device(device));

  struct Row {
    std::string name;
    double seconds;
  };
  std::vector<Row> rows;
  rows.push_back({"(a) one per tensor", seconds_per_step(*comm, device, reps, [&] {
                    for (auto& g : grads) {
                      std::vector<torch::Tensor> one{g};
                      comm->allreduce(one, ReduceOp::kAverage);
                    }
                  })});
  rows.push_back({"(b) fused, 128 MiB", seconds_per_step(*comm, device, reps, [&] { fused.reduce_now(); })});
  rows.push_back(
      {"(b) fused, 25 MiB + 1 MiB", seconds_per_step(*comm, device, reps, [&] { bucketed.reduce_now(); })});
  rows.push_back({"(c) one buffer", seconds_per_step(*comm, device, reps, [&] {
                    std::vector<torch::Tensor> one{flat};
                    comm->allreduce(one, ReduceOp::kAverage);
                  })});
  // The overlapped path through autograd hooks, on this device (a CUDA backward runs the hooks on
  // autograd's device thread): fused gradients equal the plain backward's averaged ones.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  const auto x = torch::randn({4, channels, image, image}, torch::TensorOptions().device(device));
  student->forward(std::vector<torch::Tensor>{x}).pow(2).mean().backward();
  std::vector<torch::Tensor> expected;
  for (auto& p : params) expected.push_back(p.grad().clone());
  comm->allreduce(expected, ReduceOp::kAverage);
  GradientFusion hooked(*comm, params, ddp);
  hooked.attach();
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  student->forward(std::vector<torch::Tensor>{x}).pow(2).mean().backward();
  hooked.finish();
  double worst = 0;
  for (std::size_t i = 0; i < params.size(); ++i)
    worst = std::max(worst, (params[i].grad() - expected[i]).abs().max().item<double>());

  if (world.rank() == 0) {
    std::printf("# hooks during backward on %s: max |fused - allreduced| = %.3g over %zu tensors\n",
                device.str().c_str(), worst, params.size());
    std::printf(
        "# pcdino_allreduce_bench: %s, %d rank(s), %zu tensors, %.1f MB of float32 gradients, %d reps\n",
        comm->backend().c_str(), n, params.size(), static_cast<double>(bytes) / 1e6, reps);
    std::printf("%-28s %6s %8s %7s %11s %11s %9s\n", "case", "ranks", "buffers", "s/step", "algbw GB/s",
                "busbw GB/s", "vs (c)");
    const double single = rows.back().seconds;
    const std::size_t buffers[] = {params.size(), fused.buckets().size(), bucketed.buckets().size(), 1};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double algbw = static_cast<double>(bytes) / rows[i].seconds / 1e9;
      std::printf("%-28s %6d %8zu %7.4f %11.2f %11.2f %8.2fx\n", rows[i].name.c_str(), n, buffers[i],
                  rows[i].seconds, algbw, algbw * 2.0 * (n - 1) / n, rows[i].seconds / single);
    }
  }
  return 0;
}
