#ifndef LINSERVE_SERVER_OPENAI_RESPONSE_H_
#define LINSERVE_SERVER_OPENAI_RESPONSE_H_

// The HTTP API's answers in OpenAI's shapes: a whole completion, or the
// chunks of a stream (server-sent events), built from what the scheduler
// hands a turn's sink.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/http/openai_request.h"
#include "server/http/openai_tools.h"
#include "server/common/reasoning_split.h"
#include "server/http/tool_call_parser.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

// One request's answer; `index` names one of its choices (n > 1). Not
// thread-safe (one request's thread uses it).
class OpenAiResponder {
 public:
  // One choice of a whole answer.
  struct WholeChoice {
    const std::vector<TurnPiece>* pieces = nullptr;
    const TurnSummary* summary = nullptr;
    std::optional<ParsedToolCall> call;
  };

  OpenAiResponder(OpenAiEndpoint endpoint, std::string model, bool logprobs,
                  std::string session_id);

  // A chat's reasoning goes to reasoning_content (whole and streamed), each
  // choice split on its own, and is counted in
  // usage.completion_tokens_details.reasoning_tokens (the pieces that held
  // reasoning: a piece is one token, or the tokens of one character, or with
  // logprobs its tokens); `starts_inside`: the generation prompt opened it.
  // Call before any chunk.
  void SetReasoning(ReasoningFormat format, bool starts_inside);

  // A chat whose model calls tools in its own format (hermes,
  // qwen3_coder): the answer (after any reasoning) is read for calls,
  // whole and streamed, where each call's arguments go out as they arrive
  // (OpenAI's tool_calls deltas). One choice only. Call before any chunk.
  void SetToolCalls(ToolCallFormat format, std::vector<RequestJson> functions, int32_t max_calls);
  // Calls in the answer left as text, and parameters kept as strings
  // against their schema (once the answer is whole or its stream closed).
  int64_t malformed_tool_calls() const { return malformed_tool_calls_; }
  int64_t unconverted_tool_values() const { return unconverted_tool_values_; }

  // Streaming: the chunks of a chat's first event (the assistant role, for
  // each of `n` choices), if any (completions have none).
  std::vector<nlohmann::json> Opening(int32_t n = 1) const;
  // Streaming: the chunk of one piece of text.
  nlohmann::json Chunk(const TurnPiece& piece, int32_t index = 0) const;
  // Streaming: a turn's call, as one tool_calls delta.
  nlohmann::json ToolCallChunk(const ParsedToolCall& call) const;
  // Streaming: the chunk with the finish reason ("tool_calls" after a
  // call), and (include_usage) the usage chunk.
  nlohmann::json Closing(const TurnSummary& summary, bool called = false,
                         int32_t index = 0) const;
  nlohmann::json UsageChunk(const TurnSummary& summary) const;
  // `usage`: OpenAiUsage's; `position`: the session's after the turn.
  nlohmann::json UsageChunk(const nlohmann::json& usage, int64_t position) const;

  // Without streaming: the whole answer; with `call`, its message carries
  // the call as tool_calls (content null) and finish_reason "tool_calls".
  nlohmann::json Whole(const std::vector<TurnPiece>& pieces, const TurnSummary& summary,
                       const std::optional<ParsedToolCall>& call = std::nullopt) const;
  // Several choices, index i being choices[i].
  nlohmann::json Whole(const std::vector<WholeChoice>& choices, const nlohmann::json& usage,
                       int64_t position) const;

 private:
  nlohmann::json Envelope(bool chunk) const;
  nlohmann::json Choice(const std::string& text, const std::vector<SampledToken>& tokens,
                        const nlohmann::json& finish_reason, bool chunk, int32_t index) const;
  nlohmann::json Logprobs(const std::vector<SampledToken>& tokens, int32_t index) const;
  void AddSession(nlohmann::json& out, int64_t position) const;
  // Choice `index`'s reasoning splitter; null when reasoning is not split.
  ReasoningSplitter* Splitter(int32_t index) const;
  // Splits one piece of choice `index`, counting its tokens as reasoning
  // when it held any.
  ReasoningSplitter::Split Split(const TurnPiece& piece, int32_t index) const;
  // A chat delta or message's text fields from a split.
  static void SetSplit(nlohmann::json& fields, const ReasoningSplitter::Split& split, bool whole);
  // Streaming: a delta's content read for calls: the content left, and
  // tool_calls deltas.
  void AddToolCalls(nlohmann::json& delta, const std::string& content) const;
  void FlushToolCalls(nlohmann::json& delta) const;
  // OpenAI's tool_calls entries for one delta.
  nlohmann::json ToolCallDeltas(const std::vector<ToolCallDelta>& deltas) const;
  // `usage` with completion_tokens_details when reasoning is split.
  nlohmann::json WithReasoning(nlohmann::json usage) const;

  const OpenAiEndpoint endpoint_;
  const std::string model_;
  const bool logprobs_;
  const std::string session_id_;
  const std::string id_;
  const int64_t created_;
  const std::string call_id_;  // a tool call's id, if the turn makes one
  mutable std::vector<int64_t> text_offsets_;  // completions' logprobs.text_offset, by choice
  // Set by SetReasoning; mutable as text_offsets_ is: the answer's state as
  // it streams, one splitter per choice.
  std::optional<ReasoningFormat> reasoning_format_;
  bool reasoning_starts_inside_ = false;
  mutable std::vector<ReasoningSplitter> splitters_;
  mutable int64_t reasoning_tokens_ = 0;
  // Set by SetToolCalls.
  struct ToolCalls {
    ToolCallFormat format;
    std::vector<RequestJson> functions;
    int32_t max_calls;
  };
  std::optional<ToolCalls> tool_calls_;
  mutable std::optional<ToolCallParser> tool_parser_;  // a stream's
  mutable std::vector<std::string> tool_call_ids_;     // by call index
  mutable int64_t malformed_tool_calls_ = 0;
  mutable int64_t unconverted_tool_values_ = 0;
};

// "stop" (a stop string or EOS), "length", or "abort" (cut by the server).
std::string OpenAiFinishReason(const TurnSummary& summary);

// OpenAI's usage object, with prompt_tokens_details.cached_tokens.
nlohmann::json OpenAiUsage(const TurnSummary& summary);
// A request's choices: the prompt counted once (it was prefilled once, by
// `prefill`, the choice that ran it), the completion tokens of every choice
// made (best_of's too). cached_tokens counts the prompt tokens the prefill
// resumed from the prefix-state cache.
nlohmann::json OpenAiUsage(const TurnSummary& prefill, int64_t completion_tokens);

// JSON text for the wire: invalid UTF-8 (a token's bytes may end inside a
// character) is replaced, never thrown on.
std::string DumpJson(const nlohmann::json& value);

}  // namespace linserve

#endif  // LINSERVE_SERVER_OPENAI_RESPONSE_H_
