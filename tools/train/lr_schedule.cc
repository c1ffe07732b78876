#include "tools/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace linserve {

double LrSchedule::At(int64_t step) const {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (step >= total) return floor;
  const double progress =
      static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace linserve
