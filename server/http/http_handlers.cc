#include "server/http/http_handlers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace linserve {
namespace {

using Json = nlohmann::json;

constexpr char kJson[] = "application/json";

}  // namespace

HttpHandlers::HttpHandlers(HttpOptions options, LinserveService* service, Metrics* metrics)
    : options_(std::move(options)), service_(service), metrics_(metrics) {}

void HttpHandlers::Register(httplib::Server& server) {
  server.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return PreRoute(req, res); });
  server.set_error_handler(
      [this](const httplib::Request& req, httplib::Response& res) { FillErrorBody(req, res); });
  server.Get("/health", [this](const auto& req, auto& res) { Health(req, res); });
  server.Get("/v1/models", [this](const auto& req, auto& res) { Models(req, res); });
  server.Post("/tokenize", [this](const auto& req, auto& res) { Tokenize(req, res); });
  server.Post("/detokenize", [this](const auto& req, auto& res) { Detokenize(req, res); });
  server.Post("/v1/completions", [this](const auto& req, auto& res) {
    Complete(OpenAiEndpoint::kCompletions, req, res);
  });
  server.Post("/v1/chat/completions", [this](const auto& req, auto& res) {
    Complete(OpenAiEndpoint::kChatCompletions, req, res);
  });
}

void HttpHandlers::SetServing(ChatTemplate chat_template) {
  absl::MutexLock lock(&mu_);
  chat_template_ = std::move(chat_template);
}

std::optional<ChatTemplate> HttpHandlers::chat_template() const {
  absl::MutexLock lock(&mu_);
  return chat_template_;
}

httplib::Server::HandlerResponse HttpHandlers::PreRoute(const httplib::Request& req,
                                                        httplib::Response& res) {
  int64_t header_bytes = 0;
  for (const auto& [name, value] : req.headers) {
    header_bytes += static_cast<int64_t>(name.size() + value.size() + 4);  // ": " and CRLF
  }
  if (header_bytes > options_.max_header_bytes) {
    Reply(res, "Headers",
          HttpErrorOf(431, absl::StrCat("the request's headers are ", header_bytes,
                                        " bytes; at most --max_http_header_bytes = ",
                                        options_.max_header_bytes, " are allowed")));
    return httplib::Server::HandlerResponse::Handled;
  }
  // A browser names the page's origin. Without an allow-list no page may
  // call this server (a page on any site could otherwise drive a server on
  // the visitor's machine); with one, listed origins get CORS headers.
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return httplib::Server::HandlerResponse::Unhandled;
  const auto& allowed = options_.cors_origins;
  if (std::find(allowed.begin(), allowed.end(), origin) == allowed.end() &&
      std::find(allowed.begin(), allowed.end(), "*") == allowed.end()) {
    Reply(res, "Cors",
          ToHttpError(absl::PermissionDeniedError(absl::StrCat(
              "origin ", origin, " is not allowed; --http_cors_origins lists the allowed ones"))));
    return httplib::Server::HandlerResponse::Handled;
  }
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "x-session-id, Retry-After");
  if (req.method == "OPTIONS") {
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, x-session-id");
    res.set_header("Access-Control-Max-Age", "600");
    res.status = 204;
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

void HttpHandlers::FillErrorBody(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  std::string message;
  switch (res.status) {
    case 413:
      message = absl::StrCat("the request body is ", req.get_header_value("Content-Length"),
                             " bytes; at most --max_http_body_bytes = ", options_.max_body_bytes,
                             " are allowed");
      break;
    case 404:
      message =
          absl::StrCat("no endpoint ", req.method, " ", req.path, " (server/README.md lists them)");
      break;
    default:
      message = absl::StrCat("HTTP ", res.status);
  }
  const HttpError error = HttpErrorOf(res.status, message);
  Count("Other", res.status);
  res.set_content(DumpJson(error.body), kJson);
}

absl::StatusOr<std::string> HttpHandlers::Authenticate(const httplib::Request& req) const {
  if (options_.tokens.empty()) return std::string();
  if (!req.has_header("Authorization")) return TenantOfAuthorization(options_.tokens, std::nullopt);
  const std::string authorization = req.get_header_value("Authorization");
  return TenantOfAuthorization(options_.tokens, absl::string_view(authorization));
}

absl::StatusOr<Scheduler*> HttpHandlers::Ready() const {
  Scheduler* scheduler = service_->scheduler();
  if (scheduler == nullptr || !chat_template().has_value()) {
    return absl::UnavailableError("the model is still loading; retry shortly");
  }
  return scheduler;
}

absl::StatusOr<Scheduler*> HttpHandlers::Admit(const httplib::Request& req, Json* body) const {
  absl::StatusOr<std::string> tenant = Authenticate(req);
  if (!tenant.ok()) return tenant.status();
  absl::StatusOr<Scheduler*> scheduler = Ready();
  if (!scheduler.ok() || body == nullptr) return scheduler;
  absl::StatusOr<Json> parsed = ParseBody(req);
  if (!parsed.ok()) return parsed.status();
  *body = *std::move(parsed);
  return scheduler;
}

absl::StatusOr<Json> HttpHandlers::ParseBody(const httplib::Request& req) const {
  Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!body.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return body;
}

void HttpHandlers::Count(const char* method, int http_status) {
  metrics_->CountRequest(method, CodeNameOfHttpStatus(http_status), "http");
}

void HttpHandlers::Reply(httplib::Response& res, const char* method, const HttpError& error) {
  res.status = error.status;
  if (error.retry_after_seconds > 0) {
    res.set_header("Retry-After", std::to_string(error.retry_after_seconds));
  }
  res.set_content(DumpJson(error.body), kJson);
  Count(method, error.status);
}

void HttpHandlers::ReplyJson(httplib::Response& res, const char* method, const Json& body) {
  res.status = 200;
  res.set_content(DumpJson(body), kJson);
  Count(method, 200);
}

void HttpHandlers::Health(const httplib::Request&, httplib::Response& res) {
  // Probes need no token, and are not counted (they come every few seconds).
  const bool loading = !Ready().ok();
  const char* status = loading ? "loading" : draining_ ? "draining" : "ok";
  res.status = loading || draining_ ? 503 : 200;
  res.set_content(DumpJson({{"status", status}}), kJson);
}

void HttpHandlers::Models(const httplib::Request& req, httplib::Response& res) {
  constexpr char kMethod[] = "Models";
  absl::StatusOr<Scheduler*> scheduler = Admit(req, nullptr);
  if (!scheduler.ok()) return Reply(res, kMethod, ToHttpError(scheduler.status()));
  const ModelFacts& facts = (*scheduler)->model_facts();
  static const int64_t started = absl::ToUnixSeconds(absl::Now());
  ReplyJson(
      res, kMethod,
      {{"object", "list"},
       {"data", Json::array({{{"id", options_.served_model_name},
                              {"object", "model"},
                              {"created", started},
                              {"owned_by", "linserve"},
                              {"fingerprint", facts.fingerprint},
                              {"architecture", facts.architecture},
                              {"tokenizer", facts.tokenizer},
                              {"state_bytes_per_session", facts.state_bytes_per_session}}})}});
}

void HttpHandlers::Tokenize(const httplib::Request& req, httplib::Response& res) {
  constexpr char kMethod[] = "Tokenize";
  Json body_value;
  absl::StatusOr<Scheduler*> scheduler = Admit(req, &body_value);
  if (!scheduler.ok()) return Reply(res, kMethod, ToHttpError(scheduler.status()));
  const Json* body = &body_value;
  // A chat's messages render as /v1/chat/completions renders them.
  const bool chat = body->contains("messages");
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
                         *body, *chat_template(), "");
  absl::Status valid = parsed.status();
  const std::string& text = parsed.ok() ? parsed->generate.prompt() : "";
  if (valid.ok()) valid = ValidateSessionPrompt("prompt", text, service_->options().limits);
  if (!valid.ok()) {
    const OpenAiField field =
        ToOpenAiField(chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
                      std::string(valid.message()));
    return Reply(res, kMethod, ToHttpError(absl::Status(valid.code(), field.message), field.param));
  }
  const bool special = body->value("add_special_tokens", true);
  const std::vector<int64_t> tokens =
      (*scheduler)->model_facts().token_codec->Encode(text, /*starts_text=*/special);
  ReplyJson(res, kMethod, {{"tokens", tokens}, {"count", tokens.size()}});
}

