#include "server/http/openai_response.h"

#include <algorithm>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

std::string NewId(OpenAiEndpoint endpoint) {
  absl::BitGen gen;
  return absl::StrFormat("%s-%016x%016x",
                         endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl" : "cmpl",
                         absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

Json Bytes(const std::string& text) {
  Json out = Json::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

std::string DumpJson(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string OpenAiFinishReason(const TurnSummary& summary) {
  if (summary.cancelled) return "abort";
  return summary.reason == FinishReason::kLength ? "length" : "stop";
}

Json OpenAiUsage(const TurnSummary& summary) {
  return OpenAiUsage(summary, summary.generated_tokens);
}

Json OpenAiUsage(const TurnSummary& prefill, int64_t completion_tokens) {
  return {{"prompt_tokens", prefill.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prefill.prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", prefill.cached_tokens}}}};
}

OpenAiResponder::OpenAiResponder(OpenAiEndpoint endpoint, std::string model, bool logprobs,
                                 std::string session_id)
    : endpoint_(endpoint),
      model_(std::move(model)),
      logprobs_(logprobs),
      session_id_(std::move(session_id)),
      id_(NewId(endpoint)),
      created_(absl::ToUnixSeconds(absl::Now())),
      call_id_(NewToolCallId()) {}

Json OpenAiResponder::Envelope(bool chunk) const {
  const bool chat = endpoint_ == OpenAiEndpoint::kChatCompletions;
  Json out = {
      {"id", id_},
      {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
      {"created", created_},
      {"model", model_}};
  if (!session_id_.empty()) out["session_id"] = session_id_;
  return out;
}

void OpenAiResponder::AddSession(Json& out, int64_t position) const {
  if (!session_id_.empty()) out["session_position"] = position;
}

Json OpenAiResponder::Logprobs(const std::vector<SampledToken>& tokens, int32_t index) const {
  if (endpoint_ == OpenAiEndpoint::kChatCompletions) {
    Json content = Json::array();
    for (const SampledToken& t : tokens) {
      Json top = Json::array();
      for (const TokenLogprob& alt : t.top) {
        top.push_back(
            {{"token", alt.bytes}, {"logprob", alt.logprob}, {"bytes", Bytes(alt.bytes)}});
      }
      content.push_back({{"token", t.token.bytes},
                         {"logprob", t.token.logprob},
                         {"bytes", Bytes(t.token.bytes)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  if (text_offsets_.size() <= static_cast<size_t>(index)) text_offsets_.resize(index + 1, 0);
  int64_t& text_offset = text_offsets_[index];
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const SampledToken& t : tokens) {
    out["tokens"].push_back(t.token.bytes);
    out["token_logprobs"].push_back(t.token.logprob);
    Json top = Json::object();
    for (const TokenLogprob& alt : t.top) top[alt.bytes] = alt.logprob;
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += static_cast<int64_t>(t.token.bytes.size());
  }
  return out;
}

Json OpenAiResponder::Choice(const std::string& text, const std::vector<SampledToken>& tokens,
                             const Json& finish_reason, bool chunk, int32_t index) const {
  Json choice = {{"index", index}};
  if (endpoint_ == OpenAiEndpoint::kChatCompletions) {
    if (chunk) {
      choice["delta"] = text.empty() ? Json::object() : Json{{"content", text}};
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
    }
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs_ && !tokens.empty() ? Logprobs(tokens, index) : Json(nullptr);
  choice["finish_reason"] = finish_reason;
  return choice;
}

void OpenAiResponder::SetReasoning(ReasoningFormat format, bool starts_inside) {
  if (endpoint_ != OpenAiEndpoint::kChatCompletions || format == ReasoningFormat::kNone) return;
  reasoning_format_ = format;
  reasoning_starts_inside_ = starts_inside;
}

void OpenAiResponder::SetToolCalls(ToolCallFormat format, std::vector<RequestJson> functions,
                                   int32_t max_calls) {
  if (endpoint_ != OpenAiEndpoint::kChatCompletions || format == ToolCallFormat::kLinserve) return;
  tool_calls_ = ToolCalls{format, std::move(functions), max_calls};
}

Json OpenAiResponder::ToolCallDeltas(const std::vector<ToolCallDelta>& deltas) const {
  Json out = Json::array();
  for (const ToolCallDelta& delta : deltas) {
    if (!delta.name.empty()) {
      while (tool_call_ids_.size() <= static_cast<size_t>(delta.index)) {
        tool_call_ids_.push_back(NewToolCallId());
      }
      out.push_back({{"index", delta.index},
                     {"id", tool_call_ids_[delta.index]},
                     {"type", "function"},
                     {"function", {{"name", delta.name}, {"arguments", ""}}}});
    } else {
      out.push_back({{"index", delta.index}, {"function", {{"arguments", delta.arguments}}}});
    }
  }
  return out;
}

void OpenAiResponder::AddToolCalls(Json& delta, const std::string& content) const {
  if (!tool_parser_) {
    tool_parser_.emplace(tool_calls_->format, tool_calls_->functions, tool_calls_->max_calls);
  }
  const ToolCallParser::Step step = tool_parser_->Push(content);
  delta.erase("content");
  if (!step.content.empty()) delta["content"] = step.content;
  if (!step.calls.empty()) delta["tool_calls"] = ToolCallDeltas(step.calls);
}

void OpenAiResponder::FlushToolCalls(Json& delta) const {
  if (!tool_parser_) {
    tool_parser_.emplace(tool_calls_->format, tool_calls_->functions, tool_calls_->max_calls);
  }
  const std::string content = delta.contains("content") ? delta["content"].get<std::string>() : "";
  AddToolCalls(delta, content);
  const ToolCallParser::Step step = tool_parser_->Flush();
  if (!step.content.empty()) {
    delta["content"] = delta.value("content", std::string()) + step.content;
  }
  if (!step.calls.empty()) {
    Json calls = delta.contains("tool_calls") ? delta["tool_calls"] : Json::array();
    for (Json& call : ToolCallDeltas(step.calls)) calls.push_back(std::move(call));
    delta["tool_calls"] = std::move(calls);
  }
  malformed_tool_calls_ = tool_parser_->malformed();
  unconverted_tool_values_ = tool_parser_->unconverted();
}

ReasoningSplitter* OpenAiResponder::Splitter(int32_t index) const {
  if (!reasoning_format_) return nullptr;
  while (splitters_.size() <= static_cast<size_t>(index)) {
    splitters_.emplace_back(*reasoning_format_, reasoning_starts_inside_);
  }
  return &splitters_[index];
}

ReasoningSplitter::Split OpenAiResponder::Split(const TurnPiece& piece, int32_t index) const {
  ReasoningSplitter* splitter = Splitter(index);
  const bool was_reasoning = splitter->in_reasoning();
  ReasoningSplitter::Split split = splitter->Push(piece.text);
  if (was_reasoning || !split.reasoning.empty()) {
    reasoning_tokens_ += std::max<int64_t>(1, static_cast<int64_t>(piece.tokens.size()));
  }
  return split;
}

void OpenAiResponder::SetSplit(Json& fields, const ReasoningSplitter::Split& split, bool whole) {
  if (whole) {
    fields["content"] = split.content;
    fields["reasoning_content"] = split.reasoning.empty() ? Json(nullptr) : Json(split.reasoning);
    return;
  }
  if (!split.reasoning.empty()) fields["reasoning_content"] = split.reasoning;
  if (!split.content.empty()) fields["content"] = split.content;
}

Json OpenAiResponder::WithReasoning(Json usage) const {
  if (reasoning_format_) {
    usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens_}};
  }
  return usage;
}

std::vector<Json> OpenAiResponder::Opening(int32_t n) const {
  if (endpoint_ != OpenAiEndpoint::kChatCompletions) return {};
  std::vector<Json> chunks;
  for (int32_t index = 0; index < n; ++index) {
    Json chunk = Envelope(true);
    chunk["choices"] = Json::array({{{"index", index},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

Json OpenAiResponder::Chunk(const TurnPiece& piece, int32_t index) const {
  Json chunk = Envelope(true);
  Json choice = Choice(piece.text, piece.tokens, nullptr, true, index);
  if (Splitter(index) != nullptr) {
    choice["delta"] = Json::object();
    SetSplit(choice["delta"], Split(piece, index), false);
  }
  if (tool_calls_ && choice.contains("delta")) {
    Json& delta = choice["delta"];
    AddToolCalls(delta, delta.contains("content") ? delta["content"].get<std::string>() : "");
  }
  chunk["choices"] = Json::array({std::move(choice)});
  return chunk;
}

Json OpenAiResponder::ToolCallChunk(const ParsedToolCall& call) const {
  Json chunk = Envelope(true);
  Json delta = {{"tool_calls", Json::array({{{"index", 0},
                                             {"id", call_id_},
                                             {"type", "function"},
                                             {"function", {{"name", call.name},
                                                           {"arguments", call.arguments}}}}})}};
  chunk["choices"] = Json::array(
      {{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return chunk;
}

Json OpenAiResponder::Closing(const TurnSummary& summary, bool called, int32_t index) const {
  Json chunk = Envelope(true);
  Json choice = Choice("", {}, called ? "tool_calls" : OpenAiFinishReason(summary), true, index);
  if (ReasoningSplitter* splitter = Splitter(index); splitter != nullptr) {
    SetSplit(choice["delta"], splitter->Flush(), false);
  }
  if (tool_calls_ && choice.contains("delta")) {
    FlushToolCalls(choice["delta"]);
    if (tool_parser_->calls() > 0) choice["finish_reason"] = "tool_calls";
  }
  chunk["choices"] = Json::array({std::move(choice)});
  AddSession(chunk, summary.position);
  return chunk;
}

Json OpenAiResponder::UsageChunk(const TurnSummary& summary) const {
  return UsageChunk(OpenAiUsage(summary), summary.position);
}

Json OpenAiResponder::UsageChunk(const Json& usage, int64_t position) const {
  Json chunk = Envelope(true);
  chunk["choices"] = Json::array();
  chunk["usage"] = WithReasoning(usage);
  AddSession(chunk, position);
  return chunk;
}

Json OpenAiResponder::Whole(const std::vector<TurnPiece>& pieces, const TurnSummary& summary,
                            const std::optional<ParsedToolCall>& call) const {
  return Whole({WholeChoice{&pieces, &summary, call}}, OpenAiUsage(summary), summary.position);
}

Json OpenAiResponder::Whole(const std::vector<WholeChoice>& choices, const Json& usage,
                            int64_t position) const {
  Json out = Envelope(false);
  out["choices"] = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const WholeChoice& whole = choices[i];
    std::string text;
    std::vector<SampledToken> tokens;
    for (const TurnPiece& piece : *whole.pieces) {
      text += piece.text;
      tokens.insert(tokens.end(), piece.tokens.begin(), piece.tokens.end());
    }
    const std::optional<ParsedToolCall>& call = whole.call;
    Json choice = Choice(text, tokens, call ? "tool_calls" : OpenAiFinishReason(*whole.summary),
                         false, static_cast<int32_t>(i));
    if (ReasoningSplitter* splitter = Splitter(static_cast<int32_t>(i)); splitter != nullptr) {
      ReasoningSplitter::Split split;
      for (const TurnPiece& piece : *whole.pieces) {
        ReasoningSplitter::Split part = Split(piece, static_cast<int32_t>(i));
        split.reasoning += part.reasoning;
        split.content += part.content;
      }
      ReasoningSplitter::Split rest = splitter->Flush();
      split.reasoning += rest.reasoning;
      split.content += rest.content;
      SetSplit(choice["message"], split, true);
    }
    if (tool_calls_ && i == 0 && choice.contains("message")) {
      Json& message = choice["message"];
      ParsedToolCalls parsed =
          ParseToolCalls(tool_calls_->format, tool_calls_->functions,
                         message["content"].get<std::string>(), tool_calls_->max_calls);
      malformed_tool_calls_ = parsed.malformed;
      unconverted_tool_values_ = parsed.unconverted;
      if (!parsed.calls.empty()) {
        message["content"] = parsed.content.empty() ? Json(nullptr) : Json(parsed.content);
        message["tool_calls"] = Json::array();
        for (const ParsedToolCalls::Call& parsed_call : parsed.calls) {
          message["tool_calls"].push_back(
              {{"id", NewToolCallId()},
               {"type", "function"},
               {"function", {{"name", parsed_call.name}, {"arguments", parsed_call.arguments}}}});
        }
        choice["finish_reason"] = "tool_calls";
      } else {
        message["content"] = parsed.content;
      }
    }
    if (call && choice.contains("message")) {
      choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = Json::array(
          {{{"id", call_id_},
            {"type", "function"},
            {"function", {{"name", call->name}, {"arguments", call->arguments}}}}});
    }
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = WithReasoning(usage);
  AddSession(out, position);
  return out;
}

}  // namespace linserve
