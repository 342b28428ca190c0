// Names and formats of the files a run leaves in `{output_dir}/{name_of_run}/`, shared by the stages that
// write and read them. The names are scDINO's, so that its users find what they expect.
#pragma once

#include <string>
#include <vector>

namespace pcdino {

inline constexpr const char* kMeanStdFile = "mean_and_std_of_dataset.txt";
inline constexpr const char* kConfigDumpFile = "run_config_dump.yaml";
inline constexpr const char* kSkippedImagesFile = "skipped_images.txt";

/// Per-channel normalisation statistics, in the order of the selected channels.
struct MeanStdValues {
  std::vector<double> mean;
  std::vector<double> std;
};

/// The workshop's format: a JSON object {"mean": [...], "std": [...]} with full double precision.
std::string format_mean_std(const MeanStdValues& values);

/// Reads a file written by format_mean_std() (or by scDINO's mean_std_dataset.py). Throws NoInputError
/// if it cannot be read, DataError naming the file if it is not such an object or the lists differ in
/// length or a std is not > 0.
MeanStdValues read_mean_std(const std::string& path);

}  // namespace pcdino
