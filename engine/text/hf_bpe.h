#ifndef LINSERVE_ENGINE_TEXT_HF_BPE_H_
#define LINSERVE_ENGINE_TEXT_HF_BPE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/text/hf_json.h"
#include "nlohmann/json.hpp"

namespace linserve {

// A tokenizer.json "model" of type BPE (byte_fallback false, no dropout):
// each pre-token is split into characters, then adjacent pairs are merged by
// rank, lowest first, with a priority queue (the Rust library's
// Word::merge_all, so ties and stale entries resolve as there). Encodings of
// pre-tokens are cached, up to `cache_capacity` entries. Thread-safe.
class HfBpe {
 public:
  // `json` is the "model" value. Refuses other model types, byte_fallback,
  // dropout, an unknown unk_token, a merge naming a token not in the vocab
  // (or whose result is not in it) and an id used twice. `tables`: the vocab
  // and merges ParseHfJson read aside (consumed); null or empty ones are read
  // from `json`.
  static absl::StatusOr<std::unique_ptr<HfBpe>> Load(const nlohmann::json& json,
                                                     const HfJsonPlace& place,
                                                     size_t cache_capacity,
                                                     HfModelTables* tables = nullptr);

  // Appends the ids of `piece` (in the vocabulary's characters).
  void Encode(std::string_view piece, std::vector<int64_t>* ids) const;

  // The vocabulary's token for `id`; empty if none.
  std::string_view TokenOf(int64_t id) const;
  // The id of `token`, or -1.
  int64_t IdOf(std::string_view token) const;
  // One past the highest id of the vocabulary.
  int64_t id_end() const { return static_cast<int64_t>(tokens_.size()); }
  // The number of tokens in the vocabulary (the library's get_vocab_size).
  int64_t vocab_entries() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  static uint64_t PairKey(uint32_t left, uint32_t right) {
    return (static_cast<uint64_t>(left) << 32) | right;
  }

  HfBpe() = default;
  void MergeWord(std::string_view piece, std::vector<int64_t>* ids) const;

  absl::flat_hash_map<std::string, uint32_t> vocab_;
  std::vector<std::string> tokens_;  // by id; empty where no token has the id
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool ignore_merges_ = false;
  int64_t unk_id_ = -1;
  bool fuse_unk_ = false;

  // Pre-token -> ids; stops growing when full (as the Rust library's cache).
  size_t cache_capacity_;
  mutable std::mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_BPE_H_
