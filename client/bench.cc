#include "client/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/bench_grpc.h"
#include "client/bench_http.h"
#include "client/bench_transport.h"
#include "client/stats.h"

namespace linserve {
namespace {

// Words the synthetic prompts are made of: ASCII, so a prompt of N bytes is
// N tokens of the byte-level models.
constexpr const char* kWords[] = {"the", "of",   "and",  "to",    "a",     "in",   "that",
                                  "my",  "lord", "king", "love",  "night", "thou", "shall",
                                  "not", "what", "with", "heart", "death", "sweet"};

std::string SyntheticPrompt(int32_t length, std::mt19937_64& rng) {
  std::string text;
  while (static_cast<int32_t>(text.size()) < length) {
    text += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    text += ' ';
  }
  text.resize(static_cast<size_t>(length));
  return text;
}

int32_t Draw(const LengthRange& range, std::mt19937_64& rng) {
  if (range.max <= range.min) return range.min;
  return range.min + static_cast<int32_t>(rng() % static_cast<uint64_t>(range.max - range.min + 1));
}

// One phase of the test (the warm-up, then the measured run): what to send
// and when, and what came back. The transport moves the requests.
class LoadTest {
 public:
  // `prompt_ids`: what prompts of token ids are drawn from (token mode).
  LoadTest(BenchTransport& transport, const BenchOptions& options,
           const std::vector<int32_t>& prompt_ids, int64_t requests, bool measured,
           std::vector<std::string>* idle_sessions, uint64_t seed)
      : transport_(transport),
        options_(options),
        prompt_ids_(prompt_ids),
        requests_(requests),
        measured_(measured),
        idle_sessions_(idle_sessions),
        rng_(seed) {}

  void Run() {
    start_ = absl::Now();
    end_ = start_ + options_.duration;
    if (open_loop()) {
      RunOpenLoop();
    } else {
      // The warm-up of an open-loop run goes closed loop, at least 1 wide.
      const int64_t width = std::max<int64_t>(1, options_.concurrency);
      const int64_t first = requests_ > 0 ? std::min<int64_t>(width, requests_) : width;
      for (int64_t i = 0; i < first; ++i) Launch();
    }
    WaitUntilDone();
    finished_ = absl::Now();
  }

  nlohmann::json Results() const {
    absl::MutexLock lock(&mu_);
    const double seconds = std::max(1e-9, absl::ToDoubleSeconds(finished_ - start_));
    nlohmann::json codes = nlohmann::json::object();
    for (const auto& [code, n] : by_code_) codes[code] = n;
    return {{"sent", sent_},
            {"ok", ok_},
            {"failed", done_ - ok_},
            {"dropped", dropped_},
            {"by_code", codes},
            {"duration_s", seconds},
            {"request_throughput_rps", static_cast<double>(ok_) / seconds},
            {"output_token_throughput_tps", static_cast<double>(output_tokens_) / seconds},
            {"prompt_tokens_total", prompt_tokens_},
            {"output_tokens_total", output_tokens_},
            {"ttft_ms", ToJson(Summarize(ttft_))},
            {"tpot_ms", ToJson(Summarize(tpot_))},
            {"itl_ms", ToJson(Summarize(itl_))},
            {"e2e_ms", ToJson(Summarize(e2e_))}};
  }

 private:
  bool open_loop() const { return options_.rate > 0 && measured_; }

  bool ShouldSend() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return requests_ > 0 ? sent_ < requests_ : absl::Now() < end_;
  }

