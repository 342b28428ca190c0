#include "pcdino/train/vit.hpp"

#include <cmath>
#include <stdexcept>

#include "pcdino/train/cpu_layers.hpp"

namespace pcdino::train {

namespace F = torch::nn::functional;

VitOptions VitOptions::preset(const std::string& arch, int patch_size, int in_channels, int image_size) {
  VitOptions o;
  o.patch_size = patch_size;
  o.in_channels = in_channels;
  o.image_size = image_size;
  if (arch == "vit_tiny") {
    o.embed_dim = 192, o.num_heads = 3;
  } else if (arch == "vit_small") {
    o.embed_dim = 384, o.num_heads = 6;
  } else if (arch == "vit_base") {
    o.embed_dim = 768, o.num_heads = 12;
  } else {
    throw std::invalid_argument("unknown arch '" + arch + "' (vit_tiny, vit_small, vit_base)");
  }
  o.depth = 12;
  return o;
}

VitOptions VitOptions::from_config(const DinoHyperparameters& h, int in_channels) {
  VitOptions o = preset(h.arch, h.patch_size, in_channels, h.global_crops_size);
  if (h.depth > 0) o.depth = h.depth;
  o.drop_path_rate = h.drop_path_rate;
  return o;
}

torch::Tensor trunc_normal_(torch::Tensor tensor, double mean, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  const auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  tensor.uniform_(2 * l - 1, 2 * u - 1);
  tensor.erfinv_();
  tensor.mul_(std * std::sqrt(2.0));
  tensor.add_(mean);
  tensor.clamp_(a, b);
  return tensor;
}

torch::Tensor apply_linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

torch::Tensor sequential_forward(torch::nn::Sequential seq, torch::Tensor x) {
  for (auto& m : *seq) {
    if (const auto* fc = m.ptr()->as<torch::nn::Linear>()) {
      x = linear(x, fc->weight, fc->bias);
    } else {
      x = m.forward(x);
    }
  }
  return x;
}

torch::Tensor drop_path(const torch::Tensor& x, double p, bool training) {
  if (p == 0.0 || !training) return x;
  const double keep = 1.0 - p;
  std::vector<int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  shape[0] = x.size(0);
  const auto mask = torch::rand(shape, x.options()).add_(keep).floor_();
  return x.div(keep) * mask;
}

AttentionImpl::AttentionImpl(int dim, int heads, bool fused_attention)
    : num_heads(heads), scale(std::pow(dim / heads, -0.5)), fused(fused_attention) {
  qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, dim * 3).bias(true)));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2);
  const auto qkv_x = apply_linear(qkv, x);  // [B, N, 3C]
  if (cpu_attention_applies(qkv_x)) return apply_linear(proj, cpu_attention(qkv_x, num_heads, scale));
  if (const auto widened = cpu_attention_widened(qkv_x, num_heads, scale); widened.defined()) {
    return apply_linear(proj, widened);
  }
  // [B, N, 3C] -> [3, B, heads, N, C / heads]
  const auto qkv_out = qkv_x.reshape({B, N, 3, num_heads, C / num_heads}).permute({2, 0, 3, 1, 4});
  const auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
  torch::Tensor out;  // [B, heads, N, C / heads]
  if (fused) {
    // The default scale of both is 1 / sqrt(C / heads), the reference's head_dim ** -0.5.
#if TORCH_VERSION_MAJOR >= 2
    out = at::scaled_dot_product_attention(q, k, v);
#else
    out = std::get<0>(at::_scaled_dot_product_attention(q, k, v));
#endif
  } else {
    out = (q.matmul(k.transpose(-2, -1)) * scale).softmax(-1).matmul(v);
  }
  return apply_linear(proj, out.transpose(1, 2).reshape({B, N, C}));
}

BlockImpl::BlockImpl(int dim, int num_heads, double mlp_ratio, double drop_path, bool fused_attention)
    : drop_path_prob(drop_path) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6)));
  attn = register_module("attn", Attention(dim, num_heads, fused_attention));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6)));
  const int hidden = static_cast<int>(dim * mlp_ratio);
  mlp = torch::nn::Sequential();
  mlp->push_back("fc1", torch::nn::Linear(dim, hidden));
  mlp->push_back("act", torch::nn::GELU());
  mlp->push_back("fc2", torch::nn::Linear(hidden, dim));
  register_module("mlp", mlp);
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto y = x + pcdino::train::drop_path(attn(norm1(x)), drop_path_prob, is_training());
  return y + pcdino::train::drop_path(sequential_forward(mlp, norm2(y)), drop_path_prob, is_training());
}

