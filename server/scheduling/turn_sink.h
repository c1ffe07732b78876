#ifndef LINSERVE_SERVER_TURN_SINK_H_
#define LINSERVE_SERVER_TURN_SINK_H_

// What the scheduler hands a Generate stream, in plain C++ (the service turns
// it into protobuf at the edge).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/generation/generation.h"

namespace linserve {

struct TokenLogprob {
  int64_t token = 0;
  std::string bytes;  // the token's bytes; may be part of a UTF-8 sequence
  float logprob = 0;
};

struct SampledToken {
  TokenLogprob token;
  std::vector<TokenLogprob> top;  // most likely first
};

// New output of one turn: whole UTF-8 sequences, and with logprobs on, the
// tokens behind them.
struct TurnPiece {
  std::string text;
  std::vector<SampledToken> tokens;
};

struct TurnSummary {
  FinishReason reason = FinishReason::kNone;
  bool cancelled = false;  // cut by the server (shutdown deadline)
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // of prompt_tokens, resumed from the prefix-state cache
  int32_t generated_tokens = 0;
  double queue_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  int64_t position = 0;  // the session's, after the turn; 0 when stateless
  uint64_t seed = 0;
  // The sum of the sampled tokens' log-probabilities (under the raw
  // distribution, as logprobs reports them); set when the call asked for
  // logprobs or for the sum (GenerateCall::cumulative_logprob).
  double cumulative_logprob = 0;
};

// The engine thread's side of one Generate stream. Send and Finish are called
// on the engine thread or the checkpoint writer's, never concurrently, and
// never block; Cancelled and Buffered may be called from any thread.
class TurnSink {
 public:
  virtual ~TurnSink() = default;
  virtual void Send(TurnPiece piece) = 0;
  // The last call: the summary, or why the turn failed.
  virtual void Finish(absl::StatusOr<TurnSummary> result) = 0;
  // The client has gone (cancel, deadline, broken connection).
  virtual bool Cancelled() const = 0;
  // Messages handed to Send that the client has not yet taken.
  virtual int Buffered() const = 0;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_TURN_SINK_H_
