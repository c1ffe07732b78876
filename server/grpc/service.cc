#include "server/grpc/service.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/auth.h"
#include "server/common/log.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/unary_answer.h"

namespace linserve {
namespace {

// The canonical name ("OK", "RESOURCE_EXHAUSTED", ...): absl and gRPC share
// the codes.
std::string CodeName(const grpc::Status& status) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
}

}  // namespace

void FillSession(const SessionInfo& info, v1::Session* out) {
  out->set_id(info.id);
  out->set_position(info.position);
  out->set_state_bytes(info.state_bytes);
  out->set_recurrent_state_bytes(info.recurrent_state_bytes);
  out->set_kv_state_bytes(info.kv_state_bytes);
  out->set_created_unix_ms(info.created_unix_ms);
  out->set_last_used_unix_ms(info.last_used_unix_ms);
  out->set_busy(info.busy);
  out->set_cached_tokens(info.cached_tokens);
}

void LogGenerate(const std::string& protocol, const std::string& code, const std::string& error,
                 const TurnSummary* summary) {
  nlohmann::json fields = {{"protocol", protocol}, {"code", code}};
  if (!error.empty()) fields["error"] = error;
  if (summary != nullptr) {
    fields["finish"] = summary->cancelled ? "cancelled" : FinishReasonName(summary->reason);
    fields["prompt_tokens"] = summary->prompt_tokens;
    fields["cached_tokens"] = summary->cached_tokens;
    fields["generated_tokens"] = summary->generated_tokens;
    fields["queue_ms"] = summary->queue_ms;
    fields["prefill_ms"] = summary->prefill_ms;
    fields["decode_ms"] = summary->decode_ms;
  }
  LogInfo("generate", std::move(fields));
}

std::string TenantOf(const grpc::CallbackServerContext& context) {
  const auto auth = context.auth_context();
  if (auth == nullptr) return "";
  const auto values = auth->FindPropertyValues(kTenantProperty);
  return values.empty() ? "" : std::string(values.front().data(), values.front().size());
}

LinserveService::LinserveService(Metrics* metrics, ServiceOptions options)
    : metrics_(metrics),
      options_(std::move(options)),
      streams_(options_.max_open_streams, options_.max_open_streams_per_tenant,
               &metrics->open_streams()) {}

absl::StatusOr<StreamLimit::Ticket> LinserveService::OpenStream(const std::string& tenant) {
  absl::StatusOr<StreamLimit::Ticket> ticket = streams_.Acquire(tenant);
  if (!ticket.ok()) {
    const bool tenants = absl::StrContains(ticket.status().message(), "per_tenant");
    metrics_->CountRejection(tenants ? "tenant_streams" : "open_streams");
  }
  return ticket;
}

void LinserveService::SetScheduler(Scheduler* scheduler, ReasoningFormat reasoning_format) {
  options_.limits.sampling.vocab_size = static_cast<int32_t>(scheduler->model_facts().vocab_size);
  reasoning_format_ = reasoning_format;
  scheduler_.store(scheduler);  // publishes the limits with it
}

void LinserveService::Count(const char* method, const grpc::Status& status) {
  metrics_->CountRequest(method, CodeName(status), "grpc");
}

grpc::ServerUnaryReactor* LinserveService::Reply(grpc::CallbackServerContext* context,
                                                 const char* method, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const grpc::Status grpc_status = ToGrpcStatus(status);
  Count(method, grpc_status);
  reactor->Finish(grpc_status);
  return reactor;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* LinserveService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  auto* stream = new GenerateStream([this](const grpc::Status& status, const TurnSummary* summary) {
    Count("Generate", status);
    LogGenerate("grpc", CodeName(status), status.error_message(), summary);
  });
  absl::StatusOr<StreamLimit::Ticket> ticket = OpenStream(TenantOf(*context));
  if (!ticket.ok()) {
    stream->sink()->Finish(ticket.status());
    return stream;
  }
  stream->Hold(*std::move(ticket));
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) {
    stream->sink()->Finish(NotReady());
    return stream;
  }
  absl::StatusOr<GenerateCall> call = ValidateGenerateRequest(*request, options_.limits);
  if (!call.ok()) {
    stream->sink()->Finish(call.status());
    return stream;
  }
  stream->sink()->SplitReasoning(reasoning_format_,
                                 PromptOpensReasoning(reasoning_format_, request->prompt()));
  absl::Status queued =
      scheduler->SubmitGenerate(TenantOf(*context), *std::move(call), stream->sink());
  if (!queued.ok()) stream->sink()->Finish(queued);
  return stream;
}

