#include "pcdino/train/watchdog.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "pcdino/core/error.hpp"
#include "pcdino/monitoring/metrics.hpp"

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

  const std::atomic<bool>* stop_flag = nullptr;
  double stop_timeout = 0;
  std::optional<std::chrono::steady_clock::time_point> stop_seen;  // when the flag was first seen set
  bool stop_agreed = false;  // progress with the flag set: the ranks agreed (what follows may take long)

  // The time this rank ends at without progress: `timeout` after the last progress, or `stop_timeout`
  // after a stop the ranks have not agreed on.
  std::chrono::steady_clock::time_point deadline() const {
    const auto after = [](std::chrono::steady_clock::time_point t, double seconds) {
      return t + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(seconds));
    };
    auto at = after(last, timeout);
    if (stop_seen && !stop_agreed) at = std::min(at, after(*stop_seen, stop_timeout));
    return at;
  }

  void watch() {
    using clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      // The stop flag is set by a signal handler, which cannot wake this thread: looked at every second.
      const auto next =
          stop_flag && !stop_seen ? std::min(deadline(), clock::now() + std::chrono::seconds(1)) : deadline();
      if (wake.wait_until(lock, next, [this] { return stopping; })) return;
      if (stop_flag && !stop_seen && stop_flag->load()) stop_seen = clock::now();
      if (clock::now() < deadline()) continue;
      if (stop_seen && !stop_agreed) {
        spdlog::error(
            "rank {} of {}: asked to stop (SIGTERM or SIGUSR1), and the ranks did not agree on it within "
            "{:.0f} "
            "s after {}: another rank has died or stopped answering; ending this rank without a checkpoint "
            "so "
            "that the job can restart from the last one",
            rank, size, stop_timeout, where);
      } else {
        spdlog::error(
            "rank {} of {}: no progress for {:.0f} s after {}: another rank has died or stopped answering "
            "(the "
            "launcher's log names it); ending this rank so that the job ends and can be resubmitted to "
            "resume",
            rank, size, timeout, where);
      }
      spdlog::default_logger()->flush();
      monitoring::remove_files_now();  // the job ended: its metrics must not look like a killed one's
      std::_Exit(to_int(ExitCode::kIoError));
    }
  }
};

Watchdog::Watchdog(double timeout_seconds, int rank, int size, const std::atomic<bool>* stop_flag,
                   double stop_timeout_seconds)
    : state_(std::make_unique<State>()) {
  state_->timeout = timeout_seconds;
  state_->rank = rank, state_->size = size;
  if (stop_timeout_seconds > 0) state_->stop_flag = stop_flag, state_->stop_timeout = stop_timeout_seconds;
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
  if (state_->stop_flag && state_->stop_flag->load()) state_->stop_agreed = true;
}

}  // namespace pcdino::train
