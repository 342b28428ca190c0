// libFuzzer target of the metrics textfile reader (monitoring/src/metrics.cpp): any bytes as a metrics file
// another process left in the textfile collector's folder, which every user may write and which the node
// check reads as root from the prolog. A new MetricsFile reads it to decide whether it is an ended file of
// its own stage on its node, and removes only such a file. No crash, no sanitizer report, and (checked
// here) a file that names another stage or node is never removed. Run by scripts/fuzz metrics.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "pcdino/monitoring/metrics.hpp"

namespace {

// One folder for the whole run, emptied after each input and removed at the end.
const std::string& folder() {
  // Never destroyed: the exit handler that removes the folder runs after static objects are gone.
  static const std::string& dir = *[] {
    const char* tmp = std::getenv("TMPDIR");
    auto* pattern =
        new std::string(std::string(tmp != nullptr ? tmp : "/tmp") + "/pcdino_fuzz_metrics_XXXXXX");
    if (::mkdtemp(pattern->data()) == nullptr) std::abort();
    std::atexit([] { std::filesystem::remove_all(folder()); });  // libFuzzer ends a run with exit()
    return pattern;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string left = folder() + "/pcdino_7_0.prom";
  std::ofstream(left, std::ios::binary) << text;
  pcdino::monitoring::MetricsFileOptions options;
  options.dir = folder();
  options.interval_seconds = 3600;
  options.replaces_unfinished = size % 2 == 1;  // the doctor's rule on half the inputs
  pcdino::monitoring::JobLabels labels;
  labels.slurm_job_id = "8", labels.node = "n1", labels.stage = "train";
  { pcdino::monitoring::MetricsFile file(options, labels); }
  const bool removed = !std::filesystem::exists(left);
  if (removed &&
      (text.find("stage=\"train\"") == std::string::npos || text.find("node=\"n1\"") == std::string::npos)) {
    std::fprintf(stderr, "a metrics file of another stage or node was removed\n");
    std::abort();
  }
  for (const auto& entry : std::filesystem::directory_iterator(folder()))
    std::filesystem::remove(entry.path());
  return 0;
}
