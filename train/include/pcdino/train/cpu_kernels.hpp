// The update's element loops for float32 parameters on the CPU (issue #38), each one pass over memory
// where a composition of list ops makes one pass per operation: at DINO's demo sizes the update reads
// and writes ~30 MB per array, so on a CPU it is bound by memory traffic, not arithmetic. And the
// attention of few tokens (5-65) per (image, head), where LibTorch 1.13 runs one BLAS call per matrix. Plain
// C++ on raw arrays (no LibTorch), compiled for AVX-512, AVX2 and the baseline with the best chosen at load.
// Callers split an array into ranges for threads (at::parallel_for).
#pragma once

#include <cstdint>

namespace pcdino::train::cpu {

/// One AdamW step's scalars for a parameter, each computed in double and rounded once to float32 as
/// torch::optim::AdamW's CPU kernels take their scalar arguments (1 - beta2 rounded from double is not
/// 1 - float(beta2): 1.3e-5 apart): decay = 1 - lr * weight_decay; bias_correction2_sqrt =
/// sqrt(1 - beta2^t); neg_step_size = -lr / (1 - beta1^t).
struct AdamWScalars {
  float decay = 1.0F;
  float beta1 = 0.9F;
  float one_minus_beta1 = 0.1F;
  float beta2 = 0.999F;
  float one_minus_beta2 = 0.001F;
  float bias_correction2_sqrt = 1.0F;
  float neg_step_size = 0.0F;
  float eps = 1e-8F;
};

/// AdamW on elements [0, n) of one parameter in one pass: with g = grad,
/// param *= decay; exp_avg = beta1 exp_avg + one_minus_beta1 g;
/// exp_avg_sq = beta2 exp_avg_sq + one_minus_beta2 g^2;
/// param += neg_step_size * exp_avg / (sqrt(exp_avg_sq) / bias_correction2_sqrt + eps). The order and
/// roundings of PyTorch's _multi_tensor_adamw (torch/optim/adamw.py, 1.13), per element.
void adamw(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, std::int64_t n,
           const AdamWScalars& s);

/// teacher = momentum * teacher + rest * student on elements [0, n), rest = 1 - momentum rounded from
/// double (main_dino.py's EMA: param_k.mul_(m).add_((1 - m) * param_q)).
void ema(float* teacher, const float* student, std::int64_t n, float momentum, float rest);

/// Where one (image, head)'s attention reads and writes its rows: row i of q, k and v starts at
/// q + i * stride (k, v likewise), as in a fused qkv array [B, N, 3C] read in place (stride 3C, the
/// head's q, k and v at column offsets h d, C + h d, 2C + h d); the output and its gradient are
/// [B, N, C] (stride `out_stride`).
struct AttentionRows {
  std::int64_t tokens = 0;    ///< N
  std::int64_t head_dim = 0;  ///< d
  std::int64_t stride = 0;    ///< between rows of q, k, v (and of their gradients)
  std::int64_t out_stride = 0;
  float scale = 1.0F;  ///< d^-1/2 (vision_transformer.py: head_dim ** -0.5)
};

/// One (image, head) of softmax attention (Vaswani et al. 2017, eq. 1; vision_transformer.py Attention
/// without dropout): probs [N, N] = softmax(scale q k^T) by rows, out [N, d] = probs v. Dot products
/// sum in 16 lanes and then a fixed tree, so every clone (AVX-512, AVX2, baseline) gives the same bits.
void attention_forward(const float* q, const float* k, const float* v, float* probs, float* out,
                       const AttentionRows& r);

/// Its gradients from d_out [N, d] (rows at out_stride): dv = probs^T d_out; dp = d_out v^T;
/// ds = probs * (dp - rowsum(probs * dp)) * scale; dq = ds k; dk = ds^T q. dq, dk, dv are written
/// (not accumulated) at q's, k's and v's layout; `scratch` holds N * N floats.
void attention_backward(const float* q, const float* k, const float* v, const float* probs,
                        const float* d_out, float* dq, float* dk, float* dv, float* scratch,
                        const AttentionRows& r);

}  // namespace pcdino::train::cpu
