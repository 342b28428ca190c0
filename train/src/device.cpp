#include "pcdino/train/device.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "pcdino/core/accelerator.hpp"
#include "pcdino/core/error.hpp"

#ifdef PCDINO_WITH_CUDART
#include <cuda_runtime_api.h>
#endif

namespace pcdino::train {

namespace {

// Autocast's C++ switches are per device type from LibTorch 2.4 on (the older ones deprecated); 1.13
// (Debian 12) has one pair for CUDA and one for the CPU.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_on(c10::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
void switch_autocast(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
bool autocast_on(c10::DeviceType device) {
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
void switch_autocast(c10::DeviceType device, bool enabled) {
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
}
void set_autocast_dtype(c10::DeviceType device, at::ScalarType dtype) {
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
}
#endif

// Compute capability major of CUDA device `index` (0 when unknown: built without the CUDA runtime).
int compute_capability_major(int index) {
#ifdef PCDINO_WITH_CUDART
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) == cudaSuccess) return major;
#else
  (void)index;
#endif
  return 0;
}

}  // namespace

bool cpu_has_flag(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;) {
      if (word == flag) return true;
    }
    return false;  // every core lists the same flags
  }
  return false;
}

const CpuBfloat16Unit* cpu_bfloat16_unit() {
  const auto* unit = std::find_if(std::begin(kCpuBfloat16Units), std::end(kCpuBfloat16Units),
                                  [](const CpuBfloat16Unit& u) { return cpu_has_flag(u.flag); });
  return unit == std::end(kCpuBfloat16Units) ? nullptr : unit;
}

std::string device_option(const std::string& option, const std::string& accelerator) {
  if (option != "auto") return option;
  if (accelerator == "cpu") return "cpu";
  const AcceleratorKind* kind = accelerator_kind(accelerator);
  return kind != nullptr && *kind->torch_device != '\0' ? kind->torch_device : option;
}

torch::Device select_device(const std::string& spec, int local_rank) {
  if (const std::string refused = unsupported_accelerator(spec); !refused.empty()) {
    throw ConfigError("--device " + spec + ": " + refused);
  }
  const bool have_cuda = torch::cuda::is_available();
  if (spec == "cpu" || (spec == "auto" && !have_cuda)) return torch::Device(torch::kCPU);
  if (spec != "auto" && spec != "cuda" && spec.rfind("cuda:", 0) != 0) {
    // The kinds without a LibTorch backend by the names a PyTorch user would try ("hpu").
    std::string refused;
    for (const auto& kind : accelerator_kinds()) {
      if (*kind.unsupported == '\0') continue;
      refused += std::string(refused.empty() ? "" : " and ") +
                 (kind.device_names.empty() ? kind.name : kind.device_names.front());
    }
    throw ConfigError("--device '" + spec + "': expected auto, cpu, cuda or cuda:N (" + refused +
                      ": no LibTorch backend)");
  }
  if (!have_cuda) {
    throw ConfigError("--device " + spec +
                      ": no CUDA device is visible to this LibTorch (a CPU-only build, no GPU on this node, "
                      "or CUDA_VISIBLE_DEVICES empty); use --device cpu");
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  int index = local_rank % count;
  if (spec.rfind("cuda:", 0) == 0) {
    try {
      std::size_t used = 0;
      index = std::stoi(spec.substr(5), &used);
      if (used != spec.size() - 5) throw std::invalid_argument(spec);
    } catch (const std::exception&) {
      throw ConfigError("--device '" + spec + "': the device index is not a number");
    }
    if (index < 0 || index >= count) {
      throw ConfigError("--device " + spec + ": this node has " + std::to_string(count) + " CUDA device(s)");
    }
  }
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

std::optional<torch::ScalarType> autocast_dtype(const torch::Device& device, const std::string& spec) {
  if (spec != "auto" && spec != "float32" && spec != "bfloat16" && spec != "float16") {
    throw ConfigError("--amp-dtype '" + spec + "': expected auto, float32, bfloat16 or float16");
  }
  if (spec == "float32") return std::nullopt;  // use_fp16 as if false
  if (device.is_cpu()) {
    if (spec == "float16") {
      throw ConfigError("--amp-dtype float16: autocast on a CPU is bfloat16 only; use auto or bfloat16");
    }
    if (spec == "bfloat16" || cpu_bfloat16_unit() != nullptr) return torch::kBFloat16;
    return std::nullopt;
  }
  if (!device.is_cuda()) return std::nullopt;
  if (spec == "bfloat16") return torch::kBFloat16;
  if (spec == "float16") return torch::kHalf;
  // Ampere and later have bfloat16 tensor cores; without the CUDA runtime to ask, assume a current GPU.
  const int major = compute_capability_major(device.index());
  return major == 0 || major >= 8 ? torch::kBFloat16 : torch::kHalf;
}

bool autocast_enabled(c10::DeviceType device) {
  return autocast_on(device);
}

AutocastGuard::AutocastGuard(std::optional<torch::ScalarType> dtype, c10::DeviceType device)
    : enabled_(dtype.has_value()), device_(device) {
  if (!enabled_) return;
  switch_autocast(device_, true);
  set_autocast_dtype(device_, *dtype);
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  switch_autocast(device_, false);
  at::autocast::clear_cache();
}

AutocastPause::AutocastPause(c10::DeviceType device) : was_enabled_(autocast_on(device)), device_(device) {
  if (was_enabled_) switch_autocast(device_, false);
}

AutocastPause::~AutocastPause() {
  if (was_enabled_) switch_autocast(device_, true);
}

GradScaler::GradScaler(bool enabled, double init_scale, double growth_factor, double backoff_factor,
                       int growth_interval)
    : enabled_(enabled),
      scale_(enabled ? init_scale : 1.0),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool GradScaler::unscale(const std::vector<torch::Tensor>& params) const {
  if (!enabled_) return true;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return true;
  if (grads.front().is_cuda()) {
    // AMP's multi-tensor kernel (what torch.cuda.amp.GradScaler.unscale_ runs): unscales every gradient
    // and flags an inf or NaN in one launch; the flag is read once, as GradScaler.step reads it.
    const auto on_device = torch::TensorOptions().dtype(torch::kFloat32).device(grads.front().device());
    auto found_inf = torch::zeros({1}, on_device);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf,
                                                   torch::full({1}, 1.0 / scale_, on_device));
    return found_inf.item<float>() == 0.0F;
  }
  std::vector<torch::Tensor> finite;
  for (auto& g : grads) {
    g.mul_(1.0 / scale_);
    finite.push_back(torch::isfinite(g).all());
  }
  // One device-to-host copy for all parameters rather than one per parameter.
  return torch::stack(finite).all().item<bool>();
}

void GradScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ *= backoff_factor_;
    good_steps_ = 0;
  } else if (++good_steps_ == growth_interval_) {
    scale_ *= growth_factor_;
    good_steps_ = 0;
  }
}

}  // namespace pcdino::train
