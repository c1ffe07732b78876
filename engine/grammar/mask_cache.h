#ifndef LINSERVE_ENGINE_GRAMMAR_MASK_CACHE_H_
#define LINSERVE_ENGINE_GRAMMAR_MASK_CACHE_H_

#include <cstdint>
#include <list>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "engine/grammar/grammar_matcher.h"

namespace linserve {

// A bitset over the vocabulary: bit id is set when token id is allowed.
using TokenMask = std::vector<uint64_t>;

// The token masks of every grammar a server holds, bounded in bytes and
// evicting the least recently used. A mask is vocab / 8 bytes whatever the
// grammar (31 KB at Qwen3.5's 248,320 ids), so a bound counted in masks
// grows with the vocabulary; one bound in bytes across all grammars keeps
// the memory what the operator set, lets a busy grammar use what idle ones
// do not, and needs no split per grammar. Eviction costs only time: an
// evicted mask is walked again when its state comes back.
// Not thread-safe: the engine thread owns it, as it owns the grammars.
class MaskCache {
 public:
  explicit MaskCache(int64_t max_bytes) : max_bytes_(max_bytes) {}
  MaskCache(const MaskCache&) = delete;
  MaskCache& operator=(const MaskCache&) = delete;

  // The mask `owner` (a grammar's id, NewOwner's) cached for `state`, made
  // the most recently used; null when none is. Valid until the next Insert.
  const TokenMask* Find(uint64_t owner, const GrammarState& state);
  // Keeps `mask` for (owner, state), evicting the least recently used until
  // the whole fits in max_bytes; null (nothing kept) when this one alone
  // would not. Otherwise the kept mask, valid until the next Insert.
  const TokenMask* Insert(uint64_t owner, const GrammarState& state, TokenMask mask);
  // Drops `owner`'s masks (a grammar that is going away).
  void Forget(uint64_t owner);

  // A fresh owner id: ids are never reused, so a dropped grammar's masks
  // can never answer for another.
  uint64_t NewOwner() { return next_owner_++; }

  // What one entry costs: the mask's words, the state's ids (kept in the
  // list and in the index), and the nodes' own bookkeeping.
  static int64_t EntryBytes(const GrammarState& state, const TokenMask& mask);

  int64_t bytes() const { return bytes_; }
  int64_t max_bytes() const { return max_bytes_; }
  size_t size() const { return index_.size(); }
  size_t size_of(uint64_t owner) const;
  // The states cached for `owner` (for measurements and tests).
  std::vector<GrammarState> StatesOf(uint64_t owner) const;
  int64_t evictions() const { return evictions_; }

 private:
  using Key = std::pair<uint64_t, GrammarState>;
  struct Entry {
    Key key;
    TokenMask mask;
    int64_t bytes;
  };
  void Evict(std::list<Entry>::iterator it);

  const int64_t max_bytes_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
  uint64_t next_owner_ = 1;
  std::list<Entry> lru_;  // most recently used first
  absl::flat_hash_map<Key, std::list<Entry>::iterator> index_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_MASK_CACHE_H_
