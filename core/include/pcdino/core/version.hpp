// Version of this pcdino build and of the libraries it was built against.
#pragma once

#include <string>

namespace pcdino {

/// The suite's version, "MAJOR.MINOR.PATCH", from CMake's project() version.
const char* version() noexcept;

/// The git commit the build was configured from ("unknown" outside a git checkout).
const char* git_commit() noexcept;

/// One line per component for `pcdino --version`: suite version and commit, then the versions of
/// LibTorch, MPI, HDF5, OpenCV, faiss, yaml-cpp and whether the NCCL path is compiled in.
std::string version_report();

}  // namespace pcdino
