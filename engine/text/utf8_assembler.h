#ifndef LINSERVE_ENGINE_UTF8_ASSEMBLER_H_
#define LINSERVE_ENGINE_UTF8_ASSEMBLER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace linserve {

// Turns a byte stream that arrives in arbitrary pieces (one byte per token
// here) into pieces of valid UTF-8, so that a stream never shows half a
// character. Decoding follows the WHATWG UTF-8 decoder: each maximal subpart
// of an ill-formed sequence (a stray continuation byte, an overlong form, a
// surrogate, a value above U+10FFFF, a truncated sequence) becomes one U+FFFD,
// the practice Unicode recommends (section 3.9, "U+FFFD Substitution of
// Maximal Subparts"). The concatenation of all Push results and Flush depends
// only on the bytes, not on how they were split. Not thread-safe.
class Utf8Assembler {
 public:
  // Returns the complete characters `bytes` finishes, holding back an
  // incomplete trailing sequence (at most 3 bytes) for the next call.
  std::string Push(std::string_view bytes);

  // Ends the stream: a held-back incomplete sequence becomes one U+FFFD.
  std::string Flush();

 private:
  std::string pending_;  // the valid prefix of an unfinished sequence
  int needed_ = 0;       // continuation bytes still missing
  // The range the next continuation byte must lie in; narrower than
  // 80..BF right after E0, ED, F0 and F4 to exclude overlongs, surrogates and
  // values above U+10FFFF.
  uint8_t lower_ = 0x80;
  uint8_t upper_ = 0xBF;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_UTF8_ASSEMBLER_H_
