#include "engine/text/hf_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "absl/strings/str_cat.h"
#include "engine/text/hf_unicode_compat.h"

namespace linserve {

struct HfRegex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  bool jit = false;
  size_t jit_stack_bytes = 0;

  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

namespace {

// One match block and one JIT stack per thread, reused by every regex: the
// match context's callback hands the stack to PCRE2.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = nullptr;
  size_t stack_bytes = 0;
  ~ThreadMatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& ThisThreadState() {
  thread_local ThreadMatchState state;
  return state;
}

pcre2_jit_stack* JitStackForThisThread(void* wanted_bytes) {
  ThreadMatchState& state = ThisThreadState();
  const size_t bytes = *static_cast<const size_t*>(wanted_bytes);
  if (state.stack == nullptr || state.stack_bytes < bytes) {
    pcre2_jit_stack_free(state.stack);
    state.stack = pcre2_jit_stack_create(32 * 1024, bytes, nullptr);
    state.stack_bytes = bytes;
  }
  return state.stack;
}

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

std::string_view HfRegex::OnigSpaceClassBody() {
  return "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\p{Zs}\\x{2028}\\x{2029}";
}

std::string HfRegex::TranslateFromOnig(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        if (in_class) {
          out += OnigSpaceClassBody();
        } else {
          out += "[";
          out += OnigSpaceClassBody();
          out += "]";
        }
      } else if (next == 'p' && i + 3 < pattern.size() && pattern[i + 1] == '{' &&
                 pattern[i + 3] == '}' &&
                 !OnigExtraClassBody(pattern.substr(i + 2, 1)).empty()) {
        // \p{L}, \p{N}, \p{M}, \p{P} with the code points Oniguruma's newer
        // Unicode adds.
        const std::string_view extra = OnigExtraClassBody(pattern.substr(i + 2, 1));
        if (!in_class) out += "[";
        out += "\\p{";
        out += pattern[i + 2];
        out += "}";
        out += extra;
        if (!in_class) out += "]";
        i += 3;
      } else if (next == 'S' && !in_class) {
        out += "[^";
        out += OnigSpaceClassBody();
        out += "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      // A POSIX class such as [:alpha:] inside a class: copy through ":]".
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(pattern.substr(i + 1, close + 2 - (i + 1)));
        i = close + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

absl::StatusOr<HfRegex> HfRegex::Compile(std::string_view pattern, const HfRegexLimits& limits) {
  const std::string translated = TranslateFromOnig(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // Ruby syntax, which Oniguruma follows by default: ^ and $ at every line.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (code == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("PCRE2 cannot compile the regex: ",
                                                   Pcre2Message(error), " at offset ", offset));
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  compiled->jit_stack_bytes = limits.jit_stack_bytes;
  compiled->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(compiled->context, limits.match_limit);
  pcre2_set_depth_limit(compiled->context, limits.depth_limit);
  if (compiled->jit) {
    pcre2_jit_stack_assign(compiled->context, &JitStackForThisThread,
                           const_cast<size_t*>(&compiled->jit_stack_bytes));
  }
  return HfRegex(std::move(compiled));
}

absl::StatusOr<HfRegex> HfRegex::Literal(std::string_view literal, const HfRegexLimits& limits) {
  std::string pattern;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    // Escaping every ASCII punctuation character makes it literal; letters,
    // digits and non-ASCII bytes are literal already.
    if (u < 0x80 && !std::isalnum(u)) {
      absl::StrAppend(&pattern, "\\x{", absl::Hex(u), "}");
    } else {
      pattern += c;
    }
  }
  return Compile(pattern, limits);
}

absl::Status HfRegex::FindAll(std::string_view subject,
                              std::vector<std::pair<uint32_t, uint32_t>>* matches) const {
  ThreadMatchState& state = ThisThreadState();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t search_from = 0;
  bool have_last_end = false;
  size_t last_match_end = 0;
  while (search_from <= subject.size()) {
    const int rc =
        compiled_->jit
            ? pcre2_jit_match(compiled_->code, s, subject.size(), search_from, PCRE2_NO_UTF_CHECK,
                              state.data, compiled_->context)
            : pcre2_match(compiled_->code, s, subject.size(), search_from, PCRE2_NO_UTF_CHECK,
                          state.data, compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the tokenizer's regex gave up on this text: ", Pcre2Message(rc),
                       " (the server's --tokenizer_regex_match_limit and "
                       "--tokenizer_regex_depth_limit bound it)"));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    // As the onig crate iterates: an empty match right where the last match
    // ended is refused, and the search moves on by one character.
    if (begin == end && have_last_end && last_match_end == end) {
      if (search_from >= subject.size()) break;
      size_t step = 1;
      while (search_from + step < subject.size() &&
             (static_cast<uint8_t>(subject[search_from + step]) & 0xC0) == 0x80) {
        ++step;
      }
      search_from += step;
      continue;
    }
    matches->emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(end));
    search_from = end;
    have_last_end = true;
    last_match_end = end;
  }
  return absl::OkStatus();
}

}  // namespace linserve
