#include "server/common/reasoning_split.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kOpenG1 = "<think";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t PartialTagAtEnd(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

absl::StatusOr<ReasoningFormat> ParseReasoningFormat(std::string_view name) {
  if (name == "none") return ReasoningFormat::kNone;
  if (name == "qwen3") return ReasoningFormat::kQwen3;
  if (name == "rwkv_g1") return ReasoningFormat::kRwkvG1;
  return absl::InvalidArgumentError(absl::StrCat("reasoning format \"", std::string(name),
                                                 "\" is not one of none, qwen3, rwkv_g1"));
}

const char* ReasoningFormatName(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kQwen3:
      return "qwen3";
    case ReasoningFormat::kRwkvG1:
      return "rwkv_g1";
    default:
      return "none";
  }
}

bool PromptOpensReasoning(ReasoningFormat format, std::string_view prompt) {
  if (format == ReasoningFormat::kNone) return false;
  while (!prompt.empty() && IsSpace(prompt.back())) prompt.remove_suffix(1);
  const std::string_view tag =
      format == ReasoningFormat::kRwkvG1 && !(prompt.size() >= kOpen.size() &&
                                              prompt.substr(prompt.size() - kOpen.size()) == kOpen)
          ? kOpenG1
          : kOpen;
  return prompt.size() >= tag.size() && prompt.substr(prompt.size() - tag.size()) == tag;
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format, bool starts_inside)
    : format_(format),
      phase_(format == ReasoningFormat::kNone ? Phase::kContent
             : starts_inside                  ? Phase::kReasoning
                                              : Phase::kStart),
      line_start_(format != ReasoningFormat::kNone),
      open_tag_unclosed_(format == ReasoningFormat::kRwkvG1 && starts_inside) {}

ReasoningSplitter::Split ReasoningSplitter::Push(std::string_view text) {
  held_.append(text.data(), text.size());
  Split out;
  Run(out, /*at_end=*/false);
  return out;
}

ReasoningSplitter::Split ReasoningSplitter::Flush() {
  Split out;
  Run(out, /*at_end=*/true);
  return out;
}

bool ReasoningSplitter::PassLineStart() {
  if (!line_start_) return true;
  size_t drop = 0;
  while (drop < held_.size() && held_[drop] == '\n') ++drop;
  held_.erase(0, drop);
  if (held_.empty()) return false;
  line_start_ = false;
  return true;
}

void ReasoningSplitter::Run(Split& out, bool at_end) {
  while (true) {
    if (phase_ == Phase::kStart) {
      size_t first = 0;
      while (first < held_.size() && IsSpace(held_[first])) ++first;
      std::string_view rest = std::string_view(held_).substr(first);
      const std::string_view shortest = format_ == ReasoningFormat::kRwkvG1 ? kOpenG1 : kOpen;
      if (!at_end &&
          (rest.empty() || (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest))) {
        return;  // may still become the opening tag
      }
      size_t tag = 0;
      if (rest.substr(0, kOpen.size()) == kOpen) {
        tag = kOpen.size();
      } else if (rest.substr(0, shortest.size()) == shortest) {
        tag = shortest.size();
      }
      if (tag == 0) {
        phase_ = Phase::kContent;
        line_start_ = false;  // an answer without reasoning is kept as written
        continue;
      }
      held_.erase(0, first + tag);
      phase_ = Phase::kReasoning;
      line_start_ = true;
      continue;
    }
    if (phase_ == Phase::kReasoning) {
      if (open_tag_unclosed_) {
        // A G1 prompt ends in "<think": the model may close the tag itself.
        if (held_.empty()) return;
        if (held_[0] == '>') held_.erase(0, 1);
        open_tag_unclosed_ = false;
        continue;
      }
      if (!PassLineStart()) return;
      const size_t close = held_.find(kClose);
      if (close != std::string::npos) {
        size_t end = close;
        while (end > 0 && held_[end - 1] == '\n') --end;
        out.reasoning.append(held_, 0, end);
        held_.erase(0, close + kClose.size());
        phase_ = Phase::kContent;
        line_start_ = true;
        continue;
      }
      if (at_end) {
        out.reasoning += held_;
        held_.clear();
        return;
      }
      // Hold back a possible start of the closing tag and the newlines before it.
      size_t keep = PartialTagAtEnd(held_, kClose);
      size_t end = held_.size() - keep;
      while (end > 0 && held_[end - 1] == '\n') --end;
      out.reasoning.append(held_, 0, end);
      held_.erase(0, end);
      return;
    }
    // Content.
    if (!PassLineStart()) return;
    out.content += held_;
    held_.clear();
    return;
  }
}

}  // namespace linserve
