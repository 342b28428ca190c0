#include "pcdino/train/loader_advice.hpp"

#include <algorithm>
#include <cmath>

namespace pcdino::train {

LoaderAdvice advise_loader(double data_wait, double compute, double batch_seconds) {
  LoaderAdvice advice;
  if (!(data_wait >= 0) || !(compute > 0) || !std::isfinite(data_wait) || !std::isfinite(compute))
    return advice;
  advice.wait_share = data_wait / (data_wait + compute);
  advice.warn = advice.wait_share > kDataWaitWarnShare;
  if (batch_seconds > 0 && std::isfinite(batch_seconds)) {
    advice.threads_needed = static_cast<int>(std::max(1.0, std::ceil(batch_seconds / compute)));
  }
  return advice;
}

}  // namespace pcdino::train
