#ifndef LINSERVE_CLIENT_BENCH_TRANSPORT_H_
#define LINSERVE_CLIENT_BENCH_TRANSPORT_H_

// What the load test needs from a protocol: start one streamed completion and
// hear how it went. The load test (bench.cc) owns prompts, scheduling,
// counting and the report; a transport (bench_grpc.cc, bench_http.cc) only
// moves one request and measures its pieces as they arrive.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace linserve {

// How every request of a load test samples (the generate command's flags);
// a field at its default is not sent, so the server's default applies.
struct BenchSampling {
  float temperature = 0.8f;
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::map<int32_t, float> logit_bias;  // added to these ids' logits (OpenAI's logit_bias)
};

// The served model's vocabulary, as far as the load test's prompts of token
// ids need it.
struct BenchVocabulary {
  int64_t vocab_size = 0;
  // Ids that carry no text (BOS, EOS, unused rows), [begin, end): left out.
  std::vector<std::pair<int64_t, int64_t>> special_ranges;
};

// One request of the load test, protocol-neutral.
struct BenchRequest {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;  // sent instead of `prompt` when not empty
  int32_t max_tokens = 0;  // exact: sent with ignore_eos
  BenchSampling sampling;
  uint64_t seed = 0;
  std::string session_id;    // continue this session; empty: stateless
  bool new_session = false;  // with an empty session_id: open a session in this turn
};

// The status name of a request that completed.
inline constexpr const char kBenchOk[] = "OK";

// What one finished request left behind.
struct BenchOutcome {
  // kBenchOk, a gRPC status code name ("UNAVAILABLE"), or for HTTP
  // "HTTP_<status>" and the transport failures named in bench_http.h.
  std::string status = kBenchOk;
  std::string session_id;  // the session the turn ran on, to be used again
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_ms = -1;  // -1: no piece arrived
  double e2e_ms = 0;
  std::vector<double> itl_ms;  // gaps between consecutive pieces

  bool ok() const { return status == kBenchOk; }
};

// Times the pieces of one stream as they arrive.
class PieceClock {
 public:
  explicit PieceClock(absl::Time started) : started_(started) {}
  // A non-empty piece arrived now.
  void Piece(BenchOutcome& outcome) {
    const absl::Time now = absl::Now();
    if (outcome.ttft_ms < 0) {
      outcome.ttft_ms = absl::ToDoubleMilliseconds(now - started_);
    } else {
      outcome.itl_ms.push_back(absl::ToDoubleMilliseconds(now - last_));
    }
    last_ = now;
  }
  // The stream ended now.
  void End(BenchOutcome& outcome) const {
    outcome.e2e_ms = absl::ToDoubleMilliseconds(absl::Now() - started_);
  }

 private:
  absl::Time started_;
  absl::Time last_;
};

class BenchTransport {
 public:
  using Done = std::function<void(BenchOutcome)>;

  // Waits for the transport's own threads, if any.
  virtual ~BenchTransport() = default;

  // Starts `request` and returns at once; `done` runs exactly once, on a
  // thread of the transport's, when it finished, failed or was refused.
  // Thread-safe.
  virtual void Start(BenchRequest request, Done done) = 0;

  // A new, empty session for a conversation; "" when the protocol opens one
  // in the first turn instead (the request then sets new_session). An
  // error's code is the gRPC code it stands for. Thread-safe.
  virtual absl::StatusOr<std::string> CreateSession() = 0;

  // The served model's vocabulary: GetModelInfo over gRPC, GET /v1/models
  // over HTTP. An error's code is the gRPC code it stands for. Thread-safe.
  virtual absl::StatusOr<BenchVocabulary> Vocabulary() = 0;
};

}  // namespace linserve

#endif  // LINSERVE_CLIENT_BENCH_TRANSPORT_H_
