#include "engine/grammar/token_masks.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace linserve {

TokenTrie::TokenTrie(absl::Span<const std::string> pieces, std::vector<int32_t> end_ids)
    : end_ids_(std::move(end_ids)), vocab_size_(static_cast<int64_t>(pieces.size())) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return pieces[a] < pieces[b] || (pieces[a] == pieces[b] && a < b); });
  // Sorted, each piece shares a prefix with the one before; the nodes below
  // that prefix are new. `path` holds the open nodes, one per depth.
  std::vector<int32_t> path;
  std::string_view previous;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      nodes_[path.back()].subtree_end = static_cast<int32_t>(nodes_.size());
      path.pop_back();
    }
  };
  std::vector<std::vector<int32_t>> ids_at;
  for (int32_t id : order) {
    const std::string_view piece = pieces[id];
    size_t common = 0;
    while (common < previous.size() && common < piece.size() && previous[common] == piece[common]) {
      ++common;
    }
    close_to(common);
    for (size_t d = path.size(); d < piece.size(); ++d) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint8_t>(piece[d]), static_cast<uint16_t>(d + 1), 0, 0, 0});
      ids_at.emplace_back();
    }
    ids_at[path.back()].push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int>(piece.size()));
    previous = piece;
  }
  close_to(0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].ids_begin = static_cast<int32_t>(ids_.size());
    ids_.insert(ids_.end(), ids_at[i].begin(), ids_at[i].end());
    nodes_[i].ids_end = static_cast<int32_t>(ids_.size());
  }
}

std::shared_ptr<const TokenTrie> TokenTrieOf(const Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) pieces[id] = tokenizer.TokenBytes(id);
  std::vector<int32_t> end_ids;
  for (int64_t id : tokenizer.eos_ids()) end_ids.push_back(static_cast<int32_t>(id));
  return std::make_shared<const TokenTrie>(pieces, std::move(end_ids));
}

GrammarTokenMasks::GrammarTokenMasks(std::shared_ptr<const TokenTrie> trie, const Grammar& grammar,
                                     const GrammarMaskOptions& options,
                                     std::shared_ptr<MaskCache> cache)
    : trie_(std::move(trie)),
      matcher_(grammar, options.max_parses),
      max_parses_(options.max_parses),
      cache_(cache != nullptr ? std::move(cache)
                              : std::make_shared<MaskCache>(options.cache_bytes)),
      owner_(cache_->NewOwner()) {
  by_depth_.resize(static_cast<size_t>(trie_->max_depth_) + 1);
}

GrammarTokenMasks::~GrammarTokenMasks() { cache_->Forget(owner_); }

bool GrammarTokenMasks::Compute(const GrammarState& state, TokenMask& mask) {
  const int64_t overflows_before = matcher_.overflows();
  const TokenTrie& trie = *trie_;
  mask.assign(static_cast<size_t>((trie.vocab_size_ + 63) / 64), 0);
  auto allow = [&mask](int32_t id) { mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  if (GrammarMatcher::CanEnd(state)) {
    for (int32_t id : trie.end_ids_) allow(id);
  }
  by_depth_[0] = state;
  const auto n = static_cast<int32_t>(trie.nodes_.size());
  for (int32_t i = 0; i < n;) {
    const TokenTrie::Node& node = trie.nodes_[i];
    if (!matcher_.Advance(by_depth_[node.depth - 1], node.byte, by_depth_[node.depth])) {
      i = node.subtree_end;  // no token under this prefix can follow
      continue;
    }
    for (int32_t k = node.ids_begin; k < node.ids_end; ++k) allow(trie.ids_[k]);
    ++i;
  }
  return matcher_.overflows() != overflows_before;
}

const TokenMask& GrammarTokenMasks::Allowed(const GrammarState& state) {
  if (const TokenMask* cached = cache_->Find(owner_, state)) return *cached;
  TokenMask mask;
  Compute(state, mask);
  if (const TokenMask* kept = cache_->Insert(owner_, state, std::move(mask))) return *kept;
  // Too big for the whole cache: walked again at every ask.
  Compute(state, uncached_);
  return uncached_;
}

bool GrammarTokenMasks::DeadEnd(const GrammarState& state, bool* by_parse_bound) {
  const TokenMask& allowed = Allowed(state);
  for (uint64_t word : allowed) {
    if (word != 0) return false;
  }
  // Rare: walked once more to learn why.
  if (by_parse_bound != nullptr) *by_parse_bound = Compute(state, uncached_);
  return true;
}

}  // namespace linserve
