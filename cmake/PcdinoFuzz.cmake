# libFuzzer targets of every reader of outside bytes (issue #73). With -DPCDINO_FUZZ=ON and clang (scripts/fuzz
# configures build-fuzz/ so: clang-14, no LibTorch, no tests), every library is compiled with libFuzzer's
# coverage, AddressSanitizer and UBSan (which stops at its first report), and pcdino_fuzz_target() adds one
# target; each component's targets live in its fuzz/ folder beside their seed corpus (fuzz/corpus/<input>),
# as spank/fuzz/ does. What each run takes (corpus, input size) is scripts/fuzz's table.
option(PCDINO_FUZZ "Build the libFuzzer targets (clang; scripts/fuzz)" OFF)
if(PCDINO_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PCDINO_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# pcdino_fuzz_target(NAME SOURCES ... LIBS ...): a libFuzzer program (LLVMFuzzerTestOneInput in SOURCES).
function(pcdino_fuzz_target name)
  cmake_parse_arguments(F "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${F_SOURCES})
  target_link_libraries(${name} PRIVATE ${F_LIBS})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  pcdino_target_warnings(${name})
endfunction()
