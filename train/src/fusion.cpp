#include "pcdino/train/fusion.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace pcdino::train {

GradientFusion::GradientFusion(Communicator& comm, std::vector<torch::Tensor> params,
                               const FusionOptions& options)
    : comm_(comm), params_(std::move(params)) {
  if (params_.empty()) throw std::invalid_argument("no parameters to synchronise");
  const auto device = params_.front().device();
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  arrived_.assign(params_.size(), false);
  // Reverse registration order: the head's gradients are computed first in backward.
  std::size_t bytes = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    if (p.device() != device) throw std::invalid_argument("parameters on several devices");
    const std::size_t size = static_cast<std::size_t>(p.numel()) * p.element_size();
    const std::size_t limit = buckets_.size() == 1 && options.first_bucket_bytes > 0
                                  ? options.first_bucket_bytes
                                  : options.threshold_bytes;
    if (buckets_.empty() || bytes + size > limit ||
        params_[buckets_.back().params.front()].scalar_type() != p.scalar_type()) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = b.params.size();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel());
    b.params.push_back(k);
    bytes += size;
  }
  for (auto& b : buckets_) {
    const auto& last = params_[b.params.back()];
    b.flat = torch::zeros({b.offsets.back() + last.numel()}, last.options().requires_grad(false));
  }
}

void GradientFusion::attach() {
  for (std::size_t k = 0; k < params_.size(); ++k) {
    params_[k].register_hook([this, k](const torch::Tensor& grad) { on_gradient(k, grad); });
  }
}

void GradientFusion::on_gradient(std::size_t k, const torch::Tensor& grad) {
  Bucket& b = buckets_[bucket_of_[k]];
  // On the autograd engine's thread, whose current stream is the parameter's forward stream (a CUDA
  // graph's capture stream under StepGraph): the copy and the allreduce are queued after that stream's
  // work, and so captured. Holding the gradient accumulator beyond the step would break that (PyTorch
  // issue 137483); nothing here does. Autograd runs a leaf's hooks once per backward, with its summed
  // gradient; a repeat after the buffer left (a second backward before finish()) is not supported and is
  // ignored.
  if (b.started) return;
  torch::NoGradGuard no_grad;
  b.flat.narrow(0, b.offsets[slot_of_[k]], grad.numel()).copy_(grad.reshape({-1}));
  if (!arrived_[k]) {
    arrived_[k] = true;
    ++b.ready;
  }
  if (b.ready == b.params.size()) start_ready_buckets();
}

void GradientFusion::start_ready_buckets() {
  // In index order on every rank, whatever order the gradients came in: collectives must match.
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == buckets_[next_to_start_].params.size()) {
    Bucket& b = buckets_[next_to_start_++];
    b.started = true;
    comm_.start_allreduce(b.flat, ReduceOp::kAverage);
  }
}

void GradientFusion::finish() {
  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    if (b.started) continue;
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      const std::size_t k = b.params[s];
      if (arrived_[k]) continue;
      auto slice = b.flat.narrow(0, b.offsets[s], params_[k].numel());
      if (params_[k].grad().defined()) {
        slice.copy_(params_[k].grad().reshape({-1}));
      } else {
        slice.zero_();
      }
      arrived_[k] = true;
      ++b.ready;
    }
  }
  start_ready_buckets();
  write_back();
}

void GradientFusion::write_back() {
  const auto start = std::chrono::steady_clock::now();
  comm_.wait_pending();
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto& b : buckets_) {
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      auto& p = params_[b.params[s]];
      const auto averaged = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(averaged);
      } else {
        p.mutable_grad() = averaged.clone();
      }
    }
    b.ready = 0;
    b.started = false;
  }
  arrived_.assign(params_.size(), false);
  next_to_start_ = 0;
}

void GradientFusion::abandon() noexcept {
  try {
    comm_.wait_pending();
  } catch (...) {  // a reduction's own failure; the step's error is reported instead
  }
  for (auto& b : buckets_) b.ready = 0, b.started = false;
  std::fill(arrived_.begin(), arrived_.end(), false);
  next_to_start_ = 0;
}

void GradientFusion::reduce_now() {
  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    for (std::size_t s = 0; s < b.params.size(); ++s) {
      const auto& p = params_[b.params[s]];
      auto slice = b.flat.narrow(0, b.offsets[s], p.numel());
      if (p.grad().defined()) {
        slice.copy_(p.grad().reshape({-1}));
      } else {
        slice.zero_();
      }
    }
    b.ready = b.params.size();
  }
  arrived_.assign(params_.size(), true);
  start_ready_buckets();
  write_back();
}

}  // namespace pcdino::train
