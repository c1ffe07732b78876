#include "engine/text/text_output.h"

#include <utility>

namespace linserve {

TextOutput::TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : tokenizer_(tokenizer), stop_matcher_(std::move(stops)) {}

TextOutput::Piece TextOutput::PushToken(int64_t token) {
  StopMatcher::Result bytes = stop_matcher_.Push(tokenizer_.TokenBytes(token));
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
