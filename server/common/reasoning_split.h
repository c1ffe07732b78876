#ifndef LINSERVE_SERVER_HTTP_REASONING_SPLIT_H_
#define LINSERVE_SERVER_HTTP_REASONING_SPLIT_H_

// A thinking model's turn, split into its reasoning and its answer as the
// text streams (OpenAI clients read them from `reasoning_content` and
// `content`, as vLLM, SGLang and DeepSeek's API send them).

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace linserve {

enum class ReasoningFormat {
  kNone,    // no reasoning: everything is the answer
  kQwen3,   // <think>…</think> (Qwen3, Qwen3.5, DeepSeek-R1)
  kRwkvG1,  // RWKV-7 G1: <think … </think> (the opening tag's '>' optional)
};

// "none", "qwen3", "rwkv_g1" (--reasoning_format).
absl::StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name);
const char* ReasoningFormatName(ReasoningFormat format);

// Splits a stream whatever its pieces: every split of a text gives the same
// reasoning and answer as the text pushed whole (the tests push it at every
// boundary). The reasoning is what lies between the tags, without the
// newlines next to them; the answer is what follows the closing tag, without
// its leading newlines. A turn that does not open with the tag (after
// whitespace) is all answer, unless the generation prompt already opened it
// (`starts_inside`: a prompt ending in "<think>\n", or for G1 in "<think",
// when a first '>' from the model is the tag's). A turn cut inside its
// reasoning keeps what it has as reasoning. Not thread-safe.
class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningFormat format, bool starts_inside);

  struct Split {
    std::string reasoning;
    std::string content;
  };
  // The text that can no longer change side; bytes that may still be part
  // of a tag, or newlines that may still precede the closing tag, wait.
  Split Push(std::string_view text);
  // The turn ended: whatever waits, on its side.
  Split Flush();

  // Whether the reasoning is still open (for a turn cut by max_tokens).
  bool in_reasoning() const { return phase_ == Phase::kReasoning; }

 private:
  enum class Phase { kStart, kReasoning, kContent };
  void Run(Split& out, bool at_end);
  // At the start of a side, drops held_'s leading newlines; false while
  // nothing else is held yet.
  bool PassLineStart();

  ReasoningFormat format_;
  Phase phase_;
  std::string held_;        // bytes not yet given a side
  bool line_start_ = true;  // newlines here are dropped (the start of a side)
  // The prompt opened G1's reasoning with "<think": a first '>' is the tag's.
  bool open_tag_unclosed_ = false;
};

// Whether a rendered generation prompt leaves the reasoning open (it ends in
// the opening tag and whitespace).
bool PromptOpensReasoning(ReasoningFormat format, std::string_view prompt);

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_REASONING_SPLIT_H_
