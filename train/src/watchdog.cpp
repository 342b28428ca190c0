#include "pcdino/train/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "pcdino/core/error.hpp"

namespace pcdino::train {

struct Watchdog::State {
  double timeout;
  int rank, size;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::string where = "start-up";
  std::thread thread;

  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      const auto deadline = last + std::chrono::duration<double>(timeout);
      if (wake.wait_until(lock, deadline, [this] { return stopping; })) return;
      if (std::chrono::steady_clock::now() < last + std::chrono::duration<double>(timeout)) continue;
      spdlog::error(
          "rank {} of {}: no progress for {:.0f} s after {}: another rank has died or stopped answering (the "
          "launcher's log names it); ending this rank so that the job ends and can be resubmitted to resume",
          rank, size, timeout, where);
      spdlog::default_logger()->flush();
      std::_Exit(to_int(ExitCode::kIoError));
    }
  }
};

Watchdog::Watchdog(double timeout_seconds, int rank, int size) : state_(std::make_unique<State>()) {
  state_->timeout = timeout_seconds;
  state_->rank = rank, state_->size = size;
  if (timeout_seconds > 0) state_->thread = std::thread([s = state_.get()] { s->watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

void Watchdog::progress(const std::string& what) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->last = std::chrono::steady_clock::now();
  state_->where = what;
}

}  // namespace pcdino::train
