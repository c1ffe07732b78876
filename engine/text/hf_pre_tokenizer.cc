#include "engine/text/hf_pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_byte_level.h"
#include "engine/text/hf_unicode.h"

namespace linserve {

namespace {

// GPT-2's pattern, which ByteLevel uses when use_regex is set.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A span of a piece and whether the pattern matched it; the spans of one piece
// cover it without gaps, in order.
struct Span {
  size_t begin;
  size_t end;
  bool is_match;
};

absl::StatusOr<HfSplitBehavior> ParseBehavior(const nlohmann::json& object,
                                              const HfJsonPlace& place,
                                              HfSplitBehavior fallback) {
  const auto it = object.find("behavior");
  if (it == object.end() || it->is_null()) return fallback;
  const HfJsonPlace at = place.Child("behavior");
  if (!it->is_string()) return HfLoadError(at, "not a string");
  const std::string name = it->get<std::string>();
  if (name == "Removed") return HfSplitBehavior::kRemoved;
  if (name == "Isolated") return HfSplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return HfSplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return HfSplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return HfSplitBehavior::kContiguous;
  return HfLoadError(at, absl::StrCat("unknown split behavior \"", name, "\""));
}

// The spans of `piece` given a pattern's matches (the library's
// Pattern::find_matches): gaps between matches become unmatched spans.
void SpansFromMatches(size_t size, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                      std::vector<Span>* spans) {
  if (size == 0) {
    spans->push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (prev != begin) spans->push_back({prev, begin, false});
    spans->push_back({begin, end, true});
    prev = end;
  }
  if (prev != size) spans->push_back({prev, size, false});
}

// Spans where each character for which `is_match` holds is a match of its own.
template <typename Predicate>
void SpansFromCharacters(std::string_view piece, Predicate is_match, std::vector<Span>* spans) {
  size_t last_offset = 0;
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t begin = pos;
    const char32_t cp = NextCodePoint(piece, &pos);
    if (is_match(cp)) {
      if (last_offset < begin) spans->push_back({last_offset, begin, false});
      spans->push_back({begin, pos, true});
      last_offset = pos;
    }
  }
  if (piece.size() > last_offset) spans->push_back({last_offset, piece.size(), false});
}

// Applies a split behavior to the spans (the library's NormalizedString::split)
// and appends the non-empty pieces that remain, as views of `piece`.
void CutPiece(std::string_view piece, std::vector<Span>& spans, HfSplitBehavior behavior,
              bool invert, std::vector<std::string_view>* out) {
  if (invert) {
    for (Span& span : spans) span.is_match = !span.is_match;
  }
  // Pieces as [begin, end) pairs first; merges extend the last one.
  const size_t first = out->size();
  const auto view = [&piece](size_t begin, size_t end) {
    return piece.substr(begin, end - begin);
  };
  const auto extend_last = [&](size_t end) {
    std::string_view& last = out->back();
    last = std::string_view(last.data(), piece.data() + end - last.data());
  };
  switch (behavior) {
    case HfSplitBehavior::kIsolated:
      for (const Span& s : spans) out->push_back(view(s.begin, s.end));
      break;
    case HfSplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out->push_back(view(s.begin, s.end));
      }
      break;
    case HfSplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match == previous_match && out->size() > first) {
          extend_last(s.end);
        } else {
          out->push_back(view(s.begin, s.end));
        }
        previous_match = s.is_match;
      }
      break;
    }
    case HfSplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && out->size() > first) {
          extend_last(s.end);
        } else {
          out->push_back(view(s.begin, s.end));
        }
        previous_match = s.is_match;
      }
      break;
    }
    case HfSplitBehavior::kMergedWithNext: {
      // Backwards: a match joins the piece after it.
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && out->size() > first) {
          std::string_view& last = out->back();
          last = std::string_view(piece.data() + it->begin,
                                  last.data() + last.size() - (piece.data() + it->begin));
        } else {
          out->push_back(view(it->begin, it->end));
        }
        previous_match = it->is_match;
      }
      std::reverse(out->begin() + first, out->end());
      break;
    }
  }
  // Empty pieces never reach the model.
  out->erase(std::remove_if(out->begin() + first, out->end(),
                            [](std::string_view p) { return p.empty(); }),
             out->end());
}

}  // namespace

absl::StatusOr<HfPreTokenizer> HfPreTokenizer::Load(const nlohmann::json& json,
                                                    const HfJsonPlace& place,
                                                    const HfRegexLimits& limits) {
  HfPreTokenizer pre_tokenizer;
  LINSERVE_RETURN_IF_ERROR(pre_tokenizer.AddSteps(json, place, limits));
  return pre_tokenizer;
}

