// Process-wide settings for the programs that run LibTorch on CPU (pcdino-train, pcdino-extract).
#pragma once

namespace pcdino::train {

/// Call first in main(), before MPI_Init and before any thread starts. If OMP_WAIT_POLICY is unset, sets it
/// to PASSIVE and re-executes the program (libgomp reads it only when loaded), so that idle OpenMP threads
/// sleep instead of spinning against the loader and OpenBLAS threads; then keeps freed memory in the heap
/// (mallopt) so that activations do not come back as fresh, page-faulting pages every step. Both measured
/// in bench/RESULTS.md. Settings the user made in the environment are left as they are.
void tune_process(char** argv);

}  // namespace pcdino::train
