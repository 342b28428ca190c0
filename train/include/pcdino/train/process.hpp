// Process-wide settings for the programs that run LibTorch on CPU (pcdino-train, pcdino-extract).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pcdino::train {

/// Call first in main(), before MPI_Init and before any thread starts. If neither OMP_WAIT_POLICY nor
/// GOMP_SPINCOUNT is set, sets PASSIVE with a short spin (~1 ms) and re-executes the program (libgomp reads
/// them only when loaded), so that idle OpenMP threads wait briefly between a step's parallel regions and
/// then sleep instead of spinning against the loader and OpenBLAS threads; then keeps freed memory in the
/// heap (mallopt) so that activations do not come back as fresh, page-faulting pages every step. Both
/// measured in bench/RESULTS.md. Settings the user made in the environment are left as they are.
void tune_process(char** argv);

/// The OpenMP variables tune_process sets, given the user's OMP_WAIT_POLICY and GOMP_SPINCOUNT (nullptr:
/// unset): none when the user set either, else OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT (a short spin,
/// train/src/process.cpp says how it was measured), in that order.
std::vector<std::pair<std::string, std::string>> openmp_wait_settings(const char* wait_policy,
                                                                      const char* spin_count);

/// OpenBLAS starts one thread per core in every process, so `local_ranks` ranks on one machine run
/// local_ranks x cores BLAS threads on its cores (two training processes on 2 cores, 2 OpenBLAS threads
/// each: ~27 images/s each against ~95 with one each, bench/RESULTS.md). Gives OpenBLAS this rank's
/// share through openblas_set_num_threads: Slurm's SLURM_CPUS_PER_TASK when the step sets it (a node
/// without task affinity shows every rank all its cores, and nodes may share a host, as on the local
/// cluster), else max(1, cores in this process's affinity mask / local_ranks); never more than the mask
/// holds, nor than `max_threads` when it is > 0 (--threads: the intra-op threads the user gave LibTorch;
/// OpenBLAS would otherwise use every core of the mask beside them). Acts only when the loaded BLAS is
/// OpenBLAS and the user set neither OPENBLAS_NUM_THREADS nor GOTO_NUM_THREADS. Returns the threads set,
/// 0 when it set none.
int share_blas_threads(int local_ranks, int max_threads = 0);

}  // namespace pcdino::train
