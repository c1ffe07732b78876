#ifndef LINSERVE_ENGINE_GRAMMAR_GBNF_PARSER_H_
#define LINSERVE_ENGINE_GRAMMAR_GBNF_PARSER_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_limits.h"

namespace linserve {

// GBNF honours max_symbols, max_nesting (of parentheses) and max_repeat.
using GbnfLimits = GrammarLimits;

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
