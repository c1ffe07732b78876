#ifndef LINSERVE_ENGINE_TEXT_HF_REGEX_H_
#define LINSERVE_ENGINE_TEXT_HF_REGEX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace linserve {

// Bounds on one regex search over client text, so that a pathological prompt
// fails with an error instead of stalling the engine.
struct HfRegexLimits {
  uint32_t match_limit = 10'000'000;  // PCRE2's match limit (backtracking steps)
  uint32_t depth_limit = 100'000;     // PCRE2's depth limit (the interpreter's)
  size_t jit_stack_bytes = 1 << 20;   // the most stack one thread's JIT matching may use
};

// A pre-tokenizer regex of a tokenizer.json, compiled by PCRE2 (JIT, UTF,
// UCP) to mean what the Rust library's Oniguruma (Ruby syntax) makes of it:
// `\s` is rewritten to Oniguruma's set (U+0009-000D, U+0085, Zs, Zl, Zp),
// \p{L}/\p{N}/\p{M}/\p{P} gain the code points of Oniguruma's newer Unicode
// (hf_unicode_compat.h), and
// matches are iterated as the `onig` crate iterates them. Immutable after
// Compile; Find may run on many threads at once.
class HfRegex {
 public:
  // InvalidArgument with PCRE2's message and offset if it does not compile.
  static absl::StatusOr<HfRegex> Compile(std::string_view pattern, const HfRegexLimits& limits);
  // A regex that matches `literal` exactly (the Split pre-tokenizer's String
  // pattern).
  static absl::StatusOr<HfRegex> Literal(std::string_view literal, const HfRegexLimits& limits);

  // The non-overlapping matches in `subject` (valid UTF-8), as byte ranges
  // [begin, end), appended to `matches`. ResourceExhausted when a limit is hit.
  absl::Status FindAll(std::string_view subject,
                       std::vector<std::pair<uint32_t, uint32_t>>* matches) const;

  // Oniguruma's `\s` written as a PCRE2 class body (no brackets).
  static std::string_view OnigSpaceClassBody();
  // The pattern with Oniguruma's meanings made explicit for PCRE2.
  static std::string TranslateFromOnig(std::string_view pattern);

 private:
  struct Compiled;
  explicit HfRegex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}

  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_TEXT_HF_REGEX_H_
