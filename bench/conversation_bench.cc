// linserve-conversation-bench: what a hybrid session saves, through a running
// server.
//   1. A thinking chat through one session, each turn sent as its whole
//      conversation the way Qwen3.5's template renders it (the earlier
//      answers without their reasoning), against the same conversation sent
//      stateless, which re-prefills the whole history as llama.cpp does.
//      Side by side per turn: the history's tokens, what the session
//      prefilled, and the time to the first token of both.
//   2. A prompt of --prefix_prompt_bytes through the prefix-state cache:
//      cold, then warm (resumed from the longest cached prefix).
//   3. Fork, export and import of sessions of --fork_lengths bytes.
//
//   linserve-conversation-bench --server=HOST:PORT [--turns=20]
//       [--answer_bytes=460] [--message_bytes=300] [--stateless_turns=1,10,20]
//
// The stateless turns each have a cache salt of their own, so the prefix
// cache finds nothing for them. Run by bench/conversation.sh, which writes a
// random Qwen3.5 model first.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_table.h"
#include "client/connection.h"
#include "linserve/v1/linserve.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:50051", "The running server");
ABSL_FLAG(int32_t, turns, 20, "Turns of the chat");
ABSL_FLAG(int32_t, answer_bytes, 460,
          "Bytes of each earlier answer as the template re-renders it (no reasoning)");
ABSL_FLAG(int32_t, message_bytes, 300, "Bytes of each user message");
ABSL_FLAG(int32_t, generated_tokens, 4,
          "Tokens each turn generates (the reasoning the next turn's template drops)");
ABSL_FLAG(std::string, stateless_turns, "1,10,20",
          "Turns also sent stateless, the whole history prefilled");
ABSL_FLAG(int32_t, prefix_prompt_bytes, 6300, "Bytes of the prompt of section 2 (0: skip it)");
ABSL_FLAG(std::string, fork_lengths, "1500,6300",
          "Bytes of the prompts of the sessions forked and exported in section 3");
ABSL_FLAG(int32_t, repeats, 5, "Repeats of each fork, export and import (medians)");

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

std::vector<int32_t> IntList(const std::string& list) {
  std::vector<int32_t> out;
  for (absl::string_view piece : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int32_t value = 0;
    if (absl::SimpleAtoi(piece, &value)) out.push_back(value);
  }
  return out;
}

void Check(const grpc::Status& status, const char* what) {
  if (status.ok()) return;
  absl::FPrintF(stderr, "%s failed: %s\n", what, status.error_message());
  std::exit(1);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double MillisSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

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
  Check(reader->Finish(), "Generate");
  return result;
}

// Section 2: the same prompt three times under one salt: cold, then the
// second sighting (which keeps a snapshot), then warm.
void PrefixCacheSection(v1::Linserve::Stub& stub) {
  const int32_t bytes = absl::GetFlag(FLAGS_prefix_prompt_bytes);
  if (bytes <= 0) return;
  const std::string prompt = Filler(bytes, 77);
  const TurnResult cold = Send(stub, prompt, "", 0, "prefix");
  (void)Send(stub, prompt, "", 0, "prefix");
  const TurnResult warm = Send(stub, prompt, "", 0, "prefix");
  absl::PrintF("The prefix-state cache, a %lld-token prompt: cold %.0f ms, warm %.0f ms "
               "(%lld tokens resumed): %s\n\n",
               cold.prompt_tokens, cold.ttft_ms, warm.ttft_ms, warm.cached_tokens,
               Ratio(cold.ttft_ms, warm.ttft_ms));
}

// What the fork target allows besides its 1 ms: one copy of the session's
// recurrent part, here timed as a copy of that many bytes between two
// buffers this process has touched before (the server reuses freed memory,
// --malloc_keep_mb), median of 9.
double RecurrentCopyMs(int64_t bytes) {
  std::vector<char> from(static_cast<size_t>(bytes), 1), to(static_cast<size_t>(bytes), 0);
  std::vector<double> ms;
  for (int i = 0; i < 9; ++i) {
    const absl::Time start = absl::Now();
    std::memcpy(to.data(), from.data(), to.size());
    ms.push_back(MillisSince(start));
    from[static_cast<size_t>(i)] = to[static_cast<size_t>(bytes - 1 - i)];  // keep both live
  }
  return Median(ms);
}

// Section 3: fork, export and import against the session's length.
void ForkSection(v1::Linserve::Stub& stub) {
  const std::vector<int32_t> lengths = IntList(absl::GetFlag(FLAGS_fork_lengths));
  if (lengths.empty()) return;
  Table table({"session tokens", "state", "fork ms", "recurrent copy ms", "export ms",
               "import ms"});
  for (int32_t bytes : lengths) {
    grpc::ClientContext create_context;
    v1::CreateSessionRequest create;
    create.set_prompt(Filler(bytes, bytes));
    create.set_cache_salt(absl::StrCat("fork-", bytes));
    v1::Session session;
    Check(stub.CreateSession(&create_context, create, &session), "CreateSession");
    std::vector<double> fork_ms, export_ms, import_ms;
    std::string file;
    for (int32_t r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      grpc::ClientContext fork_context;
      v1::ForkSessionRequest fork;
      fork.set_session_id(session.id());
      v1::Session child;
      absl::Time start = absl::Now();
      Check(stub.ForkSession(&fork_context, fork, &child), "ForkSession");
      fork_ms.push_back(MillisSince(start));

      grpc::ClientContext export_context;
      v1::ExportSessionRequest export_request;
      export_request.set_session_id(session.id());
      start = absl::Now();
      auto reader = stub.ExportSession(&export_context, export_request);
      v1::StateChunk chunk;
      file.clear();
      while (reader->Read(&chunk)) file += chunk.data();
      Check(reader->Finish(), "ExportSession");
      export_ms.push_back(MillisSince(start));

      grpc::ClientContext import_context;
      v1::Session imported;
      start = absl::Now();
      auto writer = stub.ImportSession(&import_context, &imported);
      const size_t piece = 64 << 10;  // the server's default max_state_chunk_bytes
      for (size_t at = 0; at < file.size(); at += piece) {
        v1::StateChunk out;
        out.set_data(file.substr(at, piece));
        writer->Write(out);
      }
      writer->WritesDone();
      Check(writer->Finish(), "ImportSession");
      import_ms.push_back(MillisSince(start));
      for (const std::string& id : {child.id(), imported.id()}) {
        grpc::ClientContext delete_context;
        v1::DeleteSessionRequest remove;
        remove.set_session_id(id);
        v1::DeleteSessionResponse removed;
        Check(stub.DeleteSession(&delete_context, remove, &removed), "DeleteSession");
      }
    }
    table.Add({absl::StrCat(session.position()), Bytes(static_cast<int64_t>(file.size())),
               absl::StrFormat("%.1f", Median(fork_ms)),
               absl::StrFormat("%.1f", RecurrentCopyMs(session.recurrent_state_bytes())),
               absl::StrFormat("%.1f", Median(export_ms)),
               absl::StrFormat("%.1f", Median(import_ms))});
  }
  absl::PrintF("Fork, export and import against the session's length (medians of %d, the "
               "client's time for each call; the store on this machine's disk):\n",
               absl::GetFlag(FLAGS_repeats));
  table.Print();
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
  const std::vector<int32_t> stateless_turns = IntList(absl::GetFlag(FLAGS_stateless_turns));
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
  PrefixCacheSection(*stub);
  ForkSection(*stub);
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return linserve::Run();
}
