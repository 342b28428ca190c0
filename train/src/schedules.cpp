#include "pcdino/train/schedules.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pcdino::train {

namespace {
// numpy.linspace(start, stop, num): num values, both ends included.
std::vector<double> linspace(double start, double stop, std::size_t num) {
  std::vector<double> v(num);
  if (num == 1) v[0] = start;
  for (std::size_t i = 0; num > 1 && i < num; ++i) {
    v[i] = start + (stop - start) * static_cast<double>(i) / static_cast<double>(num - 1);
  }
  return v;
}
}  // namespace

std::vector<double> cosine_schedule(double base_value, double final_value, int epochs,
                                    std::size_t niter_per_epoch, int warmup_epochs,
                                    double start_warmup_value) {
  if (warmup_epochs > epochs) throw std::invalid_argument("warmup_epochs is larger than epochs");
  const std::size_t warmup_iters = static_cast<std::size_t>(warmup_epochs) * niter_per_epoch;
  const std::size_t total = static_cast<std::size_t>(epochs) * niter_per_epoch;
  std::vector<double> schedule =
      warmup_iters > 0 ? linspace(start_warmup_value, base_value, warmup_iters) : std::vector<double>{};
  const std::size_t n = total - warmup_iters;
  const double pi = std::acos(-1.0);
  for (std::size_t i = 0; i < n; ++i) {
    schedule.push_back(final_value +
                       0.5 * (base_value - final_value) *
                           (1 + std::cos(pi * static_cast<double>(i) / static_cast<double>(n))));
  }
  return schedule;
}

std::vector<double> teacher_temperature_schedule(double warmup_temp, double temp, int warmup_epochs,
                                                 int epochs) {
  std::vector<double> s = linspace(warmup_temp, temp, static_cast<std::size_t>(std::max(0, warmup_epochs)));
  while (static_cast<int>(s.size()) < epochs) s.push_back(temp);
  s.resize(static_cast<std::size_t>(std::max(0, epochs)));
  return s;
}

int epochs_within_budget(int epochs, int min_epochs, int epochs_done, double budget_seconds,
                         double elapsed_seconds, double epoch_seconds) {
  const int floor = std::min(epochs, std::max({1, min_epochs, epochs_done}));
  const double more = (budget_seconds - elapsed_seconds) / std::max(epoch_seconds, 1e-9);
  if (!(more >= 1)) return floor;  // also NaN
  const double fit = epochs_done + std::floor(more);
  return fit >= epochs ? epochs : std::max(floor, static_cast<int>(fit));
}

}  // namespace pcdino::train
