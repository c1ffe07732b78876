#include "engine/text/hf_tokenizer.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/text/hf_decoder.h"
#include "engine/text/hf_unicode.h"

namespace linserve {

absl::StatusOr<std::shared_ptr<const HfTokenizer>> HfTokenizer::FromFile(
    const std::string& path, const HfTokenizerOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return FromJson(text.str(), path, options);
}

absl::StatusOr<std::shared_ptr<const HfTokenizer>> HfTokenizer::FromJson(
    std::string_view json_text, std::string_view file, const HfTokenizerOptions& options) {
  HfModelTables tables;
  LINSERVE_ASSIGN_OR_RETURN(const nlohmann::json json,
                            ParseHfJson(json_text, file, options.max_json_depth, &tables));
  const HfJsonPlace root{std::string(file), ""};
  if (!json.is_object()) return HfLoadError(root, "not a JSON object");
  const auto field = [&json](std::string_view key) -> const nlohmann::json& {
    static const nlohmann::json* const kNull = new nlohmann::json();
    const auto it = json.find(key);
    return it == json.end() ? *kNull : *it;
  };

  auto tokenizer = std::shared_ptr<HfTokenizer>(new HfTokenizer());
  LINSERVE_ASSIGN_OR_RETURN(tokenizer->normalizer_,
                            HfNormalizer::Load(field("normalizer"), root.Child("normalizer")));
  LINSERVE_ASSIGN_OR_RETURN(
      tokenizer->pre_tokenizer_,
      HfPreTokenizer::Load(field("pre_tokenizer"), root.Child("pre_tokenizer"), options.regex));
  LINSERVE_ASSIGN_OR_RETURN(tokenizer->bpe_,
                            HfBpe::Load(field("model"), root.Child("model"),
                                        options.cache_capacity, &tables));
  LINSERVE_ASSIGN_OR_RETURN(
      tokenizer->added_,
      HfAddedTokens::Load(field("added_tokens"), root.Child("added_tokens"),
                          tokenizer->normalizer_,
                          [&tokenizer](std::string_view content) {
                            return tokenizer->bpe_->IdOf(content);
                          },
                          tokenizer->bpe_->vocab_entries()));
  LINSERVE_RETURN_IF_ERROR(HfDecoder::Check(field("decoder"), root.Child("decoder")));
  LINSERVE_ASSIGN_OR_RETURN(
      tokenizer->post_processor_,
      HfPostProcessor::Load(field("post_processor"), root.Child("post_processor")));

  // Decoded bytes per id: added tokens' content first (as the library looks
  // them up first), then the vocabulary.
  const HfBpe& bpe = *tokenizer->bpe_;
  int64_t id_end = bpe.id_end();
  for (const HfAddedToken& token : tokenizer->added_.tokens()) {
    id_end = std::max(id_end, token.id + 1);
  }
  tokenizer->token_bytes_.resize(id_end);
  tokenizer->special_.assign(id_end, false);
  for (int64_t id = 0; id < bpe.id_end(); ++id) {
    const std::string_view token = bpe.TokenOf(id);
    if (!token.empty()) tokenizer->token_bytes_[id] = HfDecoder::TokenBytes(token);
  }
  for (const HfAddedToken& token : tokenizer->added_.tokens()) {
    tokenizer->token_bytes_[token.id] = HfDecoder::TokenBytes(token.content);
    tokenizer->special_[token.id] = token.special;
  }
  const std::vector<int64_t>* lists[] = {&tokenizer->post_processor_.prefix_ids,
                                         &tokenizer->post_processor_.suffix_ids};
  for (const std::vector<int64_t>* list : lists) {
    for (int64_t id : *list) {
      if (id >= id_end) {
        return HfLoadError(root.Child("post_processor"),
                           absl::StrCat("the template adds id ", id, ", which is no token"));
      }
    }
  }
  return std::shared_ptr<const HfTokenizer>(std::move(tokenizer));
}

absl::StatusOr<std::vector<int64_t>> HfTokenizer::Encode(std::string_view text,
                                                         HfAddedTokenMode mode,
                                                         absl::Span<const ByteRange> plain) const {
  std::string valid;
  if (!MakeValidUtf8(text, &valid)) {
    if (!plain.empty()) {
      return absl::InvalidArgumentError("a text with plain ranges must be valid UTF-8");
    }
    text = valid;
  }
  const std::vector<HfSegment> segments =
      added_.Split(text, normalizer_, mode == HfAddedTokenMode::kRecognized, plain);
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  for (const HfSegment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    LINSERVE_RETURN_IF_ERROR(pre_tokenizer_.ForEachPiece(
        segment.text, [this, &ids](std::string_view piece) { bpe_->Encode(piece, &ids); }));
  }
  return ids;
}

std::string_view HfTokenizer::TokenBytes(int64_t id, bool skip_special) const {
  if (id < 0 || id >= id_end()) return {};
  if (skip_special && special_[id]) return {};
  return token_bytes_[id];
}

std::string HfTokenizer::Decode(absl::Span<const int64_t> ids, bool skip_special) const {
  std::string bytes;
  for (int64_t id : ids) bytes += TokenBytes(id, skip_special);
  return bytes;
}

int64_t HfTokenizer::IdOf(std::string_view token) const {
  for (const HfAddedToken& added : added_.tokens()) {
    if (added.content == token) return added.id;
  }
  return bpe_->IdOf(token);
}

}  // namespace linserve
