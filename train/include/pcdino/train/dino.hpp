// DINO's projection head, multi-crop wrapper and loss (facebookresearch/dino: vision_transformer.py
// DINOHead, utils.MultiCropWrapper, main_dino.py DINOLoss), with the reference's parameter names
// (head.mlp.0.weight, head.last_layer.weight_g, head.last_layer.weight_v, ...).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "pcdino/train/vit.hpp"

namespace pcdino::train {

/// 3-layer MLP (GELU) to a bottleneck, L2 normalisation, then a weight-normalised linear layer to
/// `out_dim` whose norm (weight_g) is frozen at 1 when `norm_last_layer`. [B, in_dim] -> [B, out_dim].
class DinoHeadImpl : public torch::nn::Module {
 public:
  DinoHeadImpl(int in_dim, int out_dim, bool norm_last_layer = true, int hidden_dim = 2048,
               int bottleneck_dim = 256);
  torch::Tensor forward(const torch::Tensor& x);

  /// The last layer's weight: weight_g * weight_v / ||weight_v|| (row-wise), [out_dim, bottleneck].
  torch::Tensor last_layer_weight() const;

  torch::nn::Sequential mlp{nullptr};  // mlp.0, mlp.2, mlp.4 are the Linear layers
  torch::Tensor weight_g, weight_v;    // registered under last_layer.*
};
TORCH_MODULE(DinoHead);

/// Backbone and head applied to a list of crops: consecutive crops of the same size go through the
/// backbone together (utils.MultiCropWrapper). Crops [B, C, H_i, W_i] -> [sum of B over crops, out_dim],
/// in crop order.
class MultiCropWrapperImpl : public torch::nn::Module {
 public:
  MultiCropWrapperImpl(VisionTransformer backbone, DinoHead head);
  torch::Tensor forward(const std::vector<torch::Tensor>& crops);

  VisionTransformer backbone{nullptr};
  DinoHead head{nullptr};
};
TORCH_MODULE(MultiCropWrapper);

/// DINO's loss (main_dino.py DINOLoss; Caron et al. 2021, eq. 1 and 3-4): cross-entropy between the
/// teacher's centred, sharpened softmax over the 2 global crops and the student's softmax at
/// `student_temp` over all `ncrops` crops, skipping same-view pairs; the centre is an EMA (momentum
/// `center_momentum`) of the teacher's batch mean.
class DinoLoss {
 public:
  DinoLoss(int out_dim, int ncrops, double warmup_teacher_temp, double teacher_temp,
           int warmup_teacher_temp_epochs, int epochs, double student_temp = 0.1,
           double center_momentum = 0.9);

  /// student_output [ncrops * B, out_dim], teacher_output [2 * B, out_dim] (crop-major, as the wrapper
  /// gives them). Returns the scalar loss and updates the centre from teacher_output. `allreduce_sum`,
  /// if given, sums a tensor over ranks in place (the centre is averaged over all ranks' batches).
  /// `teacher_temp`, if defined (a 0-dim float32 tensor on the outputs' device), is the teacher
  /// temperature instead of teacher_temperature(epoch): a CUDA graph of the step reads it at each replay,
  /// so one graph serves every epoch of the warm-up schedule.
  torch::Tensor operator()(const torch::Tensor& student_output, const torch::Tensor& teacher_output,
                           int epoch, const std::function<void(torch::Tensor&)>& allreduce_sum = nullptr,
                           int world_size = 1, const torch::Tensor& teacher_temp = {});

  torch::Tensor center;  ///< [1, out_dim]
  /// Of the last call, detached and on the outputs' device (no host sync): the mean entropy in nats of
  /// the teacher's centred, sharpened distributions over its 2B outputs, h(P_t). The cross-entropy the
  /// loss averages is h(P_t) + KL(P_t || P_s) for every pair, so loss - teacher_entropy is the mean
  /// teacher-student KL. Together they are the DINO paper's collapse check (Caron et al. 2021, sec. 5.3,
  /// fig. 7): collapse to a uniform output drives h(P_t) to ln(out_dim), to one dimension drives it to 0,
  /// and either drives the KL to 0; a learning run keeps the KL above 0 with h(P_t) in between.
  torch::Tensor teacher_entropy;
  double teacher_temperature(int epoch) const;

 private:
  int ncrops_;
  double student_temp_, center_momentum_;
  std::vector<double> teacher_temps_;
};

/// The optimizer's parameter groups of DINO (utils.get_params_groups): group 0 the trained parameters with
/// weight decay (the schedule sets it), group 1 those without (ndim <= 1 or named *.bias: biases and
/// norms); parameters that need no gradient are left out. Both with AdamWOptions(0.0); lr is set per step.
std::vector<torch::optim::OptimizerParamGroup> params_groups(MultiCropWrapper& student);

/// Zeroes the gradients of head.last_layer (utils.cancel_gradients_last_layer) while
/// epoch < freeze_last_layer.
void cancel_gradients_last_layer(int epoch, MultiCropWrapper& student, int freeze_last_layer);

}  // namespace pcdino::train
