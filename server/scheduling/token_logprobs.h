#ifndef LINSERVE_SERVER_TOKEN_LOGPROBS_H_
#define LINSERVE_SERVER_TOKEN_LOGPROBS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "engine/text/tokenizer.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

// The sampled token's log-probability under the model's raw distribution
// (log_softmax of the logits, before penalties, temperature and filters: what
// OpenAI's and vLLM's logprobs report), and the `top_n` most likely tokens,
// most likely first, ties by lower id.
SampledToken DescribeToken(absl::Span<const float> logits, int64_t token, int32_t top_n,
                           const Tokenizer& tokenizer);

}  // namespace linserve

#endif  // LINSERVE_SERVER_TOKEN_LOGPROBS_H_
