#include "engine/grammar/integer_range.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/grammar/regex_to_gbnf.h"

namespace linserve {
namespace {

// Same-length decimal ranges [lo, hi] as alternatives, split like UTF-8
// ranges: where the rest of lo is all 0s and of hi all 9s, one class per
// digit covers it.
void SameLengthDigits(const std::string& lo, const std::string& hi, std::vector<std::string>& out) {
  size_t i = 0;
  while (i < lo.size() && lo[i] == hi[i]) ++i;
  const std::string prefix = lo.substr(0, i);
  const std::string literal = prefix.empty() ? "" : GbnfLiteral(prefix) + " ";
  if (i == lo.size()) {
    out.push_back(GbnfLiteral(lo));
    return;
  }
  const size_t rest = lo.size() - i - 1;
  auto digits = [](char a, char b) { return std::string("[") + a + "-" + b + "]"; };
  auto any = [rest] { return rest == 0 ? std::string() : absl::StrCat(" [0-9]{", rest, "}"); };
  if (lo.find_first_not_of('0', i + 1) == std::string::npos &&
      hi.find_first_not_of('9', i + 1) == std::string::npos) {
    out.push_back(literal + digits(lo[i], hi[i]) + any());
    return;
  }
  SameLengthDigits(lo, prefix + lo[i] + std::string(rest, '9'), out);
  if (hi[i] - lo[i] > 1) {
    out.push_back(literal + digits(static_cast<char>(lo[i] + 1), static_cast<char>(hi[i] - 1)) +
                  any());
  }
  SameLengthDigits(prefix + hi[i] + std::string(rest, '0'), hi, out);
}

// Non-negative integers in [lo, hi] (hi absent: no bound) without leading
// zeros.
void NonNegative(int64_t lo, std::optional<int64_t> hi, std::vector<std::string>& out) {
  const std::string low = std::to_string(lo);
  const size_t top = hi ? std::to_string(*hi).size() : low.size();
  for (size_t d = low.size(); d <= top; ++d) {
    const int64_t first = d == 1 ? 0 : static_cast<int64_t>(std::pow(10, d - 1));
    const int64_t last = d >= 19 ? std::numeric_limits<int64_t>::max()
                                 : static_cast<int64_t>(std::pow(10, d)) - 1;
    const int64_t a = std::max(lo, first), b = hi ? std::min(*hi, last) : last;
    if (a <= b) SameLengthDigits(std::to_string(a), std::to_string(b), out);
  }
  if (!hi && low.size() < 18) out.push_back(absl::StrCat("[1-9] [0-9]{", low.size(), ",17}"));
}

}  // namespace

std::string IntegerRangeGbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alternatives;
  if (!lo || *lo < 0) {
    // Magnitudes of the negative ones.
    const int64_t smallest = hi && *hi < 0 ? -*hi : 1;
    std::vector<std::string> magnitudes;
    NonNegative(smallest, lo ? std::optional<int64_t>(-*lo) : std::nullopt, magnitudes);
    if (!magnitudes.empty()) alternatives.push_back("\"-\" (" + absl::StrJoin(magnitudes, " | ") + ")");
  }
  if (!hi || *hi >= 0) NonNegative(lo ? std::max<int64_t>(*lo, 0) : 0, hi, alternatives);
  return "(" + absl::StrJoin(alternatives, " | ") + ")";
}

}  // namespace linserve
