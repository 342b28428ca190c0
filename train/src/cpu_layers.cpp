#include "pcdino/train/cpu_layers.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "pcdino/train/cpu_kernels.hpp"
#include "pcdino/train/device.hpp"

#ifdef PCDINO_WITH_ONEDNN
#include <oneapi/dnnl/dnnl_version.h>

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#endif

namespace pcdino::train {

namespace {

bool enabled_by_environment() {
  static const bool on = [] {
    const char* v = std::getenv("PCDINO_CPU_LAYERS");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
 public:
  // qkv [B, N, 3C] contiguous float32 -> [B, N, C]; probs [B, H, N, N] saved for backward.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv, int64_t heads,
                            double scale) {
    const int64_t batch = qkv.size(0), n = qkv.size(1), c = qkv.size(2) / 3;
    const auto r = rows(n, c, heads, scale);
    auto out = at::empty({batch, n, c}, qkv.options());
    auto probs = at::empty({batch, heads, n, n}, qkv.options());
    const float* in = qkv.data_ptr<float>();
    float* o = out.data_ptr<float>();
    float* p = probs.data_ptr<float>();
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / heads, h = bh % heads;
        const float* q = in + b * n * 3 * c + h * r.head_dim;
        cpu::attention_forward(q, q + c, q + 2 * c, p + bh * n * n, o + b * n * c + h * r.head_dim, r);
      }
    });
    ctx->save_for_backward({qkv, probs});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& qkv = saved[0];
    const auto& probs = saved[1];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const int64_t batch = qkv.size(0), n = qkv.size(1), c = qkv.size(2) / 3;
    const auto r = rows(n, c, heads, ctx->saved_data["scale"].toDouble());
    const auto d_out = grads[0].contiguous();
    auto d_qkv = at::empty_like(qkv);  // every element written by one (image, head)
    const float* in = qkv.data_ptr<float>();
    const float* g = d_out.data_ptr<float>();
    const float* p = probs.data_ptr<float>();
    float* d = d_qkv.data_ptr<float>();
    at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(static_cast<std::size_t>(n * n));
      for (int64_t bh = begin; bh < end; ++bh) {
        const int64_t b = bh / heads, h = bh % heads;
        const int64_t offset = b * n * 3 * c + h * r.head_dim;
        const float* q = in + offset;
        float* dq = d + offset;
        cpu::attention_backward(q, q + c, q + 2 * c, p + bh * n * n, g + b * n * c + h * r.head_dim, dq,
                                dq + c, dq + 2 * c, scratch.data(), r);
      }
    });
    return {d_qkv, at::Tensor(), at::Tensor()};
  }

 private:
  static cpu::AttentionRows rows(int64_t n, int64_t c, int64_t heads, double scale) {
    cpu::AttentionRows r;
    r.tokens = n, r.head_dim = c / heads, r.stride = 3 * c, r.out_stride = c;
    r.scale = static_cast<float>(scale);
    return r;
  }
};

#ifdef PCDINO_WITH_ONEDNN

// A matmul's primitive descriptor: oneDNN 2 (Debian 12) builds it from an operation descriptor, oneDNN 3
// (Debian 13) from the memory descriptors directly; `bias` may be null.
dnnl::matmul::primitive_desc matmul_pd(const dnnl::engine& engine, const dnnl::memory::desc& a,
                                       const dnnl::memory::desc& b, const dnnl::memory::desc* bias,
                                       const dnnl::memory::desc& c) {
#if DNNL_VERSION_MAJOR >= 3
  return bias ? dnnl::matmul::primitive_desc(engine, a, b, *bias, c)
              : dnnl::matmul::primitive_desc(engine, a, b, c);
#else
  return dnnl::matmul::primitive_desc(bias ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c),
                                      engine);
#endif
}

// C [M, N] = op(A) [M, K] op(B) [K, N] (+ bias [N]), row-major float32. A is stored [M, K], or [K, M] when
// `ta`; B is stored [K, N], or [N, K] when `tb`. One matmul primitive per shape, made on first use.
void gemm(const float* a, bool ta, const float* b, bool tb, const float* bias, float* c, int64_t m, int64_t k,
          int64_t n) {
  using dnnl::memory;
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>;
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  static std::mutex mutex;
  static std::map<Key, dnnl::matmul> cache;
  const memory::desc a_md({m, k}, memory::data_type::f32, ta ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b_md({k, n}, memory::data_type::f32, tb ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c_md({m, n}, memory::data_type::f32, memory::dims{n, 1});
  const memory::desc bias_md({1, n}, memory::data_type::f32, memory::dims{n, 1});
  dnnl::matmul primitive;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const Key key{m, k, n, ta, tb, bias != nullptr};
    auto it = cache.find(key);
    if (it == cache.end()) {
      if (cache.size() >= 512) cache.clear();  // shapes of a run are few; extraction's last batch adds one
      it = cache.emplace(key, dnnl::matmul(matmul_pd(engine, a_md, b_md, bias ? &bias_md : nullptr, c_md)))
               .first;
    }
    primitive = it->second;
  }
  thread_local dnnl::stream stream(engine);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(a_md, engine, const_cast<float*>(a))},
                                       {DNNL_ARG_WEIGHTS, memory(b_md, engine, const_cast<float*>(b))},
                                       {DNNL_ARG_DST, memory(c_md, engine, c)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(bias_md, engine, const_cast<float*>(bias)));
  primitive.execute(stream, args);
  stream.wait();
}

