// linserve-conversation-bench: a thinking chat through one session, each turn
// sent as its whole conversation the way Qwen3.5's template renders it (the
// earlier answers without their reasoning), against the same conversation
// sent stateless, which re-prefills the whole history as llama.cpp does.
// Side by side per turn: the history's tokens, what the session prefilled,
// and the time to the first token of both.
//
//   linserve-conversation-bench --server=HOST:PORT [--turns=20]
//       [--answer_bytes=1200] [--message_bytes=800] [--stateless_turns=1,10,20]
//
// The server should run with --prefix_cache_bytes=0, so that the stateless
// turns find nothing cached (each also has a salt of its own). Run by
// bench/conversation.sh, which writes a random Qwen3.5 model first.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_table.h"
#include "client/connection.h"
#include "linserve/v1/linserve.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:50051", "The running server");
ABSL_FLAG(int32_t, turns, 20, "Turns of the chat");
ABSL_FLAG(int32_t, answer_bytes, 1200,
          "Bytes of each earlier answer as the template re-renders it (no reasoning)");
ABSL_FLAG(int32_t, message_bytes, 800, "Bytes of each user message");
ABSL_FLAG(int32_t, generated_tokens, 4,
          "Tokens each turn generates (the reasoning the next turn's template drops)");
ABSL_FLAG(std::string, stateless_turns, "1,10,20",
          "Turns also sent stateless, the whole history prefilled");

namespace linserve {
namespace {

// Text of about `bytes` bytes, different for each `seed`.
std::string Filler(int32_t bytes, int seed) {
  static const char* const kWords[] = {"state",  "layer", "token", "delta", "gate",
                                       "memory", "chunk", "head",  "cache", "turn"};
  std::string text;
  for (int i = 0; static_cast<int32_t>(text.size()) < bytes; ++i) {
    absl::StrAppend(&text, kWords[(i * 7 + seed * 3) % 10], (i + seed) % 13, " ");
  }
  return text;
}

struct TurnResult {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  double ttft_ms = 0;  // queue + prefill: the request's arrival to its first token
};

TurnResult Send(v1::Linserve::Stub& stub, const std::string& conversation,
                const std::string& session_id, int64_t keep_state_at, const std::string& salt) {
  v1::GenerateRequest request;
  request.set_prompt(conversation);
  request.set_session_id(session_id);
  request.set_conversation(!session_id.empty());
  request.set_keep_state_at(keep_state_at);
  request.set_cache_salt(salt);
  request.set_max_new_tokens(absl::GetFlag(FLAGS_generated_tokens));
  request.mutable_sampling()->set_seed(7);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub.Generate(&context, request);
  v1::GenerateResponse message;
  TurnResult result;
  while (reader->Read(&message)) {
    if (!message.has_finished()) continue;
    result.prompt_tokens = message.finished().usage().prompt_tokens();
    result.cached_tokens = message.finished().usage().cached_tokens();
    result.ttft_ms = message.finished().timing().queue_ms() + message.finished().timing().prefill_ms();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    absl::FPrintF(stderr, "Generate failed: %s\n", status.error_message());
    std::exit(1);
  }
  return result;
}

int Run() {
  ConnectionOptions connection;
  connection.server = absl::GetFlag(FLAGS_server);
  auto channel = Connect(connection);
  if (!channel.ok()) {
    absl::FPrintF(stderr, "%s\n", channel.status().ToString());
    return 1;
  }
  auto stub = v1::Linserve::NewStub(*channel);
  std::vector<int32_t> stateless_turns;
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_stateless_turns), ',', absl::SkipEmpty())) {
    int32_t turn = 0;
    if (absl::SimpleAtoi(piece, &turn)) stateless_turns.push_back(turn);
  }
  grpc::ClientContext create_context;
  v1::CreateSessionRequest create;
  v1::Session session;
  if (grpc::Status s = stub->CreateSession(&create_context, create, &session); !s.ok()) {
    absl::FPrintF(stderr, "CreateSession failed: %s\n", s.error_message());
    return 1;
  }
  const std::string generation_prompt = "<|im_start|>assistant\n<think>\n";
  std::string history = "<|im_start|>system\nAnswer briefly.<|im_end|>\n";
  Table table({"turn", "history tokens", "session prefilled", "session TTFT ms",
               "stateless TTFT ms", "stateless/session"});
  const int32_t turns = absl::GetFlag(FLAGS_turns);
  int64_t session_prefilled = 0, history_prefilled = 0;
  for (int32_t turn = 1; turn <= turns; ++turn) {
    absl::StrAppend(&history, "<|im_start|>user\n",
                    Filler(absl::GetFlag(FLAGS_message_bytes), turn), "<|im_end|>\n");
    const std::string conversation = history + generation_prompt;
    const TurnResult live = Send(*stub, conversation, session.id(),
                                 static_cast<int64_t>(history.size()), "");
    session_prefilled += live.prompt_tokens - live.cached_tokens;
    history_prefilled += live.prompt_tokens;
    std::string stateless_ms = "-", ratio = "-";
    if (std::find(stateless_turns.begin(), stateless_turns.end(), turn) != stateless_turns.end()) {
      const TurnResult alone = Send(*stub, conversation, "", 0, absl::StrCat("alone-", turn));
      stateless_ms = absl::StrFormat("%.0f", alone.ttft_ms);
      ratio = Ratio(alone.ttft_ms, live.ttft_ms);
    }
    table.Add({absl::StrCat(turn), absl::StrCat(live.prompt_tokens),
               absl::StrCat(live.prompt_tokens - live.cached_tokens),
               absl::StrFormat("%.0f", live.ttft_ms), stateless_ms, ratio});
    // The template renders this answer without its reasoning from the next
    // turn on.
    absl::StrAppend(&history, "<|im_start|>assistant\n",
                    Filler(absl::GetFlag(FLAGS_answer_bytes), 1000 + turn), "<|im_end|>\n");
  }
  absl::PrintF("A thinking chat through one session (conversation turns, the earlier answers "
               "re-rendered without their reasoning) against the same conversation sent "
               "stateless:\n");
  table.Print();
  absl::PrintF("  tokens prefilled over %d turns: %lld through the session, %lld re-prefilling "
               "every history (%s fewer)\n",
               turns, session_prefilled, history_prefilled,
               Ratio(static_cast<double>(history_prefilled), static_cast<double>(session_prefilled)));
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return linserve::Run();
}
