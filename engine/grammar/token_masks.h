#ifndef LINSERVE_ENGINE_GRAMMAR_TOKEN_MASKS_H_
#define LINSERVE_ENGINE_GRAMMAR_TOKEN_MASKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/types/span.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/text/tokenizer.h"

namespace linserve {

// A vocabulary's tokens as a byte trie laid out for one question: which
// tokens can a grammar state consume whole? The nodes sit in depth-first
// order with the end of each subtree, so a walk that finds a prefix
// rejected skips every token under it in one jump.
// Immutable after construction: one per model, shared by every grammar.
class TokenTrie {
 public:
  // pieces[id]: the bytes token `id` stands for; empty for tokens with no
  // text (special tokens), which a grammar never allows. end_ids: the tokens
  // that end a turn, allowed exactly where the grammar may end.
  TokenTrie(absl::Span<const std::string> pieces, std::vector<int32_t> end_ids);

  int64_t vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

 private:
  friend class GrammarTokenMasks;
  struct Node {
    uint8_t byte;        // on the edge into this node
    uint16_t depth;      // >= 1 (the root is not stored)
    int32_t subtree_end; // the index after this node's last descendant
    int32_t ids_begin;   // into ids_: the tokens whose bytes end here
    int32_t ids_end;
  };
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> end_ids_;
  int64_t vocab_size_ = 0;
  int max_depth_ = 0;
};

// The trie of a tokenizer's pieces; its EOS (if any) ends a turn.
std::shared_ptr<const TokenTrie> TokenTrieOf(const Tokenizer& tokenizer);

// A bitset over the vocabulary: bit id is set when token id is allowed.
using TokenMask = std::vector<uint64_t>;

inline bool MaskAllows(const TokenMask& mask, int64_t id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// The tokens a grammar allows in each state: the trie walked against the
// matcher, a rejected prefix pruning its subtree, and the answer cached per
// state (a state is a few interned ids, so generations of the same grammar
// share the cache, and a grammar's states repeat: inside a string, between
// fields). One per grammar, shared by the sessions it constrains.
// Not thread-safe: the engine thread owns it.
class GrammarTokenMasks {
 public:
  GrammarTokenMasks(std::shared_ptr<const TokenTrie> trie, const Grammar& grammar,
                    size_t max_cached_masks = 1024);

  GrammarMatcher& matcher() { return matcher_; }
  const TokenTrie& trie() const { return *trie_; }

  // The tokens allowed in `state`. The reference stays valid until the next
  // call.
  const TokenMask& Allowed(const GrammarState& state);

  // Walks the trie for `state` (no cache): what Allowed computes.
  void Compute(const GrammarState& state, TokenMask& mask);

  size_t cached_masks() const { return cache_.size(); }
  // The states whose masks are cached (for measurements).
  std::vector<GrammarState> CachedStates() const;

 private:
  std::shared_ptr<const TokenTrie> trie_;
  GrammarMatcher matcher_;
  size_t max_cached_masks_;
  absl::flat_hash_map<GrammarState, std::unique_ptr<TokenMask>> cache_;
  std::vector<GrammarState> by_depth_;  // scratch of the walk
  TokenMask uncached_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_TOKEN_MASKS_H_
