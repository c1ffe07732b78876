// Generation: the decode loop's bookkeeping without a model, driven by
// hand-made logits that force each token.

#include "engine/generation/generation.h"

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/token_masks.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

const ModelConfig kConfig;
const std::string kFFFD = "\xEF\xBF\xBD";

// Logits under which greedy sampling picks `token`.
std::vector<float> Forcing(int64_t token) {
  std::vector<float> logits(kConfig.vocab_size, 0.0f);
  logits[token] = 10.0f;
  return logits;
}

SamplingParams Greedy(int32_t max_new_tokens) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.max_new_tokens = max_new_tokens;
  return params;
}

struct Streamed {
  std::vector<std::string> pieces;
  std::string text;
  std::vector<int64_t> tokens;
  FinishReason finish = FinishReason::kNone;
};

// Feeds `forced` one token per step until the generation finishes.
Streamed Drive(Generation& generation, const std::vector<int64_t>& forced) {
  Streamed run;
  for (int64_t token : forced) {
    if (generation.finished()) break;
    Generation::Step step = generation.Next(Forcing(token));
    EXPECT_EQ(step.token, token);
    run.pieces.push_back(step.text);
    run.text += step.text;
    run.tokens.push_back(step.token);
    run.finish = step.finish;
  }
  return run;
}

std::vector<int64_t> Bytes(const std::string& text) {
  return Tokenizer(kConfig).Encode(text, /*starts_text=*/false);
}

TEST(GenerationTest, StopsAtMaxNewTokens) {
  Generation generation(Tokenizer(kConfig), Greedy(3), {});
  Streamed run = Drive(generation, Bytes("abcdef"));
  EXPECT_EQ(run.text, "abc");
  EXPECT_EQ(run.finish, FinishReason::kLength);
  EXPECT_EQ(generation.generated_tokens(), 3);
  EXPECT_TRUE(generation.finished());
}

TEST(GenerationTest, StopsAtEosUnlessIgnored) {
  std::vector<int64_t> forced = Bytes("ab");
  forced.push_back(kConfig.eos_id);
  forced.push_back('c');
  Generation stops(Tokenizer(kConfig), Greedy(10), {});
  Streamed run = Drive(stops, forced);
  EXPECT_EQ(run.text, "ab");
  EXPECT_EQ(run.finish, FinishReason::kEos);
  EXPECT_EQ(run.tokens.size(), 3u);

  SamplingParams params = Greedy(4);
  params.ignore_eos = true;
  Generation goes_on(Tokenizer(kConfig), params, {});
  Streamed ignored = Drive(goes_on, forced);
  EXPECT_EQ(ignored.text, "abc");  // EOS itself carries no text
  EXPECT_EQ(ignored.finish, FinishReason::kLength);
}

TEST(GenerationTest, StopSequenceSplitAcrossTokensEndsTheTurn) {
  SamplingParams params = Greedy(50);
  params.stop = {"lo w"};
  Generation generation(Tokenizer(kConfig), params, {});
  Streamed run = Drive(generation, Bytes("hello world"));
  EXPECT_EQ(run.text, "hel");
  EXPECT_EQ(run.finish, FinishReason::kStop);
  EXPECT_EQ(run.tokens.size(), 7u);  // "hello w": the stop ends at its last byte
  // While "lo w" could still be forming, its bytes were held back.
  EXPECT_EQ(run.pieces, (std::vector<std::string>{"h", "e", "", "l", "", "", ""}));
}

TEST(GenerationTest, EmitsOnlyCompleteCharacters) {
  const std::string euro = "\xE2\x82\xAC";
  Generation whole(Tokenizer(kConfig), Greedy(4), {});
  Streamed run = Drive(whole, Bytes(euro + "x"));
  EXPECT_EQ(run.pieces, (std::vector<std::string>{"", "", euro, "x"}));

  // Cut off inside a character by the length limit: one replacement character.
  Generation cut(Tokenizer(kConfig), Greedy(2), {});
  EXPECT_EQ(Drive(cut, Bytes(euro)).text, kFFFD);
}

