// linserve-client: generate, session, model, health and the bench load test.
// Flags live here and become the option structs and requests below.

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "client/bench.h"
#include "client/commands.h"
#include "client/connection.h"

ABSL_FLAG(std::string, server, "localhost:50051", "Server address (host:port)");
ABSL_FLAG(bool, tls, false, "Use TLS");
ABSL_FLAG(std::string, ca_cert, "", "PEM file of the CA roots for --tls (default: the system's)");
ABSL_FLAG(std::string, client_cert, "", "PEM client certificate for mTLS (with --client_key)");
ABSL_FLAG(std::string, client_key, "", "PEM client key for mTLS");
ABSL_FLAG(std::string, token, "", "Bearer token sent as the authorization header");
ABSL_FLAG(double, timeout_seconds, 600, "Deadline of each call (health: at most 5 s)");

// generate
ABSL_FLAG(std::string, session, "", "generate: continue this session");
ABSL_FLAG(int32_t, max_new_tokens, 0, "generate: tokens to generate at most (0: server default)");
ABSL_FLAG(double, temperature, NAN, "0 is greedy (unset: server default 1.0)");
ABSL_FLAG(int32_t, top_k, 0, "generate, bench: keep the k most likely tokens (0: off)");
ABSL_FLAG(double, top_p, NAN, "generate, bench: nucleus mass (unset: 1.0, off)");
ABSL_FLAG(double, min_p, 0, "generate, bench: drop tokens below min_p x the most likely (0: off)");
ABSL_FLAG(double, repetition_penalty, NAN, "generate, bench: CTRL-style penalty (unset: 1.0, off)");
ABSL_FLAG(double, presence_penalty, 0, "generate, bench: subtracted once per seen token");
ABSL_FLAG(double, frequency_penalty, 0, "generate, bench: subtracted per occurrence");
ABSL_FLAG(uint64_t, seed, 0, "Sampling seed (0: the server picks one); bench: base seed");
ABSL_FLAG(std::vector<std::string>, stop, {}, "generate: stop sequences, comma-separated");
ABSL_FLAG(bool, ignore_eos, false, "generate: keep going after EOS");
ABSL_FLAG(bool, logprobs, false, "generate: print each token's logprob on stderr");
ABSL_FLAG(int32_t, top_logprobs, 0, "generate: alternatives per token with --logprobs");

// session
ABSL_FLAG(std::string, prompt, "", "session create, state create: text to prefill");
ABSL_FLAG(std::string, initial_state, "",
          "generate, session create: start from this named state (see the state command)");
ABSL_FLAG(int32_t, page_size, 100, "session list: sessions per page");
ABSL_FLAG(std::string, file, "-",
          "session export/import, state upload: the state file (- is stdout/stdin)");

// health
ABSL_FLAG(std::string, service, "", "health: service to ask about (\"\" is the whole server)");

// bench
ABSL_FLAG(int32_t, concurrency, 8, "bench: requests in flight (closed loop)");
ABSL_FLAG(double, rate, 0, "bench: requests/s with Poisson arrivals (open loop); 0: closed loop");
ABSL_FLAG(int64_t, requests, 0, "bench: requests to send (0: run for --duration)");
ABSL_FLAG(double, duration, 30, "bench: seconds to send for when --requests is 0");
ABSL_FLAG(std::string, prompt_tokens, "128",
          "bench: prompt length in tokens of the served model, N or MIN:MAX (uniform); with "
          "--prompt_mode=text, in bytes");
ABSL_FLAG(std::string, prompt_mode, "tokens",
          "bench: tokens (random ids of the model's ordinary pieces, seeded, sent as token ids) "
          "or text (English words, one byte per --prompt_tokens)");
ABSL_FLAG(std::string, output_tokens, "128", "bench: output length, N or MIN:MAX (uniform)");
ABSL_FLAG(std::string, sessions, "new", "bench: new (stateless calls) or reuse (multi-turn sessions)");
ABSL_FLAG(int32_t, warmup, 0, "bench: requests run and not counted before measuring");
ABSL_FLAG(std::string, json, "", "bench: write every figure and the settings to this file");
ABSL_FLAG(bool, progress, true, "bench: live progress line on stderr");
ABSL_FLAG(std::string, protocol, "grpc",
          "bench: grpc (Generate at --server) or http (streamed POST /v1/completions at "
          "--http_server)");
