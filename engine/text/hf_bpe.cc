#include "engine/text/hf_bpe.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace linserve {

namespace {

// Pre-tokens longer than this many bytes are not cached: they are rare and
// would crowd out the frequent short ones.
constexpr size_t kMaxCachedPieceBytes = 256;

absl::StatusOr<std::string> OptionalString(const nlohmann::json& object, std::string_view key,
                                           const HfJsonPlace& place) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return HfLoadError(place.Child(key), "not a string");
  return it->get<std::string>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfBpe>> HfBpe::Load(const nlohmann::json& json,
                                                   const HfJsonPlace& place,
                                                   size_t cache_capacity,
                                                   HfModelTables* tables) {
  if (!json.is_object()) return HfLoadError(place, "missing or not an object");
  const auto type = json.find("type");
  if (type != json.end() && !(type->is_string() && type->get<std::string>() == "BPE")) {
    return HfLoadError(place.Child("type"),
                       absl::StrCat("the model ", type->dump(), " is not supported (only BPE)"));
  }
  LINSERVE_ASSIGN_OR_RETURN(const bool byte_fallback,
                            OptionalBool(json, "byte_fallback", false, place));
  if (byte_fallback) {
    return HfLoadError(place.Child("byte_fallback"),
                       "byte_fallback true (SentencePiece-style BPE) is not supported");
  }
  const auto dropout = json.find("dropout");
  if (dropout != json.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return HfLoadError(place.Child("dropout"), "BPE dropout is not supported");
  }
  auto bpe = std::unique_ptr<HfBpe>(new HfBpe());
  bpe->cache_capacity_ = cache_capacity;
  LINSERVE_ASSIGN_OR_RETURN(bpe->continuing_subword_prefix_,
                            OptionalString(json, "continuing_subword_prefix", place));
  LINSERVE_ASSIGN_OR_RETURN(bpe->end_of_word_suffix_,
                            OptionalString(json, "end_of_word_suffix", place));
  LINSERVE_ASSIGN_OR_RETURN(bpe->ignore_merges_, OptionalBool(json, "ignore_merges", false, place));
  LINSERVE_ASSIGN_OR_RETURN(bpe->fuse_unk_, OptionalBool(json, "fuse_unk", false, place));

  // The tables, read while parsing where ParseHfJson had `tables`, else here.
  HfModelTables own_tables;
  HfModelTables& t = tables != nullptr ? *tables : own_tables;
  const HfJsonPlace vocab_place = place.Child("vocab");
  const HfJsonPlace merges_place = place.Child("merges");
  if (!t.has_vocab) {
    const auto vocab = json.find("vocab");
    if (vocab == json.end() || !vocab->is_object()) {
      return HfLoadError(vocab_place, "not an object");
    }
    for (const auto& [token, id] : vocab->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return HfLoadError(vocab_place.Child(token), "the id is not an integer in [0, 2^31)");
      }
      t.vocab.emplace_back(token, id.get<int64_t>());
    }
  }
  if (!t.has_merges) {
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* merges, RequiredArray(json, "merges", place));
    for (size_t rank = 0; rank < merges->size(); ++rank) {
      const nlohmann::json& merge = (*merges)[rank];
      if (merge.is_string()) {
        // The older form, "a b": the first space separates the two tokens.
        const std::string text = merge.get<std::string>();
        const size_t space = text.find(' ');
        if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
          return HfLoadError(merges_place.Child(rank),
                             "a merge string must be two tokens separated by one space");
        }
        t.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                 merge[1].is_string()) {
        t.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      } else {
        return HfLoadError(merges_place.Child(rank), "a merge must be \"a b\" or [\"a\", \"b\"]");
      }
    }
  }

  bpe->vocab_.reserve(t.vocab.size());
  bpe->tokens_.reserve(t.vocab.size());
  for (auto& [token, id64] : t.vocab) {
    // The place is spelled out only for an error: 248,000 of them cost.
    if (id64 >= (int64_t{1} << 31)) {
      return HfLoadError(vocab_place.Child(token), "the id is not an integer in [0, 2^31)");
    }
    const auto id = static_cast<uint32_t>(id64);
    if (token.empty()) return HfLoadError(vocab_place.Child(token), "empty token");
    if (id >= bpe->tokens_.size()) bpe->tokens_.resize(id + 1);
    if (!bpe->tokens_[id].empty()) {
      return HfLoadError(vocab_place.Child(token),
                         absl::StrCat("duplicate id ", id, " (also \"", bpe->tokens_[id], "\")"));
    }
    if (!bpe->vocab_.emplace(token, id).second) {
      return HfLoadError(vocab_place.Child(token), "the token appears twice");
    }
    bpe->tokens_[id] = std::move(token);
  }
  t.vocab.clear();

  LINSERVE_ASSIGN_OR_RETURN(const std::string unk, OptionalString(json, "unk_token", place));
  if (!unk.empty()) {
    bpe->unk_id_ = bpe->IdOf(unk);
    if (bpe->unk_id_ < 0) {
      return HfLoadError(place.Child("unk_token"),
                         absl::StrCat("unk_token \"", unk, "\" is not in the vocab"));
    }
  }

  bpe->merges_.reserve(t.merges.size());
  const size_t prefix_len = bpe->continuing_subword_prefix_.size();
  std::string merged;
  for (size_t rank = 0; rank < t.merges.size(); ++rank) {
    const auto& [left, right] = t.merges[rank];
    const int64_t left_id = bpe->IdOf(left);
    const int64_t right_id = bpe->IdOf(right);
    if (left_id < 0 || right_id < 0) {
      return HfLoadError(merges_place.Child(rank),
                         absl::StrCat("the merge names \"", left_id < 0 ? left : right,
                                      "\", which is not in the vocab"));
    }
    merged = left;
    merged.append(right, std::min(prefix_len, right.size()), std::string::npos);
    const int64_t new_id = bpe->IdOf(merged);
    if (new_id < 0) {
      return HfLoadError(merges_place.Child(rank), absl::StrCat("the merge makes \"", merged,
                                                                "\", which is not in the vocab"));
    }
    // A later duplicate overwrites an earlier one, as the library's map does.
    bpe->merges_[PairKey(left_id, right_id)] = {static_cast<uint32_t>(rank),
                                                static_cast<uint32_t>(new_id)};
  }
  t.merges.clear();
  return bpe;
}

