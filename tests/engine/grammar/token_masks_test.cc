#include "engine/grammar/token_masks.h"

#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/gbnf_parser.h"
#include "engine/text/tokenizer.h"
#include "gtest/gtest.h"

namespace linserve {
namespace {

constexpr char kJsonObject[] = R"(root ::= "{" ws pair ("," ws pair)* "}"
pair ::= string ":" ws value ws
value ::= string | number | "true" | "false" | "null" | "[" ws (value ws ("," ws value ws)*)? "]"
string ::= "\"" ([^"\\] | "\\" ["\\/bfnrt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]{0,4})";

// The mask by its definition: token t is allowed when all of its bytes can
// follow; an end token when the grammar may end; a token without bytes never.
TokenMask BruteForce(GrammarMatcher& matcher, const GrammarState& state,
                     const std::vector<std::string>& pieces, const std::vector<int32_t>& ends) {
  TokenMask mask((pieces.size() + 63) / 64, 0);
  for (size_t id = 0; id < pieces.size(); ++id) {
    GrammarState s = state;
    if (!pieces[id].empty() && matcher.AdvanceAll(s, pieces[id])) mask[id >> 6] |= 1ull << (id & 63);
  }
  if (GrammarMatcher::CanEnd(state)) {
    for (int32_t id : ends) mask[id >> 6] |= 1ull << (id & 63);
  }
  return mask;
}

std::vector<std::string> PiecesOf(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) pieces.push_back(tokenizer.TokenBytes(id));
  return pieces;
}

// Along a JSON text, at every byte boundary, the walked mask equals the
// brute-force one over the whole World vocabulary (65,536 ids, tokens that
// end inside a UTF-8 character included), and a second ask is cached.
TEST(TokenMasksTest, TheWalkedMaskIsTheBruteForceMaskOverTheWorldVocabulary) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), 65536);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<std::string> pieces = PiecesOf(*tokenizer);
  const std::vector<int32_t> ends = {0};
  auto trie = std::make_shared<const TokenTrie>(pieces, ends);
  absl::StatusOr<Grammar> grammar = ParseGbnf(kJsonObject);
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarTokenMasks masks(trie, *grammar);
  GrammarMatcher& matcher = masks.matcher();
  const std::string text = "{\"naïve\": [1.5, \"日本\"], \"b\": true}";
  GrammarState state = matcher.Start();
  for (size_t i = 0; i <= text.size(); ++i) {
    const TokenMask expected = BruteForce(matcher, state, pieces, ends);
    EXPECT_EQ(masks.Allowed(state), expected) << "after " << i << " bytes";
    EXPECT_EQ(MaskAllows(masks.Allowed(state), 0), i == text.size());
    if (i < text.size()) ASSERT_TRUE(matcher.AdvanceAll(state, text.substr(i, 1)));
  }
  EXPECT_GE(masks.cached_masks(), 2u);
  EXPECT_LE(masks.cached_masks(), text.size() + 1);
}

// The byte tokenizer: 256 one-byte pieces; ids past 255 carry none.
TEST(TokenMasksTest, ByteVocabularyAllowsExactlyTheNextBytes) {
  const Tokenizer bytes = Tokenizer::Bytes(260);
  const std::vector<std::string> pieces = PiecesOf(bytes);
  auto trie = std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>{257});
  absl::StatusOr<Grammar> grammar = ParseGbnf(R"(root ::= "yes" | "no" | "n/a")");
  ASSERT_TRUE(grammar.ok());
  GrammarTokenMasks masks(trie, *grammar);
  GrammarState state = masks.matcher().Start();
  auto allowed = [&](const GrammarState& s) {
    std::string out;
    const TokenMask& mask = masks.Allowed(s);
    for (int id = 0; id < 260; ++id) {
      if (MaskAllows(mask, id)) out += id < 256 ? std::string(1, static_cast<char>(id)) : "<end>";
    }
    return out;
  };
  EXPECT_EQ(allowed(state), "ny");
  ASSERT_TRUE(masks.matcher().AdvanceAll(state, "n"));
  EXPECT_EQ(allowed(state), "/o");
  ASSERT_TRUE(masks.matcher().AdvanceAll(state, "o"));
  EXPECT_EQ(allowed(state), "<end>");
}

}  // namespace
}  // namespace linserve
