#include "pcdino/train/process.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace pcdino::train {

namespace {

// glibc returns freed blocks over 128 KiB to the kernel (and raises that threshold only slowly), so every
// training step's activations come back as fresh pages: on a VM each first touch is a costly page fault
// (about 40% of the step time measured here, bench/RESULTS.md). Keep blocks up to 32 MiB (glibc's
// maximum for this setting) in the heap and never trim it. The setting also stops glibc's dynamic
// threshold; MALLOC_MMAP_THRESHOLD_ / GLIBC_TUNABLES set by the user still win, as glibc applies them
// at start-up and we only set what they did not.
void keep_freed_memory() {
  if (std::getenv("GLIBC_TUNABLES") != nullptr || std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded. By default its idle threads
// spin ~3 ms before sleeping; on a machine where the loader thread, OpenBLAS's threads and LibTorch's
// OpenMP threads share few cores that spinning halved the step rate (6.4 vs 12.2 images/s on 2 cores,
// bench/RESULTS.md, issue #4). PASSIVE alone goes too far: every parallel region then wakes its threads
// through the kernel, and a step of oneDNN's and LibTorch's many small regions spent a third of its time
// there (the demo's step on 2 threads: 0.074 s against 0.039 s with a short spin, issue #38). So
// PASSIVE with a spin of kOpenMpSpins (libgomp counts ~100,000 to a millisecond), unless the user chose
// either. The program starts again so that libgomp sees them. Runs before MPI_Init.
constexpr const char* kOpenMpSpins = "100000";

void prefer_short_openmp_spin(char** argv) {
  const auto settings = openmp_wait_settings(std::getenv("OMP_WAIT_POLICY"), std::getenv("GOMP_SPINCOUNT"));
  if (settings.empty()) return;
  for (const auto& [name, value] : settings) ::setenv(name.c_str(), value.c_str(), 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run on with the default policy
}

}  // namespace

std::vector<std::pair<std::string, std::string>> openmp_wait_settings(const char* wait_policy,
                                                                      const char* spin_count) {
  if (wait_policy != nullptr || spin_count != nullptr) return {};
  return {{"OMP_WAIT_POLICY", "PASSIVE"}, {"GOMP_SPINCOUNT", kOpenMpSpins}};
}

int share_blas_threads(int local_ranks, int max_threads) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr || std::getenv("GOTO_NUM_THREADS") != nullptr) return 0;
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return 0;  // not OpenBLAS (MKL, the reference BLAS): its own settings apply
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int available = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  int threads = std::max(1, available / std::max(1, local_ranks));
  if (const char* per_task = std::getenv("SLURM_CPUS_PER_TASK");
      per_task != nullptr && std::atoi(per_task) > 0) {
    threads = std::min(available, std::atoi(per_task));
  }
  if (max_threads > 0) threads = std::min(threads, max_threads);
  set(threads);
  return threads;
}

void tune_process(char** argv) {
  prefer_short_openmp_spin(argv);
  keep_freed_memory();
}

}  // namespace pcdino::train
