#include "engine/text/utf8_assembler.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

// An independent strict check: code point ranges rather than byte ranges.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t lead = static_cast<uint8_t>(s[i]);
    int length;
    uint32_t cp;
    uint32_t min;
    if (lead < 0x80) {
      length = 1, cp = lead, min = 0;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, cp = lead & 0x1F, min = 0x80;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, cp = lead & 0x0F, min = 0x800;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, cp = lead & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + length > s.size()) return false;
    for (int k = 1; k < length; ++k) {
      const uint8_t c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

// Pushes `pieces` through one assembler; every output must be valid UTF-8.
std::string Assemble(const std::vector<std::string>& pieces) {
  Utf8Assembler assembler;
  std::string out;
  for (const std::string& piece : pieces) {
    const std::string text = assembler.Push(piece);
    EXPECT_TRUE(IsValidUtf8(text)) << "piece of " << piece.size() << " bytes";
    out += text;
  }
  const std::string tail = assembler.Flush();
  EXPECT_TRUE(IsValidUtf8(tail));
  return out + tail;
}

std::vector<std::string> Bytes(const std::string& s) {
  std::vector<std::string> pieces;
  for (char c : s) pieces.push_back(std::string(1, c));
  return pieces;
}

// Every way of cutting `s` into at most three pieces.
std::vector<std::vector<std::string>> AllSplits(const std::string& s) {
  std::vector<std::vector<std::string>> splits;
  for (size_t i = 0; i <= s.size(); ++i) {
    for (size_t j = i; j <= s.size(); ++j) {
      splits.push_back({s.substr(0, i), s.substr(i, j - i), s.substr(j)});
    }
  }
  return splits;
}

const char* const kValid[] = {
    "",
    "plain ascii",
    "\xC3\xA9",          // é, 2 bytes
    "\xE2\x82\xAC",      // €, 3 bytes
    "\xF0\x9D\x84\x9E",  // musical G clef, 4 bytes
    "\xF0\x9F\x98\x80",  // emoji
    "a\xE2\x82\xAC\xF0\x9F\x98\x80"
    "b\xC3\xA9\xE6\x97\xA5\xE6\x9C\xAC",
    "\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF\xC2\x80\xE0\xA0\x80",  // range edges
};

TEST(Utf8AssemblerTest, ValidTextPassesThroughInEverySplit) {
  for (const std::string text : kValid) {
    EXPECT_EQ(Assemble({text}), text);
    EXPECT_EQ(Assemble(Bytes(text)), text);
    for (const auto& split : AllSplits(text)) EXPECT_EQ(Assemble(split), text);
  }
}

TEST(Utf8AssemblerTest, EmitsEachCharacterAsSoonAsItIsComplete) {
  for (const std::string text : kValid) {
    Utf8Assembler assembler;
    std::string out;
    for (size_t k = 0; k < text.size(); ++k) {
      out += assembler.Push(text.substr(k, 1));
      // Everything before the character byte k belongs to is out, and that
      // character too once byte k completes it.
      size_t start = k;
      while ((static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
      const uint8_t lead = static_cast<uint8_t>(text[start]);
      const size_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      const size_t boundary = start + length == k + 1 ? k + 1 : start;
      EXPECT_EQ(out, text.substr(0, boundary)) << "after byte " << k;
      EXPECT_LE(k + 1 - out.size(), 3u);
    }
    EXPECT_EQ(assembler.Flush(), "");
  }
}

TEST(Utf8AssemblerTest, InvalidBytesBecomeOneReplacementPerMaximalSubpart) {
  struct Case {
    std::string input;
    std::string expected;
  };
  const std::string r = kFFFD;
  const Case cases[] = {
      {"\x80", r},  // stray continuation
      {"a\x80\xBF"
       "b",
       "a" + r + r + "b"},                  // each stray on its own
      {"\xC0\xAF", r + r},                  // C0 is never a lead
      {"\xC1\xBF", r + r},                  // overlong 2-byte
      {"\xE0\x80\xAF", r + r + r},          // overlong 3-byte
      {"\xF0\x80\x80\xAF", r + r + r + r},  // overlong 4-byte
      {"\xED\xA0\x80", r + r + r},          // surrogate U+D800
      {"\xED\xBF\xBF", r + r + r},          // surrogate U+DFFF
      {"\xF4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\xF5\x80\x80\x80", r + r + r + r},  // F5 is never a lead
      {"\xFE\xFF", r + r},
      {"\xE2\x82"
       "A",
       r + "A"},                                                 // truncated, then ASCII
      {"\xF0\x9F\x98\xF0\x9F\x98\x80", r + "\xF0\x9F\x98\x80"},  // truncated, then valid
      {"\xF0\x9F\xC3\xA9", r + "\xC3\xA9"},
      {"\xE2\x82", r},  // truncated at the end
      {"\xF0\x9F\x98", r},
      {"\xC3", r},
      // The example of Unicode section 3.9 (Table 3-8).
      {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + r + r + r + "b" + r + "c" + r + r + "d"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Assemble({c.input}), c.expected) << testing::PrintToString(c.input);
    EXPECT_EQ(Assemble(Bytes(c.input)), c.expected) << testing::PrintToString(c.input);
    for (const auto& split : AllSplits(c.input)) {
      EXPECT_EQ(Assemble(split), c.expected) << testing::PrintToString(c.input);
    }
  }
}

TEST(Utf8AssemblerTest, HoldsBackAnIncompleteSequenceUntilFlush) {
  Utf8Assembler assembler;
  EXPECT_EQ(assembler.Push("ok\xF0\x9F"), "ok");
  EXPECT_EQ(assembler.Push("\x98"), "");
  EXPECT_EQ(assembler.Flush(), kFFFD);
  EXPECT_EQ(assembler.Flush(), "");
  // The assembler is reusable after a flush.
  EXPECT_EQ(assembler.Push("\xC3"), "");
  EXPECT_EQ(assembler.Push("\xA9"), "\xC3\xA9");
}

}  // namespace
}  // namespace linserve
