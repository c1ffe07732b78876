// End to end: the linserve-client binary against a real server process.

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/server/e2e_helpers.h"
#include "tests/server/http_client.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

std::string ModelDir() {
  static const std::string* dir = new std::string(*WriteTinyModel(FreshDir("client-model"), 8));
  return *dir;
}

std::unique_ptr<ServerProcess> StartServer(const std::string& name) {
  auto server = ServerProcess::Start({"--model=" + ModelDir(), "--store_dir=" + FreshDir(name)});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

ProcessResult Client(const ServerProcess& server, std::vector<std::string> args,
                     const std::string& input = "") {
  args.insert(args.begin(), {ClientBinary(), "--server=" + server.address()});
  return RunProcess(args, input);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(ClientTest, GenerateOutputEqualsTheServersFinalText) {
  auto server = StartServer("client-generate");
  ASSERT_NE(server, nullptr);
  ProcessResult run = Client(*server, {"generate", "--seed=17", "--max_new_tokens=80",
                                       "--temperature=0.7", "--ignore_eos", "To be"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto stub = server->Stub();
  GenerateOutcome direct = RunGenerate(*stub, MakeRequest("To be", "", 80, 17, 0.7f));
  ASSERT_TRUE(direct.status.ok());
  EXPECT_EQ(run.out, direct.text);
  EXPECT_NE(run.err.find("generated 80"), std::string::npos) << run.err;
  // The prompt may come on stdin too.
  ProcessResult piped = Client(*server, {"generate", "--seed=17", "--max_new_tokens=80",
                                         "--temperature=0.7", "--ignore_eos", "-"},
                               "To be");
  EXPECT_EQ(piped.out, direct.text);
  // A bad field is the server's error, on stderr, exit 1.
  ProcessResult bad = Client(*server, {"generate", "--temperature=500", "x"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("INVALID_ARGUMENT: temperature = 500"), std::string::npos) << bad.err;
}

TEST(ClientTest, HealthIsZeroOnlyWhileServing) {
  auto server = StartServer("client-health");
  ASSERT_NE(server, nullptr);
  ProcessResult serving = Client(*server, {"health"});
  EXPECT_EQ(serving.exit_code, 0);
  EXPECT_EQ(serving.out, "SERVING\n");
  server->Signal(SIGTERM);
  EXPECT_EQ(server->Wait(), 0);
  ProcessResult stopped = Client(*server, {"health"});
  EXPECT_NE(stopped.exit_code, 0);
  EXPECT_NE(stopped.err.find("UNAVAILABLE"), std::string::npos) << stopped.err;
}

TEST(ClientTest, SessionCommandsRoundTrip) {
  auto server = StartServer("client-sessions");
  ASSERT_NE(server, nullptr);
  ProcessResult created = Client(*server, {"session", "create", "--prompt=hello there"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string id = nlohmann::json::parse(created.out)["id"];
  EXPECT_EQ(Client(*server, {"session", "get", id}).exit_code, 0);
  ProcessResult forked = Client(*server, {"session", "fork", id});
  ASSERT_EQ(forked.exit_code, 0);
  const std::string state = FreshDir("client-export") + "/s.state";
  ASSERT_EQ(Client(*server, {"session", "export", id, "--file=" + state}).exit_code, 0);
  ProcessResult imported = Client(*server, {"session", "import", "--file=" + state});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  ProcessResult listed = Client(*server, {"session", "list", "--page_size=1"});
  ASSERT_EQ(listed.exit_code, 0);
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 3);  // every page
  EXPECT_EQ(Client(*server, {"session", "delete", id}).exit_code, 0);
  ProcessResult gone = Client(*server, {"session", "get", id});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("NOT_FOUND"), std::string::npos);
  ProcessResult model = Client(*server, {"model"});
  ASSERT_EQ(model.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(model.out)["attention_kind"], "linear_elu");
}

TEST(ClientTest, StateCommandsRoundTrip) {
  auto server = StartServer("client-states");
  ASSERT_NE(server, nullptr);
  ProcessResult made =
      Client(*server, {"state", "create", "preamble", "--prompt=A system prompt, once."});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const nlohmann::json state = nlohmann::json::parse(made.out);
  EXPECT_EQ(state["name"], "preamble");
  EXPECT_EQ(state["source"], "prompt");
  EXPECT_EQ(state["position"], "22");  // int64 fields are strings in proto JSON

  // generate and session create start from it.
  ProcessResult from_state = Client(*server, {"generate", "--initial_state=preamble",
                                              "--max_new_tokens=8", "--temperature=0", "Go"});
  ASSERT_EQ(from_state.exit_code, 0) << from_state.err;
  ProcessResult session =
      Client(*server, {"session", "create", "--initial_state=preamble"});
  ASSERT_EQ(session.exit_code, 0) << session.err;
  const std::string id = nlohmann::json::parse(session.out)["id"];
  ProcessResult in_session = Client(
      *server, {"generate", "--session=" + id, "--max_new_tokens=8", "--temperature=0", "Go"});
  ASSERT_EQ(in_session.exit_code, 0) << in_session.err;
  EXPECT_EQ(in_session.out, from_state.out);

  // An exported session uploaded as a state.
  const std::string file = FreshDir("client-state-upload") + "/s.state";
  ASSERT_EQ(Client(*server, {"session", "export", id, "--file=" + file}).exit_code, 0);
  ProcessResult uploaded = Client(*server, {"state", "upload", "exported", "--file=" + file});
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  EXPECT_EQ(nlohmann::json::parse(uploaded.out)["source"], "state_file");
  ProcessResult listed = Client(*server, {"state", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 2);
  ASSERT_EQ(Client(*server, {"state", "delete", "preamble"}).exit_code, 0);
  ProcessResult gone = Client(*server, {"state", "get", "preamble"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("NOT_FOUND"), std::string::npos) << gone.err;
  EXPECT_EQ(Client(*server, {"state", "create"}).exit_code, 2) << "usage";
}

void ExpectOrdered(const nlohmann::json& d, const std::string& name) {
  for (const char* key : {"count", "mean", "p50", "p90", "p99", "max"}) {
    EXPECT_TRUE(d.contains(key)) << name << " lacks " << key;
  }
  EXPECT_LE(d["p50"].get<double>(), d["p90"].get<double>()) << name;
  EXPECT_LE(d["p90"].get<double>(), d["p99"].get<double>()) << name;
  EXPECT_LE(d["p99"].get<double>(), d["max"].get<double>()) << name;
  EXPECT_LE(d["mean"].get<double>(), d["max"].get<double>()) << name;
}

TEST(ClientTest, BenchJsonHasEveryFigureAndTheCountsAddUp) {
  auto server = StartServer("client-bench");
  ASSERT_NE(server, nullptr);
  const std::string json = FreshDir("client-bench-json") + "/bench.json";
  ProcessResult run = Client(*server, {"bench", "--concurrency=4", "--duration=2",
                                       "--prompt_tokens=8:32", "--output_tokens=16:48",
                                       "--warmup=4", "--sessions=reuse", "--json=" + json});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = ReadJson(json);
  const nlohmann::json& r = report["results"];
  for (const char* key : {"sent", "ok", "failed", "dropped", "by_code", "duration_s",
                          "request_throughput_rps", "output_token_throughput_tps",
                          "prompt_tokens_total", "output_tokens_total"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  for (const char* key : {"server", "mode", "concurrency", "rate", "requests", "duration_s",
                          "prompt_tokens", "output_tokens", "sessions", "warmup", "seed"}) {
    EXPECT_TRUE(report["settings"].contains(key)) << key;
  }
  EXPECT_GT(r["ok"].get<int64_t>(), 4);
  EXPECT_EQ(r["ok"].get<int64_t>() + r["failed"].get<int64_t>(), r["sent"].get<int64_t>());
  EXPECT_EQ(r["by_code"]["OK"].get<int64_t>(), r["ok"].get<int64_t>());
  EXPECT_GE(r["output_tokens_total"].get<int64_t>(), 16 * r["ok"].get<int64_t>());
  EXPECT_LE(r["output_tokens_total"].get<int64_t>(), 48 * r["ok"].get<int64_t>());
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) ExpectOrdered(r[key], key);
  EXPECT_NE(run.out.find("time to first token"), std::string::npos);

  // Open loop too.
  ProcessResult open = Client(*server, {"bench", "--rate=50", "--requests=30",
                                        "--output_tokens=8", "--json=" + json});
  ASSERT_EQ(open.exit_code, 0) << open.err;
  const nlohmann::json open_report = ReadJson(json);
  EXPECT_EQ(open_report["settings"]["mode"], "open_loop");
  EXPECT_EQ(open_report["results"]["ok"].get<int64_t>() +
                open_report["results"]["failed"].get<int64_t>(),
            30);
}

TEST(ClientTest, BenchOverHttpCountsEveryRequestAndItsTokens) {
  auto server = StartServer("client-bench-http");
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->http_port(), 0);
  const std::string http = "--http_server=127.0.0.1:" + std::to_string(server->http_port());
  const std::string json = FreshDir("client-bench-http-json") + "/bench.json";
  for (const char* sessions : {"--sessions=new", "--sessions=reuse"}) {
    ProcessResult run = Client(*server, {"bench", "--protocol=http", http, sessions,
                                         "--concurrency=4", "--requests=12", "--warmup=4",
                                         "--prompt_tokens=8:32", "--output_tokens=16",
                                         "--progress=false", "--json=" + json});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("http to 127.0.0.1:"), std::string::npos) << run.out;
    const nlohmann::json report = ReadJson(json);
    EXPECT_EQ(report["settings"]["protocol"], "http");
    const nlohmann::json& r = report["results"];
    EXPECT_EQ(r["ok"].get<int64_t>(), 12) << sessions << "\n" << run.out;
    EXPECT_EQ(r["by_code"]["OK"].get<int64_t>(), 12) << sessions;
    EXPECT_EQ(r["output_tokens_total"].get<int64_t>(), 12 * 16) << sessions;
    EXPECT_GT(r["output_token_throughput_tps"].get<double>(), 0);
    EXPECT_EQ(r["ttft_ms"]["count"].get<int64_t>(), 12);
    EXPECT_GT(r["itl_ms"]["count"].get<int64_t>(), 0);
    for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) ExpectOrdered(r[key], key);
  }

  // No server: prompts of token ids cannot be made without the model's
  // vocabulary, which the bench says before it starts; prompts of text go
  // out, and every request fails as the gRPC path names it.
  server->Signal(SIGKILL);
  server->Wait();
  ProcessResult no_vocabulary = Client(*server, {"bench", "--protocol=http", http, "--requests=3",
                                                 "--progress=false", "--json=" + json});
  EXPECT_EQ(no_vocabulary.exit_code, 2);
  EXPECT_NE(no_vocabulary.err.find("cannot read the served model's vocabulary"),
            std::string::npos)
      << no_vocabulary.err;
  ProcessResult gone =
      Client(*server, {"bench", "--protocol=http", http, "--prompt_mode=text", "--requests=3",
                       "--concurrency=1", "--progress=false", "--json=" + json});
  ASSERT_EQ(gone.exit_code, 0) << gone.err;
  const nlohmann::json r = ReadJson(json)["results"];
  EXPECT_EQ(r["failed"].get<int64_t>(), 3);
  EXPECT_EQ(r["by_code"]["UNAVAILABLE"].get<int64_t>(), 3);
}

// The sampling flags reach the server on both protocols: the settings users
// chat with run, and a value out of range is refused for every request.
TEST(ClientTest, BenchSendsTheSamplingFlagsOverBothProtocols) {
  auto server = StartServer("client-bench-sampling");
  ASSERT_NE(server, nullptr);
  const std::string json = FreshDir("client-bench-sampling-json") + "/bench.json";
  const std::string http = "--http_server=127.0.0.1:" + std::to_string(server->http_port());
  for (const char* protocol : {"--protocol=grpc", "--protocol=http"}) {
    ProcessResult run = Client(
        *server, {"bench", protocol, http, "--requests=6", "--concurrency=2", "--output_tokens=8",
                  "--temperature=1", "--top_p=0.3", "--top_k=50", "--min_p=0.05",
                  "--repetition_penalty=1.1", "--presence_penalty=0.5",
                  "--frequency_penalty=0.5", "--progress=false", "--json=" + json});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const nlohmann::json report = ReadJson(json);
    EXPECT_EQ(report["results"]["ok"].get<int64_t>(), 6) << protocol << "\n" << run.out;
    const nlohmann::json& sampling = report["settings"]["sampling"];
    EXPECT_FLOAT_EQ(sampling["top_p"].get<float>(), 0.3f);
    EXPECT_EQ(sampling["top_k"].get<int>(), 50);
    EXPECT_FLOAT_EQ(sampling["presence_penalty"].get<float>(), 0.5f);

    ProcessResult refused = Client(*server, {"bench", protocol, http, "--requests=3",
                                             "--concurrency=1", "--top_p=1.5",
                                             "--progress=false", "--json=" + json});
    ASSERT_EQ(refused.exit_code, 0) << refused.err;
    const nlohmann::json r = ReadJson(json)["results"];
    EXPECT_EQ(r["failed"].get<int64_t>(), 3) << protocol << "\n" << refused.out;
  }
}

// --prompt_tokens=N is N tokens of the served model on both protocols: the
// server's own usage counts exactly N per request, none of them special.
TEST(ClientTest, BenchPromptsAreTokensOfTheServedModelOverBothProtocols) {
  constexpr int kMaxPromptBytes = 64;
  auto started = ServerProcess::Start({"--model=" + ModelDir(),
                                       "--store_dir=" + FreshDir("client-bench-tokens"),
                                       "--max_prompt_bytes=" + std::to_string(kMaxPromptBytes)});
  ASSERT_TRUE(started.ok()) << started.status();
  ServerProcess& server = **started;
  const std::string json = FreshDir("client-bench-tokens-json") + "/bench.json";
  const std::string http = "--http_server=127.0.0.1:" + std::to_string(server.http_port());

  // Both protocols report the same vocabulary: its size and the ids that
  // carry no text.
  auto stub = server.Stub();
  grpc::ClientContext context;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  ASSERT_GT(info.special_token_ranges_size(), 0);  // the tiny model's BOS and EOS
  HttpTestClient client(server.http_port());
  const HttpReply models = client.Get("/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  const nlohmann::json& model = models.json["data"][0];
  EXPECT_EQ(model["vocab_size"].get<int64_t>(), info.vocab_size());
  ASSERT_EQ(model["special_token_ranges"].size(),
            static_cast<size_t>(info.special_token_ranges_size()));
  for (int i = 0; i < info.special_token_ranges_size(); ++i) {
    EXPECT_EQ(model["special_token_ranges"][i]["begin"], info.special_token_ranges(i).begin());
    EXPECT_EQ(model["special_token_ranges"][i]["end"], info.special_token_ranges(i).end());
  }

  for (const char* protocol : {"--protocol=grpc", "--protocol=http"}) {
    for (const char* sessions : {"--sessions=new", "--sessions=reuse"}) {
      ProcessResult run = Client(server, {"bench", protocol, http, sessions, "--requests=6",
                                          "--concurrency=2", "--prompt_tokens=24",
                                          "--output_tokens=4", "--progress=false",
                                          "--json=" + json});
      ASSERT_EQ(run.exit_code, 0) << run.err;
      EXPECT_NE(run.out.find("prompts of random token ids"), std::string::npos) << run.out;
      const nlohmann::json report = ReadJson(json);
      EXPECT_EQ(report["settings"]["prompt_mode"], "tokens");
      EXPECT_EQ(report["settings"]["prompt_vocabulary"]["vocab_size"].get<int64_t>(),
                info.vocab_size());
      const nlohmann::json& r = report["results"];
      ASSERT_EQ(r["ok"].get<int64_t>(), 6) << protocol << " " << sessions << "\n" << run.out;
      // A continued turn also feeds the token its last turn sampled: 6 turns
      // on 2 conversations continue 4 times.
      const bool reuse = std::string(sessions) == "--sessions=reuse";
      EXPECT_EQ(r["prompt_tokens_total"].get<int64_t>(), 6 * 24 + (reuse ? 4 : 0))
          << protocol << " " << sessions;
    }
  }

  // The text mode stays, labelled: N bytes of words, which the tiny byte
  // model counts as N tokens and a BOS.
  ProcessResult text = Client(server, {"bench", "--prompt_mode=text", "--requests=4",
                                       "--concurrency=2", "--prompt_tokens=24",
                                       "--output_tokens=4", "--progress=false",
                                       "--json=" + json});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("prompts of words"), std::string::npos) << text.out;
  EXPECT_EQ(ReadJson(json)["settings"]["prompt_mode"], "text");
  EXPECT_FALSE(ReadJson(json)["settings"].contains("prompt_vocabulary"));
  ProcessResult bad_mode = Client(server, {"bench", "--prompt_mode=bytes", "--requests=1"});
  EXPECT_EQ(bad_mode.exit_code, 2);
  EXPECT_NE(bad_mode.err.find("--prompt_mode"), std::string::npos) << bad_mode.err;

  // Over HTTP a prompt of ids outside [0, vocab), or more of them than the
  // prompt limit, is a 400 that names the field.
  const int vocab = info.vocab_size();
  for (const nlohmann::json& prompt :
       {nlohmann::json::array({1, 2, vocab}), nlohmann::json::array({1, -1}),
        nlohmann::json(std::vector<int>(kMaxPromptBytes + 1, 1))}) {
    const HttpReply refused =
        client.Post("/v1/completions", nlohmann::json{{"prompt", prompt}, {"max_tokens", 2}});
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(refused.json["error"]["param"], "prompt") << refused.body;
    EXPECT_NE(refused.json["error"]["message"].get<std::string>().find("prompt"),
              std::string::npos)
        << refused.body;
  }
  const HttpReply out_of_range = client.Post(
      "/v1/completions", nlohmann::json{{"prompt", {1, 2, vocab}}, {"max_tokens", 2}});
  EXPECT_NE(out_of_range.json["error"]["message"].get<std::string>().find(
                "prompt[2] = " + std::to_string(vocab) + " is outside [0, " +
                std::to_string(vocab) + ")"),
            std::string::npos)
      << out_of_range.body;
  const HttpReply too_many = client.Post(
      "/v1/completions",
      nlohmann::json{{"prompt", std::vector<int>(kMaxPromptBytes + 1, 1)}, {"max_tokens", 2}});
  EXPECT_NE(too_many.json["error"]["message"].get<std::string>().find(
                "at most " + std::to_string(kMaxPromptBytes)),
            std::string::npos)
      << too_many.body;
}

TEST(ClientTest, AServerKilledMidRunShowsUpAsFailuresNotACrash) {
  auto server = StartServer("client-kill");
  ASSERT_NE(server, nullptr);
  const std::string json = FreshDir("client-kill-json") + "/bench.json";
  ProcessResult run;
  std::thread bench([&] {
    run = Client(*server, {"bench", "--concurrency=4", "--duration=4", "--output_tokens=64",
                           "--progress=false", "--json=" + json});
  });
  absl::SleepFor(absl::Milliseconds(1500));
  server->Signal(SIGKILL);
  server->Wait();
  bench.join();
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json r = ReadJson(json)["results"];
  EXPECT_GT(r["ok"].get<int64_t>(), 0);
  EXPECT_GT(r["failed"].get<int64_t>(), 0);
  EXPECT_GT(r["by_code"]["UNAVAILABLE"].get<int64_t>(), 0);
  EXPECT_EQ(r["ok"].get<int64_t>() + r["failed"].get<int64_t>(), r["sent"].get<int64_t>());
}

}  // namespace
}  // namespace linserve
