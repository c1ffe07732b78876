#ifndef LINSERVE_ENGINE_TEXT_HF_DECODER_H_
#define LINSERVE_ENGINE_TEXT_HF_DECODER_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/text/hf_json.h"
#include "nlohmann/json.hpp"

namespace linserve {

// A tokenizer.json "decoder": ByteLevel, or a Sequence of ByteLevel ones.
// Both turn each token into bytes on its own, so a token's bytes can be
// streamed as it is sampled; the UTF-8 decoding the library does at the end
// (String::from_utf8_lossy) is Utf8Assembler's job.
struct HfDecoder {
  // Checks that `json` (the "decoder" value) is one the per-token form covers.
  static absl::Status Check(const nlohmann::json& json, const HfJsonPlace& place);

  // The bytes of one token whose text is `token`: its byte-level characters
  // mapped back to bytes, or, where some character has no byte (an added
  // token such as "<think> "), the token's own UTF-8 as the library does.
  static std::string TokenBytes(std::string_view token);
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_DECODER_H_
