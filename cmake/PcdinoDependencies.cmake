# Finds every dependency from Debian 12's packages (scripts/install-deps installs them). Each is found with
# find_package (or pkg-config / find_path where Debian ships no CMake config) so that a user can point
# CMAKE_PREFIX_PATH at another installation, e.g. the LibTorch inside a PyTorch 2.x wheel on a GPU node.

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

# Training core: LibTorch, MPI, optionally CUDA + NCCL.
set(PCDINO_HAVE_TORCH OFF)
if(PCDINO_WITH_TORCH)
  find_package(Torch REQUIRED)
  set(PCDINO_HAVE_TORCH ON)
  # A LibTorch built with CUDA (a PyTorch wheel's) has torch_cuda and c10_cuda: CUDA graphs of the step.
  if(TARGET torch_cuda)
    set(PCDINO_TORCH_CUDA ON)
  endif()
  # TorchConfig sets the ABI flag on the torch target; nothing else of TORCH_CXX_FLAGS is needed globally.
endif()
find_package(MPI REQUIRED COMPONENTS C)
# We use MPI's C API from C++; keep Open MPI's deprecated C++ bindings (and their symbols) out.
set_property(TARGET MPI::MPI_C APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS OMPI_SKIP_MPICXX=1
                                                                            MPICH_SKIP_MPICXX=1)

# NCCL and CUDA are optional: found under /usr/local/cuda (or CUDAToolkit_ROOT / NCCL_ROOT), the GPU
# paths compile and link; they run only where a GPU exists.
set(PCDINO_HAVE_NCCL OFF)
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(pcdino::nccl UNKNOWN IMPORTED)
    set_target_properties(pcdino::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    target_link_libraries(pcdino::nccl INTERFACE CUDA::cudart)
    set(PCDINO_HAVE_NCCL ON)
  endif()
endif()

# Libraries of the stages.
find_package(yaml-cpp REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs)
find_package(TIFF REQUIRED)
find_package(pugixml REQUIRED)  # OME-XML in multi-page TIFFs
find_package(ZLIB REQUIRED)
find_package(OpenMP REQUIRED)  # faiss-config.cmake needs OpenMP::OpenMP_CXX and does not find it
find_package(faiss REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
pkg_check_modules(LIBFABRIC REQUIRED IMPORTED_TARGET libfabric)

# Slurm headers for the SPANK plugin (Debian's libslurm-dev ships no CMake or pkg-config file).
find_path(SLURM_INCLUDE_DIR slurm/spank.h)
if(SLURM_INCLUDE_DIR)
  set(PCDINO_HAVE_SLURM ON)
else()
  set(PCDINO_HAVE_SLURM OFF)
endif()

if(PCDINO_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(PCDINO_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
