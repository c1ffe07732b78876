#ifndef LINSERVE_ENGINE_GRAMMAR_INTEGER_RANGE_H_
#define LINSERVE_ENGINE_GRAMMAR_INTEGER_RANGE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace linserve {

// A GBNF expression for the integers in [lo, hi] written as JSON writes
// them (no leading zeros, "-" for negatives); an absent bound is open. The
// range is split by digit count, then like UTF-8 ranges, into alternatives of
// digit classes. lo <= hi where both are given.
std::string IntegerRangeGbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_INTEGER_RANGE_H_
