#include "engine/text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/text/byte_trie.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/base/status_macros.h"
#include "engine/text/world_vocabulary.h"

namespace linserve {

// What every copy of one tokenizer shares; immutable once built.
struct Tokenizer::Tables {
  std::string name;
  // Every piece, concatenated in id order: the bytes of id t are
  // [piece_starts[t], piece_starts[t + 1]) (empty for ids without a piece).
  std::string piece_bytes;
  std::vector<uint32_t> piece_starts;
  ByteTrie trie;
  std::vector<int64_t> never_sampled;
  // A Hugging Face tokenizer; pieces and trie stay empty then.
  std::shared_ptr<const HfTokenizer> hf;
  std::vector<int64_t> hf_prefix_ids;
  std::vector<int64_t> hf_suffix_ids;
  // Bytes per token to expect when sizing Encode's result: exact for byte
  // vocabularies, a rough average for World text.
  size_t bytes_per_token_estimate = 1;

  // One piece per byte (id = byte value). Ids from 256 up to `vocab_size` go
  // to never_sampled when `mask_unused` is set.
  static std::shared_ptr<Tables> ForBytes(int64_t vocab_size, bool mask_unused);

  std::string_view Piece(int64_t token) const {
    if (hf != nullptr) return hf->TokenBytes(token, /*skip_special=*/true);
    if (token < 0 || token + 1 >= static_cast<int64_t>(piece_starts.size())) return {};
    const uint32_t start = piece_starts[token];
    return std::string_view(piece_bytes).substr(start, piece_starts[token + 1] - start);
  }
};

namespace {

constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

std::vector<int64_t> EosIds(int64_t eos_id) {
  return eos_id >= 0 ? std::vector<int64_t>{eos_id} : std::vector<int64_t>{};
}

}  // namespace

std::shared_ptr<Tokenizer::Tables> Tokenizer::Tables::ForBytes(int64_t vocab_size,
                                                               bool mask_unused) {
  auto tables = std::make_shared<Tables>();
  tables->name = "byte";
  for (int b = 0; b < kNumByteTokens; ++b) {
    tables->piece_starts.push_back(static_cast<uint32_t>(b));
    tables->piece_bytes.push_back(static_cast<char>(b));
  }
  tables->piece_starts.push_back(kNumByteTokens);
  std::vector<ByteTrie::Piece> pieces;
  for (int b = 0; b < kNumByteTokens; ++b) pieces.push_back({tables->Piece(b), b});
  tables->trie = ByteTrie::Build(pieces);
  if (mask_unused) {
    for (int64_t id = kNumByteTokens; id < vocab_size; ++id) tables->never_sampled.push_back(id);
  }
  return tables;
}

Tokenizer::Tokenizer(std::shared_ptr<const Tables> tables, int64_t bos_id, bool add_bos,
                     std::vector<int64_t> eos_ids, int64_t vocab_size)
    : tables_(std::move(tables)),
      bos_id_(bos_id),
      add_bos_(add_bos),
      eos_ids_(std::move(eos_ids)),
      vocab_size_(vocab_size) {}

Tokenizer::Tokenizer(const ModelConfig& config)
    : bos_id_(config.bos_id),
      add_bos_(config.add_bos),
      eos_ids_(EosIds(config.eos_id)),
      vocab_size_(config.vocab_size) {
  // Requests build one of these each; the byte tables are the same for all.
  static const std::shared_ptr<const Tables>* const kTables =
      new std::shared_ptr<const Tables>(Tables::ForBytes(0, /*mask_unused=*/false));
  tables_ = *kTables;
}

Tokenizer Tokenizer::Bytes(int64_t vocab_size) {
  return Tokenizer(Tables::ForBytes(vocab_size, /*mask_unused=*/true), /*bos_id=*/-1,
                   /*add_bos=*/false, /*eos_ids=*/{}, vocab_size);
}

absl::StatusOr<Tokenizer> Tokenizer::World(std::string_view vocabulary, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > kMaxVocabSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size = ", vocab_size, " is outside [1, ", kMaxVocabSize, "]"));
  }
  LINSERVE_ASSIGN_OR_RETURN(std::vector<WorldVocabularyEntry> entries,
                            ParseWorldVocabulary(vocabulary, vocab_size));
  auto tables = std::make_shared<Tables>();
  tables->name = "rwkv_world";
  tables->bytes_per_token_estimate = 4;  // English runs about 4, CJK about 3
  const int64_t num_ids = entries.empty() ? 1 : entries.back().id + 1;
  tables->piece_starts.assign(num_ids + 1, 0);
  size_t total_bytes = 0;
  for (const WorldVocabularyEntry& entry : entries) total_bytes += entry.bytes.size();
  tables->piece_bytes.reserve(total_bytes);
  // Ids rise strictly, so each entry's start fills the gap of ids before it.
  int64_t next_id = 0;
  for (const WorldVocabularyEntry& entry : entries) {
    for (; next_id <= entry.id; ++next_id) {
      tables->piece_starts[next_id] = static_cast<uint32_t>(tables->piece_bytes.size());
    }
    tables->piece_bytes += entry.bytes;
  }
  tables->piece_starts[num_ids] = static_cast<uint32_t>(tables->piece_bytes.size());

