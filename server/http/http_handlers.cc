#include "server/http/http_handlers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/common/metrics_endpoint.h"
#include "server/http/playground_assets.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace linserve {

HttpHandlers::HttpHandlers(HttpOptions options, LinserveService* service, Metrics* metrics)
    : options_(std::move(options)),
      service_(service),
      metrics_(metrics),
      max_state_bytes_(service->options().scheduler.max_state_bytes),
      origin_policy_{options_.cors_origins,
                     options_.allowed_hosts.empty() ? DefaultAllowedHosts(options_.listen)
                                                    : options_.allowed_hosts,
                     !options_.tls_cert_file.empty()} {}

void HttpHandlers::SetServing(ChatTemplate chat_template) {
  if (absl::StatusOr<ToolCallFormat> named = ParseToolCallFormat(options_.tool_call_format);
      named.ok()) {
    chat_template.set_tool_call_format(*named);
  }
  absl::MutexLock lock(&mu_);
  chat_template_ = std::move(chat_template);
}

std::optional<ChatTemplate> HttpHandlers::chat_template() const {
  absl::MutexLock lock(&mu_);
  return chat_template_;
}

HttpHeadVerdict HttpHandlers::Judge(const HttpRequest& head) {
  HttpHeadVerdict verdict;
  verdict.max_body_bytes = options_.max_body_bytes;
  verdict.body_limit_name = "--max_http_body_bytes";
  if (IsStateUpload(head)) {
    // A state file is far bigger than any JSON body: its own limit, the one
    // gRPC's UploadNamedState has.
    verdict.max_body_bytes = options_.max_state_upload_bytes;
    verdict.body_limit_name = "--max_state_upload_bytes";
    verdict.refusal = JudgeStateUpload(head);
  } else if (IsSessionImport(head)) {
    // A session's state file, as ImportSession takes it.
    verdict.max_body_bytes = max_state_bytes_;
    verdict.body_limit_name = "--max_state_bytes";
    verdict.refusal = JudgeSessionImport(head);
  }
  // A compressed body could inflate to any size: the server takes bodies as
  // sent, and says so before reading one.
  const std::string coding = head.Header("Content-Encoding");
  if (!verdict.refusal && !coding.empty() && !absl::EqualsIgnoreCase(coding, "identity")) {
    verdict.refusal = Refusal(415, absl::StrCat("Content-Encoding \"", coding,
                                                "\" is not accepted; send the body uncompressed"));
  }
  return verdict;
}

HttpResponse HttpHandlers::Refusal(int status, const std::string& message) {
  return ErrorAnswer("Other", HttpErrorOf(status, message));
}

void HttpHandlers::Handle(HttpRequest req, std::shared_ptr<HttpExchange> exchange) {
  HttpHeaders cors;
  if (std::optional<HttpResponse> refused = CheckOrigin(req, cors)) {
    return exchange->Reply(*std::move(refused));
  }
  const std::string& method = req.method;
  const std::string& path = req.path;
  std::optional<HttpResponse> answer;
  if (method == "GET" && path == "/health") {
    answer = Health();
  } else if (method == "GET" && options_.playground && PlaygroundFile(path) != nullptr) {
    answer = Playground(*PlaygroundFile(path));
  } else if (method == "GET" && path == "/v1/models") {
    answer = Models(req, std::nullopt);
  } else if (method == "GET" && absl::StartsWith(path, "/v1/models/")) {
    answer = Models(req, path.substr(sizeof("/v1/models/") - 1));
  } else if (method == "GET" && path == "/metrics" && options_.metrics_registry != nullptr) {
    answer = MetricsText(req);
  } else if (method == "POST" && path == "/tokenize") {
    answer = Tokenize(req);
  } else if (method == "POST" && path == "/detokenize") {
    answer = Detokenize(req);
  } else if (method == "POST" && path == "/v1/completions") {
    return Complete(OpenAiEndpoint::kCompletions, std::move(req), std::move(cors),
                    std::move(exchange));
  } else if (method == "POST" && path == "/v1/chat/completions") {
    return Complete(OpenAiEndpoint::kChatCompletions, std::move(req), std::move(cors),
                    std::move(exchange));
  } else if (path == "/v1/states" || absl::StartsWith(path, "/v1/states/")) {
    return NamedStates(std::move(req), std::move(cors), std::move(exchange));
  } else if (path == "/v1/sessions" || absl::StartsWith(path, "/v1/sessions/")) {
    return Sessions(std::move(req), std::move(cors), std::move(exchange));
  } else {
    answer = Refusal(404, UnknownEndpointMessage(method, path));
  }
  answer->headers.insert(answer->headers.end(), cors.begin(), cors.end());
  exchange->Reply(*std::move(answer));
}

