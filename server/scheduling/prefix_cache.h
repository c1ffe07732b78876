#ifndef LINSERVE_SERVER_PREFIX_CACHE_H_
#define LINSERVE_SERVER_PREFIX_CACHE_H_

// The prefix-state cache: snapshots of the state a prompt's prefix leaves,
// taken at chunk boundaries while prefilling, so that a later prompt that
// begins with the same tokens resumes from the longest cached boundary
// instead of prefilling it again. A snapshot costs the state's size whatever
// the prefix's length.
//
// Keys form a hash chain over blocks of `chunk` tokens: block j's key hashes
// block j-1's key with block j's tokens, and the chain starts from the
// tenant and the request's cache salt. So a key names a whole prefix in one
// scope, and one tenant never resumes from another's prefix.
//
// Which boundaries are kept: a prompt's deepest boundary whose key an
// earlier prompt already reached, i.e. the point where it parts from a prompt
// seen before (the end of a shared system prompt or preamble). A prompt seen
// once leaves only its keys (32 bytes each, in a bounded set of sightings),
// never a snapshot, so one-off prompts do not wash the cache out.
//
// Engine thread only. Brings in LibTorch (it holds States): only the
// scheduler's own files include it.

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "engine/model/state.h"
#include "server/common/metrics.h"

namespace linserve {

// The chain keys of every whole block of `tokens` (tokens.size() / chunk of
// them), 32 bytes each, in the scope of `tenant` and `salt`, fed after the
// state whose content digest is `origin` ("": a fresh state). A named
// state's digest, not its name, scopes its turns: a name deleted and made
// again with other contents never meets the old one's prefixes.
std::vector<std::string> PrefixBlockKeys(std::string_view tenant, std::string_view salt,
                                         std::string_view origin,
                                         absl::Span<const int64_t> tokens, int64_t chunk);

struct PrefixCacheOptions {
  int64_t max_bytes = 0;      // snapshots' state bytes; 0: the cache is off
  int64_t max_sightings = 0;  // keys remembered for the second-sighting rule
  int64_t chunk = 64;         // tokens per block: the model's prefill chunk
};

class PrefixCache {
 public:
  PrefixCache(const PrefixCacheOptions& options, Metrics* metrics);

  bool enabled() const { return options_.max_bytes > 0; }
  int64_t chunk() const { return options_.chunk; }

  // PrefixBlockKeys with this cache's chunk.
  std::vector<std::string> Keys(std::string_view tenant, std::string_view salt,
                                std::string_view origin, absl::Span<const int64_t> tokens) const {
    return PrefixBlockKeys(tenant, salt, origin, tokens, options_.chunk);
  }

  struct Hit {
    int64_t blocks = 0;             // whole blocks the snapshot covers; 0: none
    const State* state = nullptr;   // valid until the next Insert
  };
  // The longest cached prefix among the first `max_blocks` keys (counted in
  // the lookup and hit metrics; a hit becomes the most recently used).
  Hit Lookup(absl::Span<const std::string> keys, int64_t max_blocks);

  // The block count at which this prompt should leave a snapshot: the
  // deepest block past `after` whose key was sighted before and is not
  // cached; 0 for none. Then records every key as sighted.
  int64_t ChooseSnapshot(absl::Span<const std::string> keys, int64_t after);

  // Keeps `snapshot` (one session's state: a copy of its own, CloneState or
  // a trimmed SplitState piece, which the cache now owns) under `key`,
  // evicting the least recently used snapshots to stay within max_bytes. A
  // state larger than the whole bound is not kept.
  void Insert(const std::string& key, State&& snapshot, int64_t state_bytes);

  int64_t bytes() const { return bytes_; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::string key;
    State state;
    int64_t bytes = 0;
  };
  void Sight(const std::string& key);

  const PrefixCacheOptions options_;
  Metrics* const metrics_;
  std::list<Entry> entries_;  // most recently used first
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> by_key_;
  int64_t bytes_ = 0;
  absl::flat_hash_set<std::string> sighted_;
  std::deque<std::string> sighted_order_;  // oldest first, to bound sighted_
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_PREFIX_CACHE_H_
