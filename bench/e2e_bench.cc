// linserve-e2e-bench: the numbers the project is judged on, through a running
// server and gRPC, each a ratio of two figures measured side by side in this
// run (see bench/RESULTS.md and bench/e2e.sh, which starts the server).
//
//   1. server overhead: output tokens/s through gRPC at concurrency 32 vs the
//      engine's batched decode at batch 32 in this process, same model
//   2. scaling: output tokens/s at concurrency 1, 8, 32, 64
//   3. resume vs re-prefill: time to first token continuing a 4,096-token
//      conversation from its session vs re-sending it as a prompt
//   4. constant cost: time per output token and save (export) / restore
//      (import) time after 100 vs 16,000 tokens of history
//   5. fork: 32 forks of a 4,096-token system prompt, each answering, vs 32
//      fresh sessions each prefilled with it
//   6. prefix-state cache: 32 requests that share a 4,096-token system
//      prompt, each adding 64 tokens, at concurrency 8: time to first token
//      with the prompt never seen (cold) vs seen (warm), and throughput with
//      the cache on vs off (--server_without_prefix_cache)
//
// With --named_state_prompt_tokens=N it measures only named states instead
// (bench/e2e.sh runs it against a server with the prefix-state cache off):
// time to first token of a turn started from a state made once from an
// N-token prompt P vs sending P and the turn's text whole, and what making
// the state costs (CreateNamedState) vs one cold prefill of P.
//
// The baselines of 3 and 5 re-prefill on purpose: each of their requests
// carries a cache_salt of its own, so the prefix-state cache never serves it.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/types.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/engine_measure.h"
#include "bench/malloc_flag.h"
#include "bench/server_work.h"
#include "client/bench.h"
#include "client/connection.h"
#include <ATen/Parallel.h>

#include "engine/cpu/engine_threads.h"
#include "engine/model/language_model.h"
#include "engine/text/tokenizer.h"
#include "linserve/v1/linserve.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:50051", "The running server to measure");
ABSL_FLAG(std::string, model, "models/default", "The model it serves (for the engine figure)");
ABSL_FLAG(bool, quick, false, "Tiny sizes and durations: checks that everything runs");
ABSL_FLAG(std::string, json, "", "Also write every figure to this file");
ABSL_FLAG(bool, overhead_only, false,
          "Only the server against its engine at concurrency 1 and 32, with the sampling BlinkDL "
          "recommends for chat (temperature 1, top_p 0.3, presence and frequency penalties 0.5)");
ABSL_FLAG(int32_t, overhead_rounds, 5,
          "--overhead_only: rounds at concurrency 32, each the engine's batch 32, the same work "
          "without a server and the server, side by side (medians of the rounds' ratios)");
ABSL_FLAG(std::string, fsync_dir, "",
          "The server's --store_dir: section 4 times one fsync of a file the size of a state "
          "file there, the disk's own floor under ImportSession; empty: skip it");
ABSL_FLAG(bool, save_restore_only, false,
          "Only section 4 (a turn's time per token, ExportSession and ImportSession, the "
          "disk's floor), repeated --save_restore_repeats times");
ABSL_FLAG(int32_t, save_restore_repeats, 21, "Repeats of --save_restore_only (medians)");
ABSL_FLAG(std::string, server_without_prefix_cache, "",
          "The same model served with --prefix_cache_bytes=0, for the throughput comparison of "
          "section 6; empty: skip it");

ABSL_FLAG(int64_t, named_state_prompt_tokens, 0,
          "Only the named-state comparison, from a prompt of about this many tokens (the "
          "served model's tokenizer); 0: the sections above instead");
ABSL_FLAG(int32_t, named_state_turn_tokens, 16,
          "Tokens of the turn's own text sent after the named state (or after the whole prompt)");
ABSL_FLAG(int32_t, named_state_repeats, 5, "Repeats of the named-state comparison (medians)");
ABSL_FLAG(int32_t, threads, 0,
          "The engine's threads in this process (its figures beside the server's): 0 is the "
          "cores this process may use, the server's own default");

