// libFuzzer target: the Hugging Face tokenizer on arbitrary text. The
// tokenizer is built here (256 byte-level tokens, a few merges, Qwen3.5's
// normalizer, pre-tokenizer and added-token layout), so the target needs no
// fixture. Bytes made into valid UTF-8 must encode without error, to ids
// that are tokens, and decode back to their NFC form; any input (invalid
// UTF-8 included) must not crash. A broken promise aborts.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/text/hf_byte_level.h"
#include "engine/text/hf_tokenizer.h"
#include "engine/text/hf_unicode.h"
#include "nlohmann/json.hpp"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_hf_tokenizer: broken promise: %s\n", what);
  std::abort();
}

std::string ByteLevel(const std::string& bytes) {
  std::string out;
  linserve::AppendByteLevel(bytes, &out);
  return out;
}

std::shared_ptr<const linserve::HfTokenizer> MakeTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevel(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json merges = nlohmann::json::array();
  int next_id = 256;
  for (const auto& [left, right] : std::vector<std::pair<std::string, std::string>>{
           {" ", "t"}, {"h", "e"}, {" t", "he"}, {"\n", "\n"}, {"\xC3", "\xA9"}}) {
    merges.push_back({ByteLevel(left), ByteLevel(right)});
    vocab[ByteLevel(left + right)] = next_id++;
  }
  nlohmann::json added = nlohmann::json::array();
  int added_id = next_id;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back({{"id", added_id++}, {"content", special}, {"special", true},
                     {"normalized", false}, {"lstrip", false}, {"rstrip", false},
                     {"single_word", false}});
  }
  for (const char* plain : {"<think>", "</think>"}) {
    added.push_back({{"id", added_id++}, {"content", plain}, {"special", false},
                     {"normalized", false}, {"lstrip", false}, {"rstrip", false},
                     {"single_word", false}});
  }
  const nlohmann::json json = {
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
              "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  absl::StatusOr<std::shared_ptr<const linserve::HfTokenizer>> tokenizer =
      linserve::HfTokenizer::FromJson(json.dump(), "fuzz/tokenizer.json",
                                      linserve::HfTokenizerOptions());
  Require(tokenizer.ok(), "the built-in tokenizer loads");
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const linserve::HfTokenizer> tokenizer = MakeTokenizer();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Any bytes: no crash, ids in range (invalid UTF-8 is read lossily).
  for (const auto mode :
       {linserve::HfAddedTokenMode::kRecognized, linserve::HfAddedTokenMode::kPlainContent}) {
    const absl::StatusOr<std::vector<int64_t>> ids = tokenizer->Encode(bytes, mode);
    Require(ids.ok() || absl::IsResourceExhausted(ids.status()), "encode fails only on a limit");
    if (!ids.ok()) continue;
    for (int64_t id : *ids) Require(id >= 0 && id < tokenizer->id_end(), "ids are tokens");
  }
  // Valid UTF-8 round-trips to its NFC form (this vocabulary has every byte).
  std::string text = bytes;
  std::string fixed;
  if (!linserve::MakeValidUtf8(text, &fixed)) text = fixed;
  const absl::StatusOr<std::vector<int64_t>> ids =
      tokenizer->Encode(text, linserve::HfAddedTokenMode::kRecognized);
  if (ids.ok()) {
    Require(tokenizer->Decode(*ids, /*skip_special=*/false) ==
                linserve::Normalize(text, linserve::NormalForm::kNfc) ||
                text.find("<|") != std::string::npos || text.find("<think>") != std::string::npos ||
                text.find("</think>") != std::string::npos,
            "decode(encode(text)) == NFC(text)");
  }
  return 0;
}
