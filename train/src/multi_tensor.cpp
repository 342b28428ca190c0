#include "pcdino/train/multi_tensor.hpp"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cmath>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "pcdino/train/cpu_kernels.hpp"

namespace pcdino::train {

namespace {

// The key torch::optim keeps a parameter's state under: the TensorImpl's address, printed as a string
// by LibTorch 1.13 (c10::guts::to_string) and as the pointer itself by later releases.
template <typename Key>
Key state_key(const torch::Tensor& p) {
  const void* impl = p.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << impl;
    return out.str();
  } else {
    return static_cast<Key>(const_cast<void*>(impl));
  }
}

// at::_fused_adamw_ found by name in the dispatcher (PyTorch >= 2.0), so that this file builds with
// Debian's LibTorch 1.13, which has no such operator.
std::optional<c10::OperatorHandle> fused_adamw_operator() {
  static const std::optional<c10::OperatorHandle> op = [] {
    const auto found = c10::Dispatcher::singleton().findSchema({"aten::_fused_adamw_", ""});
    return found ? std::optional<c10::OperatorHandle>(*found) : std::nullopt;
  }();
  return op;
}

// Its schema (aten/src/ATen/native/native_functions.yaml): self, grads, exp_avgs, exp_avg_sqs,
// max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale,
// found_inf; a boxed call passes every argument.
void call_fused_adamw(const c10::OperatorHandle& op, const std::vector<torch::Tensor>& params,
                      const std::vector<torch::Tensor>& grads, const std::vector<torch::Tensor>& exp_avgs,
                      const std::vector<torch::Tensor>& exp_avg_sqs, const std::vector<torch::Tensor>& steps,
                      const torch::optim::AdamWOptions& o) {
  torch::jit::Stack stack;
  for (const auto* list : {&params, &grads, &exp_avgs, &exp_avg_sqs}) stack.emplace_back(*list);
  stack.emplace_back(std::vector<torch::Tensor>{});  // max_exp_avg_sqs: no amsgrad
  stack.emplace_back(steps);
  for (const double v : {o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps()})
    stack.emplace_back(v);
  stack.emplace_back(false);          // amsgrad
  stack.emplace_back(false);          // maximize
  stack.emplace_back(c10::IValue());  // grad_scale
  stack.emplace_back(c10::IValue());  // found_inf
  op.callBoxed(&stack);
}

// The CPU's one-pass loops (cpu_kernels.hpp) take float32 arrays: every tensor contiguous on the CPU.
bool cpu_fusable(std::initializer_list<const std::vector<torch::Tensor>*> lists) {
  for (const auto* list : lists) {
    for (const auto& t : *list) {
      if (!t.device().is_cpu() || t.scalar_type() != torch::kFloat32 || !t.is_contiguous() || t.is_sparse())
        return false;
    }
  }
  return true;
}

// fn(begin, end) over [0, n) in ranges for LibTorch's intra-op threads (inline with one thread); a
// grain of 64 Ki elements keeps a range's three or four arrays within a core's L2.
template <typename Fn>
void for_ranges(int64_t n, Fn&& fn) {
  at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) { fn(begin, end); });
}

bool fusable(const std::vector<torch::Tensor>& params) {
  for (const auto& p : params) {
    if (!p.is_cuda() || !p.is_floating_point() || p.device() != params.front().device() ||
        p.scalar_type() != params.front().scalar_type())
      return false;
  }
  return true;
}

}  // namespace

const torch::optim::AdamWParamState* adamw_state(const torch::optim::Optimizer& optimizer,
                                                 const torch::Tensor& p) {
  const auto& states = optimizer.state();
  const auto found = states.find(state_key<typename std::decay_t<decltype(states)>::key_type>(p));
  return found == states.end() ? nullptr
                               : dynamic_cast<const torch::optim::AdamWParamState*>(found->second.get());
}

torch::optim::AdamWParamState& MultiTensorAdamW::state_of(const torch::Tensor& p) {
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  auto& slot = state_[state_key<Key>(p)];
  if (!slot) {  // zero moments and step count, as torch::optim::AdamW starts them
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*slot);
}

