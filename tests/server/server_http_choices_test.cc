// n > 1 and best_of end to end: a real `linserve` process and a real HTTP
// client. Each of n choices is the request alone with seed + index, whether
// streamed or not, on completions and chat; the prompt is prefilled once;
// best_of returns the choices with the highest cumulative logprob; the
// bounds and the session rule refuse by name.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

constexpr int kMaxBatch = 8;

class HttpChoicesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // No prefix cache: the prompt-token metric counts every prefill.
    auto server = ServerProcess::Start({"--model=" + DefaultModelDir(),
                                        "--store_dir=" + FreshDir("http-choices-store"),
                                        "--prefix_cache_bytes=0",
                                        absl::StrCat("--max_batch=", kMaxBatch)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  static HttpTestClient Client() { return HttpTestClient(server_->http_port()); }
  static double PromptTokensPrefilled() {
    auto metrics = ScrapeMetrics(server_->metrics_port());
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    return metrics.ok() ? MetricValue(*metrics, "linserve_prompt_tokens_total") : -1;
  }

  static ServerProcess* server_;
};
ServerProcess* HttpChoicesTest::server_ = nullptr;

Json Completion(const std::string& prompt, uint64_t seed, int n) {
  return {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0.9}, {"seed", seed}, {"n", n}};
}

Json Chat(const std::string& content, uint64_t seed, int n) {
  return {{"messages", {{{"role", "user"}, {"content", content}}}},
          {"max_tokens", 16},
          {"temperature", 0.9},
          {"seed", seed},
          {"n", n}};
}

std::string ChoiceText(const Json& choice) {
  if (choice.contains("text")) return choice["text"].get<std::string>();
  return choice["message"]["content"].get<std::string>();
}

// A streamed answer's choices by index: the text and every finish_reason
// each one got.
struct StreamedChoice {
  std::string text;
  std::vector<std::string> finish_reasons;
};
std::map<int, StreamedChoice> StreamedChoices(const HttpReply& reply) {
  std::map<int, StreamedChoice> out;
  for (const Json& event : reply.events) {
    if (!event.contains("choices")) continue;
    for (const Json& choice : event["choices"]) {
      StreamedChoice& c = out[choice["index"].get<int>()];
      if (choice.contains("text")) c.text += choice["text"].get<std::string>();
      if (choice.contains("delta")) c.text += choice["delta"].value("content", "");
      if (!choice["finish_reason"].is_null()) {
        c.finish_reasons.push_back(choice["finish_reason"].get<std::string>());
      }
    }
  }
  return out;
}

// n = 4: four choices, each the request alone with seed + index; the
// prompt prefilled once and counted once in usage.
void ExpectChoicesAreSeparateRequests(HttpTestClient& http, const std::string& path,
                                      const Json& request, double* prefilled_delta,
                                      double (*prefilled)()) {
  const int n = request["n"].get<int>();
  const double before = prefilled();
  const HttpReply whole = http.Post(path, request);
  ASSERT_EQ(whole.status, 200) << whole.body;
  *prefilled_delta = prefilled() - before;
  ASSERT_EQ(whole.json["choices"].size(), static_cast<size_t>(n)) << whole.body;

  int64_t completion_tokens = 0;
  int64_t prompt_tokens = -1;
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    const Json& choice = whole.json["choices"][i];
    EXPECT_EQ(choice["index"], i);
    Json alone = request;
    alone["n"] = 1;
    alone["seed"] = request["seed"].get<uint64_t>() + i;
    const HttpReply single = http.Post(path, alone);
    ASSERT_EQ(single.status, 200) << single.body;
    EXPECT_EQ(ChoiceText(choice), ChoiceText(single.json["choices"][0])) << "choice " << i;
    EXPECT_EQ(choice["finish_reason"], single.json["choices"][0]["finish_reason"]);
    completion_tokens += single.json["usage"]["completion_tokens"].get<int64_t>();
    prompt_tokens = single.json["usage"]["prompt_tokens"].get<int64_t>();
    texts.push_back(ChoiceText(choice));
  }
  // Sampled at temperature 0.9 with different seeds: not all alike.
  EXPECT_NE(texts.front(), texts.back());
  EXPECT_EQ(whole.json["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(whole.json["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(whole.json["usage"]["total_tokens"], prompt_tokens + completion_tokens);
  EXPECT_EQ(*prefilled_delta, prompt_tokens);

  // Streamed: the same choices, each ending with its own finish_reason.
  Json streamed_request = request;
  streamed_request["stream"] = true;
  streamed_request["stream_options"] = {{"include_usage", true}};
  const HttpReply streamed = http.Stream(path, streamed_request);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_TRUE(streamed.done);
  const std::map<int, StreamedChoice> choices = StreamedChoices(streamed);
  ASSERT_EQ(choices.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(choices.at(i).text, texts[i]) << "choice " << i;
    ASSERT_EQ(choices.at(i).finish_reasons.size(), 1u) << "choice " << i;
    EXPECT_EQ(choices.at(i).finish_reasons[0], whole.json["choices"][i]["finish_reason"]);
  }
  ASSERT_FALSE(streamed.events.empty());
  const Json& usage = streamed.events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], whole.json["usage"]);
}

