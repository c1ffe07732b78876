#include "engine/text/stop_matcher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve {
namespace {

struct Outcome {
  std::string text;
  bool stopped;
};

// Feeds `pieces` to one matcher and collects everything it emits.
Outcome Feed(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher matcher(stops);
  Outcome outcome{"", false};
  for (const std::string& piece : pieces) {
    StopMatcher::Result result = matcher.Push(piece);
    if (outcome.stopped) {
      EXPECT_EQ(result.emit, "") << "emitted after the stop";
    }
    outcome.text += result.emit;
    outcome.stopped = result.stopped;
  }
  const std::string tail = matcher.Flush();
  if (outcome.stopped) {
    EXPECT_EQ(tail, "");
  }
  outcome.text += tail;
  return outcome;
}

TEST(StopMatcherTest, FindsStopsInEverySplit) {
  struct Case {
    std::vector<std::string> stops;
    std::string input;
    std::string expected;
    bool stopped;
  };
  const Case cases[] = {
      {{"\n\nUser:"}, "Hello\n\nUser: hi", "Hello", true},
      {{"\n\nUser:"}, "Hello\n\nUse", "Hello\n\nUse", false},  // Flush returns the held bytes
      {{"\n\nUser:"}, "a\n\nb\n\nUser:", "a\n\nb", true},
      {{"aab"}, "aaab", "a", true},  // overlapping prefixes
      {{"aab"}, "aaaa", "aaaa", false},
      {{"abab"}, "abaabab", "aba", true},
      {{"X"}, "Xabc", "", true},
      {{"ab", "xyz"}, "00xy0ab1", "00xy0", true},
      {{"xyz", "ab"}, "00xyz0ab1", "00", true},
      {{"abcd", "bc"}, "xabcd", "xa", true},  // the first stop to end wins
      {{"b", "ab"}, "xab", "x", true},        // ending together: the longer one
      {{"ab", "b"}, "xab", "x", true},
      {{}, "no stops at all", "no stops at all", false},
      {{"", "z"}, "abc", "abc", false},  // empty stops are ignored
      {{"\xE2\x82\xAC"}, "5\xE2\x82\xAC", "5", true},
  };
  for (const Case& c : cases) {
    std::vector<std::vector<std::string>> splits = {{c.input}};
    std::vector<std::string> bytes;
    for (char b : c.input) bytes.push_back(std::string(1, b));
    splits.push_back(bytes);
    for (size_t i = 0; i <= c.input.size(); ++i) {
      for (size_t j = i; j <= c.input.size(); ++j) {
        splits.push_back({c.input.substr(0, i), c.input.substr(i, j - i), c.input.substr(j)});
      }
    }
    for (const auto& split : splits) {
      const Outcome outcome = Feed(c.stops, split);
      EXPECT_EQ(outcome.text, c.expected) << testing::PrintToString(c.input);
      EXPECT_EQ(outcome.stopped, c.stopped) << testing::PrintToString(c.input);
    }
  }
}

TEST(StopMatcherTest, HoldsBackOnlyTheLongestPossibleStopPrefix) {
  struct Step {
    std::string push;
    std::string emit;
    bool stopped;
  };
  StopMatcher matcher({"\n\nUser:", "aab"});
  const Step steps[] = {
      {"Hello\n", "Hello", false},  // "\n" may start "\n\nUser:"
      {"\nUs", "", false},          // "\n\nUs" still may
      {"x", "\n\nUsx", false},      // no longer
      {"aa", "", false},            // "aa" may start "aab"
      {"a", "a", false},            // "aa" still held
      {"c", "aac", false},         {"\n\nUs", "", false}, {"er:tail", "", true}, {"more", "", true},
  };
  for (const Step& step : steps) {
    StopMatcher::Result result = matcher.Push(step.push);
    EXPECT_EQ(result.emit, step.emit) << testing::PrintToString(step.push);
    EXPECT_EQ(result.stopped, step.stopped) << testing::PrintToString(step.push);
  }
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopMatcherTest, FlushReturnsHeldBytes) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.Push("the EN").emit, "the ");
  EXPECT_EQ(matcher.Flush(), "EN");
  EXPECT_EQ(matcher.Flush(), "");
}

}  // namespace
}  // namespace linserve
