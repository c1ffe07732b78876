#ifndef LINSERVE_SERVER_REQUEST_VALIDATION_H_
#define LINSERVE_SERVER_REQUEST_VALIDATION_H_

// Checks requests before they reach the scheduler: every bad field is
// INVALID_ARGUMENT naming the field and its bound, and nothing else happens.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/generation/sampler.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/grammar_limits.h"
#include "engine/text/byte_range.h"
#include "linserve/v1/linserve.pb.h"
#include "server/common/protocol.h"

namespace linserve {

// The server's request limits (each one a flag of the server).
struct RequestLimits {
  int32_t max_prompt_bytes = 16384;
  int32_t default_max_new_tokens = 256;
  SamplingLimits sampling;  // max_new_tokens cap, stop sequences, vocab
  int32_t max_top_logprobs = 20;
  int32_t max_cache_salt_bytes = 256;
  int32_t max_grammar_bytes = 65536;  // a constraint's text (a choice's strings together)
  int32_t max_choices = 256;          // strings of a choice
  // What a constraint may compile to: symbols (max_grammar_symbols), nesting
  // (grammar_max_nesting), {m,n} (grammar_max_repeat), a pattern's groups
  // (grammar_max_regex_nesting).
  GrammarLimits grammar;
  int32_t max_logit_bias = 1024;         // entries of a request's logit_bias
  int32_t max_n = 16;                    // choices of one request (HTTP n, best_of)
};

// A Generate request after validation, in the engine's terms.
struct GenerateCall {
  std::string prompt;
  // Ranges of `prompt` encoded as plain text, no added token recognized (a
  // chat's contents: server/http/special_text_fence.h); set by the HTTP API.
  std::vector<ByteRange> prompt_plain;
  std::vector<int64_t> prompt_tokens;  // set instead of `prompt`: fed as given, no BOS
  std::string session_id;  // empty: stateless
  std::string initial_state;  // a named state to start from (not with session_id)
  SamplingParams sampling;
  bool seed_given = false;  // false: the server picks the seed
  bool logprobs = false;
  int32_t top_logprobs = 0;
  // Sum the sampled tokens' log-probabilities even without logprobs
  // (best_of ranks its choices by the sum).
  bool cumulative_logprob = false;
  std::string cache_salt;  // keeps the prompt's prefix apart in the prefix-state cache
  // The prompt is the session's whole conversation (GenerateRequest.conversation);
  // keep_state_at is where in it (bytes of `prompt` or an index into
  // `prompt_tokens`) the session keeps a state for later turns (0: nowhere).
  bool conversation = false;
  int64_t keep_state_at = 0;
  // An HTTP chat session's turn: what its messages are rendered from
  // (SessionChat::context). The session keeps it with the turn's answer;
  // a turn without it leaves the session no chat messages.
  std::optional<std::string> chat_context;
  // The constraint, parsed (null: none), and its GBNF text, which names it in
  // the engine's cache of grammars.
  std::shared_ptr<const Grammar> grammar;
  std::string grammar_text;
  std::vector<std::pair<int64_t, float>> logit_bias;  // ascending ids
  Protocol protocol = Protocol::kGrpc;  // the transport, for the metrics' label
};

absl::StatusOr<GenerateCall> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                     const RequestLimits& limits);

// A choice as GBNF: root ::= "first" | "second" | ..., each string escaped.
std::string ChoiceGrammar(const std::vector<std::string>& choices);

// Named states' names: [A-Za-z0-9._-], 1 to 64 characters, not "." or "..".
absl::Status ValidateStateName(absl::string_view field, absl::string_view name);

// Session ids are 32 lowercase hex digits (128 random bits).
absl::Status ValidateSessionId(absl::string_view field, absl::string_view id);

// OK, or "<field> is not valid UTF-8 (first bad byte at offset N)".
absl::Status ValidateUtf8(absl::string_view field, absl::string_view text);

// A cache_salt: at most max_cache_salt_bytes bytes.
absl::Status ValidateCacheSalt(absl::string_view field, absl::string_view salt,
                               const RequestLimits& limits);

// Text a session is created with: UTF-8, at most the prompt limit (may be empty).
absl::Status ValidateSessionPrompt(absl::string_view field, absl::string_view prompt,
                                   const RequestLimits& limits);

}  // namespace linserve

#endif  // LINSERVE_SERVER_REQUEST_VALIDATION_H_