namespace linserve {
namespace {

struct Sizes {
  double seconds_per_load;  // each concurrency level
  int64_t conversation;     // tokens of the resumed conversation and the system prompt
  int64_t short_history;
  int64_t long_history;
  int repeats;
  int forks;
};

Sizes SizesFor(bool quick) {
  if (quick) return {1.0, 256, 16, 512, 3, 4};
  return {10.0, 4096, 100, 16000, 7, 32};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The nearest-rank percentile `p` in [0, 100].
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// A cache_salt never used before: the request's prefix is its own.
std::string Salt() {
  static std::atomic<int64_t> next{0};
  return absl::StrCat("bench-", absl::ToUnixNanos(absl::Now()), "-", next++);
}

std::string Text(int64_t bytes) {
  const std::string line = "And thus I clothe my naked villany with old odd ends. ";
  std::string text;
  while (static_cast<int64_t>(text.size()) < bytes) text += line;
  text.resize(static_cast<size_t>(bytes));
  return text;
}

// Milliseconds of one fsync of a new file of `bytes` bytes in `dir`, written
// just before (so that fsync has that many dirty bytes to write back): what
// the store's atomic write of a state file cannot avoid. The file is
// removed; -1 when it cannot be made.
double FsyncMs(const std::string& dir, size_t bytes) {
  const std::string path = absl::StrCat(dir, "/fsync-probe-", ::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  const std::string data(bytes, 'x');
  bool ok = ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  const absl::Time start = absl::Now();
  ok = ok && ::fsync(fd) == 0;
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  ::close(fd);
  ::unlink(path.c_str());
  return ok ? ms : -1;
}

// Milliseconds of the disk store's durable write of a new file of `bytes`
// bytes in `dir`, step for step as server/store/atomic_file.cc does it (a
// temporary file written and fsynced, renamed into place, the directory
// fsynced; bench/ may not include the server's code): the floor that the
// crash-safety contract puts under ImportSession, of which the one fsync
// above is the disk's part. -1 when a step fails.
double DurableWriteMs(const std::string& dir, size_t bytes) {
  const std::string path = absl::StrCat(dir, "/durable-probe-", ::getpid());
  const std::string temp = path + ".tmp";
  const std::string data(bytes, 'x');
  const absl::Time start = absl::Now();
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  ok = ok && ::fsync(fd) == 0;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  ok = ok && ::rename(temp.c_str(), path.c_str()) == 0;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ok = ok && dir_fd >= 0 && ::fsync(dir_fd) == 0;
  if (dir_fd >= 0) ::close(dir_fd);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  ::unlink(temp.c_str());
  ::unlink(path.c_str());
  return ok ? ms : -1;
}

class Client {
 public:
  explicit Client(const ConnectionOptions& connection)
      : connection_(connection), stub_(v1::Linserve::NewStub(*Connect(connection))) {}

  std::string Create(const std::string& prompt, const std::string& cache_salt = "") {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::CreateSessionRequest request;
    request.set_prompt(prompt);
    request.set_cache_salt(cache_salt);
    v1::Session session;
    Check(stub_->CreateSession(&context, request, &session), "CreateSession");
    return session.id();
  }
  std::string Fork(const std::string& id) {
    grpc::ClientContext context;
    PrepareCall(connection_, id, context);
    v1::ForkSessionRequest request;
    request.set_session_id(id);
    v1::Session session;
    Check(stub_->ForkSession(&context, request, &session), "ForkSession");
    return session.id();
  }
  void Delete(const std::string& id) {
    grpc::ClientContext context;
    PrepareCall(connection_, id, context);
    v1::DeleteSessionRequest request;
    request.set_session_id(id);
    v1::DeleteSessionResponse response;
    stub_->DeleteSession(&context, request, &response);
  }

  struct Turn {
    double ttft_ms = 0;
    v1::Finished finished;
  };
  Turn Generate(const std::string& session, const std::string& prompt, int32_t tokens,
                const std::string& cache_salt = "") {
    grpc::ClientContext context;
    PrepareCall(connection_, session, context);
    v1::GenerateRequest request;
    request.set_session_id(session);
    request.set_prompt(prompt);
    request.set_cache_salt(cache_salt);
    request.set_max_new_tokens(tokens);
    request.set_ignore_eos(true);
    request.mutable_sampling()->set_temperature(0.8f);
    request.mutable_sampling()->set_seed(1);
    const absl::Time start = absl::Now();
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    Turn turn;
    bool first = true;
    while (reader->Read(&response)) {
      if (first) turn.ttft_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      first = false;
      if (response.has_finished()) turn.finished = response.finished();
    }
    Check(reader->Finish(), "Generate");
    return turn;
  }

  // One greedy token of `prompt`, stateless or after the named state
  // `initial_state`: the time to first token as the client sees it.
  Turn First(const std::string& prompt, const std::string& initial_state,
             const std::string& cache_salt) {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::GenerateRequest request;
    request.set_prompt(prompt);
    request.set_initial_state(initial_state);
    request.set_cache_salt(cache_salt);
    request.set_max_new_tokens(1);
    request.set_ignore_eos(true);
    request.mutable_sampling()->set_temperature(0.0f);
    const absl::Time start = absl::Now();
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    Turn turn;
    bool first = true;
    while (reader->Read(&response)) {
      if (first) turn.ttft_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      first = false;
      if (response.has_finished()) turn.finished = response.finished();
    }
    Check(reader->Finish(), "Generate");
    return turn;
  }

  // CreateNamedState's answer, and its wall time as the client sees it.
  v1::NamedState CreateNamed(const std::string& name, const std::string& prompt,
                             const std::string& cache_salt, double* ms) {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::CreateNamedStateRequest request;
    request.set_name(name);
    request.set_prompt(prompt);
    request.set_cache_salt(cache_salt);
    v1::NamedState state;
    const absl::Time start = absl::Now();
    Check(stub_->CreateNamedState(&context, request, &state), "CreateNamedState");
    *ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    return state;
  }
  void DeleteNamed(const std::string& name) {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::DeleteNamedStateRequest request;
    request.set_name(name);
    v1::DeleteNamedStateResponse response;
    Check(stub_->DeleteNamedState(&context, request, &response), "DeleteNamedState");
  }
  v1::ModelInfo Info() {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::ModelInfo info;
    Check(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info), "GetModelInfo");
    return info;
  }

  std::string Export(const std::string& id) {
    grpc::ClientContext context;
    PrepareCall(connection_, id, context);
    v1::ExportSessionRequest request;
    request.set_session_id(id);
    auto reader = stub_->ExportSession(&context, request);
    std::string file;
    v1::StateChunk chunk;
    while (reader->Read(&chunk)) file += chunk.data();
    Check(reader->Finish(), "ExportSession");
    return file;
  }
  std::string Import(const std::string& file) {
    v1::Session session;
    Check(TryImport(file, &session), "ImportSession");
    return session.id();
  }
  grpc::Status TryImport(const std::string& file, v1::Session* session) {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    auto writer = stub_->ImportSession(&context, session);
    for (size_t offset = 0; offset < file.size(); offset += 65536) {
      v1::StateChunk chunk;
      chunk.set_data(file.substr(offset, 65536));
      writer->Write(chunk);
    }
    writer->WritesDone();
    return writer->Finish();
  }

 private:
  static void Check(const grpc::Status& status, const char* what) {
    if (status.ok()) return;
    std::fprintf(stderr, "%s failed: %s: %s\n", what, StatusCodeName(status.error_code()).c_str(),
                 status.error_message().c_str());
    std::exit(1);
  }

  const ConnectionOptions connection_;
  std::unique_ptr<v1::Linserve::Stub> stub_;
};

// Section 4: a turn's time per token, ExportSession and ImportSession of a
// session with a short and a long history, beside the disk's floor under an
// import (one fsync, the store's durable write) and a refused import.
void SaveAndRestore(Client& client, const Sizes& sizes, nlohmann::json& out) {
  // Both histories are measured in alternation, so that a change in the
  // machine's load hits both alike.
  const std::string short_session = client.Create(Text(sizes.short_history));
  const std::string long_session = client.Create(Text(sizes.long_history));
  std::vector<double> tpot[2], save[2], restore[2], refused, fsync_ms, durable_ms;
  const std::string fsync_dir = absl::GetFlag(FLAGS_fsync_dir);
  size_t file_bytes = 0;
  for (int r = 0; r < sizes.repeats; ++r) {
    for (int which = 0; which < 2; ++which) {
      const std::string& session = which == 0 ? short_session : long_session;
      const std::string fork = client.Fork(session);
      const v1::Finished f = client.Generate(fork, "", 64).finished;
      tpot[which].push_back(f.timing().decode_ms() / (f.usage().generated_tokens() - 1));
      client.Delete(fork);
      absl::Time start = absl::Now();
      const std::string file = client.Export(session);
      save[which].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      start = absl::Now();
      const std::string copy = client.Import(file);
      restore[which].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      client.Delete(copy);
      file_bytes = file.size();
      // The same bytes with the checksum's last byte flipped: the server reads
      // and hashes every chunk, then refuses the file before any restore or
      // write. What is left of an import over this is the server's own work.
      std::string damaged = file;
      damaged.back() = static_cast<char>(damaged.back() ^ 1);
      v1::Session unused;
      start = absl::Now();
      const grpc::Status refusal = client.TryImport(damaged, &unused);
      if (refusal.error_code() == grpc::StatusCode::DATA_LOSS) {
        refused.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      }
      if (!fsync_dir.empty()) {
        fsync_ms.push_back(FsyncMs(fsync_dir, file.size()));
        durable_ms.push_back(DurableWriteMs(fsync_dir, file.size()));
      }
    }
  }
  struct Cost {
    double tpot_ms, save_ms, restore_ms;
  };
  const Cost short_cost{Median(tpot[0]), Median(save[0]), Median(restore[0])};
  const Cost long_cost{Median(tpot[1]), Median(save[1]), Median(restore[1])};
  absl::PrintF("4. Constant cost: %lld vs %lld tokens of history (median of %d)\n",
               sizes.short_history, sizes.long_history, sizes.repeats);
  absl::PrintF("  %-36s %9s %9s %7s\n", "", "short", "long", "ratio");
  absl::PrintF("  %-36s %9.3f %9.3f %7.2f  (target <= 1.10)\n", "time per output token (ms, server)",
               short_cost.tpot_ms, long_cost.tpot_ms, long_cost.tpot_ms / short_cost.tpot_ms);
  absl::PrintF("  %-36s %9.3f %9.3f %7.2f  (target <= 1.10)\n", "save = ExportSession (ms)",
               short_cost.save_ms, long_cost.save_ms, long_cost.save_ms / short_cost.save_ms);
  absl::PrintF("  %-36s %9.3f %9.3f %7.2f  (target <= 1.10)\n", "restore = ImportSession (ms)",
               short_cost.restore_ms, long_cost.restore_ms,
               long_cost.restore_ms / short_cost.restore_ms);
  if (!fsync_ms.empty()) {
    // The import's floor: the durable write of its file, which one fsync of
    // that many bytes on the same disk bounds from below.
    absl::PrintF("  %-36s %9.3f            (restore - fsync = %.3f ms short, %.3f long; "
                 "target <= 1)\n",
                 absl::StrFormat("fsync of a %zu-byte file (ms)", file_bytes), Median(fsync_ms),
                 short_cost.restore_ms - Median(fsync_ms), long_cost.restore_ms - Median(fsync_ms));
    absl::PrintF("  %-36s %9.3f            "
                 "(restore - durable write = %.3f ms short, %.3f long)\n",
                 "the store's durable write of it (ms)", Median(durable_ms),
                 short_cost.restore_ms - Median(durable_ms),
                 long_cost.restore_ms - Median(durable_ms));
    out["fsync_ms"] = Median(fsync_ms);
    out["durable_write_ms"] = Median(durable_ms);
  }
  if (!refused.empty()) {
    absl::PrintF("  %-36s %9.3f            (restore - refused = %.3f ms short, %.3f long)\n",
                 "a refused import: transfer, checksum", Median(refused),
                 short_cost.restore_ms - Median(refused), long_cost.restore_ms - Median(refused));
    out["refused_import_ms"] = Median(refused);
  }
  absl::PrintF("\n");
  out["tpot_ms"] = {short_cost.tpot_ms, long_cost.tpot_ms};
  out["save_ms"] = {short_cost.save_ms, long_cost.save_ms};
  out["restore_ms"] = {short_cost.restore_ms, long_cost.restore_ms};
}

std::unique_ptr<LanguageModel> LoadOrExit(const std::string& model_dir) {
  auto model = LanguageModel::Load(model_dir, LoadOptions{});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(model);
}

// Output tokens/s of the engine's batched decode step, no server.
double EngineTokensPerSecond(LanguageModel& model, int64_t batch, int steps) {
  State one = model.NewState();
  (void)model.Prefill(one, model.tokenizer().Encode(Text(16), /*starts_text=*/true));
  std::vector<const State*> copies(static_cast<size_t>(batch), &one);
  State state = StackStates(copies);
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 'e');
  for (int i = 0; i < 8; ++i) (void)model.Step(state, tokens);
  std::vector<double> rates;
  for (int r = 0; r < 5; ++r) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < steps; ++i) (void)model.Step(state, tokens);
    rates.push_back(static_cast<double>(batch * steps) /
                    absl::ToDoubleSeconds(absl::Now() - start));
  }
  return Median(rates);
}

