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
    const float g = grad[i];
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

namespace {

// sum of a[i] b[i] over [0, n): 16 running sums (one vector of AVX-512, two of AVX2), then a fixed tree,
// the same order in every clone.
inline float dot(const float* __restrict a, const float* __restrict b, std::int64_t n) {
  float acc[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  for (int width = 8; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// y[0, n) += alpha x[0, n)
inline void axpy(float alpha, const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

PCDINO_CLONES
void attention_forward(const float* q, const float* k, const float* v, float* probs, float* out,
                       const AttentionRows& r) {
  const std::int64_t n = r.tokens, d = r.head_dim;
  for (std::int64_t i = 0; i < n; ++i) {
    float* p = probs + i * n;
    float max = -INFINITY;
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] = dot(q + i * r.stride, k + j * r.stride, d) * r.scale;
      max = std::fmax(max, p[j]);
    }
    float sum = 0;
    for (std::int64_t j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - max));
    const float inverse = 1.0F / sum;
    float* o = out + i * r.out_stride;
    for (std::int64_t c = 0; c < d; ++c) o[c] = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] *= inverse;
      axpy(p[j], v + j * r.stride, o, d);
    }
  }
}

PCDINO_CLONES
void attention_backward(const float* q, const float* k, const float* v, const float* probs,
                        const float* d_out, float* dq, float* dk, float* dv, float* scratch,
                        const AttentionRows& r) {
  const std::int64_t n = r.tokens, d = r.head_dim;
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t c = 0; c < d; ++c)
      dq[j * r.stride + c] = dk[j * r.stride + c] = dv[j * r.stride + c] = 0;
  }
  float* ds = scratch;  // [N, N]
  for (std::int64_t i = 0; i < n; ++i) {
    const float* p = probs + i * n;
    const float* g = d_out + i * r.out_stride;
    float row = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      axpy(p[j], g, dv + j * r.stride, d);          // dv_j += p_ij g_i
      ds[i * n + j] = dot(g, v + j * r.stride, d);  // dp_ij
      row += p[j] * ds[i * n + j];
    }
    for (std::int64_t j = 0; j < n; ++j) ds[i * n + j] = p[j] * (ds[i * n + j] - row) * r.scale;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      const float s = ds[i * n + j];
      axpy(s, k + j * r.stride, dq + i * r.stride, d);  // dq_i += ds_ij k_j
      axpy(s, q + i * r.stride, dk + j * r.stride, d);  // dk_j += ds_ij q_i
    }
  }
}

}  // namespace pcdino::train::cpu
