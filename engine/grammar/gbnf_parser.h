#ifndef LINSERVE_ENGINE_GRAMMAR_GBNF_PARSER_H_
#define LINSERVE_ENGINE_GRAMMAR_GBNF_PARSER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"

namespace linserve {

// What one grammar may cost. A grammar comes from a network client, and
// repetitions multiply: "x"{1000}{1000} is a million symbols in 12 bytes.
struct GbnfLimits {
  int64_t max_symbols = 100000;  // in the compiled grammar, repetitions expanded
  int max_nesting = 64;          // of parentheses
  int max_repeat = 1000;         // the m and n of {m,n}
};

// Parses GBNF as llama.cpp defines it into a byte grammar whose root is the
// rule named "root":
//   name ::= alternative | alternative ...    (one rule per line; a rule
//                                              continues on lines inside
//                                              parentheses, after "::=" or
//                                              "|", and on a line starting
//                                              with "|")
//   "literal"  [a-z0-9_]  [^"\\]  .  rule-name  ( group )
//   x*  x+  x?  x{m}  x{m,}  x{m,n}
//   # comments;  escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH
// Literals and classes are UTF-8 text; classes and "." match whole code
// points. Errors name the line and column and what was expected there.
absl::StatusOr<Grammar> ParseGbnf(std::string_view text, const GbnfLimits& limits = {});

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_GBNF_PARSER_H_
