#include "engine/text/hf_added_tokens.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_unicode.h"

namespace linserve {

namespace {

// The last character of `text`, or 0 if empty.
char32_t LastCodePoint(std::string_view text) {
  if (text.empty()) return 0;
  size_t begin = text.size() - 1;
  while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
  return NextCodePoint(text, &begin);
}

// Where the whitespace that ends `text` begins.
size_t TrailingSpaceBegin(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = end - 1;
    while (begin > 0 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
    size_t pos = begin;
    if (!IsWhitespace(NextCodePoint(text, &pos))) break;
    end = begin;
  }
  return end;
}

// The length of the whitespace that starts `text`.
size_t LeadingSpaceLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!IsWhitespace(NextCodePoint(text, &next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

absl::StatusOr<HfAddedTokens> HfAddedTokens::Load(
    const nlohmann::json& json, const HfJsonPlace& place, const HfNormalizer& normalizer,
    absl::FunctionRef<int64_t(std::string_view)> model_id_of, int64_t model_vocab_size) {
  HfAddedTokens added;
  if (json.is_null()) return added;
  if (!json.is_array()) return HfLoadError(place, "not an array");
  absl::flat_hash_set<int64_t> ids;
  absl::flat_hash_set<std::string> contents;
  int64_t max_assigned = -1;  // the highest id given so far
  for (size_t i = 0; i < json.size(); ++i) {
    const nlohmann::json& entry = json[i];
    const HfJsonPlace at = place.Child(i);
    if (!entry.is_object()) return HfLoadError(at, "not an object");
    HfAddedToken token;
    const auto id = entry.find("id");
    if (id == entry.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() >= (int64_t{1} << 31)) {
      return HfLoadError(at.Child("id"), "missing or not an integer in [0, 2^31)");
    }
    token.id = id->get<int64_t>();
    if (!ids.insert(token.id).second) {
      return HfLoadError(at.Child("id"), absl::StrCat("duplicate added-token id ", token.id));
    }
    LINSERVE_ASSIGN_OR_RETURN(token.content, RequiredString(entry, "content", at));
    if (token.content.empty()) return HfLoadError(at.Child("content"), "empty");
    if (!contents.insert(token.content).second) continue;
    // The library's AddedVocabulary::add_tokens.
    const int64_t model_id = model_id_of(token.content);
    if (model_id >= 0) {
      token.id = model_id;
    } else if (max_assigned < 0) {
      token.id = model_vocab_size;
    } else {
      token.id = max_assigned >= model_vocab_size ? max_assigned + 1 : model_vocab_size;
    }
    max_assigned = std::max(max_assigned, token.id);
    LINSERVE_ASSIGN_OR_RETURN(token.special, OptionalBool(entry, "special", false, at));
    LINSERVE_ASSIGN_OR_RETURN(token.normalized,
                              OptionalBool(entry, "normalized", !token.special, at));
    LINSERVE_ASSIGN_OR_RETURN(token.lstrip, OptionalBool(entry, "lstrip", false, at));
    LINSERVE_ASSIGN_OR_RETURN(token.rstrip, OptionalBool(entry, "rstrip", false, at));
    LINSERVE_ASSIGN_OR_RETURN(token.single_word, OptionalBool(entry, "single_word", false, at));
    added.tokens_.push_back(std::move(token));
  }
  for (size_t i = 0; i < added.tokens_.size(); ++i) {
    const HfAddedToken& token = added.tokens_[i];
    Matcher& matcher = token.normalized ? added.normalized_ : added.raw_;
    std::string pattern = token.normalized ? normalizer.Apply(token.content) : token.content;
    if (pattern.empty()) continue;
    // The first of two tokens with one pattern wins.
    if (std::find(matcher.patterns.begin(), matcher.patterns.end(), pattern) !=
        matcher.patterns.end()) {
      continue;
    }
    matcher.patterns.push_back(std::move(pattern));
    matcher.token_index.push_back(i);
  }
  Build(&added.raw_);
  Build(&added.normalized_);
  return added;
}

void HfAddedTokens::Build(Matcher* matcher) {
  std::vector<ByteTrie::Piece> pieces;
  for (size_t k = 0; k < matcher->patterns.size(); ++k) {
    pieces.push_back({matcher->patterns[k], static_cast<int32_t>(k)});
    matcher->first_byte[static_cast<uint8_t>(matcher->patterns[k][0])] = true;
  }
  matcher->trie = ByteTrie::Build(pieces);
}

namespace {

// Whether bytes [begin, end) overlap one of `ranges` (sorted, disjoint).
bool Overlaps(absl::Span<const ByteRange> ranges, size_t begin, size_t end) {
  for (const ByteRange& range : ranges) {
    if (range.begin >= end) return false;
    if (range.end > begin) return true;
  }
  return false;
}

}  // namespace

void HfAddedTokens::SplitWith(const Matcher& matcher, std::string_view text,
                              absl::Span<const ByteRange> plain,
                              std::vector<HfSegment>* out) const {
  size_t start_offset = 0;  // where the text not yet emitted begins
  size_t pos = 0;
  const auto push_text = [&](size_t begin, size_t end) {
    out->push_back({std::string(text.substr(begin, end - begin)), -1, Overlaps(plain, begin, end)});
  };
  while (pos < text.size()) {
    if (!matcher.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const ByteTrie::Match match = matcher.trie.LongestPrefix(text.substr(pos));
    if (match.id < 0 || Overlaps(plain, pos, pos + match.length)) {
      ++pos;
      continue;
    }
    const HfAddedToken& token = tokens_[matcher.token_index[match.id]];
    size_t begin = pos;
    size_t end = pos + match.length;
    pos = end;  // matches never overlap, whether this one is kept or not
    if (token.single_word) {
      const bool space_before = begin == 0 || !IsWordChar(LastCodePoint(text.substr(0, begin)));
      size_t after = end;
      const bool space_after =
          end == text.size() || !IsWordChar(NextCodePoint(text, &after));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) begin = std::max(TrailingSpaceBegin(text.substr(0, begin)), start_offset);
    if (token.rstrip) end += LeadingSpaceLength(text.substr(end));
    if (start_offset < begin) push_text(start_offset, begin);
    // As the library: the search goes on from the match's own end, so a token
    // may start inside what an rstrip swallowed; it is kept all the same.
    out->push_back({std::string(), token.id});
    start_offset = end;
  }
  if (start_offset < text.size()) push_text(start_offset, text.size());
}

std::vector<HfSegment> HfAddedTokens::Split(std::string_view text, const HfNormalizer& normalizer,
                                            bool recognize,
                                            absl::Span<const ByteRange> plain) const {
  std::vector<HfSegment> raw_segments;
  if (recognize && !raw_.empty()) {
    SplitWith(raw_, text, plain, &raw_segments);
  } else if (!text.empty()) {
    raw_segments.push_back({std::string(text), -1, Overlaps(plain, 0, text.size())});
  }
  std::vector<HfSegment> segments;
  for (HfSegment& segment : raw_segments) {
    if (segment.id >= 0) {
      segments.push_back(std::move(segment));
      continue;
    }
    std::string normalized = normalizer.empty() ? std::move(segment.text)
                                                : normalizer.Apply(segment.text);
    if (recognize && !normalized_.empty() && !segment.holds_plain) {
      SplitWith(normalized_, normalized, {}, &segments);
    } else if (!normalized.empty()) {
      segments.push_back({std::move(normalized), -1});
    }
  }
  return segments;
}

}  // namespace linserve
