// hf_encode TOKENIZER_JSON < strings.jsonl: for each input line (a JSON
// string), one output line of the ids linserve's HfTokenizer gives it
// (add_special_tokens false), separated by spaces, then a tab and the JSON
// string their decode gives (special tokens kept, invalid UTF-8 as U+FFFD);
// "ERROR <message>" if the encode fails. The reference check
// (hf_reference_check.js) compares both with the Rust library's.

#include <iostream>
#include <string>

#include "engine/text/hf_tokenizer.h"
#include "engine/text/hf_unicode.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: hf_encode TOKENIZER_JSON < strings.jsonl\n";
    return 2;
  }
  absl::StatusOr<std::shared_ptr<const linserve::HfTokenizer>> tokenizer =
      linserve::HfTokenizer::FromFile(argv[1], linserve::HfTokenizerOptions());
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  std::string out;
  while (std::getline(std::cin, line)) {
    const nlohmann::json text = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!text.is_string()) {
      std::cerr << "not a JSON string: " << line << "\n";
      return 2;
    }
    const absl::StatusOr<std::vector<int64_t>> ids =
        (*tokenizer)->Encode(text.get<std::string>(), linserve::HfAddedTokenMode::kRecognized);
    out.clear();
    if (!ids.ok()) {
      out = "ERROR " + std::string(ids.status().message());
    } else {
      for (size_t i = 0; i < ids->size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string((*ids)[i]);
      }
      std::string decoded = (*tokenizer)->Decode(*ids, /*skip_special=*/false);
      std::string valid;
      if (!linserve::MakeValidUtf8(decoded, &valid)) decoded = std::move(valid);
      out += '\t';
      out += nlohmann::json(decoded).dump();
    }
    out += '\n';
    std::cout << out;
  }
  return 0;
}
