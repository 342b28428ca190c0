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
  # A PyTorch wheel's libtorch.so holds and exports its own copy of part of libstdc++ (std::filesystem, from
  # the manylinux toolchain's static libstdc++_nonshared.a). Our programs are to bind to the system's
  # libstdc++, whose headers they were compiled with, so it is listed first: with libtorch.so first, a
  # GCC 13 program's std::filesystem::remove_all ran the wheel's copy and called a null pointer (2.11.0+cu130,
  # Ubuntu 24.04; tests/train/test_device.cpp's Device.ProgramsBindTheSystemsLibstdcxx checks the order).
  # The library is named by its path and handed to the linker directly: a plain -lstdc++ may find the
  # toolchain's static libstdc++.a first, and a compiler driver may move it after the other libraries.
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang" AND NOT CMAKE_CXX_FLAGS MATCHES "stdlib=libc\\+\\+")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                    OUTPUT_VARIABLE PCDINO_LIBSTDCXX OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${PCDINO_LIBSTDCXX}" AND EXISTS "${PCDINO_LIBSTDCXX}")
      get_filename_component(PCDINO_LIBSTDCXX "${PCDINO_LIBSTDCXX}" REALPATH)
      string(APPEND CMAKE_EXE_LINKER_FLAGS " -Wl,--push-state,--no-as-needed,${PCDINO_LIBSTDCXX},--pop-state")
    else()
      message(WARNING "pcdino: ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6 found no library "
                      "(\"${PCDINO_LIBSTDCXX}\"): programs may bind libstdc++ calls to LibTorch's copy")
      set(PCDINO_LIBSTDCXX "not found")
    endif()
  endif()
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

# scripts/stack's CUDA compile: a build that silently fell back to the CPU would compile none of the GPU code.
if(PCDINO_REQUIRE_TORCH_CUDA AND NOT (PCDINO_TORCH_CUDA AND PCDINO_HAVE_NCCL))
  message(FATAL_ERROR "PCDINO_REQUIRE_TORCH_CUDA: LibTorch's torch_cuda (${PCDINO_TORCH_CUDA}) and NCCL "
                      "(${PCDINO_HAVE_NCCL}) are both needed")
endif()

# Libraries of the stages.
find_package(yaml-cpp REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs)
find_package(TIFF REQUIRED)
find_package(pugixml REQUIRED)  # OME-XML in multi-page TIFFs
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of a dataset staged on a node
find_package(OpenMP REQUIRED)  # faiss-config.cmake needs OpenMP::OpenMP_CXX and does not find it
find_package(faiss REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
pkg_check_modules(LIBFABRIC REQUIRED IMPORTED_TARGET libfabric)

# Prometheus metrics (monitoring/): prometheus-cpp's core where the OS packages it (Debian 12, Ubuntu 24.04:
# prometheus-cpp-dev), or the pinned release the node image builds (ami/src/source_build.cpp). Without it
# pcdino builds with its metrics off, and says so in `pcdino --version`; the image's build requires them.
option(PCDINO_REQUIRE_METRICS "Stop at configure time unless prometheus-cpp is found" OFF)
find_package(prometheus-cpp CONFIG QUIET COMPONENTS core)
if(prometheus-cpp_FOUND)
  # Its CMake files carry no version; its pkg-config file does (found through CMAKE_PREFIX_PATH too).
  pkg_check_modules(PROMETHEUS_CPP_PC QUIET prometheus-cpp-core)
  if(NOT PROMETHEUS_CPP_PC_VERSION)
    set(PROMETHEUS_CPP_PC_VERSION "(version unknown)")
  endif()
  set(PCDINO_METRICS "prometheus-cpp ${PROMETHEUS_CPP_PC_VERSION} (node-exporter textfiles)")
elseif(PCDINO_REQUIRE_METRICS)
  message(FATAL_ERROR "PCDINO_REQUIRE_METRICS is on but prometheus-cpp (core) was not found: install "
                      "prometheus-cpp-dev or name its prefix in CMAKE_PREFIX_PATH")
else()
  set(PCDINO_METRICS "off (built without prometheus-cpp)")
endif()

# Slurm headers for the SPANK plugin (Debian's libslurm-dev ships no CMake or pkg-config file). On a
# ParallelCluster image: -DSLURM_INCLUDE_DIR=/opt/slurm/include, as the cookbook builds Pyxis. Slurm loads a
# SPANK plugin only when it was built for its own major.minor, so the version is a fact of the build.
find_path(SLURM_INCLUDE_DIR slurm/spank.h)
set(PCDINO_SLURM_VERSION "none")
if(SLURM_INCLUDE_DIR)
  set(PCDINO_HAVE_SLURM ON)
  # SLURM_VERSION_NUMBER is SLURM_VERSION_NUM(major, minor, micro) = major << 16 | minor << 8 | micro
  # (slurm/slurm_version.h); Slurm names its releases major.minor with two digits, "23.11.10".
  file(STRINGS "${SLURM_INCLUDE_DIR}/slurm/slurm_version.h" _slurm_number REGEX "^#define SLURM_VERSION_NUMBER ")
  string(REGEX MATCH "0x[0-9a-fA-F]+" _slurm_number "${_slurm_number}")
  if(_slurm_number)
    math(EXPR _slurm_major "(${_slurm_number} >> 16) & 255")
    math(EXPR _slurm_minor "(${_slurm_number} >> 8) & 255")
    math(EXPR _slurm_micro "${_slurm_number} & 255")
    if(_slurm_minor LESS 10)
      set(_slurm_minor "0${_slurm_minor}")
    endif()
    set(PCDINO_SLURM_VERSION "${_slurm_major}.${_slurm_minor}.${_slurm_micro}")
  endif()
else()
  set(PCDINO_HAVE_SLURM OFF)
endif()

# What `pcdino --version` and the doctor report: the CUDA and NCCL this build was made for.
set(PCDINO_CUDA_VERSION "none")
if(CUDAToolkit_FOUND)
  set(PCDINO_CUDA_VERSION "${CUDAToolkit_VERSION}")
endif()
set(PCDINO_NCCL_VERSION "none")
if(PCDINO_HAVE_NCCL)
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_nccl_lines}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(PCDINO_NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()
if(PCDINO_TORCH_CUDA)
  set(PCDINO_TORCH_DEVICE "CUDA")
else()
  set(PCDINO_TORCH_DEVICE "CPU only")
endif()

if(PCDINO_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(PCDINO_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
