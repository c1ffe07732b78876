#ifndef LINSERVE_ENGINE_TEXT_HF_MODEL_FILES_H_
#define LINSERVE_ENGINE_TEXT_HF_MODEL_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/text/tokenizer.h"

namespace linserve {

// True if the model directory `dir` holds a tokenizer.json.
bool HasHfTokenizer(const std::string& dir);

// The special ids a Hugging Face model directory declares across its files:
//  - eos_ids: the union of generation_config.json's eos_token_id (a number or
//    a list), config.json's and its text_config's, and tokenizer_config.json's
//    eos_token (Qwen3.5 names <|endoftext|> in one and ends turns with
//    <|im_end|> in another: each ends a turn);
//  - prefix/suffix ids: tokenizer.json's post-processor, overridden by
//    tokenizer_config.json's add_bos_token / add_eos_token where present.
// Absent files contribute nothing; malformed ones are refused by name.
absl::StatusOr<Tokenizer::HfSpecials> ReadHfSpecials(const std::string& dir,
                                                     const HfTokenizer& hf);

// The tokenizer of a model directory holding tokenizer.json, for a model
// with `vocab_size` logits rows.
absl::StatusOr<Tokenizer> LoadHfTokenizerDirectory(const std::string& dir, int64_t vocab_size,
                                                   const HfTokenizerOptions& options);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_MODEL_FILES_H_
