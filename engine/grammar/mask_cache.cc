#include "engine/grammar/mask_cache.h"

#include <utility>

namespace linserve {
namespace {

// A list node's links and allocation header, and an index slot with its
// control byte, rounded up: what an entry costs beyond its vectors' arrays.
constexpr int64_t kEntryOverheadBytes = 128;

}  // namespace

int64_t MaskCache::EntryBytes(const GrammarState& state, const TokenMask& mask) {
  const auto state_bytes = static_cast<int64_t>(state.capacity() * sizeof(int32_t));
  return static_cast<int64_t>(sizeof(Entry)) + kEntryOverheadBytes +
         static_cast<int64_t>(mask.capacity() * sizeof(uint64_t)) + 2 * state_bytes;
}

const TokenMask* MaskCache::Find(uint64_t owner, const GrammarState& state) {
  auto it = index_.find(Key(owner, state));
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &it->second->mask;
}

const TokenMask* MaskCache::Insert(uint64_t owner, const GrammarState& state, TokenMask mask) {
  mask.shrink_to_fit();
  Key key(owner, state);
  key.second.shrink_to_fit();
  auto found = index_.find(key);
  if (found != index_.end()) Evict(found->second);
  const int64_t bytes = EntryBytes(key.second, mask);
  if (bytes > max_bytes_) return nullptr;
  while (bytes_ + bytes > max_bytes_) {
    Evict(std::prev(lru_.end()));
    ++evictions_;
  }
  lru_.push_front(Entry{key, std::move(mask), bytes});
  index_.emplace(std::move(key), lru_.begin());
  bytes_ += bytes;
  return &lru_.front().mask;
}

void MaskCache::Evict(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

void MaskCache::Forget(uint64_t owner) {
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->key.first == owner) Evict(it);
    it = next;
  }
}

size_t MaskCache::size_of(uint64_t owner) const {
  size_t n = 0;
  for (const Entry& entry : lru_) n += entry.key.first == owner ? 1 : 0;
  return n;
}

std::vector<GrammarState> MaskCache::StatesOf(uint64_t owner) const {
  std::vector<GrammarState> states;
  for (const Entry& entry : lru_) {
    if (entry.key.first == owner) states.push_back(entry.key.second);
  }
  return states;
}

}  // namespace linserve
