#include "pcdino/train/dino.hpp"

#include <map>

#include "pcdino/train/cpu_layers.hpp"
#include "pcdino/train/schedules.hpp"

namespace pcdino::train {

namespace F = torch::nn::functional;

DinoHeadImpl::DinoHeadImpl(int in_dim, int out_dim, bool norm_last_layer, int hidden_dim,
                           int bottleneck_dim) {
  mlp = torch::nn::Sequential(torch::nn::Linear(in_dim, hidden_dim), torch::nn::GELU(),
                              torch::nn::Linear(hidden_dim, hidden_dim), torch::nn::GELU(),
                              torch::nn::Linear(hidden_dim, bottleneck_dim));
  register_module("mlp", mlp);
  {
    torch::NoGradGuard no_grad;
    for (auto& m : mlp->modules(false)) {
      if (auto* linear = m->as<torch::nn::Linear>()) {
        trunc_normal_(linear->weight, 0, 0.02);
        linear->bias.zero_();
      }
    }
  }
  // weight_norm(nn.Linear(bottleneck, out_dim, bias=False)): v starts as the Linear's default init
  // (kaiming uniform, bound 1/sqrt(fan_in)), g = 1.
  auto last = register_module("last_layer", std::make_shared<torch::nn::Module>());
  const double bound = 1.0 / std::sqrt(static_cast<double>(bottleneck_dim));
  weight_v =
      last->register_parameter("weight_v", torch::empty({out_dim, bottleneck_dim}).uniform_(-bound, bound));
  weight_g =
      last->register_parameter("weight_g", torch::ones({out_dim, 1}), /*requires_grad=*/!norm_last_layer);
}

torch::Tensor DinoHeadImpl::last_layer_weight() const {
  return weight_g * weight_v / weight_v.norm(2, {1}, /*keepdim=*/true);
}

torch::Tensor DinoHeadImpl::forward(const torch::Tensor& x) {
  const auto z = F::normalize(sequential_forward(mlp, x), F::NormalizeFuncOptions().dim(-1).p(2));
  return pcdino::train::linear(z, last_layer_weight(), torch::Tensor());
}

MultiCropWrapperImpl::MultiCropWrapperImpl(VisionTransformer b, DinoHead h) {
  backbone = register_module("backbone", b);
  head = register_module("head", h);
}

torch::Tensor MultiCropWrapperImpl::forward(const std::vector<torch::Tensor>& crops) {
  std::vector<torch::Tensor> features;
  std::size_t start = 0;
  while (start < crops.size()) {
    std::size_t end = start + 1;
    while (end < crops.size() && crops[end].size(-1) == crops[start].size(-1)) ++end;
    features.push_back(
        backbone(torch::cat(std::vector<torch::Tensor>(crops.begin() + start, crops.begin() + end), 0)));
    start = end;
  }
  return head(torch::cat(features, 0));
}

DinoLoss::DinoLoss(int out_dim, int ncrops, double warmup_teacher_temp, double teacher_temp,
                   int warmup_teacher_temp_epochs, int epochs, double student_temp, double center_momentum)
    : center(torch::zeros({1, out_dim})),
      ncrops_(ncrops),
      student_temp_(student_temp),
      center_momentum_(center_momentum),
      teacher_temps_(teacher_temperature_schedule(warmup_teacher_temp, teacher_temp,
                                                  warmup_teacher_temp_epochs, epochs)) {}

double DinoLoss::teacher_temperature(int epoch) const {
  return teacher_temps_.at(
      static_cast<std::size_t>(std::min<int>(epoch, static_cast<int>(teacher_temps_.size()) - 1)));
}

torch::Tensor DinoLoss::operator()(const torch::Tensor& student_output, const torch::Tensor& teacher_output,
                                   int epoch, const std::function<void(torch::Tensor&)>& allreduce_sum,
                                   int world_size, const torch::Tensor& teacher_temp) {
  // Autocast's 16-bit outputs in float32 (the reference's softmaxes run in float32 under autocast):
  // [ncrops, B, K] log-probabilities of the student, [2, B, K] probabilities of the teacher.
  const auto widened = [](const torch::Tensor& t) {
    return t.element_size() < 4 ? t.to(torch::kFloat32) : t;
  };
  const auto student_out = widened(student_output), teacher_out = widened(teacher_output);
  const int64_t batch = student_out.size(0) / ncrops_;
  const auto student_log_probs =
      F::log_softmax(student_out / student_temp_, F::LogSoftmaxFuncOptions(-1)).view({ncrops_, batch, -1});
  const auto centred = teacher_out - center;
  const auto teacher_logits =
      (teacher_temp.defined() ? centred / teacher_temp : centred / teacher_temperature(epoch)).detach();
  const auto teacher_probs = F::softmax(teacher_logits, F::SoftmaxFuncOptions(-1));
  teacher_entropy = -(teacher_probs * F::log_softmax(teacher_logits, F::LogSoftmaxFuncOptions(-1)))
                         .sum(-1)
                         .mean()
                         .to(torch::kFloat32);
  // Every (teacher view iq, student view v) pair's cross-entropy at once, [2, ncrops] (main_dino.py's
  // DINOLoss loops over the pairs), then the pairs of one view seen by both (v == iq) left out.
  const auto cross =
      -(teacher_probs.view({2, 1, batch, -1}) * student_log_probs.unsqueeze(0)).sum(-1).mean(-1);
  const auto other_views = torch::ones({2, ncrops_}, cross.options());
  other_views.fill_diagonal_(0);
  const int terms = 2 * (ncrops_ - 1);
  const auto total = (cross * other_views).sum() / terms;
  {
    torch::NoGradGuard no_grad;
    auto batch_center = teacher_out.sum(0, /*keepdim=*/true);
    if (allreduce_sum) allreduce_sum(batch_center);
    batch_center = batch_center / (teacher_out.size(0) * world_size);
    // In place: a CUDA graph of the step (StepGraph) replays its writes into this very tensor.
    center.mul_(center_momentum_).add_(batch_center, 1 - center_momentum_);
  }
  return total;
}

void cancel_gradients_last_layer(int epoch, MultiCropWrapper& student, int freeze_last_layer) {
  if (epoch >= freeze_last_layer) return;
  for (auto& p : student->head->named_parameters()) {
    if (p.key().rfind("last_layer.", 0) == 0 && p.value().grad().defined())
      p.value().mutable_grad() = torch::Tensor();
  }
}

// Bias or not by name, as the reference's name.endswith(".bias").
std::vector<torch::optim::OptimizerParamGroup> params_groups(MultiCropWrapper& student) {
  std::vector<torch::Tensor> regularized, not_regularized;
  for (const auto& p : student->named_parameters()) {
    if (!p.value().requires_grad()) continue;
    const bool bias = p.key().size() >= 5 && p.key().compare(p.key().size() - 5, 5, ".bias") == 0;
    (p.value().dim() <= 1 || bias ? not_regularized : regularized).push_back(p.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(regularized, std::make_unique<torch::optim::AdamWOptions>(0.0));
  groups.emplace_back(not_regularized, std::make_unique<torch::optim::AdamWOptions>(0.0));
  return groups;
}

}  // namespace pcdino::train
