// The Vision Transformer of DINO (Caron et al. 2021), as facebookresearch/dino's vision_transformer.py
// defines it, with the same parameter names so that state dicts move between this suite and Python:
// cls_token, pos_embed, patch_embed.proj.{weight,bias}, blocks.{i}.norm1, blocks.{i}.attn.qkv,
// blocks.{i}.attn.proj, blocks.{i}.norm2, blocks.{i}.mlp.fc1, blocks.{i}.mlp.fc2, norm.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <string>

#include "pcdino/core/config.hpp"

namespace pcdino::train {

/// Architecture of a ViT; the presets follow vision_transformer.py (vit_tiny 192/12/3, vit_small
/// 384/12/6, vit_base 768/12/12, MLP ratio 4, qkv bias, LayerNorm eps 1e-6).
struct VitOptions {
  int image_size = 224;  ///< the size pos_embed is built for (pixels); other sizes are interpolated
  int patch_size = 16;
  int in_channels = 3;
  int embed_dim = 384;
  int depth = 12;
  int num_heads = 6;
  double mlp_ratio = 4.0;
  double drop_path_rate = 0.0;
  /// Attention by LibTorch's scaled-dot-product kernel (at::scaled_dot_product_attention from 2.0: flash
  /// or memory-efficient kernels on GPUs; 1.13's prototype at::_scaled_dot_product_attention, the same
  /// arithmetic as the written-out form on CPUs) instead of the written-out matmul, scale, softmax,
  /// matmul; the same outputs within float rounding. By default where LibTorch has the kernel (>= 2.0).
  static constexpr bool kHaveScaledDotProductAttention = TORCH_VERSION_MAJOR >= 2;
  bool fused_attention = kHaveScaledDotProductAttention;

  /// "vit_tiny", "vit_small" or "vit_base"; throws std::invalid_argument naming the value otherwise.
  static VitOptions preset(const std::string& arch, int patch_size, int in_channels, int image_size);
  /// The student's backbone of a pipeline: preset(arch, patch_size, in_channels, global_crops_size) with
  /// `depth` (when > 0) and drop_path_rate from the hyperparameters.
  static VitOptions from_config(const DinoHyperparameters& h, int in_channels);
};

/// `layer`(x) with the CPU's float32 matmul of cpu_layers.hpp where it applies: x [..., in] -> [..., out].
torch::Tensor apply_linear(const torch::nn::Linear& layer, const torch::Tensor& x);

/// seq(x) for a Sequential of Linear and shape-keeping modules (the ViT's MLP, the DINO head's MLP), each
/// Linear through apply_linear. Throws what the modules throw.
torch::Tensor sequential_forward(torch::nn::Sequential seq, torch::Tensor x);

/// Stochastic depth (Huang et al. 2016): in training, each sample's residual branch is dropped with
/// probability p and the kept ones scaled by 1 / (1 - p). Identity in eval mode or with p = 0.
torch::Tensor drop_path(const torch::Tensor& x, double p, bool training);

/// Multi-head self-attention with a fused qkv projection: softmax(q k^T / sqrt(C / heads)) v per head
/// (vision_transformer.py Attention). In float32 on the CPU without autocast by cpu_attention
/// (cpu_layers.hpp) straight from the qkv projection; otherwise by LibTorch's scaled-dot-product kernel
/// when `fused_attention` (VitOptions::fused_attention), else written out. Input and output [B, N, C].
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int dim, int num_heads, bool fused_attention = VitOptions::kHaveScaledDotProductAttention);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  int num_heads;
  double scale;
  bool fused;
};
TORCH_MODULE(Attention);

/// Pre-norm transformer block: x + drop_path(attn(norm1(x))), then x + drop_path(mlp(norm2(x))).
/// [B, N, C] -> [B, N, C].
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int dim, int num_heads, double mlp_ratio, double drop_path,
            bool fused_attention = VitOptions::kHaveScaledDotProductAttention);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  Attention attn{nullptr};
  torch::nn::Sequential mlp{nullptr};  // fc1, GELU, fc2 (registered under those names)
  double drop_path_prob;
};
TORCH_MODULE(Block);

/// The backbone. forward(): [B, C, H, W] images -> [B, D] CLS token after the final norm.
class VisionTransformerImpl : public torch::nn::Module {
 public:
  explicit VisionTransformerImpl(const VitOptions& options);

  torch::Tensor forward(const torch::Tensor& images);

  /// [B, C, H, W] -> [B, 1 + (H / p)(W / p), D] tokens with positional embedding added.
  torch::Tensor prepare_tokens(const torch::Tensor& images);

  /// pos_embed for an input of `height` x `width` pixels: unchanged for the size it was built for, else
  /// the patch part resized bicubically (vision_transformer.py's interpolate_pos_encoding, including its
  /// +0.1 to avoid floating-point rounding of the scale factor). [1, 1 + patches, D].
  torch::Tensor interpolate_pos_encoding(int64_t num_patches, int64_t height, int64_t width);

  VitOptions options;
  torch::nn::Conv2d patch_embed_proj{nullptr};
  torch::Tensor cls_token, pos_embed;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(VisionTransformer);

/// DINO's truncated normal initialisation (utils.trunc_normal_: inverse-CDF sampling, then clamp to
/// [a, b]); in place, returns `tensor`.
torch::Tensor trunc_normal_(torch::Tensor tensor, double mean, double std, double a = -2.0, double b = 2.0);

}  // namespace pcdino::train