  // Counts the next request as sent and in flight, if the phase is still
  // sending.
  std::optional<BenchRequest> Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!ShouldSend()) return std::nullopt;
    ++sent_;
    ++in_flight_;
    BenchRequest request;
    const int32_t prompt_length = Draw(options_.prompt_tokens, rng_);
    if (options_.prompt_mode == PromptMode::kTokens) {
      request.prompt_tokens.reserve(static_cast<size_t>(prompt_length));
      for (int32_t i = 0; i < prompt_length; ++i) {
        request.prompt_tokens.push_back(prompt_ids_[rng_() % prompt_ids_.size()]);
      }
    } else {
      request.prompt = SyntheticPrompt(prompt_length, rng_);
    }
    request.max_tokens = Draw(options_.output_tokens, rng_);
    request.sampling = options_.sampling;
    request.seed = options_.seed + 1 + static_cast<uint64_t>(sent_);
    if (options_.reuse_sessions && !idle_sessions_->empty()) {
      request.session_id = idle_sessions_->back();
      idle_sessions_->pop_back();
    }
    return request;
  }

  void Launch() {
    std::optional<BenchRequest> request;
    {
      absl::MutexLock lock(&mu_);
      request = Next();
    }
    if (request) Send(*std::move(request));
  }

  void Send(BenchRequest request) {
    if (options_.reuse_sessions && request.session_id.empty()) {
      // Every conversation is busy: a new user arrives.
      absl::StatusOr<std::string> id = transport_.CreateSession();
      if (!id.ok()) {
        BenchOutcome failed;
        failed.status = absl::StatusCodeToString(id.status().code());
        Record(std::move(failed));
        return;
      }
      request.session_id = *id;
      request.new_session = id->empty();
    }
    transport_.Start(std::move(request),
                     [this](BenchOutcome outcome) { Record(std::move(outcome)); });
  }

  void Record(BenchOutcome outcome) {
    std::optional<BenchRequest> next;
    {
      absl::MutexLock lock(&mu_);
      ++done_;
      ++by_code_[outcome.status];
      if (outcome.ok()) {
        ++ok_;
        output_tokens_ += outcome.output_tokens;
        prompt_tokens_ += outcome.prompt_tokens;
        ttft_.push_back(outcome.ttft_ms);
        e2e_.push_back(outcome.e2e_ms);
        if (outcome.output_tokens > 1) {
          tpot_.push_back((outcome.e2e_ms - outcome.ttft_ms) /
                          static_cast<double>(outcome.output_tokens - 1));
        }
        itl_.insert(itl_.end(), outcome.itl_ms.begin(), outcome.itl_ms.end());
      }
      // A session goes back to the idle conversations whatever happened: a
      // failed turn leaves it as its last finished turn did.
      if (!outcome.session_id.empty()) idle_sessions_->push_back(outcome.session_id);
      // The closed loop's next request is counted in flight before this one
      // leaves, so Run never sees an empty moment while one is coming.
      if (!open_loop()) next = Next();
      --in_flight_;
    }
    if (next) Send(*std::move(next));
  }

  void RunOpenLoop() {
    std::exponential_distribution<double> gap(options_.rate);
    absl::Time next = start_;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (!ShouldSend()) break;
        next += absl::Seconds(gap(rng_));
      }
      absl::SleepFor(next - absl::Now());
      bool full;
      {
        absl::MutexLock lock(&mu_);
        full = in_flight_ >= options_.max_in_flight;
        // A dropped arrival was never sent: ok + failed = sent still holds.
        if (full) ++dropped_;
      }
      if (!full) Launch();
    }
  }

  void WaitUntilDone() {
    absl::Time last_print = absl::InfinitePast();
    const bool tty = isatty(STDERR_FILENO);
    while (true) {
      bool over;
      {
        absl::MutexLock lock(&mu_);
        over = in_flight_ == 0 && !ShouldSend();
      }
      const absl::Time now = absl::Now();
      if (options_.progress && measured_ &&
          (over || now - last_print >= (tty ? absl::Milliseconds(500) : absl::Seconds(5)))) {
        PrintProgress(now, tty);
        last_print = now;
      }
      if (over) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (options_.progress && measured_ && tty) std::fputc('\n', stderr);
  }

  void PrintProgress(absl::Time now, bool tty) {
    absl::MutexLock lock(&mu_);
    const double elapsed = absl::ToDoubleSeconds(now - start_);
    const std::string total = requests_ > 0
                                  ? absl::StrCat(done_, "/", requests_, " done")
                                  : absl::StrFormat("%lld done, %.0f/%.0f s", done_, elapsed,
                                                    absl::ToDoubleSeconds(options_.duration));
    std::fprintf(stderr, "%s[bench] %s  ok %lld  failed %lld  in flight %lld  %.0f tok/s%s",
                 tty ? "\r" : "", total.c_str(), static_cast<long long>(ok_),
                 static_cast<long long>(done_ - ok_), static_cast<long long>(in_flight_),
                 elapsed > 0 ? static_cast<double>(output_tokens_) / elapsed : 0.0,
                 tty ? "   " : "\n");
    std::fflush(stderr);
  }

  BenchTransport& transport_;
  const BenchOptions& options_;
  const std::vector<int32_t>& prompt_ids_;
  const int64_t requests_;
  const bool measured_;
  mutable absl::Mutex mu_;
  std::vector<std::string>* idle_sessions_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  absl::Time start_, end_, finished_;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ok_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t output_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> by_code_ ABSL_GUARDED_BY(mu_);
  std::vector<double> ttft_ ABSL_GUARDED_BY(mu_), tpot_ ABSL_GUARDED_BY(mu_),
      itl_ ABSL_GUARDED_BY(mu_), e2e_ ABSL_GUARDED_BY(mu_);
};