// The load tester's report ("results") for `concurrency` streams over `seconds`.
nlohmann::json ServerResults(const ConnectionOptions& connection, int32_t concurrency,
                             double seconds, const BenchSampling& sampling) {
  BenchOptions o;
  o.sampling = sampling;
  o.concurrency = concurrency;
  o.duration = absl::Seconds(seconds);
  o.prompt_tokens = {16, 16};
  o.output_tokens = {128, 128};
  o.warmup = concurrency;
  o.progress = false;
  auto report = RunBench(connection, o);
  if (!report.ok()) {
    std::fprintf(stderr, "%s\n", report.status().ToString().c_str());
    std::exit(1);
  }
  const nlohmann::json r = (*report)["results"];
  if (r["failed"].get<int64_t>() > 0) std::fprintf(stderr, "warning: %s\n", r.dump().c_str());
  return r;
}

double ServerTokensPerSecond(const ConnectionOptions& connection, int32_t concurrency,
                             double seconds) {
  return ServerResults(connection, concurrency, seconds, BenchSampling{})
      ["output_token_throughput_tps"]
          .get<double>();
}

// The load tester's closed loop at concurrency 32 (prompt 16, output 128
// tokens, `sampling`) done by the engine alone: bench/server_work.h.
ServerWorkResult ServerWorkAlone(LanguageModel& model, const BenchSampling& sampling,
                                 double seconds) {
  ServerWork work;
  work.sampling.temperature = sampling.temperature;
  work.sampling.top_p = sampling.top_p;
  work.sampling.presence_penalty = sampling.presence_penalty;
  work.sampling.frequency_penalty = sampling.frequency_penalty;
  work.seconds = seconds;
  return RunServerWork(model, work);
}

