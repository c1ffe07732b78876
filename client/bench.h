#ifndef LINSERVE_CLIENT_BENCH_H_
#define LINSERVE_CLIENT_BENCH_H_

// `linserve-client bench`: the load test (client/README.md).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/bench_transport.h"  // BenchSampling
#include "client/connection.h"

namespace linserve {

// Lengths drawn uniformly from [min, max].
struct LengthRange {
  int32_t min = 128;
  int32_t max = 128;
};

// "N" or "MIN:MAX"; the error names `field`.
absl::StatusOr<LengthRange> ParseLengthRange(const std::string& field, const std::string& text);

enum class BenchProtocol {
  kGrpc,  // Generate (bench_grpc.h)
  kHttp,  // streamed POST /v1/completions (bench_http.h)
};

// What a prompt of --prompt_tokens=N is made of.
enum class PromptMode {
  kTokens,  // N random ids of the model's ordinary pieces, sent as token ids
  kText,    // N bytes of English words (N tokens only for byte-level models)
};

struct BenchOptions {
  BenchProtocol protocol = BenchProtocol::kGrpc;
  int32_t concurrency = 8;  // closed loop: this many requests always in flight
  double rate = 0;          // > 0: open loop, Poisson arrivals at this many requests/s
  int64_t requests = 0;     // stop sending after this many; 0: after `duration`
  absl::Duration duration = absl::Seconds(30);
  LengthRange prompt_tokens;
  PromptMode prompt_mode = PromptMode::kTokens;
  LengthRange output_tokens;    // exact: sent as max_new_tokens with ignore_eos
  bool reuse_sessions = false;  // multi-turn conversations on sessions instead of stateless calls
  int32_t warmup = 0;           // requests run, and not counted, before measuring
  uint64_t seed = 1;            // prompts and per-request sampling seeds
  BenchSampling sampling;
  int32_t max_in_flight = 4096;  // open loop: arrivals beyond this are dropped and counted
  bool progress = true;          // the live line on stderr
};

// Runs the load test against `connection.server`, which speaks
// `options.protocol`. Every request's outcome is counted, errors included;
// only a bad option or an unusable address is an error here. The JSON has
// "settings" and "results" (counts by status code, throughputs, and
// distributions of TTFT, time per output token, inter-token latency and
// end-to-end latency in milliseconds).
absl::StatusOr<nlohmann::json> RunBench(const ConnectionOptions& connection,
                                        const BenchOptions& options);

// "ID:BIAS,ID:BIAS,..." (empty: none), as --logit_bias takes it: a
// request's logit_bias (e.g. -100 for ids a benchmark keeps out of its
// outputs). The error names the entry.
absl::StatusOr<std::map<int32_t, float>> ParseLogitBias(const std::string& text);

// The ids a prompt of token ids is drawn from: every id in [0, vocab_size)
// outside the special ranges, ascending. InvalidArgument when none is left
// or a range is malformed.
absl::StatusOr<std::vector<int32_t>> OrdinaryTokenIds(const BenchVocabulary& vocabulary);

// The human-readable report of RunBench's JSON.
std::string FormatBenchReport(const nlohmann::json& report);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_BENCH_H_