torch::Tensor MultiTensorAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (o.amsgrad()) throw std::invalid_argument("MultiTensorAdamW: amsgrad is not implemented");
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    std::vector<int64_t> steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (p.grad().is_sparse()) throw std::invalid_argument("MultiTensorAdamW: sparse gradients");
      auto& s = state_of(p);
      s.step(s.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      steps.push_back(s.step());
    }
    if (params.empty()) continue;

    const auto fused = fusable(params) && !fused_refused_ ? fused_adamw_operator() : std::nullopt;
    if (fused) {
      std::vector<torch::Tensor> device_steps, existing;
      for (std::size_t i = 0; i < params.size(); ++i) {
        auto& t = device_steps_[params[i].unsafeGetTensorImpl()];
        if (t.defined()) {
          existing.push_back(t);
        } else {  // first fused step of this parameter (or after a resume): from the host count
          t = torch::full({}, static_cast<double>(steps[i]),
                          torch::TensorOptions().dtype(torch::kFloat32).device(params[i].device()));
        }
        device_steps.push_back(t);
      }
      if (!existing.empty()) at::_foreach_add_(existing, 1);
      try {
        call_fused_adamw(*fused, params, grads, exp_avgs, exp_avg_sqs, device_steps, o);
        last_path_ = "fused";
        continue;
      } catch (const c10::Error& e) {
        spdlog::warn("at::_fused_adamw_ refused the update ({}); using the foreach AdamW",
                     e.what_without_backtrace());
        fused_refused_ = true;
      }
    }

    // The one-pass loops and the list ops keep the count on the host alone: a device count made by an
    // earlier fused step or step_on_device() would fall behind, so it is made again from the host's when
    // next needed.
    for (const auto& p : params) device_steps_.erase(p.unsafeGetTensorImpl());
    const double lr = o.lr(), wd = o.weight_decay(), eps = o.eps();
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    if (cpu_fusable({&params, &grads, &exp_avgs, &exp_avg_sqs})) {
      for (std::size_t i = 0; i < params.size(); ++i) {
        const auto t = static_cast<double>(steps[i]);
        cpu::AdamWScalars scalars;
        scalars.decay = static_cast<float>(1 - lr * wd);
        scalars.beta1 = static_cast<float>(beta1), scalars.one_minus_beta1 = static_cast<float>(1 - beta1);
        scalars.beta2 = static_cast<float>(beta2), scalars.one_minus_beta2 = static_cast<float>(1 - beta2);
        scalars.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, t)));
        scalars.neg_step_size = static_cast<float>(-lr / (1 - std::pow(beta1, t)));
        scalars.eps = static_cast<float>(eps);
        float* p = params[i].data_ptr<float>();
        const float* g = grads[i].data_ptr<float>();
        float* m = exp_avgs[i].data_ptr<float>();
        float* v = exp_avg_sqs[i].data_ptr<float>();
        for_ranges(params[i].numel(), [&](int64_t begin, int64_t end) {
          cpu::adamw(p + begin, g + begin, m + begin, v + begin, end - begin, scalars);
        });
      }
      last_path_ = "cpu_fused";
      continue;
    }

    if (wd != 0) at::_foreach_mul_(params, 1 - lr * wd);
    at::_foreach_mul_(exp_avgs, beta1);
    at::_foreach_add_(exp_avgs, grads, 1 - beta1);
    at::_foreach_mul_(exp_avg_sqs, beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
    // The bias corrections are host numbers from the host step counts: no device read. One scalar for
    // the group when every parameter has taken the same number of steps (the usual case).
    auto denominators = at::_foreach_sqrt(exp_avg_sqs);
    const bool same_step = std::all_of(steps.begin(), steps.end(), [&](int64_t t) { return t == steps[0]; });
    std::vector<c10::Scalar> sqrt_bc2, neg_step_size;
    for (std::size_t i = 0; i < (same_step ? 1 : steps.size()); ++i) {
      const auto t = static_cast<double>(steps[i]);
      sqrt_bc2.emplace_back(std::sqrt(1 - std::pow(beta2, t)));
      neg_step_size.emplace_back(-lr / (1 - std::pow(beta1, t)));
    }
    if (same_step) {
      at::_foreach_div_(denominators, sqrt_bc2[0]);
      at::_foreach_add_(denominators, eps);
      at::_foreach_addcdiv_(params, exp_avgs, denominators, neg_step_size[0]);
    } else {
      at::_foreach_div_(denominators, sqrt_bc2);
      at::_foreach_add_(denominators, eps);
      at::_foreach_addcdiv_(params, exp_avgs, denominators, neg_step_size);
    }
    last_path_ = "foreach";
  }
  return loss;
}

