#ifndef LINSERVE_ENGINE_TEXT_BYTE_RANGE_H_
#define LINSERVE_ENGINE_TEXT_BYTE_RANGE_H_

#include <cstddef>

namespace linserve {

// Bytes [begin, end) of a text.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_BYTE_RANGE_H_
