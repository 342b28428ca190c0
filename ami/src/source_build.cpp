#include "pcdino/ami/source_build.hpp"

#include <regex>
#include <stdexcept>

namespace pcdino::ami {

const std::vector<LibTorchArtifact>& libtorch_artifacts() {
  // PyTorch's C++ distributions: "cxx11-abi" zips up to 2.7 (the pre-C++11-ABI ones cannot link the OS's
  // C++ libraries), one ABI from 2.8 ("libtorch-shared-with-deps"). PyTorch publishes no digests: each was
  // recorded by another project that pins the same zip (one source is marked so); none was downloaded here.
  // A wrong one stops the image build at `sha256sum -c`, naming the release.
  static const std::vector<LibTorchArtifact> table = {
      {"2.3.1+cu121",
       "https://download.pytorch.org/libtorch/cu121/libtorch-cxx11-abi-shared-with-deps-2.3.1%2Bcu121.zip",
       "10f2fdc44e7f657f2483c948d21847316ae6b214e850744d5713affc3133f1cb",
       "Adam-Al-Rahman/robotx third_party/libtorch/workspace.bzl:8 (Bazel sha256; one source)"},
      {"2.4.0+cpu",
       "https://download.pytorch.org/libtorch/cpu/libtorch-cxx11-abi-shared-with-deps-2.4.0%2Bcpu.zip",
       "9d16cc0da41e057f20c0be5f26d7418f969e857631cfcb86550ccdecfee8de60",
       "WasmEdge/WasmEdge utils/wasi-nn/install-pytorch.sh:14 (sha256sum -c) and a Bazel WORKSPACE"},
      {"2.4.1+cpu",
       "https://download.pytorch.org/libtorch/cpu/libtorch-cxx11-abi-shared-with-deps-2.4.1%2Bcpu.zip",
       "415c3ed51c766a6ef20dc10b2e60fae7f10a3ae8aa62223d6f4bccc1fc98740b",
       "WasmEdge/WasmEdge utils/wasi-nn/install-pytorch.sh:14 (sha256sum -c; one source)"},
      {"2.4.1+cu124",
       "https://download.pytorch.org/libtorch/cu124/libtorch-cxx11-abi-shared-with-deps-2.4.1%2Bcu124.zip",
       "ebedc318756dd12229644bf24a76434e1a20f7491be34df0a689f151440f0a0a",
       "cemlyn007/ale-libtorch-ppo third_party/libtorch.bzl:9 (Bazel integrity, as hex; one source)"},
      {"2.5.1+cpu",
       "https://download.pytorch.org/libtorch/cpu/libtorch-cxx11-abi-shared-with-deps-2.5.1%2Bcpu.zip",
       "618ca54eef82a1dca46ff1993d5807d9c0deb0bae147da4974166a147cb562fa",
       "WasmEdge/WasmEdge utils/wasi-nn/install-pytorch.sh:14 (sha256sum -c) and two install scripts"},
      {"2.5.1+cu124",
       "https://download.pytorch.org/libtorch/cu124/libtorch-cxx11-abi-shared-with-deps-2.5.1%2Bcu124.zip",
       "08552b1d13de1389d01c64aaa5e2c6c5092f922618b0d32ccff8ed9099d75735",
       "a fork of cp2k tools/toolchain/scripts/stage6/install_libtorch.sh (one source, not checked by it)"},
      {"2.7.1+cpu",
       "https://download.pytorch.org/libtorch/cpu/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcpu.zip",
       "63d572598c8d532128a335018913e795c1bbb32602ce378896dc8cfbb5590976",
       "cp2k/cp2k tools/toolchain/scripts/stage6/install_libtorch.sh:11-12 and cTuningLabs/cmeta-aops"},
      {"2.7.1+cu118",
       "https://download.pytorch.org/libtorch/cu118/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcu118.zip",
       "65a33ca2751af31c0a6ae8b6e8b727c242ae1c41d294da97471de9c95ecb5406",
       "cTuningLabs/cmeta-aops tool/torch-cpp-prebuilt/api_v1.py (checked on download) and one script"},
      {"2.7.1+cu126",
       "https://download.pytorch.org/libtorch/cu126/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcu126.zip",
       "4a7ffb0c0f6c3b02fb14e7790143dfb2fbb2973c41f107357da57bcddd196077",
       "cTuningLabs/cmeta-aops tool/torch-cpp-prebuilt/api_v1.py (checked on download; one source)"},
      {"2.7.1+cu128",
       "https://download.pytorch.org/libtorch/cu128/libtorch-cxx11-abi-shared-with-deps-2.7.1%2Bcu128.zip",
       "ae513b437ae99150744ef1d06b02a4ecbbb9275c9ffe540c88909623e3293041",
       "kamisaberi/xtorch cmake/amd.cmake:19-20 (EXPECTED_HASH) and cTuningLabs/cmeta-aops"},
      {"2.8.0+cpu", "https://download.pytorch.org/libtorch/cpu/libtorch-shared-with-deps-2.8.0%2Bcpu.zip",
       "8dea5bcfed4b53ca0f6852517bea4b4d1f3ff1cc0c21da662e834d34af1ec824",
       "kamisaberi/xtorch cmake/amd.cmake:25-26 (EXPECTED_HASH) and one test"},
      {"2.9.1+cu128",
       "https://download.pytorch.org/libtorch/cu128/libtorch-shared-with-deps-2.9.1%2Bcu128.zip",
       "b052452965093db69f537b3cf376812d5acf6dca28819b20d28d7f0b171d7699",
       "fasiondog/hikyuu_extern_libs packages/l/libtorch/xmake.lua:11 (033285db; one source)"},
  };
  return table;
}

const LibTorchArtifact* libtorch_artifact(const std::string& version) {
  for (const auto& row : libtorch_artifacts())
    if (version == row.version) return &row;
  return nullptr;
}

std::string libtorch_cuda(const std::string& libtorch_version) {
  static const std::regex variant(R"(^[0-9]+(\.[0-9]+)*\+(cpu|cu([0-9]+)([0-9]))$)");
  std::smatch m;
  if (!std::regex_match(libtorch_version, m, variant))
    throw std::invalid_argument("LibTorch version '" + libtorch_version +
                                "' names no variant: expected RELEASE+cpu or RELEASE+cuXYZ (2.5.1+cu124)");
  if (m[2] == "cpu") return "";
  return m[3].str() + "." + m[4].str();  // cu124 -> 12.4, cu118 -> 11.8
}

const SourceRelease& prometheus_cpp_release() {
  // GitHub's tag archive; its bytes are also Debian's prometheus-cpp_1.0.1.orig.tar.gz (deb.debian.org pool,
  // same sha256, checked 2026-11-27), which the image-build test uses through PCDINO_FILES.
  static const SourceRelease release = {
      "prometheus-cpp", "1.0.1", "https://github.com/jupp0r/prometheus-cpp/archive/refs/tags/v1.0.1.tar.gz",
      "593e028d401d3298eada804d252bc38d8cab3ea1c9e88bcd72095281f85e6d16",
      "open-telemetry/opentelemetry-cpp bazel/repository.bzl (Bazel http_archive sha256 of v1.0.1) and "
      "Debian's prometheus-cpp_1.0.1.orig.tar.gz"};
  return release;
}

const OsBuildPackages* os_build_packages(const std::string& os) {
  static const std::vector<OsBuildPackages> table = {
      {"ubuntu2204",
       {"build-essential", "cmake", "ninja-build", "pkg-config", "unzip", "wget", "zlib1g-dev",
        "libyaml-cpp-dev", "libhdf5-dev", "libopencv-dev", "libtiff-dev", "libpugixml-dev", "libfaiss-dev",
        "libcli11-dev", "libspdlog-dev", "libfmt-dev", "nlohmann-json3-dev"},
       {},
       "",
       "packages.ubuntu.com jammy: cmake 3.22.1, libhdf5-dev 1.10.7, libopencv-dev 4.5.4, libfaiss-dev "
       "1.7.2, "
       "libcli11-dev 2.1.2, libspdlog-dev 1.9.2, nlohmann-json3-dev 3.10.5, libpugixml-dev 1.12.1"},
      {"alinux2023",
       {"gcc-c++", "make", "cmake", "ninja-build", "unzip", "wget", "zlib-devel", "libtiff-devel"},
       {"HDF5 (amazonlinux/amazon-linux-2023 issue #296)",
        "OpenCV (amazonlinux/amazon-linux-2023 issue #1018)", "FAISS", "CLI11"},
       "",
       "amazonlinux/amazon-linux-2023 issues #296 and #1018 (open); FAISS and CLI11: no AL2023 package "
       "found"},
      {"alinux2",
       {"gcc-c++", "make", "cmake3", "unzip", "wget", "zlib-devel", "libtiff-devel"},
       {"OpenCV (amazonlinux/amazon-linux-2023 issue #1018: none on Amazon Linux 2 either)",
        "HDF5 (EPEL only)", "FAISS", "CLI11", "a C++17 compiler (gcc 7.3)"},
       "",
       "Amazon Linux 2 user guide (gcc 7.3); amazonlinux/amazon-linux-2023 issues #296, #1018"},
  };
  for (const auto& row : table)
    if (os == row.os) return &row;
  return nullptr;
}

}  // namespace pcdino::ami
