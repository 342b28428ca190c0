#include "pcdino/core/run_files.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "pcdino/core/error.hpp"

namespace pcdino {

std::string format_mean_std(const MeanStdValues& values) {
  const nlohmann::json j = {{"mean", values.mean}, {"std", values.std}};
  return j.dump() + "\n";
}

MeanStdValues read_mean_std(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw NoInputError("cannot read mean/std file '" + path + "' (run `pcdino meanstd` first)");
  MeanStdValues v;
  try {
    const auto j = nlohmann::json::parse(in);
    v.mean = j.at("mean").get<std::vector<double>>();
    v.std = j.at("std").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": expected {\"mean\": [...], \"std\": [...]}: " + e.what());
  }
  if (v.mean.size() != v.std.size() || v.mean.empty()) {
    throw DataError(path + ": \"mean\" and \"std\" must be non-empty lists of the same length");
  }
  for (double s : v.std) {
    if (!(s > 0)) throw DataError(path + ": every std must be > 0 (a constant channel cannot be normalised)");
  }
  return v;
}

}  // namespace pcdino
