// The CUDA toolkit (its runfile, or the base AMI's where it ships the wanted version) and cuDNN.
#include "recipes/nvidia.hpp"

namespace pcdino::ami {

namespace {

const char* const kRunfile =
    R"SH(sh /tmp/cuda.run --silent --toolkit --toolkitpath="/usr/local/cuda-$CUDA_MM" --no-opengl-libs --override
rm -f /tmp/cuda.run
)SH";

const char* const kCudaCheck = R"SH(ln -sfn "/usr/local/cuda-$CUDA_MM" /usr/local/cuda
"/usr/local/cuda/bin/nvcc" --version | grep -q "release $CUDA_MM" || fail "nvcc does not report release $CUDA_MM"
done_ok
)SH";

const char* const kCudnn = R"SH(tar -xf /tmp/cudnn.tar.xz -C /tmp
cp -a "/tmp/$ARCHIVE/include/." /usr/local/cuda/include/
cp -a "/tmp/$ARCHIVE/lib/." /usr/local/cuda/lib64/
rm -rf /tmp/cudnn.tar.xz "/tmp/$ARCHIVE"
major=$(awk '/#define CUDNN_MAJOR/ {print $3}' /usr/local/cuda/include/cudnn_version.h)
[ "$major" = "${VERSION%%.*}" ] || fail "cudnn_version.h says major $major"
done_ok
)SH";

}  // namespace

std::string cuda_recipe(const RecipeContext& c) {
  const std::string& full = c.vars.at("CUDA_FULL");
  const bool base_cuda = c.ships(full, &parallelcluster::Release::cuda);
  return std::string("CUDA_MM=@CUDA_MM@\n") +
         (base_cuda ? shipped("CUDA @CUDA_FULL@")
                    : fetch_pinned(pin_of("cuda", full), "/tmp/cuda.run") + kRunfile) +
         kCudaCheck;
}

// NVIDIA's redistributable archive for the image's CUDA major.
std::string cudnn_recipe(const RecipeContext& c) {
  const PinnedDownload& pin = pin_of("cudnn", c.spec.versions.at("cudnn"), "cuda" + c.vars.at("CUDA_MAJOR"));
  return "ARCHIVE=cudnn-linux-x86_64-${VERSION}_cuda@CUDA_MAJOR@-archive\n" +
         fetch_pinned(pin, "/tmp/cudnn.tar.xz") + kCudnn;
}

}  // namespace pcdino::ami