void MultiTensorAdamW::step_on_device(const torch::Tensor& lr, const torch::Tensor& weight_decay) {
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (o.amsgrad()) throw std::invalid_argument("MultiTensorAdamW: amsgrad is not implemented");
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps, existing;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = state_of(p);
      auto& t = device_steps_[p.unsafeGetTensorImpl()];
      if (t.defined()) {
        existing.push_back(t);
      } else {  // this parameter's first step on the device: this step's count, from the host's
        t = torch::full({}, static_cast<double>(s.step() + 1),
                        torch::TensorOptions().dtype(torch::kFloat32).device(p.device()));
      }
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      steps.push_back(t);
    }
    if (params.empty()) continue;
    if (!existing.empty()) at::_foreach_add_(existing, 1);
    const auto n = params.size();
    const auto each = [n](const torch::Tensor& t) { return std::vector<torch::Tensor>(n, t); };
    const double eps = o.eps(), beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    if (o.weight_decay() != 0) at::_foreach_mul_(params, each(1 - lr * weight_decay));
    at::_foreach_mul_(exp_avgs, beta1);
    at::_foreach_add_(exp_avgs, grads, 1 - beta1);
    at::_foreach_mul_(exp_avg_sqs, beta2);
    at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2);
    // 1 - beta^t from the device's t as 1 - exp(t ln beta) (list ops that Debian's 1.13 has too), in
    // float64 as the host computes it: the float32 counts' exp alone is off by ~1e-6 of the update.
    std::vector<torch::Tensor> steps64;
    for (const auto& t : steps) steps64.push_back(t.to(torch::kFloat64));
    const auto bias_correction = [&steps64](double beta) {
      auto c = at::_foreach_mul(steps64, std::log(beta));
      at::_foreach_exp_(c);
      at::_foreach_neg_(c);
      at::_foreach_add_(c, 1);
      return c;
    };
    auto sqrt_bc2 = bias_correction(beta2);
    at::_foreach_sqrt_(sqrt_bc2);
    auto denominators = at::_foreach_sqrt(exp_avg_sqs);
    at::_foreach_div_(denominators, sqrt_bc2);
    at::_foreach_add_(denominators, eps);
    // p -= lr / (1 - beta1^t) * m / denominator
    auto neg_step_size = bias_correction(beta1);
    at::_foreach_reciprocal_(neg_step_size);
    at::_foreach_mul_(neg_step_size, each(-lr));
    auto updates = at::_foreach_div(exp_avgs, denominators);
    at::_foreach_mul_(updates, neg_step_size);
    at::_foreach_add_(params, updates);
    last_path_ = "device_schedule";
  }
}

void MultiTensorAdamW::advance_host_steps() {
  using Key = typename std::decay_t<decltype(state_)>::key_type;
  for (auto& group : param_groups_) {
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto found = state_.find(state_key<Key>(p));
      if (found == state_.end()) continue;  // never stepped
      auto& s = static_cast<torch::optim::AdamWParamState&>(*found->second);
      s.step(s.step() + 1);
    }
  }
}

void MultiTensorAdamW::zero_grad() {
  std::vector<torch::Tensor> grads;
  for (auto& group : param_groups_) {
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      p.mutable_grad().detach_();
      grads.push_back(p.grad());
    }
  }
  if (!grads.empty()) at::_foreach_zero_(grads);
}

void ema_update(torch::nn::Module& teacher, torch::nn::Module& student, double momentum) {
  torch::NoGradGuard no_grad;
  const auto t = teacher.parameters(), s = student.parameters();
  if (t.size() != s.size()) throw std::invalid_argument("teacher and student differ in parameter count");
  if (t.empty()) return;
  if (cpu_fusable({&t, &s})) {
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i].sizes() != s[i].sizes()) throw std::invalid_argument("teacher and student differ in a shape");
      float* teacher_data = t[i].data_ptr<float>();
      const float* student_data = s[i].data_ptr<float>();
      for_ranges(t[i].numel(), [&](int64_t begin, int64_t end) {
        cpu::ema(teacher_data + begin, student_data + begin, end - begin, static_cast<float>(momentum),
                 static_cast<float>(1 - momentum));
      });
    }
    return;
  }
  at::_foreach_mul_(t, momentum);
  at::_foreach_add_(t, s, 1 - momentum);
}

void ema_update(torch::nn::Module& teacher, torch::nn::Module& student, const torch::Tensor& momentum) {
  torch::NoGradGuard no_grad;
  const auto t = teacher.parameters(), s = student.parameters();
  if (t.size() != s.size()) throw std::invalid_argument("teacher and student differ in parameter count");
  if (t.empty()) return;
  at::_foreach_mul_(t, std::vector<torch::Tensor>(t.size(), momentum));
  at::_foreach_addcmul_(t, s, std::vector<torch::Tensor>(t.size(), 1 - momentum));
}

torch::Tensor clip_gradients(torch::nn::Module& model, double clip) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& p : model.parameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::empty({0});
  const auto norms = torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat32);
  // min(1, clip / (norm + 1e-6)) per gradient: multiplying by exactly 1 leaves unchanged the gradients
  // the reference does not scale.
  const auto coefficients = (clip / (norms + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coefficients.unbind(0));
  return norms;
}

}  // namespace pcdino::train