TEST(GenerationTest, CancelReleasesHeldBackText) {
  SamplingParams params = Greedy(50);
  params.stop = {"xyz"};
  Generation generation(Tokenizer(kConfig), params, {});
  Streamed run = Drive(generation, Bytes("abxy"));
  EXPECT_EQ(run.text, "ab");
  EXPECT_FALSE(generation.finished());
  EXPECT_EQ(generation.Cancel(), "xy");
}

TEST(GenerationTest, PenaltiesSeeThePromptAndTheGeneratedTokens) {
  SamplingParams params = Greedy(3);
  params.presence_penalty = 5.0f;
  // 'a' leads by 3 but was in the prompt: the penalty makes 'b' win.
  std::vector<float> logits(kConfig.vocab_size, 0.0f);
  logits['a'] = 3.0f;
  logits['b'] = 1.0f;
  logits['c'] = 0.5f;
  Generation generation(Tokenizer(kConfig), params, Bytes("a"));
  EXPECT_EQ(generation.Next(logits).token, 'b');
  EXPECT_EQ(generation.Next(logits).token, 'c');  // now 'b' is penalised too
  EXPECT_EQ(generation.history(), Bytes("abc"));
}

TEST(GenerationTest, SameSeedSameTokens) {
  SamplingParams params;
  params.max_new_tokens = 64;
  params.ignore_eos = true;
  std::vector<float> flat(kConfig.vocab_size, 0.0f);
  auto sample = [&](uint64_t seed) {
    params.seed = seed;
    Generation generation(Tokenizer(kConfig), params, {});
    std::vector<int64_t> tokens;
    while (!generation.finished()) tokens.push_back(generation.Next(flat).token);
    return tokens;
  };
  EXPECT_EQ(sample(42), sample(42));
  EXPECT_NE(sample(42), sample(43));
}

TEST(GenerationTest, FinishReasonsHaveWireNames) {
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kEos), "eos");
  EXPECT_STREQ(FinishReasonName(FinishReason::kGrammar), "grammar");
}

// World tokens under a grammar: the logits favour an EOS and tokens the
// grammar forbids; the text is still the grammar's, split across tokens that
// end inside a character, and the generation ends when the grammar is done.
// The row comes back as it was.
TEST(GenerationTest, AGrammarAllowsOnlyItsTextAndEndsWhenItIsComplete) {
  absl::StatusOr<Tokenizer> world = Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), 65536);
  ASSERT_TRUE(world.ok()) << world.status();
  absl::StatusOr<Grammar> grammar = ParseGbnf(R"(root ::= "日本" [0-9]{2} | "no")");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  auto masks = std::make_shared<GrammarTokenMasks>(TokenTrieOf(*world), *grammar);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SamplingParams params;
    params.temperature = 2.0f;
    params.max_new_tokens = 50;
    params.seed = seed;
    Generation generation(*world, params, {});
    generation.Constrain(masks);
    std::vector<float> logits(65536, 0.0f);
    logits[0] = 30.0f;                                   // EOS
    for (int id = 1; id < 65536; id += 3) logits[id] = 3.0f;
    const std::vector<float> before = logits;
    std::string text;
    while (!generation.finished()) {
      const Generation::Step step = generation.NextInPlace(absl::MakeSpan(logits));
      ASSERT_EQ(logits, before);
      text += step.text;
      if (generation.finished()) EXPECT_EQ(step.finish, FinishReason::kGrammar);
    }
    EXPECT_TRUE(text == "no" || (text.size() == 8 && text.rfind("日本", 0) == 0 &&
                                 std::isdigit(text[6]) && std::isdigit(text[7])))
        << text;
    EXPECT_FALSE(generation.constraint_failed());
  }
}

