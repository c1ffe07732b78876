#include "engine/text/text_output.h"

#include <utility>

namespace linserve {

TextOutput::TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stops,
                       bool skip_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      stop_matcher_(std::move(stops)) {}

TextOutput::Piece TextOutput::PushToken(int64_t token) {
  const bool skip = skip_special_tokens_ || tokenizer_.IsEos(token);
  StopMatcher::Result bytes = stop_matcher_.Push(tokenizer_.TokenBytes(token, skip));
  Piece piece{utf8_.Push(bytes.emit), bytes.stopped};
  if (bytes.stopped) piece.text += utf8_.Flush();
  return piece;
}

std::string TextOutput::Finish() {
  std::string text = utf8_.Push(stop_matcher_.Flush());
  text += utf8_.Flush();
  return text;
}

}  // namespace linserve