void HttpHandlers::Detokenize(const httplib::Request& req, httplib::Response& res) {
  constexpr char kMethod[] = "Detokenize";
  Json body_value;
  absl::StatusOr<Scheduler*> scheduler = Admit(req, &body_value);
  if (!scheduler.ok()) return Reply(res, kMethod, ToHttpError(scheduler.status()));
  const Json* body = &body_value;
  const auto tokens = body->find("tokens");
  const int64_t vocab = (*scheduler)->model_facts().vocab_size;
  const int64_t max_tokens = service_->options().limits.max_prompt_bytes;
  if (tokens == body->end() || !tokens->is_array()) {
    return Reply(
        res, kMethod,
        ToHttpError(absl::InvalidArgumentError("tokens must be a list of token ids"), "tokens"));
  }
  if (static_cast<int64_t>(tokens->size()) > max_tokens) {
    return Reply(res, kMethod,
                 ToHttpError(absl::InvalidArgumentError(absl::StrCat("tokens has ", tokens->size(),
                                                                     " ids; at most ", max_tokens,
                                                                     " are allowed")),
                             "tokens"));
  }
  std::vector<int64_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& id = (*tokens)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab) {
      return Reply(
          res, kMethod,
          ToHttpError(absl::InvalidArgumentError(absl::StrCat("tokens[", i, "] = ", id.dump(),
                                                              " is not an id in [0, ", vocab, ")")),
                      "tokens"));
    }
    ids.push_back(id.get<int64_t>());
  }
  ReplyJson(res, kMethod, {{"prompt", (*scheduler)->model_facts().token_codec->Decode(ids)}});
}

}  // namespace linserve