VisionTransformerImpl::VisionTransformerImpl(const VitOptions& o) : options(o) {
  if (o.patch_size < 1 || o.image_size < o.patch_size) {
    throw std::invalid_argument("patch_size " + std::to_string(o.patch_size) + " does not fit image_size " +
                                std::to_string(o.image_size));
  }
  // patch_embed.proj.* as in the reference: a sub-module "patch_embed" holding "proj".
  auto patch_embed = register_module("patch_embed", std::make_shared<torch::nn::Module>());
  patch_embed_proj = patch_embed->register_module(
      "proj", torch::nn::Conv2d(
                  torch::nn::Conv2dOptions(o.in_channels, o.embed_dim, o.patch_size).stride(o.patch_size)));
  const int64_t grid = o.image_size / o.patch_size;
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, o.embed_dim}));
  pos_embed = register_parameter("pos_embed", torch::zeros({1, grid * grid + 1, o.embed_dim}));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < o.depth; ++i) {
    // Stochastic depth rises linearly over the blocks (torch.linspace(0, drop_path_rate, depth)).
    const double dpr = o.depth > 1 ? o.drop_path_rate * i / (o.depth - 1) : o.drop_path_rate;
    blocks->push_back(Block(o.embed_dim, o.num_heads, o.mlp_ratio, dpr, o.fused_attention));
  }
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.embed_dim}).eps(1e-6)));

  trunc_normal_(pos_embed, 0, 0.02);
  trunc_normal_(cls_token, 0, 0.02);
  torch::NoGradGuard no_grad;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      trunc_normal_(linear->weight, 0, 0.02);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* ln = m->as<torch::nn::LayerNorm>()) {
      ln->weight.fill_(1.0);
      ln->bias.zero_();
    }
  }
}

torch::Tensor VisionTransformerImpl::interpolate_pos_encoding(int64_t num_patches, int64_t height,
                                                              int64_t width) {
  const int64_t n = pos_embed.size(1) - 1;
  if (num_patches == n && width == height) return pos_embed;
  const auto class_pos = pos_embed.slice(1, 0, 1);
  const auto patch_pos = pos_embed.slice(1, 1);
  const int64_t dim = pos_embed.size(2);
  // Rows first (the images' dim 2), as the reference's "w0" is.
  const double rows = static_cast<double>(height / options.patch_size) + 0.1;
  const double cols = static_cast<double>(width / options.patch_size) + 0.1;
  const auto side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  const auto resized = F::interpolate(
      patch_pos.reshape({1, side, side, dim}).permute({0, 3, 1, 2}),
      F::InterpolateFuncOptions()
          .scale_factor(
              std::vector<double>{rows / static_cast<double>(side), cols / static_cast<double>(side)})
          .mode(torch::kBicubic)
          .align_corners(false)
          .recompute_scale_factor(false));  // as PyTorch >= 1.6 does by default: the factor itself is used
  if (resized.size(-2) != height / options.patch_size || resized.size(-1) != width / options.patch_size) {
    throw std::logic_error("positional embedding interpolation gave the wrong grid");
  }
  return torch::cat({class_pos, resized.permute({0, 2, 3, 1}).reshape({1, -1, dim})}, 1);
}

torch::Tensor VisionTransformerImpl::prepare_tokens(const torch::Tensor& images) {
  const int64_t B = images.size(0), height = images.size(2), width = images.size(3);
  auto x = patch_embed_proj(images).flatten(2).transpose(1, 2);  // [B, patches, D]
  x = torch::cat({cls_token.expand({B, -1, -1}), x}, 1);
  return x + interpolate_pos_encoding(x.size(1) - 1, height, width);
}

torch::Tensor VisionTransformerImpl::forward(const torch::Tensor& images) {
  auto x = prepare_tokens(images);
  for (const auto& block : *blocks) x = block->as<Block>()->forward(x);
  return norm(x).select(1, 0);
}

}  // namespace pcdino::train
