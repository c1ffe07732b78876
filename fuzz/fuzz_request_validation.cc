// libFuzzer target: the server's request validation. The input is the wire
// bytes of a linserve.v1.GenerateRequest, as a gRPC client could send them;
// what protobuf parses goes through ValidateGenerateRequest with the server's
// default limits. A refusal must be INVALID_ARGUMENT with a message; an
// accepted request must be within every limit, and its sampling parameters
// must drive the engine's Sampler (logits taken from the prompt, so the
// fuzzer reaches NaN, infinities and ties) to an id inside the vocabulary.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "engine/generation/sampler.h"
#include "linserve/v1/linserve.pb.h"
#include "server/requests/request_validation.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_request_validation: broken promise: %s\n", what);
  std::abort();
}

void CheckAccepted(const linserve::GenerateCall& call, const linserve::RequestLimits& limits) {
  Require(call.prompt.size() <= static_cast<size_t>(limits.max_prompt_bytes),
          "accepted a prompt over the limit");
  Require(!call.prompt.empty() || !call.prompt_tokens.empty() || !call.session_id.empty(),
          "accepted an empty stateless prompt");
  Require(call.prompt.empty() || call.prompt_tokens.empty(), "accepted both prompt and prompt_tokens");
  Require(call.prompt_tokens.size() <= static_cast<size_t>(limits.max_prompt_bytes),
          "accepted more prompt tokens than the limit");
  for (int64_t id : call.prompt_tokens) {
    Require(id >= 0 && id < limits.sampling.vocab_size, "accepted a token id outside the vocabulary");
  }
  Require(linserve::ValidateUtf8("prompt", call.prompt).ok(), "accepted a prompt that is not UTF-8");
  Require(call.session_id.empty() || linserve::ValidateSessionId("id", call.session_id).ok(),
          "accepted a malformed session id");
  Require(linserve::ValidateSamplingParams(call.sampling, limits.sampling).ok(),
          "accepted sampling parameters the sampler refuses");
  Require(call.top_logprobs >= 0 && call.top_logprobs <= limits.max_top_logprobs,
          "accepted top_logprobs out of range");

  // Logits: the prompt's bytes read as floats, padded with zeros.
  const int vocab = limits.sampling.vocab_size;
  std::vector<float> logits(vocab, 0.0f);
  std::memcpy(logits.data(), call.prompt.data(),
              std::min(call.prompt.size(), logits.size() * sizeof(float)));
  std::vector<int64_t> history;
  for (unsigned char c : call.prompt) history.push_back(c);
  history.insert(history.end(), call.prompt_tokens.begin(), call.prompt_tokens.end());

  linserve::Sampler sampler(call.sampling);
  for (int draw = 0; draw < 3; ++draw) {
    const int64_t token = sampler.Sample(logits, history);
    Require(token >= 0 && token < vocab, "sampled an id outside the vocabulary");
    history.push_back(token);
  }
  double total = 0;
  for (const linserve::TokenProbability& p : sampler.Probabilities(logits, history)) {
    Require(p.token >= 0 && p.token < vocab, "a probability for an id outside the vocabulary");
    Require(p.probability >= 0 && p.probability <= 1, "a probability outside [0, 1]");
    total += p.probability;
  }
  Require(total == 0 || std::abs(total - 1) < 1e-6, "probabilities do not sum to 1");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every string field with invalid UTF-8 it parses; a gRPC
  // server drops those requests the same way, and the log only slows fuzzing.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  linserve::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const linserve::RequestLimits limits;
  absl::StatusOr<linserve::GenerateCall> call = linserve::ValidateGenerateRequest(request, limits);
  if (!call.ok()) {
    Require(call.status().code() == absl::StatusCode::kInvalidArgument,
            "a refusal that is not INVALID_ARGUMENT");
    Require(!call.status().message().empty(), "a refusal without a message");
    return 0;
  }
  CheckAccepted(*call, limits);
  return 0;
}