// x2d [M, K], weight [N, K], bias [N] or undefined, all contiguous float32: [M, N], with x2d and weight
// saved for backward. Two Function classes call it because an autograd Function's inputs must all be
// defined tensors.
at::Tensor forward_saving(torch::autograd::AutogradContext* ctx, const at::Tensor& x2d,
                          const at::Tensor& weight, const at::Tensor& bias) {
  ctx->save_for_backward({x2d, weight});
  const int64_t m = x2d.size(0), k = x2d.size(1), n = weight.size(0);
  auto y = at::empty({m, n}, x2d.options());
  gemm(x2d.data_ptr<float>(), false, weight.data_ptr<float>(), true,
       bias.defined() ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>(), m, k, n);
  return y;
}

// {dx, dW, db}; db only with `bias`.
torch::autograd::tensor_list backward_of(torch::autograd::AutogradContext* ctx, const at::Tensor& grad,
                                         bool bias) {
  const auto saved = ctx->get_saved_variables();
  const auto& x = saved[0];
  const auto& weight = saved[1];
  const auto dy = grad.contiguous();  // [M, N]
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  at::Tensor dx, dw, db;
  if (ctx->needs_input_grad(0)) {  // dx [M, K] = dy [M, N] W [N, K]
    dx = at::empty({m, k}, x.options());
    gemm(dy.data_ptr<float>(), false, weight.data_ptr<float>(), false, nullptr, dx.data_ptr<float>(), m, n,
         k);
  }
  if (ctx->needs_input_grad(1)) {  // dW [N, K] = dy^T [N, M] x [M, K]
    dw = at::empty({n, k}, weight.options());
    gemm(dy.data_ptr<float>(), true, x.data_ptr<float>(), false, nullptr, dw.data_ptr<float>(), n, m, k);
  }
  if (!bias) return {dx, dw};
  if (ctx->needs_input_grad(2)) db = dy.sum(0);
  return {dx, dw, db};
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x2d,
                            const at::Tensor& weight, const at::Tensor& bias) {
    return forward_saving(ctx, x2d, weight, bias);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return backward_of(ctx, grads[0], true);
  }
};

class LinearNoBiasFunction : public torch::autograd::Function<LinearNoBiasFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x2d,
                            const at::Tensor& weight) {
    return forward_saving(ctx, x2d, weight, at::Tensor());
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return backward_of(ctx, grads[0], false);
  }
};

bool takes(const at::Tensor& t) {
  return !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat);
}

#endif

}  // namespace

bool cpu_attention_applies(const at::Tensor& qkv) {
  return enabled_by_environment() && qkv.device().is_cpu() && qkv.scalar_type() == at::kFloat &&
         qkv.dim() == 3 && qkv.size(2) % 3 == 0 && !autocast_enabled(c10::DeviceType::CPU);
}

at::Tensor cpu_attention(const at::Tensor& qkv, int64_t heads, double scale) {
  TORCH_CHECK(cpu_attention_applies(qkv),
              "cpu_attention: a float32 CPU tensor [B, N, 3C] without autocast, not ", qkv.sizes(), " ",
              qkv.scalar_type());
  TORCH_CHECK(heads > 0 && (qkv.size(2) / 3) % heads == 0, "cpu_attention: ", qkv.size(2) / 3,
              " channels do not split into ", heads, " heads");
  return AttentionFunction::apply(qkv.contiguous(), heads, scale);
}

at::Tensor cpu_attention_widened(const at::Tensor& qkv, int64_t heads, double scale) {
  if (!enabled_by_environment() || !autocast_enabled(c10::DeviceType::CPU) || !qkv.device().is_cpu() ||
      qkv.scalar_type() != at::kBFloat16 || qkv.dim() != 3 || qkv.size(1) > kWidenedAttentionTokens ||
      qkv.size(0) * qkv.size(1) > kWidenedAttentionRows) {
    return {};
  }
  const auto wide = qkv.to(at::kFloat);
  const AutocastPause float32(c10::DeviceType::CPU);
  return cpu_attention(wide, heads, scale);
}

bool cpu_linear_available() {
#ifdef PCDINO_WITH_ONEDNN
  return true;
#else
  return false;
#endif
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#ifdef PCDINO_WITH_ONEDNN
  if (enabled_by_environment() && x.dim() >= 2 && weight.dim() == 2 && takes(x) && takes(weight) &&
      takes(bias) && !autocast_enabled(c10::DeviceType::CPU) && x.size(-1) == weight.size(1) &&
      (!bias.defined() || bias.dim() == 1) && x.numel() > 0) {
    auto out_shape = x.sizes().vec();
    out_shape.back() = weight.size(0);
    const auto x2d = x.reshape({-1, x.size(-1)}).contiguous();
    const auto w = weight.contiguous();
    const auto y = bias.defined() ? LinearFunction::apply(x2d, w, bias.contiguous())
                                  : LinearNoBiasFunction::apply(x2d, w);
    return y.view(out_shape);
  }
#endif
  return at::linear(x, weight, bias);
}

}  // namespace pcdino::train
