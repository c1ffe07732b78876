#ifndef LINSERVE_ENGINE_TOKENIZER_H_
#define LINSERVE_ENGINE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/base/model_config.h"
#include "engine/text/byte_range.h"

namespace linserve {

class HfTokenizer;  // engine/text/hf_tokenizer.h

// Text to token ids and back, for three kinds of vocabulary:
//  - "byte": ids 0..255 are the bytes themselves; BOS, EOS and any other id
//    up to vocab_size carry no bytes (the models this project trains, and the
//    tiny byte-level RWKV-7);
//  - "rwkv_world": the RWKV World vocabulary of 65,529 byte strings (ids 1 to
//    65,529), encoded greedily, longest piece first, as RWKV's own tokenizer
//    does; id 0 is the end of text;
//  - "huggingface": a Hugging Face tokenizer.json of the byte-level BPE kind
//    (HfTokenizer: GPT-2, Llama 3, DeepSeek, Qwen...), with its added tokens.
// The first two are a table of pieces (id -> bytes) and a trie over them: a
// byte vocabulary is simply one whose pieces are single bytes.
// Immutable after construction, so every method is thread-safe; copies share
// the tables, so copying is cheap.
class Tokenizer {
 public:
  static constexpr int64_t kNumByteTokens = 256;

  // A byte tokenizer with the config's special ids. `config` must have passed
  // ModelConfig::Validate (bos/eos in [256, vocab)).
  explicit Tokenizer(const ModelConfig& config);

  // Byte-level without special ids: id = byte value, no BOS, no EOS (byte 0 is
  // an ordinary byte). `vocab_size` should be at least 256; ids from 256 up
  // carry no bytes and are never sampled.
  static Tokenizer Bytes(int64_t vocab_size);

  // The RWKV World vocabulary (text of lines "ID REPR LEN", see
  // world_vocabulary.h). `vocab_size` is the number of rows of the model's
  // logits (65,536 for published models), which may exceed the vocabulary's
  // ids. InvalidArgument names the first malformed line and what is wrong
  // with it, or a byte with no single-byte piece (some text could not be
  // encoded).
  static absl::StatusOr<Tokenizer> World(std::string_view vocabulary, int64_t vocab_size);

  // What a Hugging Face tokenizer needs besides tokenizer.json, from the
  // model directory's other files (hf_model_files.h reads them).
  struct HfSpecials {
    std::vector<int64_t> eos_ids;  // every id that ends a turn
    std::vector<int64_t> prefix_ids;  // added before a text that starts (BOS)
    std::vector<int64_t> suffix_ids;  // added after it (an EOS some files ask for)
  };

  // A Hugging Face tokenizer for a model with `vocab_size` logits rows.
  // InvalidArgument if a token's id or a special id is past those rows.
  static absl::StatusOr<Tokenizer> HuggingFace(std::shared_ptr<const HfTokenizer> hf,
                                               HfSpecials specials, int64_t vocab_size);

  // The World vocabulary built into the library (rwkv_vocab_v20230424.txt), so
  // that serving an RWKV World model needs only its weights.
  static std::string_view BuiltInWorldVocabulary();

  // Token ids for `text`: one per byte (byte vocabularies) or the longest
  // piece at each position (World). When `starts_text` (a new conversation or
  // a stateless request: the state is the zero state) BOS comes first if the
  // model takes one (add_bos()).
  // A Hugging Face tokenizer recognizes its added tokens ("<|im_start|>") in
  // `text`, and adds the tokenizer's prefix (and suffix) ids when
  // `starts_text`. Should its pre-tokenizer regex hit its limits on this text,
  // Encode returns no ids; TryEncode says why.
  std::vector<int64_t> Encode(std::string_view text, bool starts_text) const;

  // Encode with errors: ResourceExhausted when a Hugging Face tokenizer's
  // regex hits its match limits. Within the `plain` ranges (sorted,
  // disjoint) no added token is recognized: a chat message's "<|im_start|>"
  // stays text (HfTokenizer::Encode).
  absl::StatusOr<std::vector<int64_t>> TryEncode(std::string_view text, bool starts_text,
                                                 absl::Span<const ByteRange> plain = {}) const;

  // The texts of a Hugging Face tokenizer's special added tokens
  // ("<|im_start|>", "<|endoftext|>"): what a chat message's content must
  // not turn into. Empty for the other vocabularies, which have none.
  std::vector<std::string> SpecialTexts() const;

  // The bytes of one token; empty for ids that carry none (special, unused,
  // out of range). A World or Hugging Face token may end inside a UTF-8
  // character. A Hugging Face tokenizer's special added tokens
  // ("<|im_end|>") carry their text only when `skip_special` is false; its
  // other added tokens ("<think>") always do.
  std::string TokenBytes(int64_t token, bool skip_special = true) const;

  // The bytes of `tokens` concatenated (special tokens contribute nothing
  // unless `skip_special` is false). Raw bytes, not necessarily valid UTF-8:
  // see Utf8Assembler.
  std::string Decode(absl::Span<const int64_t> tokens, bool skip_special = true) const;

  // True for ids in [0, vocab_size) that carry no bytes (as TokenBytes with
  // skip_special): BOS, EOS, special added tokens and unused ids. Ids outside
  // the vocabulary are neither pieces nor special.
  bool IsSpecial(int64_t token) const;

  // The ids IsSpecial holds for, as ascending, disjoint [begin, end) ranges
  // (World: [0, 1) and [65530, 65536)): what a client leaves out when it
  // makes up prompts of ordinary pieces. Scans the vocabulary once.
  std::vector<std::pair<int64_t, int64_t>> SpecialIdRanges() const;

  // "byte", "rwkv_world" or "huggingface", as GetModelInfo reports it.
  const std::string& name() const;

  // Ids the sampler must never pick: ids below vocab_size that carry no bytes
  // and are neither BOS nor EOS (World: 65,530..65,535 of a 65,536-row
  // model). Empty for a tokenizer made from a ModelConfig, whose unused ids
  // stay samplable as they always were. Ascending.
  const std::vector<int64_t>& never_sampled() const;

  int64_t bos_id() const { return bos_id_; }  // -1: none
  bool add_bos() const { return add_bos_; }
  // The first of eos_ids(); -1: none.
  int64_t eos_id() const { return eos_ids_.empty() ? -1 : eos_ids_.front(); }
  // Every id that ends a turn, ascending (a Hugging Face model may have
  // several: Qwen's <|endoftext|> and <|im_end|>).
  const std::vector<int64_t>& eos_ids() const { return eos_ids_; }
  bool IsEos(int64_t token) const;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Tables;

  Tokenizer(std::shared_ptr<const Tables> tables, int64_t bos_id, bool add_bos,
            std::vector<int64_t> eos_ids, int64_t vocab_size);

  // pieces, trie, name, never_sampled; or the Hugging Face tokenizer
  std::shared_ptr<const Tables> tables_;
  int64_t bos_id_;
  bool add_bos_;
  std::vector<int64_t> eos_ids_;
  int64_t vocab_size_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TOKENIZER_H_
