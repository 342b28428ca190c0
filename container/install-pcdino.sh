#!/usr/bin/env bash
# Builds and installs pcdino inside container/Dockerfile's image: the Debian/Ubuntu packages of its build
# (the container is NVIDIA's Ubuntu), against the container's LibTorch (torch.utils.cmake_prefix_path) and NCCL
# and the EFA installer's Open MPI and libfabric, into /opt/pcdino (configure stops unless LibTorch has CUDA and
# NCCL is found: a CPU-only pcdino is no GPU image); then writes the image's manifest, /etc/pcdino/image.txt, which
# every pcdino program logs when it runs inside.
#   container/install-pcdino.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: install-pcdino.sh SOURCE_DIR}
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends build-essential cmake ninja-build pkg-config git \
  libyaml-cpp-dev libhdf5-dev libopencv-dev libtiff-dev libpugixml-dev libfaiss-dev libcli11-dev \
  libspdlog-dev libfmt-dev nlohmann-json3-dev prometheus-cpp-dev libgtest-dev gnuplot-nox
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
# libfabric's pkg-config file is the EFA installer's (as the image recipe's 85-pcdino.sh finds it)
export PKG_CONFIG_PATH="/opt/amazon/efa/lib64/pkgconfig:/opt/amazon/efa/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cmake -S "$src" -B /tmp/pcdino-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/opt/pcdino \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DMPI_HOME=/opt/amazon/openmpi -DPCDINO_REQUIRE_TORCH_CUDA=ON
cmake --build /tmp/pcdino-build
cmake --install /tmp/pcdino-build
/opt/pcdino/bin/pcdino --version
mkdir -p /etc/pcdino
version=$(sed -n 's/^version=//p' /opt/pcdino/share/pcdino/package.txt)
torch=$(python3 -c 'import torch; print(torch.__version__)')
cat >/etc/pcdino/image.txt <<MANIFEST
name=pcdino-gpu
base=nvcr.io/nvidia/pytorch:${PYTORCH_TAG:-unknown} (torch $torch)
pcdino=$version
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
MANIFEST
rm -rf /tmp/pcdino-build
apt-get clean
rm -rf /var/lib/apt/lists/*
