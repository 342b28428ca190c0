// Unit tests of device selection, the autocast type choice and float16 loss scaling (what can be checked
// without a GPU; the CUDA path itself runs on GPU machines, bench/RESULTS.md).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pcdino/core/error.hpp"
#include "pcdino/train/device.hpp"
#include "pcdino/train/dino.hpp"
#include "pcdino/train/kernel_profile.hpp"
#include "pcdino/train/multi_tensor.hpp"
#include "pcdino/train/phase_clock.hpp"
#include "pcdino/train/process.hpp"

namespace pcdino::train {
namespace {

// The program is linked to bind its libstdc++ calls to the system's libstdc++, not to the copy a PyTorch
// wheel's libtorch.so exports (cmake/PcdinoDependencies.cmake): the system's is loaded before any LibTorch
// library, and std::filesystem::remove_all resolves into it. With libtorch.so first, that call crashed every
// test whose TempDir held a folder on 2.11.0+cu130. Debian's LibTorch exports no such copy, so here the load
// order is what can fail.
TEST(Device, ProgramsBindTheSystemsLibstdcxx) {
  std::vector<std::string> loaded;  // in load order: the program, then its libraries breadth-first
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name ? info->dlpi_name : "");
        return 0;
      },
      &loaded);
  const auto first = [&](const std::string& part) {
    for (std::size_t k = 0; k < loaded.size(); ++k) {
      if (std::filesystem::path(loaded[k]).filename().string().find(part) != std::string::npos) return k;
    }
    return loaded.size();
  };
  const std::size_t libstdcxx = first("libstdc++.so"), libtorch = first("libtorch");
  ASSERT_LT(libstdcxx, loaded.size()) << "libstdc++ not loaded";
  ASSERT_LT(libtorch, loaded.size()) << "no LibTorch library loaded";
  EXPECT_LT(libstdcxx, libtorch) << loaded[libtorch] << " is loaded before " << loaded[libstdcxx];
  // std::filesystem::remove_all(const path&, error_code&), as the dynamic linker binds it.
  void* symbol = dlsym(RTLD_DEFAULT, "_ZNSt10filesystem10remove_allERKNS_7__cxx114pathERSt10error_code");
  ASSERT_NE(symbol, nullptr);
  Dl_info where{};
  ASSERT_NE(dladdr(symbol, &where), 0);
  EXPECT_NE(std::string(where.dli_fname).find("libstdc++.so"), std::string::npos) << where.dli_fname;
}

TEST(Device, SelectionAndErrorsNameTheOption) {
  EXPECT_TRUE(select_device("cpu", 3).is_cpu());
  if (!torch::cuda::is_available()) {
    EXPECT_TRUE(select_device("auto", 0).is_cpu());
    try {
      select_device("cuda", 0);
      FAIL() << "cuda without a GPU must be an error";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--device cuda"), std::string::npos) << e.what();
    }
  } else {
    const auto d = select_device("cuda", 1);
    EXPECT_EQ(d.index(), 1 % static_cast<int>(torch::cuda::device_count()));
  }
  EXPECT_THROW(select_device("gpu", 0), ConfigError);
  EXPECT_THROW(select_device("cuda:x", 0), ConfigError);
}

// --threads caps OpenBLAS's threads as well as LibTorch's (LibTorch links Debian's OpenBLAS here); a
// user's OPENBLAS_NUM_THREADS wins over both.
TEST(Process, OpenMpWaitsBrieflyUnlessTheUserChose) {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  const auto chosen = openmp_wait_settings(nullptr, nullptr);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0], (std::pair<std::string, std::string>{"OMP_WAIT_POLICY", "PASSIVE"}));
  EXPECT_EQ(chosen[1].first, "GOMP_SPINCOUNT");
  const long spins = std::stol(chosen[1].second);
  EXPECT_GT(spins, 0) << "PASSIVE without a spin wakes every parallel region through the kernel";
  EXPECT_LE(spins, 1000000) << "libgomp's ~100,000 spins a millisecond: more starves the loader thread";
  EXPECT_EQ(openmp_wait_settings("ACTIVE", nullptr), Settings{}) << "the user's policy wins";
  EXPECT_EQ(openmp_wait_settings(nullptr, "0"), Settings{}) << "the user's spin count wins";
}

TEST(Process, BlasThreadsFollowTheThreadsOption) {
  if (::dlsym(RTLD_DEFAULT, "openblas_set_num_threads") == nullptr)
    GTEST_SKIP() << "the BLAS is not OpenBLAS";
  ::unsetenv("SLURM_CPUS_PER_TASK");
  ::unsetenv("OPENBLAS_NUM_THREADS");
  EXPECT_EQ(share_blas_threads(1, 1), 1);
  EXPECT_GE(share_blas_threads(1), 1);
  ::setenv("OPENBLAS_NUM_THREADS", "2", 1);
  EXPECT_EQ(share_blas_threads(1, 1), 0) << "the user's setting stays";
  ::unsetenv("OPENBLAS_NUM_THREADS");
}

