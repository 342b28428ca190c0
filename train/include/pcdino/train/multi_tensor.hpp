// DINO's update as a few list ("multi-tensor", foreach) kernels for all parameters instead of one small
// kernel per parameter (issue #22): AdamW as PyTorch's torch/optim/adamw.py composes _multi_tensor_adamw
// (or at::_fused_adamw_ on CUDA when LibTorch has it), the teacher's EMA (main_dino.py) and zeroing.
// On a GPU the step is bound by kernel launches at DINO's model sizes; on a CPU by memory traffic, so there
// AdamW and the EMA are one pass per array (cpu_kernels.hpp) where the list ops make one per operation.
#pragma once

#include <torch/optim/adamw.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace pcdino::train {

/// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) with torch::optim::AdamW's arithmetic, options,
/// parameter groups and state, so its checkpoints are LibTorch's AdamW archive as before: an older
/// checkpoint resumes, and torch::optim::AdamW reads a newer one. Per group and step: p *= 1 - lr * wd;
/// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) +
/// eps), each as one list op over the group's parameters that have a gradient (a parameter without one,
/// e.g. DINO's frozen last layer, is skipped and keeps its step count t, as in torch::optim::AdamW).
/// On the CPU, where every tensor of a group is contiguous float32, a group is one pass over memory per
/// parameter (cpu::adamw, split over LibTorch's intra-op threads) instead of nine list ops' passes.
/// On CUDA, where the dispatcher has at::_fused_adamw_ (LibTorch >= 2.0), a group is one fused kernel,
/// with step counts as float32 tensors on the device (PyTorch's fused layout) beside the host counts the
/// archive keeps; a call it refuses falls back to the list ops for the rest of the run (logged once).
/// amsgrad is refused (std::invalid_argument): DINO does not use it.
class MultiTensorAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  /// One update of every group. `closure`, if given, is evaluated first with autograd on (as
  /// torch::optim::AdamW::step); returns its loss or an undefined tensor.
  torch::Tensor step(LossClosure closure = nullptr) override;

  /// One update of every group that reads its schedule from the device, so that it can be captured in a
  /// CUDA graph and replayed (PyTorch's capturable _multi_tensor_adamw): `lr` and `weight_decay` are 0-dim
  /// tensors on the parameters' device (float64, as the host computes the schedules), filled before each
  /// step; every group's lr is `lr`, and a group whose options have a non-zero weight_decay decays by
  /// `weight_decay` (DINO's regularised group), the others not (a captured step keeps the choice its
  /// capture saw). Step counts and bias corrections are device tensors (float32, as PyTorch keeps them).
  /// The host step counts are not advanced: call advance_host_steps() after each step that ran, eager or
  /// replayed. Before a capture every parameter must have taken an eager step here (its device step count
  /// is made then, not inside a graph).
  void step_on_device(const torch::Tensor& lr, const torch::Tensor& weight_decay);

  /// The host side of a step_on_device() that ran: every parameter with a gradient counts one more step
  /// (the count checkpoints keep).
  void advance_host_steps();

  /// Sets every defined gradient of every group to zero with one list op (Optimizer::zero_grad: one
  /// kernel per parameter). Kept, not dropped (PyTorch's set_to_none): on the CPU new gradients every
  /// step measured slower (fresh memory for ~30 MB each step), and a CUDA graph needs them where its
  /// capture saw them.
  void zero_grad();

  /// The kernels the last step ran: "foreach", "fused" (CUDA) or "cpu_fused" (step()), "device_schedule"
  /// (step_on_device());
  /// "" before the first step.
  const std::string& last_path() const { return last_path_; }

 private:
  // p's AdamW state, made on its first step.
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);

  bool fused_refused_ = false;
  std::string last_path_;
  // The fused path's per-parameter step counts on the device, by the parameter's TensorImpl.
  std::unordered_map<const void*, torch::Tensor> device_steps_;
};

/// The AdamW state `optimizer` (torch::optim::AdamW or MultiTensorAdamW) keeps for parameter `p`: step
/// count and moments; nullptr before p's first step.
const torch::optim::AdamWParamState* adamw_state(const torch::optim::Optimizer& optimizer,
                                                 const torch::Tensor& p);

/// teacher = m * teacher + (1 - m) * student over all parameters (same order, same shapes), without
/// autograd, as two list ops (main_dino.py: param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)),
/// or on the CPU for contiguous float32 parameters one pass each (cpu::ema).
/// Throws std::invalid_argument if the modules differ in parameter count.
void ema_update(torch::nn::Module& teacher, torch::nn::Module& student, double momentum);

/// The same with `momentum` a 0-dim tensor on the parameters' device (read there: capturable in a CUDA
/// graph).
void ema_update(torch::nn::Module& teacher, torch::nn::Module& student, const torch::Tensor& momentum);

/// Per-parameter clipping (utils.clip_gradients): every gradient of `model` whose L2 norm exceeds `clip`
/// is scaled by clip / (norm + 1e-6), the others are left as they are. The norms are one list op, the
/// scaling another; nothing is copied to the host. Returns the norms before clipping, float32 [n] on the
/// gradients' device in parameter order (parameters without a gradient are skipped); empty [0] if none.
torch::Tensor clip_gradients(torch::nn::Module& model, double clip);

}  // namespace pcdino::train