// The server against its engine with chat sampling, for a model with a
// large vocabulary (bench/e2e.sh's RWKV-7 row). Concurrency 32 runs in
// rounds, each the engine's bare batch 32, the same closed loop done by the
// engine alone and the server one after the other: this machine's speed
// drifts by a tenth within minutes, so each round's ratios are side by side
// and the medians are of those.
int OverheadOnly(const ConnectionOptions& connection, const std::string& model_dir, bool quick) {
  BenchSampling chat;
  chat.temperature = 1.0f;
  chat.top_p = 0.3f;
  chat.presence_penalty = 0.5f;
  chat.frequency_penalty = 0.5f;
  const int steps = quick ? 4 : 32;
  const double seconds = quick ? 2 : 20;
  const int rounds = quick ? 1 : std::max(1, absl::GetFlag(FLAGS_overhead_rounds));
  const std::unique_ptr<LanguageModel> model = LoadOrExit(model_dir);
  const double engine1 = EngineTokensPerSecond(*model, 1, 2 * steps);
  const nlohmann::json one = ServerResults(connection, 1, seconds, chat);
  const double tpot = one["tpot_ms"]["p50"].get<double>();
  absl::PrintF("Server against engine, %s (prompt 16, output 128 tokens; temperature 1, top_p "
               "0.3, presence and frequency penalties 0.5)\n",
               model_dir);
  absl::PrintF("  concurrency 1 (%.0f s): engine step %.2f ms, server TPOT p50 %.2f ms: %.2f "
               "(target <= 1.08)\n",
               seconds, 1e3 / engine1, tpot, tpot / (1e3 / engine1));
  absl::PrintF("  concurrency 32, %d rounds of %.0f s each; \"alone\": the server's work without "
               "a server, the same closed loop's prefills, decode steps and sampling by the engine "
               "in this process\n",
               rounds, seconds);
  absl::PrintF("  %5s %10s %10s %10s %13s %13s %12s   %s\n", "round", "engine 32", "alone",
               "server", "server/engine", "alone/engine", "server/alone",
               "alone's time: decode, prefill, sampling; ms per decode step");
  std::vector<double> engine32, alone_tps, server_tps, server_ratio, alone_ratio, server_alone;
  nlohmann::json many;
  for (int r = 0; r < rounds; ++r) {
    engine32.push_back(EngineTokensPerSecond(*model, 32, steps));
    const ServerWorkResult alone = ServerWorkAlone(*model, chat, seconds);
    many = ServerResults(connection, 32, seconds, chat);
    alone_tps.push_back(alone.output_tokens_per_second);
    server_tps.push_back(many["output_token_throughput_tps"].get<double>());
    server_ratio.push_back(server_tps.back() / engine32.back());
    alone_ratio.push_back(alone_tps.back() / engine32.back());
    server_alone.push_back(server_tps.back() / alone_tps.back());
    absl::PrintF("  %5d %10.1f %10.1f %10.1f %13.2f %13.2f %12.2f   %.1f%%, %.1f%%, %.1f%%; %.1f\n",
                 r + 1, engine32.back(), alone_tps.back(), server_tps.back(), server_ratio.back(),
                 alone_ratio.back(), server_alone.back(), 100 * alone.decode_share,
                 100 * alone.prefill_share, 100 * alone.sampling_share, alone.decode_step_ms);
  }
  absl::PrintF("  median %9.1f %10.1f %10.1f %13.2f %13.2f %12.2f   (server/engine: target >= "
               "0.85)\n\n",
               Median(engine32), Median(alone_tps), Median(server_tps), Median(server_ratio),
               Median(alone_ratio), Median(server_alone));
  const std::string json = absl::GetFlag(FLAGS_json);
  if (!json.empty()) {
    std::ofstream(json) << nlohmann::json{{"engine_batch1_tps", engine1},
                                          {"engine_batch32_tps", engine32},
                                          {"server_work_alone_tps", alone_tps},
                                          {"server_c32_tps", server_tps},
                                          {"server_c1", one},
                                          {"server_c32_last_round", many}}
                               .dump(2);
  }
  return 0;
}

