#ifndef LINSERVE_ENGINE_JINJA_JINJA_PARSER_H_
#define LINSERVE_ENGINE_JINJA_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_lexer.h"

namespace linserve::jinja {

// Expressions and blocks nest at most this deep; deeper is refused at load,
// so neither the parser nor the interpreter recurses without bound.
inline constexpr int kMaxNesting = 64;

// The statements of a template. Refuses, naming the line, any construct
// outside the subset (extends, include, import, with, an unknown filter or
// test, ...) and any syntax error.
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens);

// The filters and tests the interpreter knows (the parser refuses others).
bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_PARSER_H_
