#include "engine/jinja/jinja_template.h"

#include <string>

#include "gtest/gtest.h"

namespace linserve::jinja {
namespace {

std::string Render(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                   const RenderLimits& limits = {}) {
  auto t = Template::Parse(source);
  if (!t.ok()) return "PARSE: " + std::string(t.status().message());
  auto out = t->Render(context, limits);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(JinjaTemplateTest, Smoke) { EXPECT_EQ(Render("a{{ 1 + 2 }}b"), "a3b"); }

}  // namespace
}  // namespace linserve::jinja
