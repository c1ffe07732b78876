#ifndef LINSERVE_ENGINE_TEXT_HF_ADDED_TOKENS_H_
#define LINSERVE_ENGINE_TEXT_HF_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/text/byte_range.h"
#include "engine/text/byte_trie.h"
#include "engine/text/hf_json.h"
#include "engine/text/hf_normalizer.h"
#include "nlohmann/json.hpp"

namespace linserve {

// One entry of tokenizer.json's "added_tokens".
struct HfAddedToken {
  int64_t id = -1;
  std::string content;
  bool special = false;      // hidden from output when skip_special_tokens
  bool normalized = false;   // matched on the normalized text, not the raw text
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool single_word = false;  // matches only between non-word characters
};

// A stretch of text: an added token (id >= 0) or text for the pre-tokenizer.
struct HfSegment {
  std::string text;  // the normalized text when id < 0
  int64_t id = -1;
  bool holds_plain = false;  // overlaps a range where no token is recognized
};


// Finds added tokens in text as the library's AddedVocabulary does: first the
// non-normalized tokens in the raw text, then, in each stretch between them,
// after normalizing it, the normalized ones; leftmost, longest first.
class HfAddedTokens {
 public:
  // Ids are assigned as the library assigns them, whatever the file's "id"
  // says (the library only warns): a token whose content is in the model's
  // vocabulary takes the model's id (`model_id_of`, -1 if none); the others
  // take the next id from `model_vocab_size` (the number of vocabulary
  // entries) on; a second token with the same content is dropped. Files the
  // library saved carry exactly these ids.
  static absl::StatusOr<HfAddedTokens> Load(
      const nlohmann::json& json, const HfJsonPlace& place, const HfNormalizer& normalizer,
      absl::FunctionRef<int64_t(std::string_view)> model_id_of, int64_t model_vocab_size);

  // Splits `text` (valid UTF-8) into segments, normalizing the text between
  // tokens. With `recognize` false no token is matched: the whole text is
  // normalized as one segment. No token is matched where it would overlap a
  // `plain` range (sorted, disjoint): a chat message's "<|im_start|>" inside
  // a rendered prompt stays text. A stretch between raw tokens that overlaps
  // one is not searched for normalized tokens at all: its offsets do not
  // survive normalizing.
  std::vector<HfSegment> Split(std::string_view text, const HfNormalizer& normalizer,
                               bool recognize, absl::Span<const ByteRange> plain = {}) const;

  const std::vector<HfAddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    ByteTrie trie;
    std::vector<size_t> token_index;  // trie id -> index in tokens_
    std::array<bool, 256> first_byte{};
    std::vector<std::string> patterns;  // what the trie's pieces view
    bool empty() const { return token_index.empty(); }
  };

  // Appends the segments of `text` (the matcher's tokens cut out, except
  // where they overlap `plain`) to `out`; text segments keep `text`'s bytes.
  void SplitWith(const Matcher& matcher, std::string_view text, absl::Span<const ByteRange> plain,
                 std::vector<HfSegment>* out) const;
  static void Build(Matcher* matcher);

  std::vector<HfAddedToken> tokens_;
  Matcher raw_;         // normalized: false
  Matcher normalized_;  // normalized: true, their content normalized
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_ADDED_TOKENS_H_