ABSL_FLAG(std::string, logit_bias, "",
          "bench: ID:BIAS,... added to those ids' logits in every request (OpenAI's "
          "logit_bias; -100 keeps an id out of the outputs)");
ABSL_FLAG(std::string, http_server, "localhost:8080",
          "bench --protocol=http: the server's HTTP address (host:port; https with --tls)");

namespace linserve {
namespace {

constexpr const char* kUsage =
    "linserve-client COMMAND [flags]\n"
    "  generate [PROMPT|-]   stream a completion (prompt from the argument or stdin)\n"
    "  session create|get ID|list|delete ID|fork ID|export ID|import\n"
    "  state create NAME|upload NAME|get NAME|list|delete NAME\n"
    "  model                 the served model's info (JSON)\n"
    "  health                exit 0 only when the server is SERVING\n"
    "  bench                 the load test (--concurrency or --rate, --requests or --duration)\n";

ConnectionOptions ConnectionFromFlags() {
  ConnectionOptions c;
  c.server = absl::GetFlag(FLAGS_server);
  c.tls = absl::GetFlag(FLAGS_tls);
  c.ca_cert_file = absl::GetFlag(FLAGS_ca_cert);
  c.client_cert_file = absl::GetFlag(FLAGS_client_cert);
  c.client_key_file = absl::GetFlag(FLAGS_client_key);
  c.token = absl::GetFlag(FLAGS_token);
  c.timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  return c;
}

v1::GenerateRequest GenerateRequestFromFlags(std::string prompt) {
  v1::GenerateRequest r;
  r.set_prompt(std::move(prompt));
  r.set_session_id(absl::GetFlag(FLAGS_session));
  r.set_initial_state(absl::GetFlag(FLAGS_initial_state));
  r.set_max_new_tokens(absl::GetFlag(FLAGS_max_new_tokens));
  v1::SamplingParams* s = r.mutable_sampling();
  if (!std::isnan(absl::GetFlag(FLAGS_temperature))) s->set_temperature(absl::GetFlag(FLAGS_temperature));
  s->set_top_k(absl::GetFlag(FLAGS_top_k));
  if (!std::isnan(absl::GetFlag(FLAGS_top_p))) s->set_top_p(absl::GetFlag(FLAGS_top_p));
  s->set_min_p(absl::GetFlag(FLAGS_min_p));
  if (!std::isnan(absl::GetFlag(FLAGS_repetition_penalty))) {
    s->set_repetition_penalty(absl::GetFlag(FLAGS_repetition_penalty));
  }
  s->set_presence_penalty(absl::GetFlag(FLAGS_presence_penalty));
  s->set_frequency_penalty(absl::GetFlag(FLAGS_frequency_penalty));
  if (absl::GetFlag(FLAGS_seed) != 0) s->set_seed(absl::GetFlag(FLAGS_seed));
  for (const std::string& stop : absl::GetFlag(FLAGS_stop)) r.add_stop(stop);
  r.set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  r.set_logprobs(absl::GetFlag(FLAGS_logprobs));
  r.set_top_logprobs(absl::GetFlag(FLAGS_top_logprobs));
  return r;
}

int Bench(ConnectionOptions connection) {
  BenchOptions o;
  const std::string protocol = absl::GetFlag(FLAGS_protocol);
  if (protocol != "grpc" && protocol != "http") {
    std::fprintf(stderr, "error: --protocol = \"%s\" is not grpc or http\n", protocol.c_str());
    return 2;
  }
  if (protocol == "http") {
    o.protocol = BenchProtocol::kHttp;
    connection.server = absl::GetFlag(FLAGS_http_server);
  }
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.rate = absl::GetFlag(FLAGS_rate);
  o.requests = absl::GetFlag(FLAGS_requests);
  o.duration = absl::Seconds(absl::GetFlag(FLAGS_duration));
  absl::StatusOr<LengthRange> prompt = ParseLengthRange("prompt_tokens", absl::GetFlag(FLAGS_prompt_tokens));
  absl::StatusOr<LengthRange> output = ParseLengthRange("output_tokens", absl::GetFlag(FLAGS_output_tokens));
  for (const absl::Status& s : {prompt.status(), output.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  o.prompt_tokens = *prompt;
  const std::string prompt_mode = absl::GetFlag(FLAGS_prompt_mode);
  if (prompt_mode != "tokens" && prompt_mode != "text") {
    std::fprintf(stderr, "error: --prompt_mode = \"%s\" is not tokens or text\n",
                 prompt_mode.c_str());
    return 2;
  }
  o.prompt_mode = prompt_mode == "tokens" ? PromptMode::kTokens : PromptMode::kText;
  o.output_tokens = *output;
  const std::string sessions = absl::GetFlag(FLAGS_sessions);
  if (sessions != "new" && sessions != "reuse") {
    std::fprintf(stderr, "error: --sessions = \"%s\" is not new or reuse\n", sessions.c_str());
    return 2;
  }
  o.reuse_sessions = sessions == "reuse";
  o.warmup = absl::GetFlag(FLAGS_warmup);
  o.seed = absl::GetFlag(FLAGS_seed) == 0 ? 1 : absl::GetFlag(FLAGS_seed);
  BenchSampling& s = o.sampling;
  if (!std::isnan(absl::GetFlag(FLAGS_temperature))) s.temperature = absl::GetFlag(FLAGS_temperature);
  s.top_k = absl::GetFlag(FLAGS_top_k);
  if (!std::isnan(absl::GetFlag(FLAGS_top_p))) s.top_p = absl::GetFlag(FLAGS_top_p);
  s.min_p = absl::GetFlag(FLAGS_min_p);
  if (!std::isnan(absl::GetFlag(FLAGS_repetition_penalty))) {
    s.repetition_penalty = absl::GetFlag(FLAGS_repetition_penalty);
  }
  s.presence_penalty = absl::GetFlag(FLAGS_presence_penalty);
  s.frequency_penalty = absl::GetFlag(FLAGS_frequency_penalty);
  absl::StatusOr<std::map<int32_t, float>> bias = ParseLogitBias(absl::GetFlag(FLAGS_logit_bias));
  if (!bias.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(bias.status().message()).c_str());
    return 2;
  }
  s.logit_bias = *std::move(bias);
  o.progress = absl::GetFlag(FLAGS_progress);
  absl::StatusOr<nlohmann::json> report = RunBench(connection, o);
  if (!report.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(report.status().message()).c_str());
    return 2;
  }
  std::printf("%s", FormatBenchReport(*report).c_str());
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report->dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "error: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

int Main(std::vector<char*> args) {
  if (args.size() < 2) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  const std::string command = args[1];
  std::vector<std::string> rest(args.begin() + 2, args.end());
  ConnectionOptions connection = ConnectionFromFlags();
  if (command == "generate") {
    std::string prompt;
    if (rest.empty() || rest[0] == "-") {
      prompt.assign(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      prompt = absl::StrJoin(rest, " ");
    }
    return GenerateCommand(connection, GenerateRequestFromFlags(std::move(prompt)));
  }
  if (command == "session") {
    return SessionCommand(connection, rest, absl::GetFlag(FLAGS_prompt),
                          absl::GetFlag(FLAGS_initial_state), absl::GetFlag(FLAGS_page_size),
                          absl::GetFlag(FLAGS_file));
  }
  if (command == "state") {
    return StateCommand(connection, rest, absl::GetFlag(FLAGS_prompt), absl::GetFlag(FLAGS_file));
  }
  if (command == "model") return ModelCommand(connection);
  if (command == "health") {
    connection.timeout = std::min(connection.timeout, absl::Seconds(5));
    return HealthCommand(connection, absl::GetFlag(FLAGS_service));
  }
  if (command == "bench") return Bench(connection);
  std::fprintf(stderr, "unknown command %s\n%s", command.c_str(), kUsage);
  return 2;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "client/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(linserve::kUsage);
  return linserve::Main(absl::ParseCommandLine(argc, argv));
}
