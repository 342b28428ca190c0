#include "pcdino/train/kernel_profile.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdint>
#include <set>

#include "pcdino/core/error.hpp"

namespace pcdino::train {

namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// libkineto::ActivityType (pytorch/kineto, libkineto/include/ActivityType.h; the same numbers from
// LibTorch 1.13 to 2.11): what KinetoEvent::activityType() returns. Its header is not installed with
// LibTorch.
constexpr std::uint8_t kCpuOp = 0, kGpuMemcpy = 3, kGpuMemset = 4, kConcurrentKernel = 5;

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (cuda) a.insert(ActivityType::CUDA);
  return a;
}

double duration_seconds(const profiler::KinetoEvent& e) {
#if TORCH_VERSION_MAJOR >= 2
  return static_cast<double>(e.durationNs()) / 1e9;
#else
  return static_cast<double>(e.durationUs()) / 1e6;
#endif
}

}  // namespace

KernelProfile::KernelProfile(bool cuda) : cuda_(cuda) {
  if (torch::profiler::impl::profilerEnabled())
    throw Error(ExitCode::kSoftware, "kernel profile: the PyTorch profiler already runs in this process");
  const ProfilerConfig config(ProfilerState::KINETO);
  const std::set<ActivityType> recorded = activities(cuda);
  profiler::prepareProfiler(config, recorded);
  profiler::enableProfiler(config, recorded);
}

KernelProfile::~KernelProfile() {
  if (running_) profiler::disableProfiler();
}

KernelTotals KernelProfile::stop() {
  if (!running_) throw Error(ExitCode::kSoftware, "kernel profile: stopped twice");
  if (cuda_) torch::cuda::synchronize();  // the last kernels' records are written when they end
  running_ = false;
  const auto result = profiler::disableProfiler();
  KernelTotals totals;
  for (const auto& e : result->events()) {
    const std::uint8_t type = e.activityType();
    if (e.deviceType() == c10::DeviceType::CPU) {
      totals.host_operators += type == kCpuOp ? 1 : 0;  // the host's CUDA runtime calls are not operators
    } else if (type == kConcurrentKernel || type == kGpuMemcpy || type == kGpuMemset) {
      totals.device_seconds += duration_seconds(e);
      totals.kernels += type == kConcurrentKernel ? 1 : 0;
    }
  }
  return totals;
}

}  // namespace pcdino::train