absl::Status HfPreTokenizer::AddSteps(const nlohmann::json& json, const HfJsonPlace& place,
                                      const HfRegexLimits& limits) {
  if (json.is_null()) return absl::OkStatus();
  LINSERVE_ASSIGN_OR_RETURN(const std::string type, ComponentType(json, place));
  Step step;
  if (type == "Sequence") {
    LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json* list,
                              RequiredArray(json, "pretokenizers", place));
    const HfJsonPlace list_place = place.Child("pretokenizers");
    for (size_t i = 0; i < list->size(); ++i) {
      LINSERVE_RETURN_IF_ERROR(AddSteps((*list)[i], list_place.Child(i), limits));
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    LINSERVE_ASSIGN_OR_RETURN(step.add_prefix_space,
                              OptionalBool(json, "add_prefix_space", true, place));
    LINSERVE_ASSIGN_OR_RETURN(const bool use_regex, OptionalBool(json, "use_regex", true, place));
    if (use_regex) {
      absl::StatusOr<HfRegex> regex = HfRegex::Compile(kGpt2Pattern, limits);
      if (!regex.ok()) return HfLoadError(place, regex.status().message());
      step.regex = *std::move(regex);
    }
  } else if (type == "Split") {
    step.kind = Step::Kind::kSplit;
    const auto pattern = json.find("pattern");
    const HfJsonPlace pattern_place = place.Child("pattern");
    if (pattern == json.end() || !pattern->is_object() || pattern->size() != 1) {
      return HfLoadError(pattern_place, "must be {\"Regex\": ...} or {\"String\": ...}");
    }
    const std::string kind = pattern->begin().key();
    const HfJsonPlace value_place = pattern_place.Child(kind);
    if (!pattern->begin().value().is_string()) return HfLoadError(value_place, "not a string");
    const std::string text = pattern->begin().value().get<std::string>();
    absl::StatusOr<HfRegex> regex;
    if (kind == "Regex") {
      regex = HfRegex::Compile(text, limits);
    } else if (kind == "String") {
      regex = HfRegex::Literal(text, limits);
    } else {
      return HfLoadError(pattern_place, absl::StrCat("unknown pattern kind \"", kind, "\""));
    }
    if (!regex.ok()) return HfLoadError(value_place, regex.status().message());
    step.regex = *std::move(regex);
    LINSERVE_ASSIGN_OR_RETURN(step.behavior,
                              ParseBehavior(json, place, HfSplitBehavior::kIsolated));
    LINSERVE_ASSIGN_OR_RETURN(step.invert, OptionalBool(json, "invert", false, place));
  } else if (type == "Digits") {
    step.kind = Step::Kind::kDigits;
    LINSERVE_ASSIGN_OR_RETURN(const bool individual,
                              OptionalBool(json, "individual_digits", false, place));
    step.behavior = individual ? HfSplitBehavior::kIsolated : HfSplitBehavior::kContiguous;
  } else if (type == "Punctuation") {
    step.kind = Step::Kind::kPunctuation;
    LINSERVE_ASSIGN_OR_RETURN(step.behavior,
                              ParseBehavior(json, place, HfSplitBehavior::kIsolated));
  } else {
    return HfLoadError(place.Child("type"),
                       absl::StrCat("the pre-tokenizer \"", type,
                                    "\" is not supported (only ByteLevel, Split, Digits, "
                                    "Punctuation and Sequence)"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

bool HfPreTokenizer::ends_byte_level() const {
  return !steps_.empty() && steps_.back().kind == Step::Kind::kByteLevel;
}

absl::Status HfPreTokenizer::Run(size_t step_index, std::string_view piece,
                                 absl::FunctionRef<void(std::string_view)> emit) const {
  if (piece.empty()) return absl::OkStatus();
  if (step_index == steps_.size()) {
    emit(piece);
    return absl::OkStatus();
  }
  const Step& step = steps_[step_index];
  // Buffers per step, reused by every call on this thread: the first step
  // sees the whole text, and fresh buffers of its size would be paged in on
  // every encode.
  struct Scratch {
    std::vector<std::pair<uint32_t, uint32_t>> matches;
    std::vector<Span> spans;
    std::vector<std::string_view> parts;
    std::string mapped;
  };
  thread_local std::vector<Scratch> scratch_by_step;
  if (scratch_by_step.size() < steps_.size()) scratch_by_step.resize(steps_.size());
  Scratch& scratch = scratch_by_step[step_index];
  std::vector<std::pair<uint32_t, uint32_t>>& matches = scratch.matches;
  std::vector<Span>& spans = scratch.spans;
  std::vector<std::string_view>& parts = scratch.parts;
  matches.clear();
  spans.clear();
  parts.clear();
  switch (step.kind) {
    case Step::Kind::kSplit: {
      LINSERVE_RETURN_IF_ERROR(step.regex->FindAll(piece, &matches));
      SpansFromMatches(piece.size(), matches, &spans);
      CutPiece(piece, spans, step.behavior, step.invert, &parts);
      break;
    }
    case Step::Kind::kDigits:
      SpansFromCharacters(piece, IsNumeric, &spans);
      CutPiece(piece, spans, step.behavior, /*invert=*/false, &parts);
      break;
    case Step::Kind::kPunctuation:
      SpansFromCharacters(piece, IsPunctuation, &spans);
      CutPiece(piece, spans, step.behavior, /*invert=*/false, &parts);
      break;
    case Step::Kind::kByteLevel: {
      std::string prefixed;
      if (step.add_prefix_space && piece[0] != ' ') {
        prefixed = " ";
        prefixed += piece;
        piece = prefixed;
      }
      if (step.regex.has_value()) {
        LINSERVE_RETURN_IF_ERROR(step.regex->FindAll(piece, &matches));
        SpansFromMatches(piece.size(), matches, &spans);
        CutPiece(piece, spans, HfSplitBehavior::kIsolated, /*invert=*/false, &parts);
      } else {
        parts.push_back(piece);
      }
      // The pieces go on in byte-level characters.
      std::string& mapped = scratch.mapped;
      for (std::string_view part : parts) {
        mapped.clear();
        AppendByteLevel(part, &mapped);
        LINSERVE_RETURN_IF_ERROR(Run(step_index + 1, mapped, emit));
      }
      return absl::OkStatus();
    }
  }
  for (std::string_view part : parts) LINSERVE_RETURN_IF_ERROR(Run(step_index + 1, part, emit));
  return absl::OkStatus();
}

absl::Status HfPreTokenizer::ForEachPiece(std::string_view text,
                                          absl::FunctionRef<void(std::string_view)> emit) const {
  return Run(0, text, emit);
}

}  // namespace linserve