TEST(GenerationTest, NeverSamplesANeverSampledId) {
  absl::StatusOr<Tokenizer> world =
      Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), /*vocab_size=*/65536);
  ASSERT_TRUE(world.ok()) << world.status();
  // Logits that strongly favour the unused rows 65,530..65,535, as an
  // untrained or badly converted head might.
  std::vector<float> logits(65536, 0.0f);
  for (int64_t id : world->never_sampled()) logits[id] = 50.0f + static_cast<float>(id % 7);
  logits[74] = 5.0f;  // "I", the best of the rest

  Generation greedy(*world, Greedy(3), {});
  EXPECT_EQ(greedy.Next(logits).token, 74);

  SamplingParams params;
  params.temperature = 1.5f;
  params.max_new_tokens = 200;
  params.seed = 7;
  params.ignore_eos = true;
  Generation sampled(*world, params, {});
  while (!sampled.finished()) {
    const int64_t token = sampled.Next(logits).token;
    ASSERT_TRUE(token >= 0 && token < 65530) << token;
  }
}

TEST(GenerationTest, WithoutAnEosIdNothingEndsAsEos) {
  // Bytes(256): byte 0 is text, not an end.
  Generation generation(Tokenizer::Bytes(256), Greedy(3), {});
  std::vector<float> zero(256, 0.0f);
  zero[0] = 10.0f;
  Generation::Step step{};
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(generation.finished());
    step = generation.Next(zero);
    EXPECT_EQ(step.token, 0);
  }
  EXPECT_EQ(step.finish, FinishReason::kLength);
}

TEST(GenerationTest, WorldEndOfTextIsEos) {
  absl::StatusOr<Tokenizer> world = Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), 65536);
  ASSERT_TRUE(world.ok()) << world.status();
  std::vector<float> logits(65536, 0.0f);
  logits[0] = 10.0f;
  Generation generation(*world, Greedy(5), {});
  const Generation::Step step = generation.Next(logits);
  EXPECT_EQ(step.token, 0);
  EXPECT_EQ(step.finish, FinishReason::kEos);
  EXPECT_EQ(step.text, "");
}

// A grammar whose only next byte would take more parses than the matcher's
// bound: the generation samples nothing (token -1), ends with kGrammar and
// says why; the row comes back as it was. At the bound it goes on.
TEST(GenerationTest, AGrammarPastItsParseBoundEndsWithoutSampling) {
  const Tokenizer bytes = Tokenizer::Bytes(260);
  // After "x", each of the 15 optional z's is a parse, and the y one more: 16.
  absl::StatusOr<Grammar> grammar = ParseGbnf(R"(root ::= "x" ("z"?){15} "y")");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  for (int max_parses : {16, 15}) {
    GrammarMaskOptions options;
    options.max_parses = max_parses;
    auto masks = std::make_shared<GrammarTokenMasks>(TokenTrieOf(bytes), *grammar, options);
    SamplingParams params;
    params.temperature = 0.0f;
    params.max_new_tokens = 4;
    Generation generation(bytes, params, {});
    generation.Constrain(masks);
    std::vector<float> logits(260, 0.0f);
    logits['z'] = 5.0f;
    const std::vector<float> before = logits;
    const Generation::Step step = generation.NextInPlace(absl::MakeSpan(logits));
    EXPECT_EQ(logits, before);
    if (max_parses == 16) {
      EXPECT_EQ(step.token, 'x');
      EXPECT_FALSE(generation.finished());
      EXPECT_EQ(generation.NextInPlace(absl::MakeSpan(logits)).token, 'z');
      EXPECT_FALSE(generation.constraint_failed());
    } else {
      EXPECT_EQ(step.token, -1);
      EXPECT_EQ(step.finish, FinishReason::kGrammar);
      EXPECT_TRUE(generation.finished());
      EXPECT_TRUE(generation.constraint_failed());
      EXPECT_TRUE(generation.parse_bound_hit());
      EXPECT_EQ(generation.generated_tokens(), 0);
    }
  }
}

}  // namespace
}  // namespace linserve
