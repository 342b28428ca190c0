// DINO checkpoints in the reference's layout, in torch.save's zip format with plain Python containers, so
// that a plain torch.load(path) reads them, weights_only=True (PyTorch 2.6's default) included, from
// PyTorch 1.13 on; checkpoints of earlier pcdino (torch::pickle_save's tagged containers) still load here:
//   {"student": {"module.backbone.cls_token": ..., "module.head.last_layer.weight_g": ...},  (DDP names)
//    "teacher": {"backbone.cls_token": ..., "head.mlp.0.weight": ...},
//    "optimizer": uint8 tensor (LibTorch's own archive of the AdamW state: exact resume in C++),
//    "optimizer_crc32": zlib's CRC-32 of those bytes (checked before LibTorch loads them),
//    "epoch": epochs finished, "iteration": iterations done in the next epoch (0 at an epoch's end),
//    "dino_loss": {"center": [1, out_dim]}, "rng_state": the CPU generator's state,
//    "cuda_rng_state": the GPU's (trained on a GPU), "args": {key: value},
//    "rank_rng_states": [each rank's CPU generator state], "rank_cuda_rng_states": [each rank's GPU
//    generator state] (several ranks: drop path draws differ by rank, so a resumed multi-rank run needs
//    every rank's)}
// Tensors are stored on the host whatever device trained them; loading puts them on the modules' device.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "pcdino/train/dino.hpp"

namespace pcdino::train {

struct CheckpointState {
  int epoch = 0;      ///< epochs finished
  int iteration = 0;  ///< iterations of epoch `epoch` already done (a checkpoint taken on a signal)
  std::map<std::string, std::string> args;
  /// Several ranks: every rank's generator states in rank order (uint8 tensors, as Generator::get_state
  /// gives them), gathered to the writer before save_checkpoint(); empty with one rank. The GPU's are
  /// empty when training on CPUs.
  std::vector<torch::Tensor> rank_rng_states, rank_cuda_rng_states;
};

/// Writes the checkpoint to `path` atomically (temporary file, then rename), each tensor's bytes straight
/// from the model into the file (bench/checkpoint.sh). Throws CantCreateError.
void save_checkpoint(const std::string& path, MultiCropWrapper& student, MultiCropWrapper& teacher,
                     torch::optim::Optimizer& optimizer, const DinoLoss& loss, const CheckpointState& state);

/// Reads `path` into the given modules, optimizer and loss centre (the modules must have the
/// checkpoint's architecture) and restores the generators: rank `rank`'s states when the checkpoint
/// holds one per rank of a world of `world_size`, else (one rank, an older checkpoint or another world
/// size) the single "rng_state" / "cuda_rng_state". Throws NoInputError if it cannot be read, DataError
/// naming the file and the first mismatching parameter otherwise.
CheckpointState load_checkpoint(const std::string& path, MultiCropWrapper& student, MultiCropWrapper& teacher,
                                torch::optim::Optimizer& optimizer, DinoLoss& loss, int rank = 0,
                                int world_size = 1);

/// A checkpoint's "epoch", "iteration" and "args" (written by any version of pcdino; a reference
/// checkpoint without them gives epoch -1 and no args). The file is mapped, not read: its tensors' bytes are
/// never touched (milliseconds for a 700 MB checkpoint). Every reader here checks that no tensor claims
/// more bytes than the file holds. Throws NoInputError if the file cannot be read,
/// DataError naming it if it is not a checkpoint.
CheckpointState read_checkpoint_state(const std::string& path);

/// The parameters and buffers of `module` by name, with `prefix` before each name, detached: host tensors
/// share the module's memory (as PyTorch's state_dict()), a GPU's are copied to the host.
c10::Dict<std::string, torch::Tensor> state_dict(const torch::nn::Module& module,
                                                 const std::string& prefix = "");

/// Reads one state dict of a checkpoint (key "teacher" or "student"), with the "module." and "backbone."
/// prefixes stripped, e.g. for feature extraction. Throws as load_checkpoint().
std::map<std::string, torch::Tensor> read_state_dict(const std::string& path, const std::string& key);

/// A ViT backbone read from a checkpoint, as the extract stage runs it.
struct PretrainedVit {
  VisionTransformer vit{nullptr};
  std::string arch;  ///< the checkpoint's args.arch ("" if it has none)
  int epoch = -1;    ///< the checkpoint's epoch (-1 if it has none)
};

/// The `key` ("teacher" or "student") backbone of the checkpoint at `path` (DINO's
/// utils.load_pretrained_weights with eval_knn.py's model): the ViT is built from the weights' shapes
/// (width, input channels, patch size, image size from patch_embed.proj.weight [D, C, p, p] and pos_embed
/// [1, grid^2 + 1, D], depth from the blocks), its heads from args.arch or the DINO preset of that width,
/// and every parameter is copied in. Throws NoInputError if the file cannot be read, DataError naming the
/// file when a weight is missing or of another shape, or the heads cannot be told.
PretrainedVit load_pretrained_vit(const std::string& path, const std::string& key);

}  // namespace pcdino::train
