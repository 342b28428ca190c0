// The update's element loops for float32 parameters on the CPU (issue #38), each one pass over memory
// where a composition of list ops makes one pass per operation: at DINO's demo sizes the update reads
// and writes ~30 MB per array, so on a CPU it is bound by memory traffic, not arithmetic. Plain C++ on
// raw arrays (no LibTorch), compiled for AVX-512, AVX2 and the baseline with the best chosen at load.
// Callers split an array into ranges for threads (at::parallel_for).
#pragma once

#include <cstdint>

namespace pcdino::train::cpu {

/// One AdamW step's scalars for a parameter, each computed in double and rounded once to float32 as
/// torch::optim::AdamW's CPU kernels take their scalar arguments (1 - beta2 rounded from double is not
/// 1 - float(beta2): 1.3e-5 apart): decay = 1 - lr * weight_decay; bias_correction2_sqrt =
/// sqrt(1 - beta2^t); neg_step_size = -lr / (1 - beta1^t); grad_scale multiplies the gradient as it is
/// read (1: none).
struct AdamWScalars {
  float decay = 1.0F;
  float beta1 = 0.9F;
  float one_minus_beta1 = 0.1F;
  float beta2 = 0.999F;
  float one_minus_beta2 = 0.001F;
  float bias_correction2_sqrt = 1.0F;
  float neg_step_size = 0.0F;
  float eps = 1e-8F;
  float grad_scale = 1.0F;
};

/// AdamW on elements [0, n) of one parameter in one pass: with g = grad_scale * grad,
/// param *= decay; exp_avg = beta1 exp_avg + one_minus_beta1 g;
/// exp_avg_sq = beta2 exp_avg_sq + one_minus_beta2 g^2;
/// param += neg_step_size * exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps). The order and
/// roundings of PyTorch's _multi_tensor_adamw (torch/optim/adamw.py, 1.13), per element.
void adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
           const AdamWScalars& s);

/// teacher = momentum * teacher + rest * student on elements [0, n), rest = 1 - momentum rounded from
/// double (main_dino.py's EMA: param_k.mul_(m).add_((1 - m) * param_q)).
void ema(float* teacher, const float* student, std::int64_t n, float momentum, float rest);

}  // namespace pcdino::train::cpu