TEST_F(HttpChoicesTest, CompletionChoicesAreSeparateRequestsWithSeedPlusIndex) {
  HttpTestClient http = Client();
  double prefilled = 0;
  ExpectChoicesAreSeparateRequests(http, "/v1/completions", Completion("ROMEO:", 11, 4),
                                   &prefilled, &PromptTokensPrefilled);
  EXPECT_EQ(prefilled, 6);  // "ROMEO:" once, not four times
}

TEST_F(HttpChoicesTest, ChatChoicesAreSeparateRequestsWithSeedPlusIndex) {
  HttpTestClient http = Client();
  double prefilled = 0;
  ExpectChoicesAreSeparateRequests(http, "/v1/chat/completions", Chat("What light?", 5, 4),
                                   &prefilled, &PromptTokensPrefilled);
  EXPECT_GT(prefilled, 0);
}

// best_of makes best_of choices (seeds s..s+best_of-1) and returns the n
// with the highest sum of token logprobs, best first.
TEST_F(HttpChoicesTest, BestOfReturnsTheHighestCumulativeLogprob) {
  HttpTestClient http = Client();
  constexpr int kBestOf = 5;
  constexpr uint64_t kSeed = 21;
  std::vector<std::pair<double, std::string>> made;  // (cumulative logprob, text)
  int64_t made_tokens = 0;
  for (int i = 0; i < kBestOf; ++i) {
    Json alone = Completion("JULIET:", kSeed + i, 1);
    alone["logprobs"] = 0;
    const HttpReply single = http.Post("/v1/completions", alone);
    ASSERT_EQ(single.status, 200) << single.body;
    double sum = 0;
    for (const Json& lp : single.json["choices"][0]["logprobs"]["token_logprobs"]) {
      sum += lp.get<double>();
    }
    made.emplace_back(sum, ChoiceText(single.json["choices"][0]));
    made_tokens += single.json["usage"]["completion_tokens"].get<int64_t>();
  }
  std::vector<std::pair<double, std::string>> ranked = made;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  ASSERT_NE(ranked[0].first, ranked[1].first);
  ASSERT_NE(ranked[1].first, ranked[2].first);

  Json one = Completion("JULIET:", kSeed, 1);
  one["best_of"] = kBestOf;
  const HttpReply best = http.Post("/v1/completions", one);
  ASSERT_EQ(best.status, 200) << best.body;
  ASSERT_EQ(best.json["choices"].size(), 1u);
  EXPECT_EQ(ChoiceText(best.json["choices"][0]), ranked[0].second);
  EXPECT_TRUE(best.json["choices"][0]["logprobs"].is_null());  // not asked for

  Json two = Completion("JULIET:", kSeed, 2);
  two["best_of"] = kBestOf;
  const HttpReply best_two = http.Post("/v1/completions", two);
  ASSERT_EQ(best_two.status, 200) << best_two.body;
  ASSERT_EQ(best_two.json["choices"].size(), 2u);
  EXPECT_EQ(ChoiceText(best_two.json["choices"][0]), ranked[0].second);
  EXPECT_EQ(ChoiceText(best_two.json["choices"][1]), ranked[1].second);
  EXPECT_EQ(best_two.json["choices"][1]["index"], 1);
  // Every choice made is billed; the prompt once.
  EXPECT_EQ(best_two.json["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(best_two.json["usage"]["completion_tokens"], made_tokens);
}

TEST_F(HttpChoicesTest, BoundsAndCombinationsAreRefusedByName) {
  HttpTestClient http = Client();
  struct Case {
    std::string path;
    Json body;
    std::string param;
    std::string message;  // a part of it
  };
  const std::string session(32, 'a');
  Json streamed_best_of = Completion("a", 1, 1);
  streamed_best_of["best_of"] = 2;
  streamed_best_of["stream"] = true;
  Json best_of_below_n = Completion("a", 1, 3);
  best_of_below_n["best_of"] = 2;
  Json best_of_over_max_n = Completion("a", 1, 1);
  best_of_over_max_n["best_of"] = 17;
  Json with_session = Completion("a", 1, 2);
  with_session["session_id"] = session;
  Json new_session = Completion("a", 1, 2);
  new_session["session"] = "new";
  const std::vector<Case> cases = {
      {"/v1/completions", Completion("a", 1, 17), "n", "n = 17 is outside [1, 16] (--max_n)"},
      {"/v1/chat/completions", Chat("a", 1, 17), "n", "n = 17 is outside [1, 16] (--max_n)"},
      {"/v1/completions", Completion("a", 1, kMaxBatch + 1), "n",
       absl::StrCat("n = ", kMaxBatch + 1, " is more than max_batch = ", kMaxBatch)},
      {"/v1/completions", best_of_over_max_n, "best_of", "best_of = 17 is outside [1, 16]"},
      {"/v1/completions", best_of_below_n, "best_of", "best_of = 2 is less than n = 3"},
      {"/v1/completions", streamed_best_of, "best_of", "cannot be streamed"},
      {"/v1/completions", with_session, "n", "name it with session_choice (0 to 1)"},
      {"/v1/completions", new_session, "n", "name it with session_choice (0 to 1)"},
  };
  for (const Case& c : cases) {
    const HttpReply reply = http.Post(c.path, c.body);
    EXPECT_EQ(reply.status, 400) << c.body << " -> " << reply.body;
    EXPECT_EQ(reply.json["error"]["param"], c.param) << reply.body;
    EXPECT_NE(reply.json["error"]["message"].get<std::string>().find(c.message),
              std::string::npos)
        << reply.body;
  }
}

// With a session, session_choice names the choice that continues it: the
// session then holds exactly what a session given that choice's seed alone
// holds, and the other choices leave it alone.
TEST_F(HttpChoicesTest, SessionChoiceContinuesTheSession) {
  HttpTestClient http = Client();
  Json forked = Completion("ROMEO:", 40, 3);
  forked["session"] = "new";
  forked["session_choice"] = 2;
  const HttpReply made = http.Post("/v1/completions", forked);
  ASSERT_EQ(made.status, 200) << made.body;
  ASSERT_EQ(made.json["choices"].size(), 3u);
  const std::string id = made.json["session_id"].get<std::string>();

  Json alone = Completion("ROMEO:", 42, 1);
  alone["session"] = "new";
  const HttpReply reference = http.Post("/v1/completions", alone);
  ASSERT_EQ(reference.status, 200) << reference.body;
  EXPECT_EQ(ChoiceText(made.json["choices"][2]), ChoiceText(reference.json["choices"][0]));
  EXPECT_EQ(made.json["session_position"], reference.json["session_position"]);

  // The next turn of each: the same text.
  auto next = [&](const std::string& session_id) {
    Json turn = Completion("\nJULIET:", 7, 1);
    turn["session_id"] = session_id;
    return http.Post("/v1/completions", turn);
  };
  const HttpReply after_choice = next(id);
  const HttpReply after_reference = next(reference.json["session_id"].get<std::string>());
  ASSERT_EQ(after_choice.status, 200) << after_choice.body;
  ASSERT_EQ(after_reference.status, 200) << after_reference.body;
  EXPECT_EQ(ChoiceText(after_choice.json["choices"][0]),
            ChoiceText(after_reference.json["choices"][0]));
  EXPECT_EQ(after_choice.json["session_position"], after_reference.json["session_position"]);
}

// A client that leaves mid-stream ends every choice: the request's log
// line comes once all of them have ended, and none is left running.
TEST_F(HttpChoicesTest, ALeavingClientEndsEveryChoice) {
  HttpTestClient http = Client();
  Json request = Completion("ROMEO:", 3, 4);
  request["max_tokens"] = 4000;
  request["ignore_eos"] = true;
  request["stream"] = true;
  int events = 0;
  const HttpReply cut = http.Stream("/v1/completions", request, {},
                                    [&](const Json&) { return ++events < 8; });
  EXPECT_FALSE(cut.done);
  ASSERT_TRUE(server_->WaitForLog("the client closed the connection", absl::Seconds(60)));
  auto metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(MetricValue(*metrics, "linserve_active_requests"), 0);
}

}  // namespace
}  // namespace linserve
