#ifndef LINSERVE_ENGINE_JINJA_JINJA_TEMPLATE_H_
#define LINSERVE_ENGINE_JINJA_JINJA_TEMPLATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace linserve::jinja {

struct Stmt;

// Bounds on one rendering: each is an error naming itself when crossed.
struct RenderLimits {
  // Bytes of text produced, counting macro results and block sets as well
  // as the final output.
  int64_t max_output_bytes = 4 << 20;
  // Loop iterations (for loops, range, filters that walk a list), all
  // loops of the rendering together.
  int64_t max_loop_iterations = 1 << 20;
  // Macro calls in progress at once.
  int max_call_depth = 32;
};

// The largest template text Parse accepts.
inline constexpr size_t kMaxTemplateBytes = 1 << 20;

// A Jinja template of the subset chat templates use: parsed once, rendered
// any number of times, from any thread at once (rendering only reads it).
// The template text is code; the context's values are data and never reach
// the parser.
class Template {
 public:
  // Refuses, naming the line and the construct, anything outside the subset
  // (docs/DESIGN.md, "Chat templates").
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with `context`'s keys as variables (objects keep their key
  // order). Globals: raise_exception, namespace, range, dict. An error
  // raised by the template (`raise_exception`), a type error or a limit
  // crossed comes back as InvalidArgument (a limit as ResourceExhausted),
  // naming the line.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

}  // namespace linserve::jinja

#endif  // LINSERVE_ENGINE_JINJA_JINJA_TEMPLATE_H_
