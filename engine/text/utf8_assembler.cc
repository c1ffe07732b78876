#include "engine/text/utf8_assembler.h"

namespace linserve {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string Utf8Assembler::Push(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + pending_.size() + 3);
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t byte = static_cast<uint8_t>(bytes[i++]);
    if (needed_ == 0) {
      if (byte <= 0x7F) {
        out.push_back(static_cast<char>(byte));
        continue;
      }
      if (byte >= 0xC2 && byte <= 0xDF) {
        needed_ = 1;
      } else if (byte >= 0xE0 && byte <= 0xEF) {
        if (byte == 0xE0) lower_ = 0xA0;  // below: overlong
        if (byte == 0xED) upper_ = 0x9F;  // above: surrogates
        needed_ = 2;
      } else if (byte >= 0xF0 && byte <= 0xF4) {
        if (byte == 0xF0) lower_ = 0x90;  // below: overlong
        if (byte == 0xF4) upper_ = 0x8F;  // above: beyond U+10FFFF
        needed_ = 3;
      } else {
        // 80..BF without a lead byte, C0/C1 (always overlong), F5..FF.
        out += kReplacement;
        continue;
      }
      pending_.push_back(static_cast<char>(byte));
      continue;
    }
    if (byte < lower_ || byte > upper_) {
      // The pending bytes are a maximal subpart: replace them, then look at
      // this byte again as the possible start of a new sequence.
      pending_.clear();
      needed_ = 0;
      lower_ = 0x80;
      upper_ = 0xBF;
      out += kReplacement;
      --i;  // the loop has not consumed it
      continue;
    }
    lower_ = 0x80;
    upper_ = 0xBF;
    pending_.push_back(static_cast<char>(byte));
    if (--needed_ == 0) {
      out += pending_;
      pending_.clear();
    }
  }
  return out;
}

std::string Utf8Assembler::Flush() {
  if (pending_.empty()) return std::string();
  pending_.clear();
  needed_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
  return kReplacement;
}

}  // namespace linserve