std::optional<HttpResponse> HttpHandlers::CheckOrigin(const HttpRequest& req, HttpHeaders& cors) {
  // A browser names the page's origin. Without an allow-list no other
  // site's page may call this server (a page on any site could otherwise
  // drive a server on the visitor's machine); with one, listed origins get
  // CORS headers. The server's own page (the playground) may, on a host the
  // server answers to (http_origins.h: DNS rebinding).
  const std::string origin = req.Header("Origin");
  if (origin.empty()) return std::nullopt;
  switch (JudgeOrigin(origin_policy_, origin, req.Header("Host"))) {
    case OriginVerdict::kSameOrigin:
      return std::nullopt;
    case OriginVerdict::kRefused:
      return ErrorAnswer(
          "Cors", ToHttpError(absl::PermissionDeniedError(absl::StrCat(
                      "origin ", origin,
                      " is not allowed; --http_cors_origins lists other sites' pages allowed, "
                      "and the server's own page is served only on the hosts "
                      "--http_allowed_hosts lists (by default loopback and --http_listen's)"))));
    case OriginVerdict::kCors:
      break;
  }
  cors = {{"Access-Control-Allow-Origin", origin},
          {"Vary", "Origin"},
          {"Access-Control-Expose-Headers", "x-session-id, Retry-After"}};
  if (req.method != "OPTIONS") return std::nullopt;
  HttpResponse preflight;
  preflight.status = 204;
  preflight.content_type.clear();
  preflight.headers = cors;
  preflight.headers.insert(preflight.headers.end(),
                           {{"Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS"},
                            {"Access-Control-Allow-Headers", "Authorization, Content-Type, x-session-id"},
                            {"Access-Control-Max-Age", "600"}});
  return preflight;
}

absl::StatusOr<std::string> HttpHandlers::Authenticate(const HttpRequest& req) const {
  if (options_.tokens.empty()) return std::string();
  if (!req.HasHeader("Authorization")) return TenantOfAuthorization(options_.tokens, std::nullopt);
  const std::string authorization = req.Header("Authorization");
  return TenantOfAuthorization(options_.tokens, absl::string_view(authorization));
}

absl::StatusOr<Scheduler*> HttpHandlers::Ready() const {
  Scheduler* scheduler = service_->scheduler();
  if (scheduler == nullptr || !chat_template().has_value()) {
    return absl::UnavailableError("the model is still loading; retry shortly");
  }
  return scheduler;
}

absl::StatusOr<Scheduler*> HttpHandlers::Admit(const HttpRequest& req, RequestJson* body) const {
  absl::StatusOr<std::string> tenant = Authenticate(req);
  if (!tenant.ok()) return tenant.status();
  absl::StatusOr<Scheduler*> scheduler = Ready();
  if (!scheduler.ok() || body == nullptr) return scheduler;
  absl::StatusOr<RequestJson> parsed = ParseBody(req);
  if (!parsed.ok()) return parsed.status();
  *body = *std::move(parsed);
  return scheduler;
}

absl::StatusOr<RequestJson> HttpHandlers::ParseBody(const HttpRequest& req) const {
  RequestJson body = RequestJson::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!body.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return body;
}

void HttpHandlers::Count(const char* method, int http_status) {
  metrics_->CountRequest(method, CodeNameOfHttpStatus(http_status), "http");
}

HttpResponse HttpHandlers::ErrorAnswer(const char* method, const HttpError& error) {
  HttpResponse response;
  response.status = error.status;
  if (error.retry_after_seconds > 0) {
    response.headers.emplace_back("Retry-After", std::to_string(error.retry_after_seconds));
  }
  response.body = DumpJson(error.body);
  Count(method, error.status);
  return response;
}

HttpResponse HttpHandlers::JsonAnswer(const char* method, const nlohmann::json& body) {
  HttpResponse response;
  response.body = DumpJson(body);
  Count(method, 200);
  return response;
}