// Section 6: requests of `system` + `own(i)` for i in [0, count) at
// `concurrency`, each generating 16 tokens; returns each one's time to first
// token (ms, in request order) and sets `seconds` to the wall time of all.
std::vector<double> RunPrompts(const ConnectionOptions& connection, int count, int concurrency,
                               const std::function<std::string(int)>& prompt, double* seconds,
                               std::vector<int64_t>* cached = nullptr) {
  std::vector<double> ttft(static_cast<size_t>(count));
  if (cached != nullptr) cached->assign(static_cast<size_t>(count), 0);
  std::atomic<int> next{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      Client own(connection);
      for (int i = next++; i < count; i = next++) {
        const Client::Turn turn = own.Generate("", prompt(i), 16);
        ttft[static_cast<size_t>(i)] = turn.ttft_ms;
        if (cached != nullptr) (*cached)[static_cast<size_t>(i)] = turn.finished.usage().cached_tokens();
      }
    });
  }
  for (auto& w : workers) w.join();
  *seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return ttft;
}

nlohmann::json MeasurePrefixCache(const ConnectionOptions& connection, const Sizes& sizes) {
  const int count = sizes.forks, concurrency = 8;
  const int64_t own_tokens = 64;
  // Distinct from their first byte, so that no two system prompts share a block.
  auto system = [&](const std::string& name) {
    const std::string head = "[" + name + "] ";
    return head + Text(sizes.conversation - static_cast<int64_t>(head.size()));
  };
  auto own = [&](int i) {
    const std::string head = "\nQ" + std::to_string(i) + ": ";
    return head + Text(own_tokens - static_cast<int64_t>(head.size()));
  };
  const std::string run = Salt();  // this run's prompts are new to the server
  double cold_s = 0, warm_s = 0, off_s = 0;
  const std::vector<double> cold = RunPrompts(
      connection, count, concurrency,
      [&](int i) { return system(run + " cold " + std::to_string(i)) + own(i); }, &cold_s);
  const std::string shared = system(run + " shared");
  Client client(connection);
  for (int i = 0; i < 2; ++i) client.Generate("", shared + own(1000 + i), 16);  // two sightings
  std::vector<int64_t> cached;
  const std::vector<double> warm = RunPrompts(
      connection, count, concurrency, [&](int i) { return shared + own(i); }, &warm_s, &cached);

  absl::PrintF("6. Prefix-state cache: %d requests, a %lld-token system prompt + %lld tokens of "
               "their own, concurrency %d, 16 tokens out\n",
               count, sizes.conversation, own_tokens, concurrency);
  absl::PrintF("  %-44s %9s %9s\n", "time to first token (ms)", "median", "p99");
  absl::PrintF("  %-44s %9.1f %9.1f\n", "cold: each system prompt never seen", Median(cold),
               Percentile(cold, 99));
  absl::PrintF("  %-44s %9.1f %9.1f\n", "warm: the shared one seen twice before", Median(warm),
               Percentile(warm, 99));
  absl::PrintF("  ratio %.1fx faster at the median (target >= 20x); cached tokens per warm "
               "request: %lld to %lld\n",
               Median(cold) / Median(warm), *std::min_element(cached.begin(), cached.end()),
               *std::max_element(cached.begin(), cached.end()));
  nlohmann::json out = {{"cold_ttft_ms", {Median(cold), Percentile(cold, 99)}},
                        {"warm_ttft_ms", {Median(warm), Percentile(warm, 99)}},
                        {"warm_rps", count / warm_s}};
  const std::string without = absl::GetFlag(FLAGS_server_without_prefix_cache);
  if (!without.empty()) {
    ConnectionOptions off = connection;
    off.server = without;
    Client(off).Generate("", shared + own(1000), 16);  // the same history as the server with it
    Client(off).Generate("", shared + own(1001), 16);
    RunPrompts(off, count, concurrency, [&](int i) { return shared + own(i); }, &off_s);
    absl::PrintF("  throughput of the warm requests: cache on %.2f, off %.2f requests/s: %.1fx\n",
                 count / warm_s, count / off_s, off_s / warm_s);
    out["off_rps"] = count / off_s;
  }
  // What a snapshot at every boundary of every prompt would have kept.
  const int64_t block = [&] {
    auto stub = v1::Linserve::NewStub(*Connect(connection));
    grpc::ClientContext context;
    PrepareCall(connection, "", context);
    v1::ModelInfo info;
    (void)stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    out["state_bytes"] = info.state_bytes_per_session();
    return std::max<int64_t>(1, info.prefix_cache_block_tokens());
  }();
  const int64_t per_prompt = (sizes.conversation + own_tokens) / block;
  const int64_t every = count * per_prompt + (per_prompt - sizes.conversation / block) * (count + 2) +
                        sizes.conversation / block;
  absl::PrintF("  a snapshot at every boundary of every prompt would keep %lld (%.1f MiB); the "
               "second-sighting rule keeps one a shared prefix (the server's gauge below)\n\n",
               every, static_cast<double>(every * out["state_bytes"].get<int64_t>()) / (1 << 20));
  return out;
}

