#ifndef LINSERVE_TOOLS_TRAIN_LR_SCHEDULE_H_
#define LINSERVE_TOOLS_TRAIN_LR_SCHEDULE_H_

#include <cstdint>

namespace linserve {

// Linear warmup from 0 to `peak` over `warmup` steps, then a cosine decay to
// `floor` at `total` steps (and `floor` after). `step` counts from 0.
struct LrSchedule {
  double peak = 3e-3;
  double floor = 3e-4;
  int64_t warmup = 100;
  int64_t total = 1000;

  double At(int64_t step) const;
};

}  // namespace linserve

#endif  // LINSERVE_TOOLS_TRAIN_LR_SCHEDULE_H_
