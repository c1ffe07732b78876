#include "engine/text/hf_byte_level.h"

#include <array>

#include "engine/text/hf_unicode.h"

namespace linserve {

namespace {

struct ByteLevelTables {
  std::array<char32_t, 256> char_of_byte{};
  std::array<std::string, 256> utf8_of_byte;
  // byte + 1 for characters below U+0144, 0 where a character stands for no byte.
  std::array<uint16_t, 0x144> byte_of_char{};

  ByteLevelTables() {
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      char_of_byte[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      AppendUtf8(char_of_byte[b], &utf8_of_byte[b]);
      byte_of_char[char_of_byte[b]] = static_cast<uint16_t>(b + 1);
    }
  }
};

const ByteLevelTables& Tables() {
  static const ByteLevelTables* const tables = new ByteLevelTables();
  return *tables;
}

}  // namespace

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const ByteLevelTables& tables = Tables();
  for (char c : bytes) *out += tables.utf8_of_byte[static_cast<uint8_t>(c)];
}

bool DecodeByteLevel(std::string_view text, std::string* out) {
  const ByteLevelTables& tables = Tables();
  const size_t old_size = out->size();
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = NextCodePoint(text, &pos);
    if (cp >= tables.byte_of_char.size() || tables.byte_of_char[cp] == 0) {
      out->resize(old_size);
      return false;
    }
    out->push_back(static_cast<char>(tables.byte_of_char[cp] - 1));
  }
  return true;
}

}  // namespace linserve
