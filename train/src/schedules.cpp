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

std::size_t steps_within_budget(std::size_t full_steps, std::size_t niter, std::size_t steps_done,
                                double budget_seconds, double elapsed_seconds, const StepCosts& costs) {
  const std::size_t floor = std::min(full_steps, std::max<std::size_t>(1, steps_done));
  const std::size_t per_epoch = std::max<std::size_t>(1, niter);
  const auto fits = [&](std::size_t total) {
    const std::size_t ends = total / per_epoch - steps_done / per_epoch + (total % per_epoch != 0 ? 1 : 0);
    return elapsed_seconds + static_cast<double>(total - steps_done) * costs.step_seconds +
               static_cast<double>(ends) * costs.epoch_end_seconds + costs.run_end_seconds <=
           budget_seconds;
  };
  // The cost grows with the steps: the largest total that fits, by bisection over (floor, full_steps].
  std::size_t lo = floor, hi = full_steps;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::size_t ScheduleCut::index(std::size_t step) const {
  if (full == 0) return 0;
  if (step < from_step) return std::min(step, full - 1);
  if (steps <= from_step + 1) return full - 1;
  const double span = static_cast<double>(full - 1 - std::min(from_index, full - 1));
  const double at = static_cast<double>(step - from_step) / static_cast<double>(steps - 1 - from_step);
  return std::min(full - 1, from_index + static_cast<std::size_t>(std::llround(at * span)));
}

ScheduleCut ScheduleCut::recut(std::size_t step, std::size_t new_steps) const {
  return ScheduleCut{step, index(step), new_steps, full};
}

}  // namespace pcdino::train