HttpResponse HttpHandlers::Health() {
  // Probes need no token, and are not counted (they come every few seconds).
  const bool loading = !Ready().ok();
  const char* status = loading ? "loading" : draining_ ? "draining" : "ok";
  HttpResponse response;
  response.status = loading || draining_ ? 503 : 200;
  response.body = DumpJson({{"status", status}});
  return response;
}

namespace {

// [{"begin": b, "end": e}, ...], as GetModelInfo's special_token_ranges.
nlohmann::json SpecialTokenRanges(const ModelFacts& facts) {
  nlohmann::json ranges = nlohmann::json::array();
  for (const auto& [begin, end] : facts.special_token_ranges) {
    ranges.push_back({{"begin", begin}, {"end", end}});
  }
  return ranges;
}

}  // namespace

ReasoningFormat HttpHandlers::reasoning_format() const {
  const std::optional<ChatTemplate> chat = chat_template();
  return ResolveReasoningFormat(options_.reasoning_format, chat ? &*chat : nullptr);
}

ToolCallFormat HttpHandlers::tool_call_format() const {
  // SetServing applied the flag to the template.
  const std::optional<ChatTemplate> chat = chat_template();
  return chat ? chat->tool_call_format() : ToolCallFormat::kLinserve;
}

HttpResponse HttpHandlers::Models(const HttpRequest& req, std::optional<std::string> id) {
  constexpr char kMethod[] = "Models";
  absl::StatusOr<Scheduler*> scheduler = Admit(req, nullptr);
  if (!scheduler.ok()) return ErrorAnswer(kMethod, ToHttpError(scheduler.status()));
  // GET /v1/models/{id}, as OpenAI's models.retrieve: the one model, or 404.
  if (id.has_value() && *id != options_.served_model_name) {
    return ErrorAnswer(kMethod, ToHttpError(absl::NotFoundError(absl::StrCat(
                                                "The model '", *id, "' does not exist; this server serves '",
                                                options_.served_model_name, "'")),
                                            "model"));
  }
  const ModelFacts& facts = (*scheduler)->model_facts();
  static const int64_t started = absl::ToUnixSeconds(absl::Now());
  nlohmann::json model = {{"id", options_.served_model_name},
                          {"object", "model"},
                          {"created", started},
                          {"owned_by", "linserve"},
                          {"fingerprint", facts.fingerprint},
                          {"architecture", facts.architecture},
                          {"tokenizer", facts.tokenizer},
                          {"state_bytes_per_session", facts.state_bytes_per_session},
                          {"state_bytes_per_token", facts.state_bytes_per_token},
                          {"vocab_size", facts.vocab_size},
                          {"special_token_ranges", SpecialTokenRanges(facts)},
                          {"reasoning_format", ReasoningFormatName(reasoning_format())},
                          {"tool_call_format", ToolCallFormatName(tool_call_format())}};
  if (const std::optional<ChatTemplate> chat = chat_template(); chat) {
    model["chat_template"] = chat->source();
  }
  // vLLM's name for the longest context a session may reach: set where the
  // state grows with the position (--max_context_tokens).
  const int64_t context = service_->options().scheduler.max_context_tokens;
  if (facts.state_grows && context > 0) model["max_model_len"] = context;
  if (id.has_value()) return JsonAnswer(kMethod, model);
  return JsonAnswer(kMethod,
                    {{"object", "list"}, {"data", nlohmann::json::array({std::move(model)})}});
}

const PlaygroundAsset* HttpHandlers::PlaygroundFile(const std::string& path) {
  for (const PlaygroundAsset& asset : PlaygroundAssets()) {
    if (asset.path == path || (asset.path == "/" && path == "/index.html")) return &asset;
  }
  return nullptr;
}

HttpResponse HttpHandlers::Playground(const PlaygroundAsset& asset) {
  HttpResponse response;
  response.content_type = std::string(asset.content_type);
  response.body = std::string(asset.body);
  response.headers = {{"Content-Security-Policy", kPlaygroundContentSecurityPolicy},
                      {"X-Content-Type-Options", "nosniff"},
                      {"Cache-Control", "no-cache"}};
  Count("Playground", 200);
  return response;
}

HttpResponse HttpHandlers::MetricsText(const HttpRequest& req) {
  // Behind the API's tokens when it has any: the same guard as every route.
  if (absl::StatusOr<std::string> tenant = Authenticate(req); !tenant.ok()) {
    return ErrorAnswer("Metrics", ToHttpError(tenant.status()));
  }
  return MetricsResponse(*options_.metrics_registry);
}