  std::vector<ByteTrie::Piece> pieces;
  pieces.reserve(entries.size());
  bool single_byte[kNumByteTokens] = {};
  for (const WorldVocabularyEntry& entry : entries) {
    pieces.push_back({tables->Piece(entry.id), static_cast<int32_t>(entry.id)});
    if (entry.bytes.size() == 1) single_byte[static_cast<uint8_t>(entry.bytes[0])] = true;
  }
  // Greedy encoding can always fall back to one byte only if each has a piece.
  for (int b = 0; b < kNumByteTokens; ++b) {
    if (!single_byte[b]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "the vocabulary has no piece for the byte 0x%02X, so some text could not be encoded", b));
    }
  }
  tables->trie = ByteTrie::Build(pieces);
  for (int64_t id = 1; id < vocab_size; ++id) {
    if (tables->Piece(id).empty()) tables->never_sampled.push_back(id);
  }
  return Tokenizer(std::move(tables), /*bos_id=*/-1, /*add_bos=*/false, /*eos_ids=*/{0},
                   vocab_size);
}

absl::StatusOr<Tokenizer> Tokenizer::HuggingFace(std::shared_ptr<const HfTokenizer> hf,
                                                 HfSpecials specials, int64_t vocab_size) {
  if (vocab_size < 1 || vocab_size > kMaxVocabSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size = ", vocab_size, " is outside [1, ", kMaxVocabSize, "]"));
  }
  if (hf->id_end() > vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the tokenizer has token id ", hf->id_end() - 1, ", past the model's ", vocab_size,
        " embedding rows"));
  }
  const std::vector<int64_t>* lists[] = {&specials.eos_ids, &specials.prefix_ids,
                                         &specials.suffix_ids};
  for (const std::vector<int64_t>* list : lists) {
    for (int64_t id : *list) {
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "special token id ", id, " is outside the model's ", vocab_size, " embedding rows"));
      }
    }
  }
  std::sort(specials.eos_ids.begin(), specials.eos_ids.end());
  specials.eos_ids.erase(std::unique(specials.eos_ids.begin(), specials.eos_ids.end()),
                         specials.eos_ids.end());
  auto tables = std::make_shared<Tables>();
  tables->name = "huggingface";
  tables->bytes_per_token_estimate = 4;
  tables->hf = std::move(hf);
  // Rows past the tokenizer's ids, and ids no token has, carry nothing the
  // model was trained to say. Special added tokens stay samplable: they are
  // how a model ends a turn.
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (id >= tables->hf->id_end() ||
        tables->hf->TokenBytes(id, /*skip_special=*/false).empty()) {
      tables->never_sampled.push_back(id);
    }
  }
  tables->hf_prefix_ids = specials.prefix_ids;
  tables->hf_suffix_ids = specials.suffix_ids;
  const int64_t bos_id = specials.prefix_ids.size() == 1 ? specials.prefix_ids[0] : -1;
  const bool add_bos = !specials.prefix_ids.empty() || !specials.suffix_ids.empty();
  return Tokenizer(std::move(tables), bos_id, add_bos, std::move(specials.eos_ids), vocab_size);
}

