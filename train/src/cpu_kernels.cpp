#include "pcdino/train/cpu_kernels.hpp"

#include <cmath>

namespace pcdino::train::cpu {

// One binary that uses the widest vectors the CPU has: GCC builds each clone for its target and picks
// one when the program loads (an ifunc). The file is compiled with -fno-math-errno so that sqrt
// vectorises, and without contracting a * b + c into one rounding, so that every clone gives the same
// numbers.
#define PCDINO_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

PCDINO_CLONES
void adamw(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
           float* __restrict exp_avg_sq, std::int64_t n, const AdamWScalars& scalars) {
  const AdamWScalars s = scalars;  // copies, so the loop does not re-read them through a pointer
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    const float p = param[i] * s.decay;
    const float m = exp_avg[i] * s.beta1 + g * s.one_minus_beta1;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denominator = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p + s.neg_step_size * m / denominator;
  }
}

PCDINO_CLONES
void ema(float* __restrict teacher, const float* __restrict student, std::int64_t n, float momentum,
         float rest) {
  for (std::int64_t i = 0; i < n; ++i) teacher[i] = teacher[i] * momentum + student[i] * rest;
}

}  // namespace pcdino::train::cpu
