#include "engine/text/hf_unicode_compat.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace linserve {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

constexpr CodePointRange kPunctuationOnlyInLibrary[] = {
    {0x166D, 0x166D}, {0x111C9, 0x111C9},
};

constexpr CodePointRange kPunctuationOnlyInUtf8proc[] = {
    {0x61D, 0x61D}, {0x9FD, 0x9FD}, {0xA76, 0xA76}, {0xC77, 0xC77}, {0xC84, 0xC84},
    {0x1B7D, 0x1B7E}, {0x2E43, 0x2E4F}, {0x2E52, 0x2E5D}, {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59},
    {0x10F86, 0x10F89}, {0x1144B, 0x1144F}, {0x1145A, 0x1145B}, {0x1145D, 0x1145D},
    {0x11660, 0x1166C}, {0x116B9, 0x116B9}, {0x1183B, 0x1183B}, {0x11944, 0x11946},
    {0x119E2, 0x119E2}, {0x11A3F, 0x11A46}, {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2},
    {0x11B00, 0x11B09}, {0x11C41, 0x11C45}, {0x11C70, 0x11C71}, {0x11EF7, 0x11EF8},
    {0x11F43, 0x11F4F}, {0x11FFF, 0x11FFF}, {0x12FF1, 0x12FF2}, {0x16E97, 0x16E9A},
    {0x16FE2, 0x16FE2}, {0x1E95E, 0x1E95F},
};

constexpr CodePointRange kNumericOnlyInRust[] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11DE0, 0x11DE9},
    {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x16FF4, 0x16FF6}, {0x1CCF0, 0x1CCF9},
    {0x1E5F1, 0x1E5FA},
};

constexpr CodePointRange kNormalizationUnknownToLibrary[] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C},
    {0xD3B, 0xD3C}, {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA},
    {0x32FF, 0x32FF}, {0xA7F2, 0xA7F4}, {0xA82C, 0xA82C}, {0xAB69, 0xAB69}, {0x10781, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC},
    {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070},
    {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A}, {0x1193D, 0x1193E},
    {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34}, {0x11A47, 0x11A47},
    {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97},
    {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
    {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], char32_t cp) {
  const auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                   [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

}  // namespace

std::string_view OnigExtraClassBody(std::string_view property) {
  if (property == "L") {
    return
      "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-"
      "\\x{105F3}\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}"
      "\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-"
      "\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}"
      "\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}"
      "\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}\\x{18CFF}"
      "\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}\\x{1E4D0}-"
      "\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}"
      "\\x{31350}-\\x{323AF}";
  }
  if (property == "N") {
    return
      "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-"
      "\\x{11F59}\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}"
      "\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}";
  }
  if (property == "M") {
    return
      "\\x{897}\\x{CF3}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}"
      "\\x{113B8}-\\x{113C0}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-"
      "\\x{113D0}\\x{113D2}\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F03}"
      "\\x{11F34}-\\x{11F3A}\\x{11F3E}-\\x{11F42}\\x{11F5A}\\x{13440}\\x{13447}-"
      "\\x{13455}\\x{1611E}-\\x{1612F}\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}\\x{1E5EE}-"
      "\\x{1E5EF}";
  }
  if (property == "P") {
    return
      "\\x{1B4E}-\\x{1B4F}\\x{1B7F}\\x{10D6E}\\x{113D4}-\\x{113D5}\\x{113D7}-"
      "\\x{113D8}\\x{11B00}-\\x{11B09}\\x{11BE1}\\x{11F43}-\\x{11F4F}\\x{16D6D}-"
      "\\x{16D6F}\\x{1E5FF}";
  }
  return {};
}

bool IsPunctuationOnlyInLibrary(char32_t cp) { return InRanges(kPunctuationOnlyInLibrary, cp); }

bool IsPunctuationOnlyInUtf8proc(char32_t cp) { return InRanges(kPunctuationOnlyInUtf8proc, cp); }

bool IsNumericOnlyInRust(char32_t cp) { return InRanges(kNumericOnlyInRust, cp); }

namespace {

// The ranges of a class body written by OnigExtraClassBody ("\\x{A}-\\x{B}\\x{C}").
std::vector<CodePointRange> ParseClassBody(std::string_view body) {
  std::vector<CodePointRange> ranges;
  const auto next = [&body](size_t* pos) {
    const size_t open = body.find('{', *pos);
    const size_t close = body.find('}', open);
    *pos = close + 1;
    return static_cast<char32_t>(
        std::stoul(std::string(body.substr(open + 1, close - open - 1)), nullptr, 16));
  };
  size_t pos = 0;
  while (pos < body.size()) {
    const char32_t first = next(&pos);
    char32_t last = first;
    if (pos < body.size() && body[pos] == '-') last = next(&pos);
    ranges.push_back({first, last});
  }
  return ranges;
}

}  // namespace

bool IsWordOnlyInUnicode16(char32_t cp) {
  static const std::vector<CodePointRange>* const ranges = [] {
    auto* all = new std::vector<CodePointRange>();
    for (const char* property : {"L", "M", "N"}) {
      for (const CodePointRange& r : ParseClassBody(OnigExtraClassBody(property))) {
        // Kaktovik numerals are No, which \\w leaves out.
        if (r.first != 0x1D2C0) all->push_back(r);
      }
    }
    std::sort(all->begin(), all->end(),
              [](const CodePointRange& a, const CodePointRange& b) { return a.first < b.first; });
    return all;
  }();
  const auto it = std::upper_bound(ranges->begin(), ranges->end(), cp,
                                   [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges->begin() && cp <= std::prev(it)->last;
}

bool IsUnknownToLibraryNormalization(char32_t cp) {
  return InRanges(kNormalizationUnknownToLibrary, cp);
}

}  // namespace linserve
