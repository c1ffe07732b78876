#ifndef LINSERVE_ENGINE_TEXT_OUTPUT_H_
#define LINSERVE_ENGINE_TEXT_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/stop_matcher.h"
#include "engine/text/tokenizer.h"
#include "engine/text/utf8_assembler.h"

namespace linserve {

// The text of one generation stream, token by token:
//   token -> Tokenizer::TokenBytes -> StopMatcher -> Utf8Assembler -> text.
//
// Stop matching runs on the raw bytes, before UTF-8 assembly, so that a stop
// is found exactly where the model's bytes contain it, as in the non-streamed
// result (decode all bytes, cut at the first stop). For valid UTF-8 either
// order gives the same text, but the assembler rewrites invalid bytes as
// U+FFFD: matching after it, a stop containing U+FFFD would fire on
// replacements for bytes the model never produced as that character, and a
// stop that is not itself valid UTF-8 (stops are byte strings) could never
// match. Matching first, the assembler sees the final, already cut byte
// stream, so an incomplete character just before the cut becomes one U+FFFD,
// exactly as in the whole-text decode.
//
// EOS and max_new_tokens are the caller's to detect; special tokens add no
// text unless `skip_special_tokens` is false (a Hugging Face tokenizer's
// "<|im_start|>" then shows; EOS ids never do: they end the text). Not
// thread-safe.
class TextOutput {
 public:
  TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stops,
             bool skip_special_tokens = true);

  struct Piece {
    std::string text;  // valid UTF-8, possibly empty
    bool stopped;      // a stop sequence ended here; push no more tokens
  };

  // The text `token` completes. On a stop, `text` also holds the flushed
  // remainder, so there is nothing left for Finish.
  Piece PushToken(int64_t token);

  // Ends the stream (EOS, length limit, cancellation): flushes the bytes held
  // back as a possible stop prefix, then any incomplete character as U+FFFD.
  std::string Finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  StopMatcher stop_matcher_;
  Utf8Assembler utf8_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_OUTPUT_H_