// The served model's tokenizer, from its ModelInfo (the World vocabulary is
// built into the library; a byte model's text is one token per byte).
Tokenizer TokenizerOf(const v1::ModelInfo& info) {
  if (info.tokenizer() == "rwkv_world") {
    auto world = Tokenizer::World(Tokenizer::BuiltInWorldVocabulary(), info.vocab_size());
    if (!world.ok()) {
      std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
      std::exit(1);
    }
    return *std::move(world);
  }
  return Tokenizer::Bytes(info.vocab_size());
}

// `head` and then the bench's text, the shortest that `tokenizer` makes at
// least `tokens` tokens of (`starts_text`: a stateless prompt's encoding).
std::string TextOfTokens(const Tokenizer& tokenizer, const std::string& head, int64_t tokens,
                         bool starts_text) {
  auto count = [&](int64_t bytes) {
    return static_cast<int64_t>(tokenizer.Encode(head + Text(bytes), starts_text).size());
  };
  int64_t low = 0, high = 16 * tokens + 64;  // no piece is longer than 16 bytes on average
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (count(mid) >= tokens) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  return head + Text(low);
}

double LoadAverage() {
  double one = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &one) != 1) one = -1;
    std::fclose(f);
  }
  return one;
}

// A turn from a named state made once from a prompt P vs sending P and the
// turn's text X whole, and making the state vs one cold prefill of P. Each
// repeat has a prompt of its own, and every cold request a cache_salt of its
// own, so nothing is resumed even where the prefix-state cache is on.
int NamedStateSpeed(const ConnectionOptions& connection, const std::string& model) {
  const int64_t prompt_tokens = absl::GetFlag(FLAGS_named_state_prompt_tokens);
  const int64_t turn_tokens = absl::GetFlag(FLAGS_named_state_turn_tokens);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_named_state_repeats));
  const std::string fsync_dir = absl::GetFlag(FLAGS_fsync_dir);
  Client client(connection);
  const v1::ModelInfo info = client.Info();
  const Tokenizer tokenizer = TokenizerOf(info);
  const std::string run = Salt();
  const double load_before = LoadAverage();

  struct Repeat {
    Client::Turn cold_whole, cold_prompt, from_state, again;
    v1::NamedState made;
    double create_ms = 0, fsync_ms = -1;
    int64_t prompt_bytes = 0;
  };
  // The cold prefill of P and the state's making alternate which goes first
  // from one repeat to the next, so that neither always follows the other.
  auto one = [&](const std::string& tag, int64_t tokens, bool create_first) {
    Repeat r;
    const std::string name = absl::StrCat(run, "-", tag);
    const std::string prompt = TextOfTokens(tokenizer, "[" + name + "] ", tokens, true);
    auto turn = [&](const std::string& q) {
      return TextOfTokens(tokenizer, "\nQ" + q + ": ", turn_tokens, false);
    };
    r.prompt_bytes = static_cast<int64_t>(prompt.size());
    if (!create_first) r.cold_prompt = client.First(prompt, "", Salt());
    r.made = client.CreateNamed(name, prompt, Salt(), &r.create_ms);
    if (create_first) r.cold_prompt = client.First(prompt, "", Salt());
    r.from_state = client.First(turn(tag), name, "");
    r.again = client.First(turn(tag + "b"), name, "");
    r.cold_whole = client.First(prompt + turn(tag), "", Salt());
    client.DeleteNamed(name);
    if (!fsync_dir.empty()) r.fsync_ms = FsyncMs(fsync_dir, static_cast<size_t>(r.made.state_bytes()));
    return r;
  };
  (void)one("warmup", std::min<int64_t>(prompt_tokens, 64), false);
  std::vector<Repeat> runs;
  for (int i = 0; i < repeats; ++i) runs.push_back(one(std::to_string(i), prompt_tokens, i % 2 == 1));
  const double load_after = LoadAverage();

  auto column = [&](const std::function<double(const Repeat&)>& f) {
    std::vector<double> v;
    for (const Repeat& r : runs) v.push_back(f(r));
    return v;
  };
  auto range = [&](const std::function<int64_t(const Repeat&)>& f) {
    int64_t low = f(runs[0]), high = low;
    for (const Repeat& r : runs) low = std::min(low, f(r)), high = std::max(high, f(r));
    return low == high ? absl::StrCat(low) : absl::StrCat(low, "-", high);
  };
  auto ttft = [](Client::Turn Repeat::*t) {
    return [t](const Repeat& r) { return (r.*t).ttft_ms; };
  };
  auto prefill = [](Client::Turn Repeat::*t) {
    return [t](const Repeat& r) { return (r.*t).finished.timing().prefill_ms(); };
  };
  auto tokens = [](Client::Turn Repeat::*t) {
    return [t](const Repeat& r) -> int64_t { return (r.*t).finished.usage().prompt_tokens(); };
  };
  auto cached = [&] {
    int64_t sum = 0;
    for (const Repeat& r : runs) {
      sum += r.made.cached_tokens() + r.cold_prompt.finished.usage().cached_tokens() +
             r.cold_whole.finished.usage().cached_tokens();
    }
    return sum;
  }();
  auto print_row = [](const std::string& what, const std::string& tokens,
                      const std::vector<double>& client_ms, const std::vector<double>& server_ms) {
    absl::PrintF("  %-44s %9s %9.1f %9.1f %9.1f %9.1f\n", what, tokens, Median(client_ms),
                 *std::min_element(client_ms.begin(), client_ms.end()),
                 *std::max_element(client_ms.begin(), client_ms.end()), Median(server_ms));
  };

  absl::PrintF("Named states: a turn from a state made once, %s (%s, %s tokenizer, vocabulary "
               "%d, %s; prefix-state cache %s)\n",
               model, info.architecture(), info.tokenizer(), info.vocab_size(),
               info.compute_dtype(),
               info.prefix_cache_bytes() == 0 ? "off" : "on, every request salted apart");
  absl::PrintF("machine: %u cores shared by client and server; load average %.2f before, %.2f "
               "after; greedy, 1 token out; median of %d, each repeat a prompt of its own\n",
               std::thread::hardware_concurrency(), load_before, load_after, repeats);
  absl::PrintF("  P: %s tokens (%s bytes) as the state's prompt_tokens; X: %lld tokens\n",
               range([](const Repeat& r) { return r.made.prompt_tokens(); }),
               range([](const Repeat& r) { return r.prompt_bytes; }), turn_tokens);
  absl::PrintF("  %-44s %9s %9s %9s %9s %9s\n", "(ms)", "tokens", "median", "min", "max",
               "server");
  absl::PrintF("  time to first token (client; server: its prefill_ms)\n");
  const std::vector<double> whole = column(ttft(&Repeat::cold_whole));
  const std::vector<double> from = column(ttft(&Repeat::from_state));
  print_row("cold: P + X sent whole", range(tokens(&Repeat::cold_whole)), whole,
            column(prefill(&Repeat::cold_whole)));
  print_row("X from the named state, its first turn", range(tokens(&Repeat::from_state)), from,
            column(prefill(&Repeat::from_state)));
  print_row("X' from the named state, a second turn", range(tokens(&Repeat::again)),
            column(ttft(&Repeat::again)), column(prefill(&Repeat::again)));
  absl::PrintF("  ratio %.1fx faster at the median (target >= 20x)\n", Median(whole) / Median(from));
  absl::PrintF("  making the state vs one cold prefill of P\n");
  const std::vector<double> cold = column(ttft(&Repeat::cold_prompt));
  const std::vector<double> made = column([](const Repeat& r) { return r.create_ms; });
  const std::vector<double> made_prefill =
      column([](const Repeat& r) { return r.made.prefill_ms(); });
  print_row("cold Generate of P, max_new_tokens 1 (TTFT)", range(tokens(&Repeat::cold_prompt)),
            cold, column(prefill(&Repeat::cold_prompt)));
  print_row("CreateNamedState(P) (wall)", range([](const Repeat& r) {
              return r.made.prompt_tokens();
            }),
            made, made_prefill);
  absl::PrintF("  ratio %.2f wall to TTFT, %.2f prefill_ms to prefill_ms at the medians (target <= "
               "1); the median of each repeat's own: %.2f wall to TTFT\n",
               Median(made) / Median(cold),
               Median(made_prefill) / Median(column(prefill(&Repeat::cold_prompt))),
               Median(column([](const Repeat& r) { return r.create_ms / r.cold_prompt.ttft_ms; })));
  absl::PrintF("  CreateNamedState's wall past its prefill_ms: %.1f ms (median of each repeat's; "
               "serializing, hashing and storing a %s-byte state file, and the call)\n",
               Median(column([](const Repeat& r) { return r.create_ms - r.made.prefill_ms(); })),
               range([](const Repeat& r) { return r.made.state_bytes(); }));
  const std::vector<double> fsync = column([](const Repeat& r) { return r.fsync_ms; });
  if (!fsync_dir.empty()) {
    absl::PrintF("  one fsync of a file that size in the store's directory: %.1f ms (median)\n",
                 Median(fsync));
  }
  absl::PrintF("  tokens resumed from the prefix-state cache in all cold requests and creations: "
               "%lld\n\n",
               cached);
  const std::string json = absl::GetFlag(FLAGS_json);
  if (!json.empty()) {
    std::ofstream(json) << nlohmann::json{{"cold_whole_ttft_ms", whole},
                                          {"from_state_ttft_ms", from},
                                          {"cold_prompt_ttft_ms", cold},
                                          {"create_ms", made},
                                          {"create_prefill_ms", made_prefill},
                                          {"fsync_ms", fsync}}
                               .dump(2);
  }
  return 0;
}

