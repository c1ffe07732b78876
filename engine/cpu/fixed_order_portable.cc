// engine/cpu/fixed_order_kernel.h in plain C++ for any CPU: a panel's 16 sums as
// an array, each the same running sum as in the SIMD families, but each
// product rounded before it is added (no fused multiply-add on the baseline
// CPU), so its bits are its own. Compiled with -ffp-contract=off, so that a
// compiler targeting a CPU with FMA cannot fuse them on some builds and not
// on others (engine/CMakeLists.txt).

#include <cstdint>
#include <cstring>

#include "engine/cpu/fixed_order_kernel.h"

namespace linserve {
namespace {

struct Portable {
  struct V {
    float lane[16];
  };
  static constexpr int kRows = 2;
  static constexpr int kCols = 2;
  static V Zero() { return V{}; }
  static V Load(const float* p) {
    V v;
    std::memcpy(v.lane, p, sizeof(v.lane));
    return v;
  }
  static V Load(const uint16_t* p) {
    V v;
    for (int j = 0; j < 16; ++j) {
      const uint32_t bits = static_cast<uint32_t>(p[j]) << 16;
      std::memcpy(&v.lane[j], &bits, sizeof(float));
    }
    return v;
  }
  static V Broadcast(float x) {
    V v;
    for (float& lane : v.lane) lane = x;
    return v;
  }
  static V MulAdd(const V& x, const V& w, V acc) {
    for (int j = 0; j < 16; ++j) {
      const float product = x.lane[j] * w.lane[j];
      acc.lane[j] = acc.lane[j] + product;
    }
    return acc;
  }
  static void Store(float* p, const V& v) { std::memcpy(p, v.lane, sizeof(v.lane)); }
};

#include "engine/cpu/fixed_order_kernel.inc"

}  // namespace

void FixedOrderProductPortable(const FixedOrderArgs& args, int64_t panel_begin,
                               int64_t panel_end) {
  RunAny<Portable>(args, panel_begin, panel_end);
}

}  // namespace linserve