// Gaudi and NeuronCores have no LibTorch backend: asking for them is refused with the reason; the
// pipeline's slurm.accelerator fills in --device auto.
TEST(Device, GaudiAndNeuronAreRefusedAndTheAcceleratorKeyChoosesAuto) {
  for (const char* spec : {"hpu", "habana", "neuron"}) {
    try {
      select_device(spec, 0);
      ADD_FAILURE() << spec << " must be refused";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.code(), ExitCode::kConfig);
      EXPECT_NE(std::string(e.what()).find("pcdino does not train or extract on"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(device_option("auto", "nvidia"), "cuda");
  EXPECT_EQ(device_option("auto", "cpu"), "cpu");
  EXPECT_EQ(device_option("auto", "auto"), "auto");
  EXPECT_EQ(device_option("cuda:1", "cpu"), "cuda:1") << "an explicit --device wins";
}

TEST(Device, AutocastTypes) {
  // On a CPU: bfloat16 where it has AMX or AVX512_BF16 (this machine's /proc/cpuinfo decides which is
  // checked), forced by "bfloat16" anywhere, never float16.
  const torch::Device cpu(torch::kCPU);
  const bool amx = cpu_has_flag("amx_bf16"), avx512 = cpu_has_flag("avx512_bf16");
  if (amx || avx512) {
    EXPECT_EQ(autocast_dtype(cpu, "auto"), torch::kBFloat16);
    ASSERT_NE(cpu_bfloat16_unit(), nullptr);
    EXPECT_STREQ(cpu_bfloat16_unit()->name, amx ? "AMX" : "AVX512_BF16") << "AMX is named first";
  } else {
    EXPECT_FALSE(autocast_dtype(cpu, "auto").has_value()) << "float32 without AMX or AVX512_BF16";
    EXPECT_EQ(cpu_bfloat16_unit(), nullptr);
  }
  EXPECT_EQ(autocast_dtype(cpu, "bfloat16"), torch::kBFloat16);
  EXPECT_THROW(autocast_dtype(cpu, "float16"), ConfigError);
  EXPECT_TRUE(cpu_has_flag("fpu")) << "every x86-64 lists fpu";
  EXPECT_FALSE(cpu_has_flag("no_such_flag"));
  EXPECT_FALSE(cpu_has_flag("fp")) << "whole words only";
  const torch::Device gpu(torch::kCUDA, 0);  // no GPU needed: forced types do not ask the device
  EXPECT_EQ(autocast_dtype(gpu, "bfloat16"), torch::kBFloat16);
  EXPECT_EQ(autocast_dtype(gpu, "float16"), torch::kHalf);
  EXPECT_THROW(autocast_dtype(gpu, "fp8"), ConfigError);
}

// The guard turns CPU autocast on in its dtype and off after; a pause inside it runs float32 and leaves
// autocast on again; a pause outside it changes nothing.
TEST(Device, AutocastGuardAndPause) {
  const auto a = torch::randn({4, 8}), b = torch::randn({8, 3});
  ASSERT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  {
    const AutocastGuard bfloat16(torch::kBFloat16, c10::DeviceType::CPU);
    EXPECT_TRUE(autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      const AutocastPause float32(c10::DeviceType::CPU);
      EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
    }
    EXPECT_TRUE(autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16) << "the pause keeps the dtype";
  }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  { const AutocastPause nothing_to_pause(c10::DeviceType::CPU); }
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
  const AutocastGuard none(std::nullopt, c10::DeviceType::CPU);
  EXPECT_FALSE(autocast_enabled(c10::DeviceType::CPU));
}

TEST(GradScaler, ScalesUnscalesSkipsOnOverflowAndAdapts) {
  GradScaler off(false);
  const auto loss = torch::tensor(2.0);
  EXPECT_EQ(off.scale(loss).item<double>(), 2.0);

  GradScaler scaler(true, 1024.0, 2.0, 0.5, /*growth_interval=*/3);
  EXPECT_EQ(scaler.scale(loss).item<double>(), 2048.0);
  auto w = torch::ones({4}, torch::requires_grad());
  (scaler.scale((w * torch::tensor({1.0F, 2.0F, 3.0F, 4.0F})).sum())).backward();
  ASSERT_TRUE(scaler.unscale({w}));
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}))) << "powers of two: exact";

  w.mutable_grad() = torch::tensor({1.0F, std::numeric_limits<float>::infinity(), 0.0F, 0.0F});
  EXPECT_FALSE(scaler.unscale({w})) << "an overflowed gradient skips the step";
  scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 512.0);
  for (int i = 0; i < 3; ++i) scaler.update(false);
  EXPECT_EQ(scaler.current_scale(), 1024.0) << "grows after growth_interval good steps";
}

