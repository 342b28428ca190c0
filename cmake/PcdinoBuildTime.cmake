# What a build costs on 2 cores, where <torch/torch.h> is most of it: parsing and compiling it takes a
# LibTorch source ~11 s of its ~23 s (-O2 -g1; train/src/trainer.cpp, bench/RESULTS.md "Build time").

# RelWithDebInfo's debug information is line tables (-g1): a backtrace still names each frame's function,
# file and line, and a LibTorch source compiles in 70% of -g's time (trainer.cpp 33 s -> 23 s).
# PCDINO_FULL_DEBUG_INFO=ON keeps -g (gdb's locals and types).
option(PCDINO_FULL_DEBUG_INFO "RelWithDebInfo with -g (full debug information) instead of -g1" OFF)
if(NOT PCDINO_FULL_DEBUG_INFO)
  foreach(lang C CXX)
    string(REGEX REPLACE "(^| )-g( |$)" "\\1-g1\\2" CMAKE_${lang}_FLAGS_RELWITHDEBINFO
                         "${CMAKE_${lang}_FLAGS_RELWITHDEBINFO}")
  endforeach()
endif()

# pcdino_torch_unity_build(<target>): <target>'s sources compiled PCDINO_TORCH_UNITY_BATCH at a time
# (CMake's unity build), so that LibTorch's headers are compiled once a batch instead of once a source.
# A source with options of its own (COMPILE_OPTIONS) stays on its own. For the targets of many LibTorch
# sources; each source must then keep its file-local names in an anonymous namespace that no other source of
# the target reuses. PCDINO_TORCH_UNITY_BATCH=1 compiles every source alone (finding a missing #include).
set(PCDINO_TORCH_UNITY_BATCH 6 CACHE STRING "LibTorch sources compiled together (1: each alone)")
function(pcdino_torch_unity_build target)
  if(PCDINO_TORCH_UNITY_BATCH GREATER 1)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${PCDINO_TORCH_UNITY_BATCH})
  endif()
endfunction()
