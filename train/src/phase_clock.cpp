#include "pcdino/train/phase_clock.hpp"

#include <string>
#include <utility>
#include <vector>

#include "pcdino/core/error.hpp"

#ifdef PCDINO_WITH_CUDART
#include <cuda_runtime_api.h>
#endif

namespace pcdino::train {

#ifdef PCDINO_WITH_CUDART

namespace {

void check(cudaError_t rc, const char* call, ExitCode code) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();  // cleared: LibTorch's next launch check would report it as its own
  throw Error(code, std::string("CUDA events: ") + call + ": " + cudaGetErrorString(rc));
}

}  // namespace

// Each mark is an event (kept for reuse) and the phase it ends (kPhaseCount for a step's start).
struct PhaseClock::Events {
  int device = 0;
  std::vector<cudaEvent_t> pool;
  std::vector<std::size_t> phases;  // of the marks since collect(), in order; pool[i] is mark i's event

  ~Events() {
    for (cudaEvent_t e : pool) cudaEventDestroy(e);
  }

  void mark(std::size_t phase) {
    // Recorded on this device's stream whatever device the thread last chose.
    check(cudaSetDevice(device), "cudaSetDevice", ExitCode::kSoftware);
    if (phases.size() == pool.size()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "cudaEventCreate", ExitCode::kSoftware);
      pool.push_back(e);
    }
    check(cudaEventRecord(pool[phases.size()], cudaStreamLegacy), "cudaEventRecord", ExitCode::kSoftware);
    phases.push_back(phase);
  }

  void collect(PhaseSeconds& totals) {
    if (phases.empty()) return;
    check(cudaEventSynchronize(pool[phases.size() - 1]), "cudaEventSynchronize", ExitCode::kSoftware);
    for (std::size_t i = 1; i < phases.size(); ++i) {
      if (phases[i] == kPhaseCount) continue;  // a step's start ends no phase
      float ms = 0;
      check(cudaEventElapsedTime(&ms, pool[i - 1], pool[i]), "cudaEventElapsedTime", ExitCode::kSoftware);
      totals[phases[i]] += static_cast<double>(ms) / 1e3;
    }
    phases.clear();
  }
};

PhaseClock::PhaseClock(int cuda_device) {
  if (cuda_device < 0) return;
  auto events = std::make_unique<Events>();
  events->device = cuda_device;
  // One event made here, so that a device without a working runtime is found before training starts.
  check(cudaSetDevice(cuda_device), "cudaSetDevice", ExitCode::kUnavailable);
  cudaEvent_t first = nullptr;
  check(cudaEventCreate(&first), "cudaEventCreate", ExitCode::kUnavailable);
  events->pool.push_back(first);
  events_ = std::move(events);
}

#else

struct PhaseClock::Events {
  void mark(std::size_t) {}
  void collect(PhaseSeconds&) {}
};

PhaseClock::PhaseClock(int cuda_device) {
  if (cuda_device >= 0) {
    throw Error(ExitCode::kUnavailable, "CUDA events: this pcdino was built without the CUDA runtime");
  }
}

#endif

PhaseClock::~PhaseClock() = default;

void PhaseClock::start() {
  if (events_) {
    events_->mark(kPhaseCount);
    return;
  }
  tick_ = std::chrono::steady_clock::now();
}

void PhaseClock::lap(Phase phase) {
  const auto index = static_cast<std::size_t>(phase);
  if (events_) {
    events_->mark(index);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  pending_[index] += std::chrono::duration<double>(now - tick_).count();
  tick_ = now;
}

void PhaseClock::collect(PhaseSeconds& totals) {
  if (events_) {
    events_->collect(totals);
    return;
  }
  for (std::size_t i = 0; i < kPhaseCount; ++i) totals[i] += pending_[i];
  pending_ = {};
}

const char* PhaseClock::source() const {
  return events_ ? "cuda_events" : "host_clock";
}

}  // namespace pcdino::train
