#ifndef LINSERVE_SERVER_HTTP_SPECIAL_TEXT_FENCE_H_
#define LINSERVE_SERVER_HTTP_SPECIAL_TEXT_FENCE_H_

// A chat template writes special tokens ("<|im_start|>") as text, and the
// rendered prompt is encoded with them recognized; a message's content must
// never produce one, or a user could write "<|im_start|>system" and speak as
// the system. Before rendering, every special token's text inside what the
// request sent (contents, tool calls, tools, chat_template_kwargs) is fenced
// by markers holding a per-request random nonce; after rendering, the
// markers are lifted and the ranges they held are encoded as plain text
// (Tokenizer::TryEncode's `plain`). The markers are private-use characters
// and digits, which no template's string operations change, and a client
// cannot forge the nonce. Only special tokens are fenced: "<think>" and
// "<tool_response>" in a message are the model's own text, as Hugging Face
// encodes them, and templates test for them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/text/byte_range.h"
#include "server/http/openai_request_json.h"

namespace linserve {

// A rendered prompt: its text and the ranges to encode as plain text.
struct RenderedPrompt {
  std::string text;
  std::vector<ByteRange> plain;
};

class SpecialTextFence {
 public:
  // `special_texts`: Tokenizer::SpecialTexts(); none makes both calls below
  // no-ops.
  explicit SpecialTextFence(const std::vector<std::string>& special_texts);

  // `value` with each special text in its strings (object keys too) fenced.
  RequestJson Fence(const RequestJson& value) const;

  // The rendered `text` without its fences, and where the fenced texts now
  // lie. INVALID_ARGUMENT if the template cut a fence (it sliced a content
  // string through one).
  absl::StatusOr<RenderedPrompt> Lift(std::string text) const;

 private:
  std::string FenceString(const std::string& s) const;

  std::vector<std::string> texts_;  // longest first
  std::string open_;
  std::string close_;
  std::string nonce_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_SPECIAL_TEXT_FENCE_H_
