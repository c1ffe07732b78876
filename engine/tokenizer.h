#ifndef LINSERVE_ENGINE_TOKENIZER_H_
#define LINSERVE_ENGINE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/model_config.h"

namespace linserve {

// The byte-level tokenizer: ids 0..255 are the bytes
// themselves; BOS, EOS and any other id up to vocab_size carry no bytes.
// Immutable after construction, so every method is thread-safe.
class Tokenizer {
 public:
  static constexpr int64_t kNumByteTokens = 256;

  // `config` must have passed ModelConfig::Validate (bos/eos in [256, vocab)).
  explicit Tokenizer(const ModelConfig& config);

  // One id per byte of `text`. When `starts_text` (a new conversation or a
  // stateless request: the state is the zero state) BOS comes first if the
  // model takes one (ModelConfig::add_bos).
  std::vector<int64_t> Encode(std::string_view text, bool starts_text) const;

  // The byte of a byte token; empty for special and out-of-range ids.
  std::string TokenBytes(int64_t token) const;

  // The bytes of `tokens` concatenated (special tokens contribute nothing).
  // Raw bytes, not necessarily valid UTF-8: see Utf8Assembler.
  std::string Decode(absl::Span<const int64_t> tokens) const;

  // True for ids in [256, vocab_size): BOS, EOS and unused ids. Ids outside
  // the vocabulary are neither bytes nor special.
  bool IsSpecial(int64_t token) const;

  int64_t bos_id() const { return bos_id_; }
  bool add_bos() const { return add_bos_; }
  int64_t eos_id() const { return eos_id_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  int64_t bos_id_;
  bool add_bos_;
  int64_t eos_id_;
  int64_t vocab_size_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TOKENIZER_H_
