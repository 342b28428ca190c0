// Version of this pcdino build and of the libraries it was built against.
#pragma once

#include <string>

namespace pcdino {

/// The suite's version, "MAJOR.MINOR.PATCH", from CMake's project() version.
const char* version() noexcept;

/// The git commit the build was configured from ("unknown" outside a git checkout).
const char* git_commit() noexcept;

/// What this build was configured against, for the checks that judge a node (`pcdino doctor`): "none"
/// where the build found no such component.
struct BuildFacts {
  const char* libtorch;  ///< LibTorch's version ("2.5.1"; empty in a build without LibTorch)
  bool libtorch_cuda;    ///< whether that LibTorch has CUDA (torch_cuda): a CPU-only trainer cannot use a GPU
  const char* cuda;      ///< the CUDA toolkit found ("12.4.131") or "none"
  const char* nccl;      ///< NCCL's version from nccl.h ("2.21.5") or "none"
  const char* slurm;     ///< SLURM_VERSION_STRING of the headers spank_pcdino.so was built with, or "none"
  const char* mpi;       ///< the MPI library's release and standard ("4.1.4 (MPI standard 3.1)")
};
const BuildFacts& build_facts() noexcept;

/// One line per component for `pcdino --version`: suite version and commit, then LibTorch (and whether it
/// has CUDA), the CUDA, NCCL and Slurm the build was made for, MPI, HDF5, OpenCV, faiss and yaml-cpp.
std::string version_report();

}  // namespace pcdino
