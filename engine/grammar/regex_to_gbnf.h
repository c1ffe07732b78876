#ifndef LINSERVE_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_
#define LINSERVE_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/grammar/grammar_limits.h"

namespace linserve {

// A JSON schema `pattern` as a GBNF expression over the JSON-encoded text of
// the string it matches (without the quotes): a literal " or \ becomes its
// escape, and classes and "." leave out ", \ and control characters, which
// a JSON string would have to escape.
//
// The subset: literal characters and escapes (\. \\ \/ \- \n \t \r and the
// like), ".", classes [abc] [a-z] [^...] with \d \w \s inside, \d \w \s \D
// \W \S, groups ( ) and (?: ), alternation |, quantifiers * + ? {m} {m,}
// {m,n}. The pattern is anchored as written with ^ and $ (JSON schema
// patterns are not anchored: without ^ any text may come first, without $
// any text may follow). Lookaround, backreferences, lazy quantifiers and
// anchors inside the pattern are InvalidArgument naming the construct.
// `limits`: max_regex_nesting bounds groups inside groups, max_repeat the m
// and n of {m,n}; each error names its limit.
absl::StatusOr<std::string> RegexToGbnf(std::string_view pattern, const GrammarLimits& limits = {});

// A GBNF literal ("...") of `text`, escaped.
std::string GbnfLiteral(std::string_view text);

}  // namespace linserve

#endif  // LINSERVE_ENGINE_GRAMMAR_REGEX_TO_GBNF_H_
