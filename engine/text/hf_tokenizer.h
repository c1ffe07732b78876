#ifndef LINSERVE_ENGINE_TEXT_HF_TOKENIZER_H_
#define LINSERVE_ENGINE_TEXT_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/text/hf_added_tokens.h"
#include "engine/text/hf_bpe.h"
#include "engine/text/hf_normalizer.h"
#include "engine/text/hf_post_processor.h"
#include "engine/text/hf_pre_tokenizer.h"
#include "engine/text/hf_regex.h"

namespace linserve {

struct HfTokenizerOptions {
  HfRegexLimits regex;       // bounds on each pre-tokenizer regex search
  int max_json_depth = 64;   // deeper tokenizer.json files are refused
  size_t cache_capacity = 10'000;  // cached pre-token encodings; 0 turns the cache off
};

// Whether a text's added tokens ("<|im_start|>", "<think>") become their ids.
enum class HfAddedTokenMode {
  kRecognized,    // a prompt's text: they do
  kPlainContent,  // a chat message's content: they stay text
};

// A Hugging Face tokenizer.json of the byte-level BPE kind, encoding as the
// Rust `tokenizers` library (0.22) does: added tokens, normalizer,
// pre-tokenizer, BPE; decoding token by token. Anything outside that scope is
// refused at load, naming the component and its JSON path. Immutable after
// loading; thread-safe.
class HfTokenizer {
 public:
  // Parses and checks tokenizer.json's text; `file` names it in errors.
  static absl::StatusOr<std::shared_ptr<const HfTokenizer>> FromJson(
      std::string_view json_text, std::string_view file, const HfTokenizerOptions& options);
  // Reads the file at `path`, then as FromJson.
  static absl::StatusOr<std::shared_ptr<const HfTokenizer>> FromFile(
      const std::string& path, const HfTokenizerOptions& options);

  // The ids of `text` without the post-processor's special tokens (the
  // library's add_special_tokens = false). Invalid UTF-8 is read as Rust's
  // from_utf8_lossy reads it. ResourceExhausted if a regex hits its limits.
  // No added token is recognized where it would overlap a `plain` range
  // (HfAddedTokens::Split); InvalidArgument if `plain` is given for text
  // that is not valid UTF-8 (its offsets would not hold).
  absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text, HfAddedTokenMode mode,
                                              absl::Span<const ByteRange> plain = {}) const;

  // The post-processor's special tokens around one sequence (BOS...).
  const HfPostProcessor& post_processor() const { return post_processor_; }

  // The bytes of one token; empty for special added tokens when `skip_special`
  // and for ids that are no token.
  std::string_view TokenBytes(int64_t id, bool skip_special) const;
  // The bytes of `ids` concatenated; not necessarily valid UTF-8.
  std::string Decode(absl::Span<const int64_t> ids, bool skip_special) const;

  // The id of a token (added or in the vocabulary) by its text; -1 if none.
  int64_t IdOf(std::string_view token) const;
  // One past the highest id.
  int64_t id_end() const { return static_cast<int64_t>(token_bytes_.size()); }
  bool IsSpecial(int64_t id) const {
    return id >= 0 && id < id_end() && special_[id];
  }
  const std::vector<HfAddedToken>& added_tokens() const { return added_.tokens(); }

 private:
  HfTokenizer() = default;

  HfNormalizer normalizer_;
  HfPreTokenizer pre_tokenizer_;
  std::unique_ptr<HfBpe> bpe_;
  HfAddedTokens added_;
  HfPostProcessor post_processor_;
  std::vector<std::string> token_bytes_;  // by id, what the decoder makes of it
  std::vector<bool> special_;             // by id: a special added token
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_TOKENIZER_H_
