#include "engine/jinja/jinja_template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_interpreter.h"
#include "engine/jinja/jinja_lexer.h"
#include "engine/jinja/jinja_parser.h"

namespace linserve::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  if (source.size() > kMaxTemplateBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a template of ", source.size(), " bytes; the most is ", kMaxTemplateBytes));
  }
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<Body> body = jinja::Parse(*tokens);
  if (!body.ok()) return body.status();
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(*body));
  return t;
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                             const RenderLimits& limits) const {
  if (!context.is_object())
    return absl::InvalidArgumentError("the template context is not an object");
  Interpreter interpreter(limits);
  auto globals = std::make_shared<Scope>(nullptr);
  AddGlobals(interpreter, *globals);
  for (const auto& [key, value] : context.items()) globals->Set(key, Value::FromJson(value));
  try {
    return interpreter.Render(*body_, globals);
  } catch (const LimitError& error) {
    return absl::ResourceExhaustedError(
        absl::StrCat("template line ", interpreter.line_, ": ", error.what()));
  } catch (const RenderError& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("template line ", interpreter.line_, ": ", error.what()));
  }
}

}  // namespace linserve::jinja
