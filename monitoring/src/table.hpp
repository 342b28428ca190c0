// What both MetricsFile implementations share (with and without prometheus-cpp): the name checks.
#pragma once

#include <string>

#include "pcdino/monitoring/metrics.hpp"

namespace pcdino::monitoring {

/// The row of `name` in metric_table(), checked against how it is used: its type, the stage of the file
/// (`stage`), whether a label is given. Throws std::invalid_argument naming what is wrong.
const MetricSpec& checked_spec(const char* name, const std::string& stage, MetricType type, bool labelled);

/// Throws std::invalid_argument unless some metric of metric_table() belongs to `stage`.
void check_stage(const std::string& stage);

}  // namespace pcdino::monitoring
