// The fully connected layers of the ViT and the DINO head on the CPU through oneDNN's matmul (brgemm)
// instead of LibTorch 1.13's OpenBLAS sgemm. At the demo's shapes (a few hundred rows, 192-2048 wide)
// oneDNN's float32 matmul measured 1.1-1.3x OpenBLAS's on one core (bench/RESULTS.md, issue #38): it packs
// no panels per call for these sizes. Everything else keeps LibTorch's linear.
#pragma once

#include <ATen/core/Tensor.h>

namespace pcdino::train {

/// Whether this build has the oneDNN path (found at configure time: Debian's libdnnl-dev, the library
/// Debian's LibTorch itself links).
bool cpu_linear_available();

/// y = x W^T + b (torch::nn::functional::linear), x [..., in], weight [out, in], bias [out] or undefined,
/// y [..., out]. Differentiable in all three. Runs oneDNN's matmul (forward, and in backward
/// dx = dy W, dW = dy^T x, db = sum of dy over rows) when cpu_linear_available(), every tensor is a
/// float32 CPU tensor, and CPU autocast is off; otherwise, or with PCDINO_CPU_LINEAR=0 in the
/// environment, it is at::linear. The same results as at::linear within float32 rounding (a different
/// summation order). Throws what at::linear throws for mismatched shapes.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace pcdino::train