absl::StatusOr<std::vector<int64_t>> Tokenizer::TryEncode(std::string_view text, bool starts_text,
                                                         absl::Span<const ByteRange> plain) const {
  if (tables_->hf == nullptr) return Encode(text, starts_text);
  LINSERVE_ASSIGN_OR_RETURN(std::vector<int64_t> body,
                            tables_->hf->Encode(text, HfAddedTokenMode::kRecognized, plain));
  if (!starts_text) return body;
  std::vector<int64_t> ids = tables_->hf_prefix_ids;
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), tables_->hf_suffix_ids.begin(), tables_->hf_suffix_ids.end());
  return ids;
}

std::vector<std::string> Tokenizer::SpecialTexts() const {
  std::vector<std::string> texts;
  if (tables_->hf == nullptr) return texts;
  for (const HfAddedToken& token : tables_->hf->added_tokens()) {
    if (token.special && !token.content.empty()) texts.push_back(token.content);
  }
  return texts;
}

std::vector<int64_t> Tokenizer::Encode(std::string_view text, bool starts_text) const {
  if (tables_->hf != nullptr) {
    absl::StatusOr<std::vector<int64_t>> ids = TryEncode(text, starts_text);
    return ids.ok() ? *std::move(ids) : std::vector<int64_t>();
  }
  const bool add_bos = starts_text && add_bos_;
  std::vector<int64_t> ids;
  ids.reserve(text.size() / tables_->bytes_per_token_estimate + (add_bos ? 1 : 0));
  if (add_bos) ids.push_back(bos_id_);
  const ByteTrie& trie = tables_->trie;
  while (!text.empty()) {
    // Never empty: every vocabulary has a piece for each single byte.
    const ByteTrie::Match match = trie.LongestPrefix(text);
    ids.push_back(match.id);
    text.remove_prefix(match.length);
  }
  return ids;
}

std::string Tokenizer::TokenBytes(int64_t token, bool skip_special) const {
  if (tables_->hf != nullptr) return std::string(tables_->hf->TokenBytes(token, skip_special));
  return std::string(tables_->Piece(token));
}

std::string Tokenizer::Decode(absl::Span<const int64_t> tokens, bool skip_special) const {
  if (tables_->hf != nullptr) return tables_->hf->Decode(tokens, skip_special);
  std::string bytes;
  bytes.reserve(tokens.size() * tables_->bytes_per_token_estimate);
  for (int64_t token : tokens) bytes += tables_->Piece(token);
  return bytes;
}

bool Tokenizer::IsEos(int64_t token) const {
  // One or two ids: a scan beats a set.
  return std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
}

bool Tokenizer::IsSpecial(int64_t token) const {
  return token >= 0 && token < vocab_size_ && tables_->Piece(token).empty();
}

std::vector<std::pair<int64_t, int64_t>> Tokenizer::SpecialIdRanges() const {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t id = 0; id < vocab_size_; ++id) {
    if (!IsSpecial(id)) continue;
    if (!ranges.empty() && ranges.back().second == id) {
      ranges.back().second = id + 1;
    } else {
      ranges.emplace_back(id, id + 1);
    }
  }
  return ranges;
}

const std::string& Tokenizer::name() const { return tables_->name; }

const std::vector<int64_t>& Tokenizer::never_sampled() const { return tables_->never_sampled; }

}  // namespace linserve
