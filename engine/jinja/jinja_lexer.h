#ifndef LINSERVE_ENGINE_JINJA_JINJA_LEXER_H_
#define LINSERVE_ENGINE_JINJA_JINJA_LEXER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace linserve::jinja {

struct Token {
  enum class Kind {
    kText,             // template text, whitespace control applied
    kOpenStatement,    // {%
    kCloseStatement,   // %}
    kOpenExpression,   // {{
    kCloseExpression,  // }}
    kName,             // identifiers and keywords (and, if, true, ...)
    kString,           // a string literal, escapes resolved
    kInteger,
    kFloat,
    kPunct,  // operators and brackets: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
    kEnd,
  };
  Kind kind;
  std::string text;
  int line;  // 1-based line of the template where the token starts
};

// The template as Hugging Face renders chat templates: newlines read as
// "\n", one trailing newline dropped, trim_blocks and lstrip_blocks on (for
// `{% %}` and `{# #}` tags only, never for text that looks like one),
// `{%-`/`-%}` (and the same on `{{ }}` and `{# #}`) strip the whitespace
// beside them, comments vanish and `{% raw %}` keeps its text as it is.
// Refuses an unterminated tag or string, naming the line.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_LEXER_H_
