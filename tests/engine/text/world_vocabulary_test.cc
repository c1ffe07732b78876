// The RWKV World vocabulary's line format: Python literals, and every way a
// line can be malformed, each reported with its line number.

#include "engine/text/world_vocabulary.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

// Whether `message` contains `part`, for EXPECT_TRUE with a readable failure.
::testing::AssertionResult Contains(absl::string_view message, const std::string& part) {
  if (message.find(part) != absl::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << message << "\" lacks \"" << part << "\"";
}

TEST(WorldVocabularyTest, DecodesPythonLiterals) {
  struct Case {
    std::string literal;
    std::string bytes;
  };
  const Case cases[] = {
      {"'a b'", "a b"},
      {"\"it's\"", "it's"},
      {"'\\''", "'"},
      {"'\\\"'", "\""},
      {"'\\\\'", "\\"},
      {"'\\n\\t\\r\\a\\b\\f\\v'", "\n\t\r\a\b\f\v"},
      {"'\\x00'", std::string(1, '\0')},
      {"'\\0'", std::string(1, '\0')},
      {"'\\101\\60'", "A0"},
      // In a str, \x80 is the character U+0080, two bytes of UTF-8.
      {"'\\x80'", "\xC2\x80"},
      {"b'\\x80'", "\x80"},
      {"b'\\xe4\\xb8'", "\xE4\xB8"},
      {"b'\\\\n'", "\\n"},
      {"'\\u2002'", "\xE2\x80\x82"},
      {"'\\U0001F600'", "\xF0\x9F\x98\x80"},
      {"'блабла 以下は'", "блабла 以下は"},
      {"''", ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> bytes = DecodePythonLiteral(c.literal);
    ASSERT_TRUE(bytes.ok()) << c.literal << ": " << bytes.status();
    EXPECT_EQ(*bytes, c.bytes) << c.literal;
  }
}

TEST(WorldVocabularyTest, ParsesLinesWithGapsCrlfAndNoFinalNewline) {
  absl::StatusOr<std::vector<WorldVocabularyEntry>> entries =
      ParseWorldVocabulary("1 'a' 1\r\n3 ' b c' 4\n7 b'\\xff' 1", /*id_limit=*/8);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].id, 1);
  EXPECT_EQ((*entries)[0].bytes, "a");
  EXPECT_EQ((*entries)[1].id, 3);
  EXPECT_EQ((*entries)[1].bytes, " b c");
  EXPECT_EQ((*entries)[2].id, 7);
  EXPECT_EQ((*entries)[2].bytes, "\xFF");
  EXPECT_TRUE(ParseWorldVocabulary("", 8)->empty());
}

TEST(WorldVocabularyTest, AMalformedLineIsNamedWithWhatIsWrong) {
  struct Case {
    const char* what;
    std::string text;
    int line;             // the line to blame
    std::string message;  // part of the explanation
  };
  const Case cases[] = {
      {"id not a number", "1 'a' 1\nx 'b' 1\n", 2, "id `x` is not a decimal number"},
      {"negative id", "-1 'a' 1\n", 1, "id `-1` is not a decimal number"},
      {"id 0", "0 'a' 1\n", 1, "id 0 is the end of text"},
      {"duplicate id", "1 'a' 1\n1 'b' 1\n", 2, "duplicate id 1"},
      {"id out of order", "1 'a' 1\n3 'b' 1\n2 'c' 1\n", 3, "id 2 is out of order"},
      {"id past the logits", "1 'a' 1\n300 'b' 1\n", 2,
       "id 300 is not below the vocabulary size 300"},
      {"missing LEN", "1 'a' 1\n2 'b'\n", 2, "expected three fields"},
      {"missing everything", "1 'a' 1\n2\n", 2, "expected three fields"},
      {"blank line", "1 'a' 1\n\n2 'b' 1\n", 2, "expected three fields"},
      {"LEN not a number", "1 'a' one\n", 1, "LEN `one` is not a decimal number"},
      {"wrong LEN", "1 'a' 1\n2 'ab' 3\n", 2, "LEN 3 does not match the 2 bytes"},
      {"wrong LEN of a str's \\x", "1 '\\x80' 1\n", 1, "LEN 1 does not match the 2 bytes"},
      {"unquoted", "1 a 1\n", 1, "not a quoted Python str"},
      {"unterminated", "1 'ab 2\n", 1, "not a quoted Python str"},
      {"mismatched quotes", "1 'ab\" 2\n", 1, "not a quoted Python str"},
      {"quote inside", "1 'a'b' 3\n", 1, "unescaped quote ' inside"},
      {"escaped closing quote", "1 'a\\' 2\n", 1, "the closing quote is escaped"},
      {"unknown escape", "1 '\\q' 1\n", 1, "unknown escape \\q"},
      {"\\u in bytes", "1 b'\\u0041' 1\n", 1, "unknown escape \\u in a bytes literal"},
      {"short \\x", "1 '\\x4' 1\n", 1, "escape \\x needs 2 hex digits"},
      {"short \\u", "1 '\\u12' 1\n", 1, "escape \\u needs 4 hex digits"},
      {"surrogate", "1 '\\ud800' 3\n", 1, "has no UTF-8 form"},
      {"beyond Unicode", "1 '\\U00110000' 4\n", 1, "has no UTF-8 form"},
      {"octal above a byte", "1 b'\\777' 1\n", 1, "octal escape above \\377"},
      {"non-ASCII in bytes", "1 b'\xC3\xA9' 2\n", 1, "non-ASCII byte 0xc3"},
      {"invalid UTF-8 in str", "1 'a\xFF' 2\n", 1, "invalid UTF-8 at byte 2"},
      {"empty piece", "1 '' 0\n", 1, "empty piece"},
      {"repeated piece", "1 'a' 1\n2 'b' 1\n3 b'a' 1\n", 3,
       "the piece of id 3 repeats that of id 1 (line 1)"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<WorldVocabularyEntry>> entries =
        ParseWorldVocabulary(c.text, /*id_limit=*/300);
    ASSERT_FALSE(entries.ok()) << c.what;
    EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_TRUE(
        Contains(entries.status().message(), "vocabulary line " + std::to_string(c.line) + ": "))
        << c.what;
    EXPECT_TRUE(Contains(entries.status().message(), c.message)) << c.what;
  }
}

TEST(WorldVocabularyTest, TheEarliestRepeatIsBlamed) {
  absl::StatusOr<std::vector<WorldVocabularyEntry>> entries =
      ParseWorldVocabulary("1 'z' 1\n2 'a' 1\n3 'a' 1\n4 'z' 1\n", 300);
  ASSERT_FALSE(entries.ok());
  EXPECT_TRUE(Contains(entries.status().message(), "vocabulary line 3: "));
}

}  // namespace
}  // namespace linserve
