// Renders one template over a list of contexts, for the conformance check
// against @huggingface/jinja (jinja_conformance.mjs).
//   jinja_render TEMPLATE CONTEXTS_JSON
// CONTEXTS_JSON holds a JSON array of objects; prints a JSON array with, for
// each, {"text": ...} or {"error": ...}. A template that does not parse
// prints {"parse_error": ...} and exits 0.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "engine/jinja/jinja_template.h"
#include "nlohmann/json.hpp"

namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: jinja_render TEMPLATE CONTEXTS_JSON\n";
    return 2;
  }
  auto parsed = linserve::jinja::Template::Parse(ReadFile(argv[1]));
  if (!parsed.ok()) {
    std::cout << nlohmann::json{{"parse_error", std::string(parsed.status().message())}}.dump()
              << "\n";
    return 0;
  }
  nlohmann::ordered_json contexts = nlohmann::ordered_json::parse(ReadFile(argv[2]));
  nlohmann::json results = nlohmann::json::array();
  for (const auto& context : contexts) {
    auto text = parsed->Render(context);
    if (text.ok()) {
      results.push_back({{"text", *text}});
    } else {
      results.push_back({{"error", std::string(text.status().message())}});
    }
  }
  std::cout << results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
