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
#include "engine/grammar/mask_cache.h"
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

inline bool MaskAllows(const TokenMask& mask, int64_t id) {
  return (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

// What a grammar's masks may cost.
struct GrammarMaskOptions {
  // Parses alive in one state (grammar_max_parses): an ambiguous grammar
  // can double them with every byte. A byte that would pass it is refused.
  int max_parses = 4096;
  // Bytes of the grammar's own mask cache, when it is given none to share.
  int64_t cache_bytes = int64_t{64} << 20;
};

// The tokens a grammar allows in each state: the trie walked against the
// matcher, a rejected prefix pruning its subtree, and the answer cached per
// state (a state is a few interned ids, so generations of the same grammar
// share the cache, and a grammar's states repeat: inside a string, between
// fields). One per grammar, shared by the sessions it constrains; the masks
// live in a MaskCache, bounded in bytes, that grammars may share.
// Not thread-safe: the engine thread owns it.
class GrammarTokenMasks {
 public:
  // `cache`: the masks' cache, shared with other grammars; null: one of
  // options.cache_bytes of its own.
  GrammarTokenMasks(std::shared_ptr<const TokenTrie> trie, const Grammar& grammar,
                    const GrammarMaskOptions& options = {},
                    std::shared_ptr<MaskCache> cache = nullptr);
  ~GrammarTokenMasks();
  GrammarTokenMasks(const GrammarTokenMasks&) = delete;
  GrammarTokenMasks& operator=(const GrammarTokenMasks&) = delete;

  GrammarMatcher& matcher() { return matcher_; }
  const TokenTrie& trie() const { return *trie_; }

  // The tokens allowed in `state`. The reference stays valid until the next
  // call on any grammar that shares this one's cache (it may evict).
  const TokenMask& Allowed(const GrammarState& state);

  // Walks the trie for `state` (no cache): what Allowed computes. Returns
  // whether the walk refused a byte only because it would pass max_parses
  // (the mask is then what the bound leaves).
  bool Compute(const GrammarState& state, TokenMask& mask);

  // Whether `state` allows no token at all, not even an end: a generation
  // there is stuck. `by_parse_bound`: whether that is because of
  // max_parses (the grammar itself would go on).
  bool DeadEnd(const GrammarState& state, bool* by_parse_bound);

  int max_parses() const { return max_parses_; }
  size_t cached_masks() const { return cache_->size_of(owner_); }
  // The states whose masks are cached (for measurements).
  std::vector<GrammarState> CachedStates() const { return cache_->StatesOf(owner_); }
  const MaskCache& cache() const { return *cache_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  GrammarMatcher matcher_;
  const int max_parses_;
  std::shared_ptr<MaskCache> cache_;
  const uint64_t owner_;                // this grammar's id in cache_
  std::vector<GrammarState> by_depth_;  // scratch of the walk
  TokenMask uncached_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_TOKEN_MASKS_H_