int Main() {
  const Sizes sizes = SizesFor(absl::GetFlag(FLAGS_quick));
  ConnectionOptions connection;
  connection.server = absl::GetFlag(FLAGS_server);
  if (absl::GetFlag(FLAGS_named_state_prompt_tokens) > 0) {
    return NamedStateSpeed(connection, absl::GetFlag(FLAGS_model));
  }
  if (absl::GetFlag(FLAGS_overhead_only)) {
    return OverheadOnly(connection, absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_quick));
  }
  Client client(connection);
  nlohmann::json out;
  if (absl::GetFlag(FLAGS_save_restore_only)) {
    Sizes repeated = sizes;
    repeated.repeats = std::max(1, absl::GetFlag(FLAGS_save_restore_repeats));
    SaveAndRestore(client, repeated, out);
    return 0;
  }

  (void)MeasureMatmulPeak(1, "cpu");  // maps the BLAS library for ReadMachineInfo
  const MachineInfo machine = ReadMachineInfo("cpu");
  absl::PrintF("linserve end-to-end benchmark, %s\n", machine.date);
  absl::PrintF("machine: %d cores, %s; LibTorch %s, device cpu; server %s, model %s\n",
               machine.cores, machine.cpu_model, machine.torch_version, connection.server,
               absl::GetFlag(FLAGS_model));
  absl::PrintF("client, server and engine share this machine's cores\n\n");

  // 1 and 2.
  const int engine_steps = absl::GetFlag(FLAGS_quick) ? 4 : 64;
  const std::unique_ptr<LanguageModel> model = LoadOrExit(absl::GetFlag(FLAGS_model));
  const double engine = EngineTokensPerSecond(*model, 32, engine_steps);
  const double engine1 = EngineTokensPerSecond(*model, 1, 4 * engine_steps);
  std::vector<std::pair<int, double>> levels;
  for (int c : {1, 8, 32, 64}) {
    levels.push_back({c, ServerTokensPerSecond(connection, c, sizes.seconds_per_load)});
  }
  const double at32 = levels[2].second, at1 = levels[0].second;
  absl::PrintF("1. Server overhead (prompt 16, output 128 tokens, %.0f s per level)\n",
               sizes.seconds_per_load);
  absl::PrintF("  engine batched decode, batch 32, no gRPC   %9.1f tokens/s\n", engine);
  absl::PrintF("  through gRPC, concurrency 32                %9.1f tokens/s\n", at32);
  absl::PrintF("  ratio %.2f (target >= 0.80)\n\n", at32 / engine);
  absl::PrintF("2. Scaling: output tokens/s by concurrency\n");
  for (auto [c, tps] : levels) absl::PrintF("  concurrency %2d  %9.1f tokens/s  %5.2fx\n", c, tps, tps / at1);
  absl::PrintF("  32 vs 1: %.2fx (target >= 8x)\n", at32 / at1);
  absl::PrintF("  the engine alone, no gRPC: batch 1 %.1f, batch 32 %.1f tokens/s: %.2fx\n\n",
               engine1, engine, engine / engine1);
  out["engine_batch32_tps"] = engine;
  out["engine_batch1_tps"] = engine1;
  for (auto [c, tps] : levels) out["server_tps"][std::to_string(c)] = tps;

  // 3.
  const std::string conversation = Text(sizes.conversation);
  const std::string base = client.Create(conversation);
  std::vector<double> resumed, resent;
  for (int r = 0; r < sizes.repeats; ++r) {
    const std::string fork = client.Fork(base);
    resumed.push_back(client.Generate(fork, "\n", 1).ttft_ms);
    client.Delete(fork);
    resent.push_back(client.Generate("", conversation + "\n", 1, Salt()).ttft_ms);
  }
  absl::PrintF("3. Resume vs re-prefill: time to first token after a %lld-token conversation "
               "(median of %d)\n", sizes.conversation, sizes.repeats);
  absl::PrintF("  continued from its session   %9.2f ms\n", Median(resumed));
  absl::PrintF("  re-sent as a prompt          %9.2f ms\n", Median(resent));
  absl::PrintF("  ratio %.1fx faster (target >= 20x)\n\n", Median(resent) / Median(resumed));
  out["resume_ttft_ms"] = Median(resumed);
  out["resend_ttft_ms"] = Median(resent);

  // 4.
  SaveAndRestore(client, sizes, out);

  // 5.
  auto fan_out = [&](bool fork) {
    const absl::Time start = absl::Now();
    std::vector<std::thread> workers;
    for (int i = 0; i < sizes.forks; ++i) {
      workers.emplace_back([&, i] {
        Client own(connection);
        const std::string id = fork ? own.Fork(base) : own.Create(conversation, Salt());
        own.Generate(id, "\nQ" + std::to_string(i) + ": ", 32);
        own.Delete(id);
      });
    }
    for (auto& w : workers) w.join();
    return absl::ToDoubleMilliseconds(absl::Now() - start);
  };
  const double forked = fan_out(true), fresh = fan_out(false);
  absl::PrintF("5. Fork: %d conversations on a %lld-token system prompt, each answering 32 tokens\n",
               sizes.forks, sizes.conversation);
  absl::PrintF("  forked from one prefilled session   %9.1f ms\n", forked);
  absl::PrintF("  each prefilled from scratch         %9.1f ms\n", fresh);
  absl::PrintF("  ratio %.1fx faster\n", fresh / forked);
  out["fork_ms"] = forked;
  out["fresh_ms"] = fresh;

  // 6.
  out["prefix_cache"] = MeasurePrefixCache(connection, sizes);

  if (!absl::GetFlag(FLAGS_json).empty()) std::ofstream(absl::GetFlag(FLAGS_json)) << out.dump(2);
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  if (!linserve::KeepFreedMemoryAsFlagged()) return 2;
  // As the server: the engine's own pool, LibTorch's ops on the calling thread.
  const int threads = absl::GetFlag(FLAGS_threads);
  linserve::SetEngineThreads(threads > 0 ? threads : linserve::AvailableCores());
  at::set_num_threads(1);
  return linserve::Main();
}
