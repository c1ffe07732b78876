// tool_choice "required" always parses, on the models the issue names: a
// random tiny Qwen3.5 model served with Qwen3.5's own template (its XML call
// format) and the RWKV-7 fixture (linserve's call format), 200 seeds each at
// temperature 1, in one server each, with several clients at once so that
// the turns decode together; and in Hermes form (Qwen3's template).

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/qwen35/qwen35_config.h"
#include "engine/qwen35/qwen35_random.h"
#include "tests/rwkv7_fixture.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

const Json kTool = Json::parse(R"({"type": "function", "function": {
    "name": "set_alarm", "parameters": {"type": "object", "properties": {
    "hour": {"type": "integer", "minimum": 0, "maximum": 23},
    "label": {"type": "string", "maxLength": 6},
    "loud": {"type": "boolean"}}, "required": ["hour", "label", "loud"]}}})");

// Seeds 1..seeds (fewer under the sanitizers: SeedsForThisRun) over eight
// clients; "" when every answer was one call that
// fits the schema, else the first answer that was not.
std::string RequiredOverSeeds(int port, int max_tokens, int seeds = 200) {
  constexpr int kClients = 8;
  seeds = SeedsForThisRun(seeds);
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([c, port, max_tokens, seeds, &failures] {
      HttpTestClient http(port);
      for (int seed = 1 + c; seed <= seeds && failures[c].empty(); seed += kClients) {
        const Json request = {{"messages", {{{"role", "user"}, {"content", "Wake me at 7."}}}},
                              {"tools", {kTool}},
                              {"tool_choice", "required"},
                              {"parallel_tool_calls", false},
                              {"max_tokens", max_tokens},
                              {"temperature", 1.0},
                              {"seed", seed}};
        HttpReply reply = http.Post("/v1/chat/completions", request);
        const std::string failure = "seed " + std::to_string(seed) + ": " + reply.body;
        if (reply.status != 200) {
          failures[c] = failure;
          continue;
        }
        const Json& choice = reply.json["choices"][0];
        const Json& calls = choice["message"]["tool_calls"];
        if (choice["finish_reason"] != "tool_calls" || !calls.is_array() || calls.size() != 1 ||
            calls[0]["function"]["name"] != "set_alarm") {
          failures[c] = failure;
          continue;
        }
        const Json arguments =
            Json::parse(calls[0]["function"]["arguments"].get<std::string>(), nullptr, false);
        if (!arguments.is_object() || !arguments["hour"].is_number_integer() ||
            arguments["hour"] < 0 || arguments["hour"] > 23 || !arguments["label"].is_string() ||
            !arguments["loud"].is_boolean()) {
          failures[c] = failure;
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (const std::string& failure : failures) {
    if (!failure.empty()) return failure;
  }
  return "";
}

TEST(ToolCallsTest, RequiredParsesOnARandomQwen35ModelWithItsTemplate) {
  const Qwen35Config config = Qwen35ShapeByName("tiny").value();
  const std::string dir = FreshDir("tools-qwen35-model");
  ASSERT_TRUE(WriteRandomQwen35Directory(config, dir, {}).ok());
  auto server = ServerProcess::Start({"--model=" + dir, "--store_dir=" + FreshDir("tools-qwen35"),
                                      "--dtype=float32",
                                      std::string("--chat_template_file=") + LINSERVE_SOURCE_DIR +
                                          "/tests/engine/jinja/templates/Qwen3.5-4B.jinja"});
  ASSERT_TRUE(server.ok()) << server.status();
  HttpTestClient http((*server)->http_port());
  HttpReply models = http.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json["data"][0]["tool_call_format"], "qwen3_coder");
  EXPECT_EQ(RequiredOverSeeds((*server)->http_port(), 256), "");
}

TEST(ToolCallsTest, RequiredParsesOnTheRwkv7Fixture) {
  if (!std::filesystem::exists(Rwkv7FixturePath("tiny-rwkv7-fp32.pth"))) {
    GTEST_SKIP() << "no " << Rwkv7FixturePath("tiny-rwkv7-fp32.pth");
  }
  const std::string dir = WriteTinyRwkv7Dir(FreshDir("tools-rwkv7-model"));
  auto server = ServerProcess::Start(
      {"--model=" + dir, "--store_dir=" + FreshDir("tools-rwkv7"), "--dtype=float32"});
  ASSERT_TRUE(server.ok()) << server.status();
  HttpTestClient http((*server)->http_port());
  HttpReply models = http.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json["data"][0]["tool_call_format"], "linserve");
  EXPECT_EQ(RequiredOverSeeds((*server)->http_port(), 160), "");
}

// Qwen3's template writes its calls as Hermes JSON: the byte model held to
// that form.
TEST(ToolCallsTest, RequiredParsesInHermesFormWithQwen3sTemplate) {
  auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                      "--store_dir=" + FreshDir("tools-hermes"),
                                      std::string("--chat_template_file=") + LINSERVE_SOURCE_DIR +
                                          "/tests/engine/jinja/templates/Qwen-Qwen3-0.6B.jinja"});
  ASSERT_TRUE(server.ok()) << server.status();
  HttpTestClient http((*server)->http_port());
  HttpReply models = http.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.json["data"][0]["tool_call_format"], "hermes");
  EXPECT_EQ(RequiredOverSeeds((*server)->http_port(), 160, 40), "");
}

}  // namespace
}  // namespace linserve
