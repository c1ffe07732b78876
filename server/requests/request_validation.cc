#include "server/requests/request_validation.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/status_macros.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex_to_gbnf.h"
#include "engine/text/utf8_assembler.h"

namespace linserve {
namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(std::string(message));
}

// The Utf8Assembler rewrites exactly the ill-formed bytes, so valid text is
// the text whose assembly is itself.
bool IsValidUtf8(std::string_view text) {
  Utf8Assembler assembler;
  std::string out = assembler.Push(text);
  out += assembler.Flush();
  return out == text;
}

// Token ids stand in for the text: the byte limit bounds their count (no
// tokenizer makes more tokens than bytes), the vocabulary their values.
absl::Status ValidatePromptTokens(const v1::GenerateRequest& request, const RequestLimits& limits) {
  const auto& tokens = request.prompt_tokens();
  if (tokens.empty()) return absl::OkStatus();
  if (!request.prompt().empty()) return Invalid("prompt and prompt_tokens are both set; send one");
  if (tokens.size() > static_cast<size_t>(limits.max_prompt_bytes)) {
    return Invalid(absl::StrCat("prompt_tokens has ", tokens.size(), " ids; at most ",
                                limits.max_prompt_bytes, " are allowed"));
  }
  for (int i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limits.sampling.vocab_size) {
      return Invalid(absl::StrCat("prompt_tokens[", i, "] = ", tokens[i], " is outside [0, ",
                                  limits.sampling.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateUtf8(absl::string_view field, absl::string_view text) {
  const std::string_view view(text.data(), text.size());
  if (IsValidUtf8(view)) return absl::OkStatus();
  // The first ill-formed subpart starts where the assembled output first
  // departs from the input (or, for a truncated last character, where the
  // output ends).
  Utf8Assembler assembler;
  size_t assembled = 0;
  for (size_t offset = 0; offset < view.size(); ++offset) {
    const std::string piece = assembler.Push(view.substr(offset, 1));
    if (view.compare(assembled, piece.size(), piece) != 0) break;
    assembled += piece.size();
  }
  return Invalid(
      absl::StrCat(field, " is not valid UTF-8 (first bad byte at offset ", assembled, ")"));
}

absl::Status ValidateSessionId(absl::string_view field, absl::string_view id) {
  bool hex = id.size() == 32;
  for (char c : id) hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (hex) return absl::OkStatus();
  return Invalid(absl::StrCat(field, " is malformed: a session id is 32 lowercase hex digits, got ",
                              id.size(), " bytes"));
}

absl::Status ValidateStateName(absl::string_view field, absl::string_view name) {
  constexpr size_t kMaxStateNameBytes = 64;
  if (name.empty() || name.size() > kMaxStateNameBytes) {
    return Invalid(absl::StrCat(field, " is ", name.size(), " characters; a state's name has 1 to ",
                                kMaxStateNameBytes));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return Invalid(absl::StrCat(field, " has a character other than [A-Za-z0-9._-] at offset ",
                                  i));
    }
  }
  if (name == "." || name == "..") return Invalid(absl::StrCat(field, " may not be . or .."));
  return absl::OkStatus();
}

absl::Status ValidateSessionPrompt(absl::string_view field, absl::string_view prompt,
                                   const RequestLimits& limits) {
  if (prompt.size() > static_cast<size_t>(limits.max_prompt_bytes)) {
    return Invalid(absl::StrCat(field, " is ", prompt.size(), " bytes; at most ",
                                limits.max_prompt_bytes, " are allowed"));
  }
  return ValidateUtf8(field, prompt);
}

absl::Status ValidateCacheSalt(absl::string_view field, absl::string_view salt,
                               const RequestLimits& limits) {
  if (salt.size() <= static_cast<size_t>(limits.max_cache_salt_bytes)) return absl::OkStatus();
  return Invalid(absl::StrCat(field, " is ", salt.size(), " bytes; at most max_cache_salt_bytes = ",
                              limits.max_cache_salt_bytes, " are allowed"));
}

namespace {

// The constraint's text as GBNF, counted against its limits before it is
// parsed; the parse's own limits bound what the text expands to.
absl::Status ValidateConstraint(const v1::GenerateRequest& request, const RequestLimits& limits,
                                GenerateCall& call) {
  const auto max_bytes = static_cast<size_t>(limits.max_grammar_bytes);
  std::string_view field;
  if (request.constraint_case() == v1::GenerateRequest::kGrammar) {
    field = "grammar";
    if (request.grammar().size() > max_bytes) {
      return Invalid(absl::StrCat("grammar is ", request.grammar().size(),
                                  " bytes; at most max_grammar_bytes = ", max_bytes));
    }
    call.grammar_text = request.grammar();
  } else if (request.constraint_case() == v1::GenerateRequest::kChoice) {
    field = "choice";
    const auto& choices = request.choice().choices();
    if (choices.empty() || choices.size() > limits.max_choices) {
      return Invalid(absl::StrCat("choice has ", choices.size(), " strings; 1 to max_choices = ",
                                  limits.max_choices, " are allowed"));
    }
    size_t bytes = 0;
    for (int i = 0; i < choices.size(); ++i) {
      bytes += choices[i].size();
      if (bytes > max_bytes) {
        return Invalid(absl::StrCat("choice's strings pass max_grammar_bytes = ", max_bytes,
                                    " bytes together"));
      }
      if (choices[i].empty()) return Invalid(absl::StrCat("choice[", i, "] is empty"));
      LINSERVE_RETURN_IF_ERROR(ValidateUtf8(absl::StrCat("choice[", i, "]"), choices[i]));
    }
    call.grammar_text = ChoiceGrammar({choices.begin(), choices.end()});
  } else if (request.constraint_case() == v1::GenerateRequest::kJsonSchema) {
    field = "json_schema";
    if (request.json_schema().size() > max_bytes) {
      return Invalid(absl::StrCat("json_schema is ", request.json_schema().size(),
                                  " bytes; at most max_grammar_bytes = ", max_bytes));
    }
    // Its own errors name json_schema and the place in the schema.
    JsonSchemaOptions options;
    options.limits = limits.grammar;
    LINSERVE_ASSIGN_OR_RETURN(call.grammar_text,
                              JsonSchemaTextToGbnf(request.json_schema(), options));
  } else {
    return absl::OkStatus();
  }
  absl::StatusOr<Grammar> grammar = ParseGbnf(call.grammar_text, limits.grammar);
  if (!grammar.ok()) {
    return Invalid(absl::StrCat(std::string(field), ": ", grammar.status().message()));
  }
  call.grammar = std::make_shared<const Grammar>(*std::move(grammar));
  return absl::OkStatus();
}

// OpenAI's range; sorted by id, so a request's bias is applied the same
// way however its map was ordered.
absl::Status ValidateLogitBias(const v1::GenerateRequest& request, const RequestLimits& limits,
                               GenerateCall& call) {
  const auto& bias = request.logit_bias();
  if (bias.size() > static_cast<size_t>(limits.max_logit_bias)) {
    return Invalid(absl::StrCat("logit_bias has ", bias.size(), " entries; at most max_logit_bias = ",
                                limits.max_logit_bias));
  }
  for (const auto& [id, value] : bias) {
    if (id < 0 || id >= limits.sampling.vocab_size) {
      return Invalid(absl::StrCat("logit_bias names token ", id, ", outside [0, ",
                                  limits.sampling.vocab_size, ")"));
    }
    if (!(value >= -100.0f && value <= 100.0f)) {
      return Invalid(absl::StrCat("logit_bias[", id, "] = ", value, " is outside [-100, 100]"));
    }
    call.logit_bias.push_back({id, value});
  }
  std::sort(call.logit_bias.begin(), call.logit_bias.end());
  return absl::OkStatus();
}

}  // namespace

std::string ChoiceGrammar(const std::vector<std::string>& choices) {
  std::string gbnf = "root ::=";
  for (size_t i = 0; i < choices.size(); ++i) {
    absl::StrAppend(&gbnf, i == 0 ? " " : " | ", GbnfLiteral(choices[i]));
  }
  return gbnf;
}

namespace {

// GenerateRequest.conversation and keep_state_at.
absl::Status ValidateConversation(const v1::GenerateRequest& request, GenerateCall& call) {
  call.conversation = request.conversation();
  call.keep_state_at = request.keep_state_at();
  if (call.conversation && call.session_id.empty()) {
    return Invalid("conversation needs session_id: it is the whole conversation of a session");
  }
  if (call.conversation && request.prompt().empty() && request.prompt_tokens().empty()) {
    return Invalid("conversation is set and the prompt is empty; send the conversation");
  }
  if (call.keep_state_at != 0 && !call.conversation) {
    return Invalid("keep_state_at needs conversation = true");
  }
  const int64_t length = request.prompt_tokens().empty()
                             ? static_cast<int64_t>(request.prompt().size())
                             : static_cast<int64_t>(request.prompt_tokens().size());
  if (call.keep_state_at < 0 || call.keep_state_at > length) {
    return Invalid(absl::StrCat("keep_state_at = ", call.keep_state_at, " is outside [0, ", length,
                                "] (the conversation's ",
                                request.prompt_tokens().empty() ? "bytes" : "tokens", ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerateCall> ValidateGenerateRequest(const v1::GenerateRequest& request,
                                                     const RequestLimits& limits) {
  GenerateCall call;
  call.session_id = request.session_id();
  if (!call.session_id.empty()) {
    LINSERVE_RETURN_IF_ERROR(ValidateSessionId("session_id", call.session_id));
  } else if (request.prompt().empty() && request.prompt_tokens().empty()) {
    return Invalid("prompt is empty; a request without session_id needs at least 1 byte");
  }
  call.initial_state = request.initial_state();
  if (!call.initial_state.empty()) {
    if (!call.session_id.empty()) {
      return Invalid("initial_state and session_id are both set: a session already has its "
                     "state; send one");
    }
    LINSERVE_RETURN_IF_ERROR(ValidateStateName("initial_state", call.initial_state));
  }
  LINSERVE_RETURN_IF_ERROR(ValidateSessionPrompt("prompt", request.prompt(), limits));
  call.prompt = request.prompt();
  LINSERVE_RETURN_IF_ERROR(ValidatePromptTokens(request, limits));
  call.prompt_tokens.assign(request.prompt_tokens().begin(), request.prompt_tokens().end());
  LINSERVE_RETURN_IF_ERROR(ValidateCacheSalt("cache_salt", request.cache_salt(), limits));
  call.cache_salt = request.cache_salt();
  LINSERVE_RETURN_IF_ERROR(ValidateConversation(request, call));

  const v1::SamplingParams& s = request.sampling();
  SamplingParams& p = call.sampling;
  if (s.has_temperature()) p.temperature = s.temperature();
  p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  p.presence_penalty = s.presence_penalty();
  p.frequency_penalty = s.frequency_penalty();
  p.seed = s.seed();
  call.seed_given = s.has_seed();
  p.max_new_tokens =
      request.max_new_tokens() == 0 ? limits.default_max_new_tokens : request.max_new_tokens();
  p.stop.assign(request.stop().begin(), request.stop().end());
  p.ignore_eos = request.ignore_eos();
  p.skip_special_tokens = !request.has_skip_special_tokens() || request.skip_special_tokens();
  LINSERVE_RETURN_IF_ERROR(ValidateSamplingParams(p, limits.sampling));

  call.logprobs = request.logprobs();
  call.top_logprobs = request.top_logprobs();
  if (call.top_logprobs < 0 || call.top_logprobs > limits.max_top_logprobs) {
    return Invalid(absl::StrCat("top_logprobs = ", call.top_logprobs, " is outside [0, ",
                                limits.max_top_logprobs, "]"));
  }
  if (call.top_logprobs > 0 && !call.logprobs) {
    return Invalid("top_logprobs needs logprobs = true");
  }
  LINSERVE_RETURN_IF_ERROR(ValidateConstraint(request, limits, call));
  LINSERVE_RETURN_IF_ERROR(ValidateLogitBias(request, limits, call));
  return call;
}

}  // namespace linserve