grpc::ServerUnaryReactor* LinserveService::CreateSession(grpc::CallbackServerContext* context,
                                                         const v1::CreateSessionRequest* request,
                                                         v1::Session* response) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "CreateSession", NotReady());
  absl::Status valid = ValidateSessionPrompt("prompt", request->prompt(), options_.limits);
  if (valid.ok()) valid = ValidateCacheSalt("cache_salt", request->cache_salt(), options_.limits);
  if (valid.ok() && !request->initial_state().empty()) {
    valid = ValidateStateName("initial_state", request->initial_state());
  }
  if (!valid.ok()) return Reply(context, "CreateSession", valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->CreateSession(
      TenantOf(*context), request->prompt(), request->cache_salt(), request->initial_state(),
      Answer<SessionInfo>(this, reactor, "CreateSession",
                          [response](const SessionInfo& info) { FillSession(info, response); }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::GetSession(grpc::CallbackServerContext* context,
                                                      const v1::GetSessionRequest* request,
                                                      v1::Session* response) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "GetSession", NotReady());
  absl::Status valid = ValidateSessionId("session_id", request->session_id());
  if (!valid.ok()) return Reply(context, "GetSession", valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->GetSession(
      TenantOf(*context), request->session_id(),
      Answer<SessionInfo>(this, reactor, "GetSession",
                          [response](const SessionInfo& info) { FillSession(info, response); }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::ListSessions(grpc::CallbackServerContext* context,
                                                        const v1::ListSessionsRequest* request,
                                                        v1::ListSessionsResponse* response) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "ListSessions", NotReady());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->ListSessions(
      TenantOf(*context), request->page_size(), request->page_token(),
      Answer<SessionPage>(this, reactor, "ListSessions", [response](const SessionPage& page) {
        for (const SessionInfo& info : page.sessions) FillSession(info, response->add_sessions());
        response->set_next_page_token(page.next_page_token);
      }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::DeleteSession(grpc::CallbackServerContext* context,
                                                         const v1::DeleteSessionRequest* request,
                                                         v1::DeleteSessionResponse*) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "DeleteSession", NotReady());
  absl::Status valid = ValidateSessionId("session_id", request->session_id());
  if (!valid.ok()) return Reply(context, "DeleteSession", valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->DeleteSession(TenantOf(*context), request->session_id(),
                           Answer<bool>(this, reactor, "DeleteSession", [](const bool&) {}));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::ForkSession(grpc::CallbackServerContext* context,
                                                       const v1::ForkSessionRequest* request,
                                                       v1::Session* response) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "ForkSession", NotReady());
  absl::Status valid = ValidateSessionId("session_id", request->session_id());
  if (!valid.ok()) return Reply(context, "ForkSession", valid);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  scheduler->ForkSession(
      TenantOf(*context), request->session_id(),
      Answer<SessionInfo>(this, reactor, "ForkSession",
                          [response](const SessionInfo& info) { FillSession(info, response); }));
  return reactor;
}

grpc::ServerUnaryReactor* LinserveService::GetModelInfo(grpc::CallbackServerContext* context,
                                                        const v1::GetModelInfoRequest*,
                                                        v1::ModelInfo* response) {
  Scheduler* scheduler = scheduler_.load();
  if (scheduler == nullptr) return Reply(context, "GetModelInfo", NotReady());
  const ModelFacts& facts = scheduler->model_facts();
  response->set_config_json(facts.config_json);
  response->set_fingerprint(facts.fingerprint);
  response->set_attention_kind(facts.attention_kind);
  response->set_state_bytes_per_session(facts.state_bytes_per_session);
  response->set_state_bytes_per_token(facts.state_bytes_per_token);
  response->set_reasoning_format(ReasoningFormatName(reasoning_format_));
  response->set_vocab_size(static_cast<int32_t>(facts.vocab_size));
  response->set_device(facts.device);
  response->set_architecture(facts.architecture);
  response->set_tokenizer(facts.tokenizer);
  response->set_compute_dtype(facts.compute_dtype);
  response->set_weight_format(facts.weight_format);
  response->set_prefix_cache_bytes(facts.prefix_cache_bytes);
  response->set_prefix_cache_block_tokens(static_cast<int32_t>(facts.prefill_chunk_tokens));
  for (const auto& [begin, end] : facts.special_token_ranges) {
    v1::TokenIdRange* range = response->add_special_token_ranges();
    range->set_begin(static_cast<int32_t>(begin));
    range->set_end(static_cast<int32_t>(end));
  }
  v1::Limits* limits = response->mutable_limits();
  // Every tokenizer makes at most one token of a byte, so the byte limit on
  // the request bounds the model's work on a prompt.
  limits->set_max_prompt_bytes(options_.limits.max_prompt_bytes);
  limits->set_max_prompt_tokens(options_.limits.max_prompt_bytes + (facts.adds_bos ? 1 : 0));
  limits->set_max_context_tokens(
      facts.state_grows ? static_cast<int32_t>(options_.scheduler.max_context_tokens) : 0);
  limits->set_max_new_tokens_cap(options_.limits.sampling.max_new_tokens_cap);
  limits->set_default_max_new_tokens(options_.limits.default_max_new_tokens);
  limits->set_max_stop_sequences(options_.limits.sampling.max_stop_sequences);
  limits->set_max_stop_bytes(options_.limits.sampling.max_stop_bytes);
  limits->set_max_sessions(static_cast<int32_t>(options_.scheduler.max_sessions));
  limits->set_max_queued_requests(options_.scheduler.max_queued_requests);
  limits->set_max_state_bytes(options_.scheduler.max_state_bytes);
  limits->set_max_state_chunk_bytes(options_.max_state_chunk_bytes);
  limits->set_max_cache_salt_bytes(options_.limits.max_cache_salt_bytes);
  limits->set_max_grammar_bytes(options_.limits.max_grammar_bytes);
  limits->set_max_choices(options_.limits.max_choices);
  limits->set_max_logit_bias(options_.limits.max_logit_bias);
  limits->set_max_grammar_symbols(options_.limits.grammar.max_symbols);
  limits->set_grammar_max_nesting(options_.limits.grammar.max_nesting);
  limits->set_grammar_max_repeat(options_.limits.grammar.max_repeat);
  limits->set_grammar_max_regex_nesting(options_.limits.grammar.max_regex_nesting);
  limits->set_grammar_max_parses(options_.scheduler.grammar_masks.max_parses);
  limits->set_max_state_upload_bytes(options_.scheduler.max_state_upload_bytes);
  limits->set_max_named_states_per_tenant(options_.scheduler.max_named_states_per_tenant);
  limits->set_max_named_state_bytes_per_tenant(options_.scheduler.max_named_state_bytes_per_tenant);
  for (const NamedStateInfo& state : facts.global_named_states) {
    FillNamedState(state, response->add_named_states());
  }
  for (const char* kind : {"grammar", "choice", "json_schema"}) response->add_constraints(kind);
  return Reply(context, "GetModelInfo", absl::OkStatus());
}

}  // namespace linserve
