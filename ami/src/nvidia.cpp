// The NVIDIA kind: the components its images pin, its template facts (the CUDA runfile), its part of
// pcdino's source build, and its recipes, as one row of the accelerator kinds (accelerator_image.hpp). Its
// compatibility rules are compat.cpp's driver, CUDA and NCCL tables; verify.sh checks it inline.
#include "recipes/nvidia.hpp"

#include "accelerator_image.hpp"

namespace pcdino::ami {

namespace {

// The CUDA runfile's placeholders, and the AMI's description.
void nvidia_facts(const ImageSpec& spec, Vars* v) {
  const std::string full = cuda_full_version(spec.versions.at("cuda"));
  (*v)["CUDA_FULL"] = full;
  (*v)["CUDA_MM"] = full.substr(0, full.find('.', full.find('.') + 1));
  (*v)["CUDA_MAJOR"] = full.substr(0, full.find('.'));
  (*v)["CUDA_RUNFILE_DRIVER"] = cuda_runfile_driver(full);
  (*v)["DESCRIPTION"] = "driver " + spec.versions.at("nvidia_driver") + ", CUDA " + full + ", NCCL " +
                        spec.versions.at("nccl") + ", EFA " + spec.versions.at("efa_installer");
}

const char* const kCudaTorchCheck = R"SH(# A CPU trainer on a GPU node is a broken image, not a slow job.
"$PREFIX/bin/pcdino" --version | grep -q "^  libtorch .*(CUDA)" || fail "pcdino's LibTorch has no CUDA"
)SH";

}  // namespace

// Every NVIDIA image pins the driver, CUDA, cuDNN, NCCL, aws-ofi-nccl and nccl-tests. Pinned only where
// needed: Fabric Manager, which NVSwitch systems (p4d, p5) need at the driver's exact version when the image
// replaces the base AMI's driver (check_compatibility says when); and where wanted, NVIDIA's dcgm-exporter
// (its Ubuntu package's version, "4.8.2-1"; pcdino/core/exporters.hpp), which serves the GPUs' DCGM fields
// to the head node's Prometheus beside the node exporter.
const AcceleratorImage& nvidia_image() {
  static const AcceleratorImage kind = {
      "nvidia",
      {"nvidia_driver", "cuda", "cudnn", "nccl", "aws_ofi_nccl", "nccl_tests"},
      {"fabric_manager", "dcgm_exporter"},
      nvidia_recipes(),
      {},
      check_nvidia,
      nvidia_facts,
      "",
      "-DCUDAToolkit_ROOT=/usr/local/cuda -DNCCL_ROOT=/opt/nccl \\\n  ",
      kCudaTorchCheck,
  };
  return kind;
}

}  // namespace pcdino::ami
