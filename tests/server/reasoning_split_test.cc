// The reasoning split: each format's whole texts, then every way of cutting
// each text into pieces gives the same split.

#include "server/common/reasoning_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/http/openai_response.h"

namespace linserve {
namespace {

struct Case {
  ReasoningFormat format;
  bool starts_inside;
  std::string text;
  std::string reasoning;
  std::string content;
};

const std::vector<Case>& Cases() {
  using F = ReasoningFormat;
  static const std::vector<Case> cases = {
      {F::kQwen3, false, "<think>\nLet me add.\n</think>\n\n4", "Let me add.", "4"},
      {F::kQwen3, false, "<think>a</think>b", "a", "b"},
      {F::kQwen3, false, "\n <think>\n\nx\ny\n\n</think>\n\nanswer\n", "x\ny", "answer\n"},
      {F::kQwen3, false, "No reasoning here.", "", "No reasoning here."},
      {F::kQwen3, false, "  <thinking> is not the tag", "", "  <thinking> is not the tag"},
      {F::kQwen3, false, "<think></think>", "", ""},
      {F::kQwen3, false, "<think>\n\n</think>\n\nOnly the answer.", "", "Only the answer."},
      // The generation prompt opened it: the text starts inside.
      {F::kQwen3, true, "Thinking.\n</think>\n\nDone.", "Thinking.", "Done."},
      {F::kQwen3, true, "\n</think>\n\nDone.", "", "Done."},
      // Cut by max_tokens inside the reasoning: what it has, as reasoning.
      {F::kQwen3, true, "still thinking </thi", "still thinking </thi", ""},
      {F::kQwen3, false, "<think>half a thought\n\n", "half a thought\n\n", ""},
      // A closing tag's look-alikes stay reasoning.
      {F::kQwen3, false, "<think>a </thinker> b < / think></think>c", "a </thinker> b < / think>",
       "c"},
      {F::kQwen3, false, "<think>a</think>b</think>c", "a", "b</think>c"},
      // RWKV-7 G1: the opening tag's '>' is optional.
      {F::kRwkvG1, false, " <think\nIt is 4.\n</think>\n\nFour.", "It is 4.", "Four."},
      {F::kRwkvG1, false, " <think>\nIt is 4.</think> Four.", "It is 4.", " Four."},
      {F::kRwkvG1, false, " <thinking>", "ing>", ""},
      {F::kRwkvG1, false, " Four.", "", " Four."},
      {F::kRwkvG1, true, " x</think>y", " x", "y"},
      // A G1 prompt ending in "<think": the model's '>' closes the tag.
      {F::kRwkvG1, true, ">\nx\n</think>\ny", "x", "y"},
      {F::kRwkvG1, true, "> x</think>y", " x", "y"},
      {F::kNone, false, "<think>a</think>b", "", "<think>a</think>b"},
  };
  return cases;
}

ReasoningSplitter::Split SplitPieces(const Case& c, const std::vector<std::string>& pieces) {
  ReasoningSplitter splitter(c.format, c.starts_inside);
  ReasoningSplitter::Split whole;
  for (const std::string& piece : pieces) {
    ReasoningSplitter::Split part = splitter.Push(piece);
    whole.reasoning += part.reasoning;
    whole.content += part.content;
  }
  ReasoningSplitter::Split rest = splitter.Flush();
  whole.reasoning += rest.reasoning;
  whole.content += rest.content;
  return whole;
}

TEST(ReasoningSplitTest, WholeTexts) {
  for (const Case& c : Cases()) {
    ReasoningSplitter::Split split = SplitPieces(c, {c.text});
    EXPECT_EQ(split.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(split.content, c.content) << c.text;
  }
}

TEST(ReasoningSplitTest, EveryPieceBoundaryGivesTheSameSplit) {
  for (const Case& c : Cases()) {
    const std::string& t = c.text;
    // One cut anywhere, two cuts anywhere (inside either tag included), and
    // byte by byte.
    for (size_t i = 0; i <= t.size(); ++i) {
      for (size_t j = i; j <= t.size(); ++j) {
        ReasoningSplitter::Split split =
            SplitPieces(c, {t.substr(0, i), t.substr(i, j - i), t.substr(j)});
        ASSERT_EQ(split.reasoning, c.reasoning) << t << " cut at " << i << ", " << j;
        ASSERT_EQ(split.content, c.content) << t << " cut at " << i << ", " << j;
      }
    }
    std::vector<std::string> bytes;
    for (char ch : t) bytes.emplace_back(1, ch);
    ReasoningSplitter::Split split = SplitPieces(c, bytes);
    EXPECT_EQ(split.reasoning, c.reasoning) << t;
    EXPECT_EQ(split.content, c.content) << t;
  }
}

TEST(ReasoningSplitTest, ReasoningIsSentAsItArrives) {
  ReasoningSplitter splitter(ReasoningFormat::kQwen3, false);
  EXPECT_EQ(splitter.Push("<thi").reasoning, "");
  EXPECT_EQ(splitter.Push("nk>\nfirst ").reasoning, "first ");
  EXPECT_TRUE(splitter.in_reasoning());
  ReasoningSplitter::Split s = splitter.Push("words\n</");
  EXPECT_EQ(s.reasoning, "words");  // the newline and "</" may be the closing tag's
  s = splitter.Push("think>\n\nhi");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "hi");
  EXPECT_FALSE(splitter.in_reasoning());
}

TEST(ReasoningSplitTest, FormatsByNameAndPromptsThatOpenTheReasoning) {
  EXPECT_EQ(*ParseReasoningFormat("qwen3"), ReasoningFormat::kQwen3);
  EXPECT_EQ(*ParseReasoningFormat("rwkv_g1"), ReasoningFormat::kRwkvG1);
  EXPECT_FALSE(ParseReasoningFormat("deepseek").ok());
  EXPECT_TRUE(PromptOpensReasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptOpensReasoning(ReasoningFormat::kQwen3,
                                    "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(
      PromptOpensReasoning(ReasoningFormat::kRwkvG1, "User: hi think\n\nAssistant: <think"));
  EXPECT_FALSE(PromptOpensReasoning(ReasoningFormat::kRwkvG1, "User: hi\n\nAssistant:"));
  EXPECT_FALSE(PromptOpensReasoning(ReasoningFormat::kNone, "<think>"));
}

// The HTTP answer: the same reasoning_content and content whole and
// streamed, and the reasoning pieces counted in usage.
TEST(ReasoningAnswerTest, WholeAndStreamedCarryTheSameSplit) {
  const std::vector<std::string> texts = {"Let",   " me",   " add", ".\n</",
                                          "think", ">\n\n", "4",    "."};
  std::vector<TurnPiece> pieces;
  for (const std::string& t : texts) pieces.push_back({t, {}});
  TurnSummary summary;
  summary.reason = FinishReason::kStop;
  summary.generated_tokens = static_cast<int32_t>(texts.size());

  OpenAiResponder whole(OpenAiEndpoint::kChatCompletions, "m", false, "");
  whole.SetReasoning(ReasoningFormat::kQwen3, /*starts_inside=*/true);
  nlohmann::json answer = whole.Whole(pieces, summary);
  EXPECT_EQ(answer["choices"][0]["message"]["reasoning_content"], "Let me add.");
  EXPECT_EQ(answer["choices"][0]["message"]["content"], "4.");
  EXPECT_EQ(answer["usage"]["completion_tokens_details"]["reasoning_tokens"], 6);

  OpenAiResponder streamed(OpenAiEndpoint::kChatCompletions, "m", false, "");
  streamed.SetReasoning(ReasoningFormat::kQwen3, /*starts_inside=*/true);
  std::string reasoning, content;
  auto take = [&](const nlohmann::json& chunk) {
    const nlohmann::json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content"))
      reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  };
  for (const TurnPiece& piece : pieces) take(streamed.Chunk(piece));
  take(streamed.Closing(summary));
  EXPECT_EQ(reasoning, "Let me add.");
  EXPECT_EQ(content, "4.");
  EXPECT_EQ(streamed.UsageChunk(summary)["usage"]["completion_tokens_details"]["reasoning_tokens"],
            6);

  // Without a reasoning format the answer is as before: no reasoning fields.
  OpenAiResponder plain(OpenAiEndpoint::kChatCompletions, "m", false, "");
  nlohmann::json before = plain.Whole(pieces, summary);
  EXPECT_FALSE(before["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_FALSE(before["usage"].contains("completion_tokens_details"));
}

}  // namespace
}  // namespace linserve
