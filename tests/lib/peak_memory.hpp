// The test process's own peak resident memory (Linux's VmHWM), reset and read around a step: a reader's
// memory on a file that claims more than it holds (issue #73).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace pcdino::test {

/// A field of /proc/self/status in KiB ("VmHWM", "VmRSS"); -1 if absent.
inline long status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

/// Resets the peak to the current resident size (proc(5): /proc/self/clear_refs, "5").
inline void reset_peak_memory() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  ASSERT_TRUE(clear.flush()) << "cannot reset the peak RSS (/proc/self/clear_refs)";
}

/// The peak resident memory since reset_peak_memory() above the resident size then, in KiB.
class PeakMemory {
 public:
  PeakMemory() : start_(status_kib("VmRSS")) { reset_peak_memory(); }
  long grown_kib() const { return status_kib("VmHWM") - start_; }

 private:
  long start_;
};

}  // namespace pcdino::test
