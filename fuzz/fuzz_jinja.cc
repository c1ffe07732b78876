// libFuzzer target: the Jinja chat-template engine. The input's first part
// is a template, the rest a JSON context (when it parses as an object); the
// template is parsed and, when it parses, rendered under small limits. The
// promises: no crash, no hang, no memory growth past the limits, and a
// render that is either text within the output limit or an error status.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/jinja/jinja_template.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  std::string source = input.ConsumeRandomLengthString(16384);
  std::string context_text = input.ConsumeRemainingBytesAsString();
  auto parsed = linserve::jinja::Template::Parse(source);
  if (!parsed.ok()) return 0;
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_text, nullptr, false);
  if (context.is_discarded() || !context.is_object()) {
    context = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"add_generation_prompt", true}};
  }
  linserve::jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_loop_iterations = 1 << 14;
  limits.max_call_depth = 16;
  auto text = parsed->Render(context, limits);
  if (text.ok() && static_cast<int64_t>(text->size()) > limits.max_output_bytes) {
    std::fprintf(stderr, "fuzz_jinja: %zu bytes of output past the limit\n", text->size());
    std::abort();
  }
  return 0;
}
