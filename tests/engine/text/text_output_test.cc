#include "engine/text/text_output.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

struct Streamed {
  std::vector<std::string> pieces;
  std::string text;
  bool stopped = false;
};

// Streams `tokens` the way the server does: stop at a stop sequence, else
// Finish after the last token.
Streamed Stream(const std::vector<std::string>& stops, const std::vector<int64_t>& tokens) {
  TextOutput output(Tokenizer{ModelConfig()}, stops);
  Streamed streamed;
  for (int64_t token : tokens) {
    TextOutput::Piece piece = output.PushToken(token);
    streamed.pieces.push_back(piece.text);
    streamed.text += piece.text;
    if (piece.stopped) {
      streamed.stopped = true;
      return streamed;
    }
  }
  streamed.pieces.push_back(output.Finish());
  streamed.text += streamed.pieces.back();
  return streamed;
}

std::vector<int64_t> Tokens(const std::string& text) {
  return Tokenizer{ModelConfig()}.Encode(text, /*starts_text=*/false);
}

TEST(TextOutputTest, StreamsCompleteCharactersAndCutsAtStops) {
  const std::string smile = "\xF0\x9F\x98\x80";
  struct Case {
    std::vector<std::string> stops;
    std::string generated;
    std::string expected;
    bool stopped;
  };
  const Case cases[] = {
      {{}, "caf\xC3\xA9 " + smile, "caf\xC3\xA9 " + smile, false},
      {{"\n\nUser:"}, smile + " hi\n\nUser: more", smile + " hi", true},
      {{"\n\nUser:"}, "hi\n\nUse", "hi\n\nUse", false},
      // A stop that starts with a multi-byte character.
      {{smile + "!"}, "ok " + smile + smile + "!", "ok " + smile, true},
      // An incomplete character cut by the stop becomes one U+FFFD.
      {{"STOP"}, "a\xE2\x82STOP", "a" + kFFFD, true},
      // Held-back bytes at the end: the stop prefix, then a truncated char.
      {{"\xE2\x82\xAC!"}, "x\xE2\x82", "x" + kFFFD, false},
  };
  for (const Case& c : cases) {
    const Streamed streamed = Stream(c.stops, Tokens(c.generated));
    EXPECT_EQ(streamed.text, c.expected) << testing::PrintToString(c.generated);
    EXPECT_EQ(streamed.stopped, c.stopped) << testing::PrintToString(c.generated);
  }
}

TEST(TextOutputTest, SpecialTokensAddNoText) {
  std::vector<int64_t> tokens = {256, 'o', 257, 'k'};
  EXPECT_EQ(Stream({}, tokens).text, "ok");
}

TEST(TextOutputTest, NoPieceSplitsACharacter) {
  const std::string text = "\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80!";
  const Streamed streamed = Stream({"zz"}, Tokens(text));
  EXPECT_EQ(streamed.text, text);
  const std::vector<std::string> expected = {
      "", "", "\xE6\x97\xA5", "", "", "\xE6\x9C\xAC", " ", "", "", "", "\xF0\x9F\x98\x80", "!", ""};
  EXPECT_EQ(streamed.pieces, expected);
}

TEST(TextOutputTest, NothingAfterTheStop) {
  TextOutput output(Tokenizer{ModelConfig()}, {"."});
  EXPECT_EQ(output.PushToken('a').text, "a");
  const TextOutput::Piece piece = output.PushToken('.');
  EXPECT_EQ(piece.text, "");
  EXPECT_TRUE(piece.stopped);
  EXPECT_TRUE(output.PushToken('b').stopped);
  EXPECT_EQ(output.Finish(), "");
}

}  // namespace
}  // namespace linserve
