#include "server/scheduling/prefix_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/sha256.h"

namespace linserve {
namespace {

std::string_view BytesOf(absl::Span<const int64_t> tokens) {
  return {reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int64_t)};
}

}  // namespace

std::vector<std::string> PrefixBlockKeys(std::string_view tenant, std::string_view salt,
                                         std::string_view origin,
                                         absl::Span<const int64_t> tokens, int64_t chunk) {
  // Lengths first, so that no (tenant, salt, origin) reads as another.
  const std::string lengths =
      absl::StrCat(tenant.size(), ":", salt.size(), ":", origin.size(), ":");
  std::string key = Sha256Digest({"linserve prefix v2:", lengths, tenant, salt, origin});
  std::vector<std::string> keys;
  const size_t blocks = tokens.size() / static_cast<size_t>(chunk);
  keys.reserve(blocks);
  for (size_t j = 0; j < blocks; ++j) {
    key = Sha256Digest({key, BytesOf(tokens.subspan(j * chunk, chunk))});
    keys.push_back(key);
  }
  return keys;
}

PrefixCache::PrefixCache(const PrefixCacheOptions& options, Metrics* metrics)
    : options_(options), metrics_(metrics) {}

PrefixCache::Hit PrefixCache::Lookup(absl::Span<const std::string> keys, int64_t max_blocks) {
  metrics_->prefix_cache_lookups_total().Increment();
  for (int64_t j = std::min<int64_t>(max_blocks, keys.size()); j > 0; --j) {
    auto found = by_key_.find(keys[j - 1]);
    if (found == by_key_.end()) continue;
    entries_.splice(entries_.begin(), entries_, found->second);
    metrics_->prefix_cache_hits_total().Increment();
    metrics_->prefix_cache_hit_tokens_total().Increment(static_cast<double>(j * options_.chunk));
    return {j, &found->second->state};
  }
  return {};
}

int64_t PrefixCache::ChooseSnapshot(absl::Span<const std::string> keys, int64_t after) {
  int64_t chosen = 0;
  for (int64_t j = static_cast<int64_t>(keys.size()); j > after; --j) {
    if (sighted_.contains(keys[j - 1]) && !by_key_.contains(keys[j - 1])) {
      chosen = j;
      break;
    }
  }
  for (const std::string& key : keys) Sight(key);
  return chosen;
}

void PrefixCache::Sight(const std::string& key) {
  if (options_.max_sightings <= 0 || !sighted_.insert(key).second) return;
  sighted_order_.push_back(key);
  while (static_cast<int64_t>(sighted_order_.size()) > options_.max_sightings) {
    sighted_.erase(sighted_order_.front());
    sighted_order_.pop_front();
  }
}

void PrefixCache::Insert(const std::string& key, State&& snapshot, int64_t state_bytes) {
  if (state_bytes > options_.max_bytes || by_key_.contains(key)) return;
  while (bytes_ + state_bytes > options_.max_bytes) {
    Entry& oldest = entries_.back();
    bytes_ -= oldest.bytes;
    by_key_.erase(oldest.key);
    entries_.pop_back();
    metrics_->prefix_cache_evictions_total().Increment();
  }
  entries_.push_front(Entry{key, std::move(snapshot), state_bytes});
  by_key_[key] = entries_.begin();
  bytes_ += state_bytes;
  metrics_->prefix_cache_bytes().Set(static_cast<double>(bytes_));
}

}  // namespace linserve
