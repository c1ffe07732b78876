#ifndef LINSERVE_ENGINE_GRAMMAR_GRAMMAR_LIMITS_H_
#define LINSERVE_ENGINE_GRAMMAR_GRAMMAR_LIMITS_H_

#include <cstdint>

namespace linserve {

// What compiling one constraint may cost. A constraint comes from a network
// client, and both depth and repetition are attacks: parsers recurse once
// per level, and "x"{1000}{1000} is a million symbols in 12 bytes. Each bound
// is named in its errors by the server flag that sets it, so a client reads
// which limit it hit and an operator which knob raises it.
struct GrammarLimits {
  // Symbols of the compiled grammar, repetitions expanded (max_grammar_symbols).
  int64_t max_symbols = 100000;
  // Parentheses inside parentheses in GBNF, and schemas inside schemas in a
  // JSON schema (grammar_max_nesting): both are recursion depth.
  int max_nesting = 64;
  // The m and n of {m,n} in GBNF and in a pattern, and the JSON schema
  // counts that compile to one: minLength, maxLength, minItems, maxItems
  // (grammar_max_repeat).
  int max_repeat = 1000;
  // Groups inside groups of a JSON schema `pattern` (grammar_max_regex_nesting).
  int max_regex_nesting = 32;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_GRAMMAR_LIMITS_H_