std::string_view HfBpe::TokenOf(int64_t id) const {
  if (id < 0 || id >= id_end()) return {};
  return tokens_[id];
}

int64_t HfBpe::IdOf(std::string_view token) const {
  const auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  return it == vocab_.end() ? int64_t{-1} : static_cast<int64_t>(it->second);
}

void HfBpe::Encode(std::string_view piece, std::vector<int64_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const int64_t id = IdOf(piece);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  const bool cacheable = cache_capacity_ > 0 && piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(absl::string_view(piece.data(), piece.size()));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  MergeWord(piece, ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < cache_capacity_) {
      cache_.emplace(std::string(piece), std::vector<int64_t>(ids->begin() + first, ids->end()));
    }
  }
}

void HfBpe::MergeWord(std::string_view piece, std::vector<int64_t>* ids) const {
  // A doubly linked list of symbols, as the library's Word: merged-away
  // symbols get len 0 and stay in place.
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  // Unknown characters become unk_id_ (fused when fuse_unk_), or vanish
  // without an unk_token, as in the library.
  int64_t pending_unk_len = 0;
  const auto add = [&symbols](uint32_t id, uint32_t len) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, len});
  };
  std::string key;
  size_t pos = 0;
  while (pos < piece.size()) {
    size_t end = pos + 1;
    while (end < piece.size() && (static_cast<uint8_t>(piece[end]) & 0xC0) == 0x80) ++end;
    std::string_view character = piece.substr(pos, end - pos);
    const bool is_first = pos == 0;
    const bool is_last = end == piece.size();
    int64_t id;
    if ((!is_first && !continuing_subword_prefix_.empty()) ||
        (is_last && !end_of_word_suffix_.empty())) {
      key.clear();
      if (!is_first) key += continuing_subword_prefix_;
      key += character;
      if (is_last) key += end_of_word_suffix_;
      id = IdOf(key);
    } else {
      id = IdOf(character);
    }
    const auto len = static_cast<uint32_t>(end - pos);
    if (id >= 0) {
      if (pending_unk_len > 0) {
        add(static_cast<uint32_t>(unk_id_), static_cast<uint32_t>(pending_unk_len));
        pending_unk_len = 0;
      }
      add(static_cast<uint32_t>(id), len);
    } else if (unk_id_ >= 0) {
      if (pending_unk_len > 0 && !fuse_unk_) {
        add(static_cast<uint32_t>(unk_id_), static_cast<uint32_t>(pending_unk_len));
        pending_unk_len = 0;
      }
      pending_unk_len += len;
    }
    pos = end;
  }
  if (pending_unk_len > 0) {
    add(static_cast<uint32_t>(unk_id_), static_cast<uint32_t>(pending_unk_len));
  }

  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    uint32_t new_id;
  };
  // Lowest rank first, then leftmost.
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    const auto it = merges_.find(PairKey(symbols[i].id, symbols[i + 1].id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, static_cast<uint32_t>(i), it->second.new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (current.len == 0 || current.next < 0) continue;
    const size_t next_pos = static_cast<size_t>(current.next);
    const Symbol right = symbols[next_pos];
    // A stale entry: one of the pair has merged since it was queued.
    const auto check = merges_.find(PairKey(current.id, right.id));
    if (check == merges_.end() || check->second.new_id != top.new_id) continue;
    current.id = top.new_id;
    current.len += right.len;
    current.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0 && static_cast<size_t>(right.next) < symbols.size()) {
      symbols[right.next].prev = static_cast<int32_t>(top.pos);
    }
    if (current.prev >= 0) {
      const auto it = merges_.find(PairKey(symbols[current.prev].id, current.id));
      if (it != merges_.end()) {
        queue.push({it->second.rank, static_cast<uint32_t>(current.prev), it->second.new_id});
      }
    }
    if (current.next >= 0) {
      const auto it = merges_.find(PairKey(current.id, symbols[current.next].id));
      if (it != merges_.end()) queue.push({it->second.rank, top.pos, it->second.new_id});
    }
  }
  for (const Symbol& symbol : symbols) {
    if (symbol.len != 0) ids->push_back(symbol.id);
  }
}

}  // namespace linserve
