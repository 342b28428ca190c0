// The ViT's and the DINO head's layers on the CPU in float32 where LibTorch 1.13's own are slow at DINO's
// small shapes (issue #38, bench/RESULTS.md):
// - the fully connected layers through oneDNN's matmul (brgemm) instead of OpenBLAS's sgemm: at the demo's
//   shapes (a few hundred rows, 192-2048 wide) 1.1-1.3x faster on one core, packing no panels per call;
// - attention of few tokens straight from the fused qkv projection, one (image, head) per task, where
//   LibTorch runs a permute copy, one BLAS call per (image, head) and matrix, and a softmax.
// PCDINO_CPU_LAYERS=0 in the environment turns both off (LibTorch's own ops; for side-by-side benchmarks).
#pragma once

#include <ATen/core/Tensor.h>

namespace pcdino::train {

/// Whether this build has the oneDNN path (found at configure time: Debian's libdnnl-dev, the library
/// Debian's LibTorch itself links).
bool cpu_linear_available();

/// y = x W^T + b (torch::nn::functional::linear), x [..., in], weight [out, in], bias [out] or undefined,
/// y [..., out]. Differentiable in all three. Runs oneDNN's matmul (forward, and in backward
/// dx = dy W, dW = dy^T x, db = sum of dy over rows) when cpu_linear_available(), every tensor is a
/// float32 CPU tensor, and CPU autocast is off; otherwise, or with PCDINO_CPU_LAYERS=0 in the
/// environment, it is at::linear. The same results as at::linear within float32 rounding (a different
/// summation order). Throws what at::linear throws for mismatched shapes.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

/// Whether cpu_attention() takes `qkv`: a float32 CPU tensor [B, N, 3C], CPU autocast off, and not turned
/// off by PCDINO_CPU_LAYERS=0.
bool cpu_attention_applies(const at::Tensor& qkv);

/// Where attention under CPU bfloat16 autocast runs widened to float32 through cpu_attention(): at most
/// kWidenedAttentionTokens tokens and kWidenedAttentionRows rows (B * N) in the batch. At the demo's (16
/// sequences of 17 tokens, 48 of 5) that beat LibTorch's bfloat16 products by 1-3% of the step. At the
/// benchmark's 50 tokens it cost ~25%, and at its 48-384 sequences of 17 tokens (816-6528 rows) 2-5%:
/// oneDNN's bfloat16 products win there (bench/RESULTS.md, issue #38).
inline constexpr int64_t kWidenedAttentionTokens = 32;
inline constexpr int64_t kWidenedAttentionRows = 512;

/// Under CPU bfloat16 autocast, for a bfloat16 CPU `qkv` [B, N, 3C] with N <= kWidenedAttentionTokens and
/// B * N <= kWidenedAttentionRows (and PCDINO_CPU_LAYERS not 0): cpu_attention() of qkv widened to float32,
/// autocast paused for it, [B, N, C] float32 (the next linear casts it back). Otherwise an undefined
/// tensor: the caller computes attention its own way. Differentiable in qkv; throws as cpu_attention()
/// for bad head counts.
at::Tensor cpu_attention_widened(const at::Tensor& qkv, int64_t heads, double scale);

/// Multi-head softmax attention (vision_transformer.py Attention.forward from its qkv projection to the
/// input of proj, attention dropout 0): qkv [B, N, 3C] as the reference's reshape(B, N, 3, heads, C /
/// heads) reads it, returns [B, N, C] = per head softmax(scale q k^T) v, heads side by side
/// (the reference's transpose(1, 2).reshape(B, N, C)). Differentiable in qkv. The same results as the
/// written-out form within float32 rounding. Throws c10::Error when !cpu_attention_applies(qkv) or C does
/// not split into `heads`.
at::Tensor cpu_attention(const at::Tensor& qkv, int64_t heads, double scale);

}  // namespace pcdino::train