TEST(Training, ClippingScalesOnlyLargeGradientsAndReturnsNorms) {
  torch::nn::Linear layer(2, 2);
  layer->weight.mutable_grad() = torch::tensor({{3.0F, 0.0F}, {0.0F, 4.0F}});  // norm 5
  layer->bias.mutable_grad() = torch::tensor({0.3F, 0.4F});                    // norm 0.5
  const auto norms = clip_gradients(*layer, 1.0);
  ASSERT_EQ(norms.numel(), 2);
  EXPECT_NEAR(norms[0].item<double>(), 5.0, 1e-6);
  EXPECT_NEAR(norms[1].item<double>(), 0.5, 1e-6);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(layer->weight.grad()[1][1].item<double>(), 4.0 * coef, 1e-6);
  EXPECT_TRUE(torch::equal(layer->bias.grad(), torch::tensor({0.3F, 0.4F}))) << "below the clip: untouched";
}

// The profiler records the operators run between start and stop, and no GPU time where nothing ran on a
// GPU; one profile at a time, stopped once.
TEST(KernelProfile, OnTheCpuRecordsTheOperatorsAndNoDeviceTime) {
  auto a = torch::randn({64, 64});
  KernelProfile profile(false);
  EXPECT_THROW(KernelProfile second(false), Error);
  for (int i = 0; i < 3; ++i) a = torch::mm(a, a).tanh();
  const KernelTotals totals = profile.stop();
  EXPECT_GE(totals.host_operators, 6) << "3 mm and 3 tanh";
  EXPECT_EQ(totals.kernels, 0);
  EXPECT_EQ(totals.device_seconds, 0.0);
  EXPECT_THROW(profile.stop(), Error);
  KernelProfile again(false);  // the first one is off
  EXPECT_EQ(again.stop().kernels, 0);
}

// On a GPU each matmul is a kernel, and their GPU time is within the host's time around them (which waits
// for the GPU at the end).
TEST(KernelProfile, OnCudaTheKernelsAreCountedAndTimed) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto a = torch::randn({1024, 1024}, torch::kCUDA);
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  KernelProfile profile(true);
  for (int i = 0; i < 20; ++i) a = torch::mm(a, a).div_(1024);
  const KernelTotals totals = profile.stop();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%lld kernels, %.3e s on the GPU, %.3e s on the host\n", totals.kernels, totals.device_seconds,
              wall);
  EXPECT_GE(totals.kernels, 20);
  EXPECT_GT(totals.device_seconds, 0.0);
  EXPECT_LT(totals.device_seconds, wall);
}

// The host clock sums each phase from the previous mark and forgets what it handed over; CUDA events are
// made where a device works (a GPU machine: its own timeline) and refused with the runtime's reason where
// not (this build machine has the CUDA runtime but no driver).
TEST(PhaseClock, HostClockSumsEachPhaseAndEventsSayWhyNot) {
  using std::chrono::milliseconds;
  PhaseClock host;
  EXPECT_STREQ(host.source(), "host_clock");
  for (int step = 0; step < 2; ++step) {
    host.start();
    std::this_thread::sleep_for(milliseconds(30));
    host.lap(Phase::kData);
    host.lap(Phase::kForward);
    std::this_thread::sleep_for(milliseconds(10));
    host.lap(Phase::kBackward);
    host.lap(Phase::kUpdate);
  }
  PhaseSeconds totals{};
  host.collect(totals);
  EXPECT_GE(totals[0], 0.060);
  EXPECT_LT(totals[1], 0.020);
  EXPECT_GE(totals[2], 0.020);
  EXPECT_LT(totals[2], totals[0]);
  const PhaseSeconds first = totals;
  host.collect(totals);
  EXPECT_EQ(totals, first) << "collected twice";

  try {
    PhaseClock events(0);
    EXPECT_STREQ(events.source(), "cuda_events");
    events.start();
    events.lap(Phase::kData);
    events.lap(Phase::kForward);
    PhaseSeconds gpu{};
    events.collect(gpu);
    EXPECT_GE(gpu[0], 0.0);
    EXPECT_LT(gpu[0] + gpu[1], 1.0);
    EXPECT_EQ(gpu[2], 0.0);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUnavailable);
    EXPECT_EQ(std::string(e.what()).rfind("CUDA events: ", 0), 0U) << e.what();
    EXPECT_FALSE(std::filesystem::exists("/dev/nvidia0"))
        << "a GPU machine refused CUDA events: " << e.what();
  }
}

}  // namespace
}  // namespace pcdino::train
