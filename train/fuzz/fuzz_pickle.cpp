// libFuzzer target of the checkpoint pickle's bounds (train/src/pickle_bounds.cpp), the walk over data.pkl
// that stands before LibTorch's unpickler: any bytes as a pickle, either passed or refused with a DataError
// naming the file. LibTorch's unpickler itself is not in the fuzzing tree; the seeded mutation test
// Checkpoint.DamagedCheckpointsAreEachReadOrRefusedNamingTheFile runs the two together. Run by scripts/fuzz
// pickle.
#include <cstddef>
#include <cstdint>

#include "pcdino/core/error.hpp"
#include "pcdino/train/pickle_bounds.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    pcdino::train::check_pickle_bounds(reinterpret_cast<const char*>(data), size, "checkpoint.pth");
  } catch (const pcdino::DataError&) {
  }
  return 0;
}