std::string UnknownEndpointMessage(absl::string_view method, absl::string_view path) {
  return absl::StrCat(
      "no endpoint ", method, " ", path,
      "; this server answers GET / (the playground page), POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
      "GET /v1/models/{id}, POST /tokenize, POST /detokenize, GET /health, GET, PUT, POST and "
      "DELETE under /v1/states, and GET, POST and DELETE under /v1/sessions");
}

HttpResponse HttpHandlers::Tokenize(const HttpRequest& req) {
  constexpr char kMethod[] = "Tokenize";
  RequestJson body_value;
  absl::StatusOr<Scheduler*> scheduler = Admit(req, &body_value);
  if (!scheduler.ok()) return ErrorAnswer(kMethod, ToHttpError(scheduler.status()));
  const RequestJson* body = &body_value;
  // A chat's messages render as /v1/chat/completions renders them.
  const bool chat = body->contains("messages");
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
                         *body, *chat_template(), "", service_->options().limits.grammar);
  absl::Status valid = parsed.status();
  const std::string& text = parsed.ok() ? parsed->generate.prompt() : "";
  if (valid.ok()) valid = ValidateSessionPrompt("prompt", text, service_->options().limits);
  if (!valid.ok()) {
    const OpenAiField field =
        ToOpenAiField(chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
                      std::string(valid.message()));
    return ErrorAnswer(kMethod, ToHttpError(absl::Status(valid.code(), field.message), field.param));
  }
  // A Jinja chat template writes its own special tokens: no BOS of the
  // tokenizer's unless asked for.
  const bool jinja_chat = chat && chat_template()->jinja() != nullptr;
  const bool special = body->value("add_special_tokens", !jinja_chat);
  // The messages' special token texts stay text, as the chat is fed.
  const absl::StatusOr<std::vector<int64_t>> encoded =
      (*scheduler)->model_facts().token_codec->TryEncode(text, /*starts_text=*/special,
                                                         parsed->prompt_plain);
  if (!encoded.ok()) return ErrorAnswer(kMethod, ToHttpError(encoded.status()));
  const std::vector<int64_t>& tokens = *encoded;
  // A chat's rendered text as well (llama.cpp's /apply-template gives it so):
  // exactly what the model is fed.
  if (chat) return JsonAnswer(kMethod, {{"tokens", tokens}, {"count", tokens.size()}, {"prompt", text}});
  return JsonAnswer(kMethod, {{"tokens", tokens}, {"count", tokens.size()}});
}

HttpResponse HttpHandlers::Detokenize(const HttpRequest& req) {
  constexpr char kMethod[] = "Detokenize";
  RequestJson body_value;
  absl::StatusOr<Scheduler*> scheduler = Admit(req, &body_value);
  if (!scheduler.ok()) return ErrorAnswer(kMethod, ToHttpError(scheduler.status()));
  const RequestJson* body = &body_value;
  const auto tokens = body->find("tokens");
  const int64_t vocab = (*scheduler)->model_facts().vocab_size;
  const int64_t max_tokens = service_->options().limits.max_prompt_bytes;
  if (tokens == body->end() || !tokens->is_array()) {
    return ErrorAnswer(
        kMethod,
        ToHttpError(absl::InvalidArgumentError("tokens must be a list of token ids"), "tokens"));
  }
  if (static_cast<int64_t>(tokens->size()) > max_tokens) {
    return ErrorAnswer(kMethod,
                 ToHttpError(absl::InvalidArgumentError(absl::StrCat("tokens has ", tokens->size(),
                                                                     " ids; at most ", max_tokens,
                                                                     " are allowed")),
                             "tokens"));
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const nlohmann::json& id = (*tokens)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      return ErrorAnswer(
          kMethod,
          ToHttpError(absl::InvalidArgumentError(absl::StrCat("tokens[", i, "] = ", id.dump(),
                                                              " is not an id in [0, ", vocab, ")")),
                      "tokens"));
    }
    ids.push_back(id.get<int64_t>());
  }
  return JsonAnswer(kMethod, {{"prompt", (*scheduler)->model_facts().token_codec->Decode(ids)}});
}

}  // namespace linserve
