// libFuzzer target: tokenizer.json files themselves. Whatever the bytes,
// HfTokenizer::FromJson returns a tokenizer or an InvalidArgument naming the
// file; it never crashes, and a tokenizer it returns encodes a short text to
// ids that are tokens. Seeds: any tokenizer.json (../shared/data/tokenizers).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/text/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<std::shared_ptr<const linserve::HfTokenizer>> tokenizer =
      linserve::HfTokenizer::FromJson(text, "fuzz/tokenizer.json",
                                      linserve::HfTokenizerOptions());
  if (!tokenizer.ok()) {
    if (!absl::IsInvalidArgument(tokenizer.status()) ||
        tokenizer.status().message().find("fuzz/tokenizer.json") == absl::string_view::npos) {
      std::fprintf(stderr, "unexpected refusal: %s\n", tokenizer.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  const absl::StatusOr<std::vector<int64_t>> ids = (*tokenizer)->Encode(
      "Hello, wörld! 123 <|im_start|>\n", linserve::HfAddedTokenMode::kRecognized);
  if (ids.ok()) {
    for (int64_t id : *ids) {
      if (id < 0 || id >= (*tokenizer)->id_end()) std::abort();
    }
  }
  return 0;
}
