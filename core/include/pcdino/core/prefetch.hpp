// Read-ahead: items are produced on background threads, in order, at most `capacity` ahead of the
// consumer, so that decoding overlaps with whatever the consumer does (computing moments, training).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace pcdino {

/// Produces produce(0), produce(1), ..., produce(count - 1) on `threads` worker threads and hands them
/// out in that order through next(). At most `capacity` items are decoded but not yet taken. An exception
/// thrown by produce(k) is rethrown by the next() call that would have returned item k.
template <class T>
class Prefetcher {
 public:
  Prefetcher(std::size_t count, std::function<T(std::size_t)> produce, int threads, std::size_t capacity)
      : count_(count),
        produce_(std::move(produce)),
        capacity_(capacity < 1 ? 1 : capacity),
        slots_(capacity_) {
    const int n = threads < 1 ? 1 : threads;
    for (int t = 0; t < n; ++t) workers_.emplace_back([this] { work(); });
  }

  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    for (auto& w : workers_) w.join();
  }

  /// The next item in order, or std::nullopt after the last. Blocks until it is ready.
  std::optional<T> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (taken_ == count_) return std::nullopt;
    Slot& slot = slots_[taken_ % capacity_];
    ready_.wait(lock, [&] { return slot.full; });
    slot.full = false;
    ++taken_;
    std::optional<T> item = std::move(slot.item);
    std::exception_ptr error = slot.error;
    slot.item.reset();
    slot.error = nullptr;
    lock.unlock();
    space_.notify_all();
    if (error) std::rethrow_exception(error);
    return item;
  }

 private:
  struct Slot {
    std::optional<T> item;
    std::exception_ptr error;
    bool full = false;
  };

  void work() {
    for (;;) {
      std::size_t k = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock, [&] { return stop_ || started_ >= count_ || started_ < taken_ + capacity_; });
        if (stop_ || started_ >= count_) return;
        k = started_++;
      }
      Slot result;
      try {
        result.item.emplace(produce_(k));
      } catch (...) {
        result.error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Slot& slot = slots_[k % capacity_];
        slot.item = std::move(result.item);
        slot.error = result.error;
        slot.full = true;
      }
      ready_.notify_all();
    }
  }

  const std::size_t count_;
  std::function<T(std::size_t)> produce_;
  const std::size_t capacity_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable space_;
  std::size_t started_ = 0;
  std::size_t taken_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace pcdino
