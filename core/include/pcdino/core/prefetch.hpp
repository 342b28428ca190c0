// Read-ahead: items are produced on background threads, in order, at most `capacity` ahead of the
// consumer, so that decoding overlaps with whatever the consumer does (computing moments, training).
#pragma once

#include <algorithm>
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
/// thrown by produce(k) is rethrown by the next() call that would have returned item k. Workers take
/// `batch` consecutive items at a time, so that small items (a 28x28 image decodes in ~20 us) do not pay
/// a lock and a wake-up each.
template <class T>
class Prefetcher {
 public:
  Prefetcher(std::size_t count, std::function<T(std::size_t)> produce, int threads, std::size_t capacity,
             std::size_t batch = 1)
      : count_(count),
        produce_(std::move(produce)),
        batch_(batch < 1 ? 1 : batch),
        capacity_(std::max(capacity, batch_)),
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
    std::vector<Slot> results;
    for (;;) {
      std::size_t first = 0, n = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(lock,
                    [&] { return stop_ || started_ >= count_ || started_ + batch_ <= taken_ + capacity_; });
        if (stop_ || started_ >= count_) return;
        first = started_;
        n = std::min(batch_, count_ - started_);
        started_ += n;
      }
      results.assign(n, Slot{});
      for (std::size_t i = 0; i < n; ++i) {
        try {
          results[i].item.emplace(produce_(first + i));
        } catch (...) {
          results[i].error = std::current_exception();
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = 0; i < n; ++i) {
          Slot& slot = slots_[(first + i) % capacity_];
          slot.item = std::move(results[i].item);
          slot.error = results[i].error;
          slot.full = true;
        }
      }
      ready_.notify_all();
    }
  }

  const std::size_t count_;
  std::function<T(std::size_t)> produce_;
  const std::size_t batch_;
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
