#include "engine/tokenizer.h"

namespace linserve {

Tokenizer::Tokenizer(const ModelConfig& config)
    : bos_id_(config.bos_id),
      add_bos_(config.add_bos),
      eos_id_(config.eos_id),
      vocab_size_(config.vocab_size) {}

std::vector<int64_t> Tokenizer::Encode(std::string_view text, bool starts_text) const {
  const bool add_bos = starts_text && add_bos_;
  std::vector<int64_t> ids;
  ids.reserve(text.size() + (add_bos ? 1 : 0));
  if (add_bos) ids.push_back(bos_id_);
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string Tokenizer::TokenBytes(int64_t token) const {
  if (token < 0 || token >= kNumByteTokens) return std::string();
  return std::string(1, static_cast<char>(static_cast<unsigned char>(token)));
}

std::string Tokenizer::Decode(absl::Span<const int64_t> tokens) const {
  std::string bytes;
  bytes.reserve(tokens.size());
  for (int64_t token : tokens) {
    if (token >= 0 && token < kNumByteTokens) {
      bytes.push_back(static_cast<char>(static_cast<unsigned char>(token)));
    }
  }
  return bytes;
}

bool Tokenizer::IsSpecial(int64_t token) const {
  return token >= kNumByteTokens && token < vocab_size_;
}

}  // namespace linserve
