// NCCL built from its release tag, the aws-ofi-nccl plugin that carries it over EFA, and nccl-tests for
// verify.sh's two-node all_reduce.
#include "recipes/nvidia.hpp"

namespace pcdino::ami {

std::string nccl_recipe(const RecipeContext& c) {
  return "rm -rf /tmp/nccl-src\n" +
         clone_pinned(pin_of("nccl", c.spec.versions.at("nccl")), "/tmp/nccl-src") +
         R"SH(make -C /tmp/nccl-src -j "$(nproc)" src.build CUDA_HOME=/usr/local/cuda BUILDDIR=/opt/nccl
rm -rf /tmp/nccl-src
want=${VERSION%-*}
got=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' /opt/nccl/include/nccl.h)
[ "$got" = "$want" ] || fail "nccl.h says $got"
echo /opt/nccl/lib >/etc/ld.so.conf.d/nccl.conf && ldconfig
done_ok
)SH";
}

std::string aws_ofi_nccl_recipe(const RecipeContext& c) {
  return "rm -rf /tmp/aws-ofi-nccl\n" +
         clone_pinned(pin_of("aws_ofi_nccl", c.spec.versions.at("aws_ofi_nccl")), "/tmp/aws-ofi-nccl") +
         R"SH(cd /tmp/aws-ofi-nccl
./autogen.sh
./configure --prefix=/opt/aws-ofi-nccl --with-libfabric=/opt/amazon/efa --with-cuda=/usr/local/cuda \
  --with-nccl=/opt/nccl --with-mpi=/opt/amazon/openmpi
make -j "$(nproc)"
make install
cd / && rm -rf /tmp/aws-ofi-nccl
[ -f /opt/aws-ofi-nccl/lib/libnccl-net.so ] || fail "libnccl-net.so not installed"
echo /opt/aws-ofi-nccl/lib >/etc/ld.so.conf.d/aws-ofi-nccl.conf && ldconfig
done_ok
)SH";
}

std::string nccl_tests_recipe(const RecipeContext& c) {
  return "rm -rf /opt/nccl-tests\n" +
         clone_pinned(pin_of("nccl_tests", c.spec.versions.at("nccl_tests")), "/opt/nccl-tests") +
         R"SH(make -C /opt/nccl-tests -j "$(nproc)" MPI=1 MPI_HOME=/opt/amazon/openmpi CUDA_HOME=/usr/local/cuda NCCL_HOME=/opt/nccl
[ -x /opt/nccl-tests/build/all_reduce_perf ] || fail "all_reduce_perf not built"
done_ok
)SH";
}

}  // namespace pcdino::ami
