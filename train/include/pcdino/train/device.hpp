// Where training and extraction run (CPU or one CUDA device per local rank) and mixed precision (the
// reference's use_fp16: torch.cuda.amp.autocast with a GradScaler on GPUs; bfloat16 autocast on CPUs
// with AMX or AVX512_BF16, as torch.autocast("cpu") runs it).
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace pcdino::train {

/// The --device a stage uses: an explicit value wins; "auto" takes the pipeline's slurm.accelerator
/// (a kind's torch_device, core/accelerator.hpp: "nvidia" -> "cuda"; "cpu" -> "cpu", "auto" -> "auto"). The
/// config has refused the kinds pcdino does not compute on.
std::string device_option(const std::string& option, const std::string& accelerator);

/// Resolves a --device value: "cpu"; "cuda" (device local_rank % device_count, one GPU per local rank
/// as Slurm's --gpus-per-task or a CUDA_VISIBLE_DEVICES per rank leave them); "cuda:N"; "auto" (CUDA as
/// "cuda" when LibTorch sees a GPU, else CPU). Throws ConfigError naming --device for another value, or
/// for CUDA when this LibTorch has no CUDA or the machine no GPU, and for an accelerator kind pcdino does
/// not compute on (its name or --device name, core/accelerator.hpp) with the reason.
torch::Device select_device(const std::string& spec, int local_rank);

/// A CPU feature on which bfloat16 autocast pays: its /proc/cpuinfo flag and the name the log gives it.
struct CpuBfloat16Unit {
  const char* flag;
  const char* name;
};

/// The CPUs on which autocast_dtype's "auto" gives bfloat16, in the order asked; oneDNN's matmuls use
/// either. pcdino-train does not go by them: it times a step in each precision (run_training). Each measured
/// with the demo's step on one core (bench/RESULTS.md, issue #38; issue #51: 0.62x on an Intel Xeon with
/// AVX512_BF16 and no AMX):
///  - amx_bf16: Intel AMX's bfloat16 tile multiply (Sapphire Rapids and later): 1.47x float32's step on
///    an Intel Xeon;
///  - avx512_bf16: the AVX-512 bfloat16 dot product (Cooper Lake, AMD Zen 4 and later): 1.25x on an AMD
///    EPYC (Zen 5).
/// Other CPUs keep float32 unless --amp-dtype forces bfloat16.
inline constexpr CpuBfloat16Unit kCpuBfloat16Units[] = {{"amx_bf16", "AMX"}, {"avx512_bf16", "AVX512_BF16"}};

/// The first of kCpuBfloat16Units that this CPU lists, or nullptr where it has none.
const CpuBfloat16Unit* cpu_bfloat16_unit();

/// Whether /proc/cpuinfo lists `flag` (e.g. "amx_bf16", "avx512_bf16"): the CPU has it and the kernel
/// lets programs use it. false where the file cannot be read.
bool cpu_has_flag(const std::string& flag);

/// The autocast type for use_fp16 on `device`. On a GPU "auto" gives bfloat16 from compute capability
/// 8.0 (no loss scaling needed) and float16 below; "bfloat16" and "float16" force one, "float32" turns
/// autocast off. On a CPU "auto"
/// gives bfloat16 where the CPU has one of kCpuBfloat16Units and nullopt (float32) elsewhere, "bfloat16"
/// forces it, and "float16" is refused (LibTorch's CPU autocast is bfloat16 only). Throws ConfigError naming
/// --amp-dtype for another value.
std::optional<torch::ScalarType> autocast_dtype(const torch::Device& device, const std::string& spec);

/// Autocast of the forward pass on `device` (CUDA or CPU) in `dtype` while alive (nothing when dtype is
/// nullopt); clears autocast's weight cache on exit, as torch.autocast's __exit__ does.
class AutocastGuard {
 public:
  explicit AutocastGuard(std::optional<torch::ScalarType> dtype,
                         c10::DeviceType device = c10::DeviceType::CUDA);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_ = false;
  c10::DeviceType device_;
};

/// Whether autocast is on for `device` in this thread (an AutocastGuard's region).
bool autocast_enabled(c10::DeviceType device);

/// Autocast on `device` off while alive and back on after, if it was on: a region of an AutocastGuard's
/// that runs in float32 (torch.autocast(enabled=False) nested in torch.autocast). Keeps the dtype and
/// the weight cache.
class AutocastPause {
 public:
  explicit AutocastPause(c10::DeviceType device);
  ~AutocastPause();
  AutocastPause(const AutocastPause&) = delete;
  AutocastPause& operator=(const AutocastPause&) = delete;

 private:
  bool was_enabled_;
  c10::DeviceType device_;
};

/// Dynamic loss scaling for float16 (torch.cuda.amp.GradScaler's defaults: initial scale 2^16, growth
/// x2 after 2000 steps without overflow, backoff x0.5 on an overflow, which skips that step). Disabled,
/// it multiplies by 1 and never skips.
class GradScaler {
 public:
  explicit GradScaler(bool enabled, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int growth_interval = 2000);

  /// loss * scale (the loss itself when disabled).
  torch::Tensor scale(const torch::Tensor& loss) const;

  /// Divides the gradients of `params` by the scale in place; returns false if any is inf or NaN
  /// (the step must then be skipped). Call before clipping, as the reference's unscale_().
  bool unscale(const std::vector<torch::Tensor>& params) const;

  /// Adapts the scale after a step: backoff if `found_inf`, growth after growth_interval good steps.
  void update(bool found_inf);

  bool enabled() const { return enabled_; }
  double current_scale() const { return scale_; }

 private:
  bool enabled_;
  double scale_, growth_factor_, backoff_factor_;
  int growth_interval_, good_steps_ = 0;
};

}  // namespace pcdino::train
