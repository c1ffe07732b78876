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

// Qwen3.5's vocabulary size, of made-up pieces: id 0 ends a turn; 1, 2 and
// 3 are "a", "aa" and "aaaa"; every other id a letter and its number, which
// the grammars below never allow (so each walk prunes at the first byte,
// and the test costs the masks' bytes, not the walk).
constexpr int64_t kQwen35Vocab = 248320;

std::shared_ptr<const TokenTrie> LargeTrie() {
  std::vector<std::string> pieces(kQwen35Vocab);
  pieces[1] = "a";
  pieces[2] = "aa";
  pieces[3] = "aaaa";
  for (int64_t id = 4; id < kQwen35Vocab; ++id) {
    pieces[id] = std::string(1, static_cast<char>('a' + id % 26)) + std::to_string(id);
  }
  return std::make_shared<const TokenTrie>(pieces, std::vector<int32_t>{0});
}

// What a state k a's into "a"{n} allows, by definition.
void ExpectAMask(const TokenMask& mask, int k, int n) {
  EXPECT_EQ(MaskAllows(mask, 0), k == n) << k;
  EXPECT_EQ(MaskAllows(mask, 1), k + 1 <= n) << k;
  EXPECT_EQ(MaskAllows(mask, 2), k + 2 <= n) << k;
  EXPECT_EQ(MaskAllows(mask, 3), k + 4 <= n) << k;
  int64_t allowed = 0;
  for (uint64_t word : mask) allowed += __builtin_popcountll(word);
  EXPECT_EQ(allowed, (k == n) + (k + 1 <= n) + (k + 2 <= n) + (k + 4 <= n)) << k;  // no other id
}

// A stream of distinct states (every position of "a"{600}, twice over) at
// a 248,320-id vocabulary, whose masks are 31,040 bytes each: the cache's
// bytes never pass its bound (a tenth of what the states' masks would
// take), it evicts rather than refusing, and every answer, an evicted
// state's included, is the walked mask.
TEST(TokenMasksTest, TheMaskCacheStaysWithinItsBytesAtQwen35sVocabulary) {
  auto trie = LargeTrie();
  constexpr int kLength = 600;
  absl::StatusOr<Grammar> grammar = ParseGbnf("root ::= \"a\"{" + std::to_string(kLength) + "}");
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMaskOptions options;
  options.cache_bytes = int64_t{2} << 20;  // about 66 masks of 248,320 ids
  GrammarTokenMasks masks(trie, *grammar, options);
  GrammarMatcher& matcher = masks.matcher();
  std::vector<GrammarState> states = {matcher.Start()};
  for (int k = 1; k <= kLength; ++k) {
    GrammarState next = states.back();
    ASSERT_TRUE(matcher.AdvanceAll(next, "a"));
    states.push_back(next);
  }
  const int64_t mask_bytes = kQwen35Vocab / 8;
  EXPECT_EQ(mask_bytes, 31040);
  EXPECT_GE(MaskCache::EntryBytes(states[0], TokenMask(kQwen35Vocab / 64)), mask_bytes);
  for (int pass = 0; pass < 2; ++pass) {
    for (int k = 0; k <= kLength; ++k) {
      ExpectAMask(masks.Allowed(states[k]), k, kLength);
      ASSERT_LE(masks.cache().bytes(), options.cache_bytes) << "pass " << pass << ", k " << k;
    }
  }
  // A scan longer than the cache misses at every ask: each mask was kept,
  // and all but those still there evicted.
  EXPECT_EQ(masks.cache().evictions() + static_cast<int64_t>(masks.cached_masks()),
            2 * (kLength + 1));
  EXPECT_GE(masks.cached_masks(), 60u);  // yet the cache stays full
  EXPECT_LE(masks.cached_masks() * mask_bytes, static_cast<size_t>(options.cache_bytes));
  // The most recently used stay: asked again, they answer from the cache.
  const int64_t evictions = masks.cache().evictions();
  for (int k = kLength; k > kLength - 50; --k) ExpectAMask(masks.Allowed(states[k]), k, kLength);
  EXPECT_EQ(masks.cache().evictions(), evictions);
}

// Grammars share one cache and one bound: a grammar's stream of new states
// evicts another's masks (never refuses them), the other still answers
// rightly, and a grammar that goes away gives its bytes back.
TEST(TokenMasksTest, GrammarsShareOneByteBoundAndGiveItBack) {
  auto trie = LargeTrie();
  auto cache = std::make_shared<MaskCache>(int64_t{1} << 20);
  absl::StatusOr<Grammar> a = ParseGbnf("root ::= \"a\"{100}");
  absl::StatusOr<Grammar> b = ParseGbnf("root ::= \"a\"{200}");
  ASSERT_TRUE(a.ok() && b.ok());
  GrammarTokenMasks first(trie, *a, {}, cache);
  GrammarState state = first.matcher().Start();
  for (int k = 0; k <= 10; ++k) {
    ExpectAMask(first.Allowed(state), k, 100);
    if (k < 10) ASSERT_TRUE(first.matcher().AdvanceAll(state, "a"));
  }
  EXPECT_EQ(first.cached_masks(), 11u);
  {
    GrammarTokenMasks second(trie, *b, {}, cache);
    GrammarState s = second.matcher().Start();
    for (int k = 0; k <= 200; ++k) {
      ExpectAMask(second.Allowed(s), k, 200);
      ASSERT_LE(cache->bytes(), cache->max_bytes());
      if (k < 200) ASSERT_TRUE(second.matcher().AdvanceAll(s, "a"));
    }
    EXPECT_EQ(first.cached_masks(), 0u);  // the least recently used went first
    EXPECT_GT(second.cached_masks(), 0u);
  }
  EXPECT_EQ(cache->size(), 0u);
  EXPECT_EQ(cache->bytes(), 0);
  state = first.matcher().Start();
  ExpectAMask(first.Allowed(state), 0, 100);
  EXPECT_EQ(first.cached_masks(), 1u);
}

// A bound smaller than one mask keeps nothing, and every answer is still
// right (walked at every ask).
TEST(TokenMasksTest, ABoundBelowOneMaskKeepsNoneAndStillAnswers) {
  auto trie = LargeTrie();
  absl::StatusOr<Grammar> grammar = ParseGbnf("root ::= \"a\"{8}");
  ASSERT_TRUE(grammar.ok());
  for (int64_t bytes : {int64_t{0}, kQwen35Vocab / 8}) {
    GrammarMaskOptions options;
    options.cache_bytes = bytes;
    GrammarTokenMasks masks(trie, *grammar, options);
    GrammarState state = masks.matcher().Start();
    for (int k = 0; k <= 8; ++k) {
      ExpectAMask(masks.Allowed(state), k, 8);
      ExpectAMask(masks.Allowed(state), k, 8);
      if (k < 8) ASSERT_TRUE(masks.matcher().AdvanceAll(state, "a"));
    }
    EXPECT_EQ(masks.cached_masks(), 0u);
    EXPECT_EQ(masks.cache().bytes(), 0);
  }
}

}  // namespace
}  // namespace linserve