nlohmann::json Settings(const ConnectionOptions& connection, const BenchOptions& o,
                        const BenchVocabulary& vocabulary, size_t ordinary_ids) {
  nlohmann::json settings = {{"protocol", o.protocol == BenchProtocol::kHttp ? "http" : "grpc"},
          {"server", connection.server},
          {"mode", o.rate > 0 ? "open_loop" : "closed_loop"},
          {"concurrency", o.concurrency},
          {"rate", o.rate},
          {"requests", o.requests},
          {"duration_s", absl::ToDoubleSeconds(o.duration)},
          {"prompt_tokens", {{"min", o.prompt_tokens.min}, {"max", o.prompt_tokens.max}}},
          {"prompt_mode", o.prompt_mode == PromptMode::kTokens ? "tokens" : "text"},
          {"output_tokens", {{"min", o.output_tokens.min}, {"max", o.output_tokens.max}}},
          {"sessions", o.reuse_sessions ? "reuse" : "new"},
          {"warmup", o.warmup},
          {"seed", o.seed},
          {"sampling",
           {{"temperature", o.sampling.temperature},
            {"top_k", o.sampling.top_k},
            {"top_p", o.sampling.top_p},
            {"min_p", o.sampling.min_p},
            {"repetition_penalty", o.sampling.repetition_penalty},
            {"presence_penalty", o.sampling.presence_penalty},
            {"frequency_penalty", o.sampling.frequency_penalty},
            {"logit_bias_entries", o.sampling.logit_bias.size()}}}};
  if (o.prompt_mode == PromptMode::kTokens) {
    settings["prompt_vocabulary"] = {{"vocab_size", vocabulary.vocab_size},
                                     {"ordinary_ids", ordinary_ids}};
  }
  return settings;
}

}  // namespace

absl::StatusOr<LengthRange> ParseLengthRange(const std::string& field, const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  LengthRange range;
  const bool parsed = (parts.size() == 1 && absl::SimpleAtoi(parts[0], &range.min) &&
                       (range.max = range.min, true)) ||
                      (parts.size() == 2 && absl::SimpleAtoi(parts[0], &range.min) &&
                       absl::SimpleAtoi(parts[1], &range.max));
  if (!parsed || range.min < 1 || range.max < range.min) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", field, " = \"", text, "\" is not N or MIN:MAX with 1 <= MIN <= MAX"));
  }
  return range;
}

absl::StatusOr<std::map<int32_t, float>> ParseLogitBias(const std::string& text) {
  std::map<int32_t, float> bias;
  if (text.empty()) return bias;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    int32_t id = 0;
    float value = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id) || id < 0 ||
        !absl::SimpleAtof(parts[1], &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--logit_bias: \"", entry, "\" is not ID:BIAS with ID >= 0"));
    }
    bias[id] = value;
  }
  return bias;
}

absl::StatusOr<std::vector<int32_t>> OrdinaryTokenIds(const BenchVocabulary& vocabulary) {
  const int64_t vocab = vocabulary.vocab_size;
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the server reports vocab_size = ", vocab, ", not in [1, 2^31)"));
  }
  std::vector<int32_t> ids;
  int64_t next = 0;  // the first id not yet looked at
  for (const auto& [begin, end] : vocabulary.special_ranges) {
    if (begin < next || end < begin || end > vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("the server reports the special token range [", begin, ", ", end,
                       "), not ascending within [0, ", vocab, ")"));
    }
    for (int64_t id = next; id < begin; ++id) ids.push_back(static_cast<int32_t>(id));
    next = end;
  }
  for (int64_t id = next; id < vocab; ++id) ids.push_back(static_cast<int32_t>(id));
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        "every id of the served model's vocabulary is special: no prompt of ordinary tokens "
        "can be made (use --prompt_mode=text)");
  }
  return ids;
}

