// hf_classes: for each Unicode class the Hugging Face tokenizer depends on
// (the Punctuation and Digits pre-tokenizers' predicates, and \p{L}, \p{N},
// \p{M}, \p{P}, \s as linserve's PCRE2 translation compiles them), one line
// "NAME CP CP ..." of the code points in it (decimal). hf_unicode_classes.js
// compares them with the Rust library's.
//   hf_classes --normalize=nfc|nfkc: each stdin line, normalized, on stdout.

#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "engine/text/hf_regex.h"
#include "engine/text/hf_unicode.h"

namespace {

template <typename Predicate>
void PrintClass(const char* name, const std::vector<char32_t>& code_points, Predicate in_class) {
  std::cout << name;
  for (char32_t cp : code_points) {
    if (in_class(cp)) std::cout << ' ' << static_cast<uint32_t>(cp);
  }
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string(argv[1]) == "--normalize=nfc" ||
                    std::string(argv[1]) == "--normalize=nfkc")) {
    const linserve::NormalForm form = std::string(argv[1]) == "--normalize=nfc"
                                          ? linserve::NormalForm::kNfc
                                          : linserve::NormalForm::kNfkc;
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) std::cout << linserve::Normalize(line, form) << '\n';
    return 0;
  }
  std::vector<char32_t> code_points;
  for (char32_t cp = 1; cp <= 0x10FFFF; ++cp) {
    if (cp < 0xD800 || cp > 0xDFFF) code_points.push_back(cp);
  }
  PrintClass("punct", code_points, linserve::IsPunctuation);
  PrintClass("numeric", code_points, linserve::IsNumeric);
  for (const char* pattern : {"\\p{L}", "\\p{N}", "\\p{M}", "\\p{P}", "\\s"}) {
    const absl::StatusOr<linserve::HfRegex> regex =
        linserve::HfRegex::Compile(pattern, linserve::HfRegexLimits());
    if (!regex.ok()) return 1;
    PrintClass(pattern, code_points, [&regex](char32_t cp) {
      std::string text;
      linserve::AppendUtf8(cp, &text);
      std::vector<std::pair<uint32_t, uint32_t>> matches;
      return regex->FindAll(text, &matches).ok() && matches.size() == 1 &&
             matches[0].second == text.size();
    });
  }
  return 0;
}