absl::StatusOr<nlohmann::json> RunBench(const ConnectionOptions& connection,
                                        const BenchOptions& options) {
  if (options.rate <= 0 && options.concurrency < 1) {
    return absl::InvalidArgumentError("--concurrency must be at least 1 (or set --rate)");
  }
  if (options.requests <= 0 && options.duration <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("set --requests or a positive --duration");
  }
  absl::StatusOr<std::unique_ptr<BenchTransport>> transport =
      options.protocol == BenchProtocol::kHttp ? MakeHttpBenchTransport(connection)
                                               : MakeGrpcBenchTransport(connection);
  if (!transport.ok()) return transport.status();

  BenchVocabulary vocabulary;
  std::vector<int32_t> prompt_ids;
  if (options.prompt_mode == PromptMode::kTokens) {
    absl::StatusOr<BenchVocabulary> served = (*transport)->Vocabulary();
    if (!served.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot read the served model's vocabulary for prompts of token ids: ",
          absl::StatusCodeToString(served.status().code()), ": ", served.status().message()));
    }
    vocabulary = *std::move(served);
    absl::StatusOr<std::vector<int32_t>> ids = OrdinaryTokenIds(vocabulary);
    if (!ids.ok()) return ids.status();
    prompt_ids = *std::move(ids);
  }

  // Closed-loop conversations exist before the clock starts, one per
  // concurrent request, where the protocol creates sessions apart from turns.
  std::vector<std::string> idle_sessions;
  if (options.reuse_sessions && options.rate <= 0) {
    for (int32_t i = 0; i < options.concurrency; ++i) {
      absl::StatusOr<std::string> id = (*transport)->CreateSession();
      if (!id.ok()) {
        return absl::UnavailableError(absl::StrCat(
            "cannot create the bench's sessions: ", absl::StatusCodeToString(id.status().code()),
            ": ", id.status().message()));
      }
      if (id->empty()) break;  // opened by their first turns
      idle_sessions.push_back(*std::move(id));
    }
  }
  if (options.warmup > 0) {
    LoadTest warmup(**transport, options, prompt_ids, options.warmup, /*measured=*/false,
                    &idle_sessions, options.seed ^ 0x5eed);
    warmup.Run();
  }
  LoadTest measured(**transport, options, prompt_ids, options.requests, /*measured=*/true,
                    &idle_sessions, options.seed);
  measured.Run();
  return nlohmann::json{{"settings", Settings(connection, options, vocabulary, prompt_ids.size())},
                        {"results", measured.Results()}};
}

std::string FormatBenchReport(const nlohmann::json& report) {
  const nlohmann::json& r = report["results"];
  const nlohmann::json& settings = report["settings"];
  const bool token_prompts = settings["prompt_mode"] == "tokens";
  std::string out = absl::StrFormat(
      "%s to %s, prompts of %s\n", settings["protocol"].get<std::string>(),
      settings["server"].get<std::string>(),
      token_prompts ? "random token ids (--prompt_mode=tokens)" : "words (--prompt_mode=text)");
  absl::StrAppend(
      &out, absl::StrFormat("requests: %lld sent, %lld ok, %lld failed, %lld dropped in %.2f s\n",
                            r["sent"].get<long long>(), r["ok"].get<long long>(),
                            r["failed"].get<long long>(), r["dropped"].get<long long>(),
                            r["duration_s"].get<double>()));
  for (const auto& [code, n] : r["by_code"].items()) {
    absl::StrAppend(&out, absl::StrFormat("  %-20s %lld\n", code, n.get<long long>()));
  }
  absl::StrAppend(&out,
                  absl::StrFormat("throughput: %.2f requests/s, %.1f output tokens/s\n",
                                  r["request_throughput_rps"].get<double>(),
                                  r["output_token_throughput_tps"].get<double>()));
  absl::StrAppend(&out, absl::StrFormat("%-22s %10s %10s %10s %10s %10s\n", "(ms)", "mean", "p50",
                                        "p90", "p99", "max"));
  for (const auto& [key, name] : std::vector<std::pair<std::string, std::string>>{
           {"ttft_ms", "time to first token"},
           {"tpot_ms", "time per output token"},
           {"itl_ms", "inter-token latency"},
           {"e2e_ms", "end-to-end latency"}}) {
    const nlohmann::json& d = r[key];
    absl::StrAppend(&out, absl::StrFormat("%-22s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name,
                                          d["mean"].get<double>(), d["p50"].get<double>(),
                                          d["p90"].get<double>(), d["p99"].get<double>(),
                                          d["max"].get<double>()));
  }
  return out;
}

}  // namespace linserve
