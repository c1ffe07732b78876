// /v1/states: named states over HTTP, the gRPC API's CreateNamedState,
// UploadNamedState, GetNamedState, ListNamedStates and DeleteNamedState.
//
//   GET    /v1/states          the server's own states, then the caller's
//   POST   /v1/states          {"name", "prompt", "cache_salt"?}: made from a prompt
//   GET    /v1/states/{name}
//   PUT    /v1/states/{name}   the body: a state file's bytes (application/octet-stream)
//   DELETE /v1/states/{name}
//
// Nothing here waits: the scheduler answers on its own thread, and
// HttpExchange::Reply may be called from any thread.

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_handlers.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace linserve {
namespace {

constexpr absl::string_view kStatesPath = "/v1/states";
constexpr absl::string_view kUploadType = "application/octet-stream";

// The {name} of /v1/states/{name} (maybe empty: checked by the caller), or
// nullopt for /v1/states itself. Names are [A-Za-z0-9._-]: nothing to
// percent-decode.
std::optional<std::string> NameInPath(const std::string& path) {
  if (path.size() <= kStatesPath.size()) return std::nullopt;
  return path.substr(kStatesPath.size() + 1);
}

// The gRPC method a request is (its name in linserve_requests_total), or
// nullptr when the path has no such method.
const char* StateMethod(const std::string& method, bool named) {
  if (!named) {
    if (method == "GET") return "ListNamedStates";
    if (method == "POST") return "CreateNamedState";
    return nullptr;
  }
  if (method == "GET") return "GetNamedState";
  if (method == "PUT") return "UploadNamedState";
  if (method == "DELETE") return "DeleteNamedState";
  return nullptr;
}

// The media type of a Content-Type, without its parameters, in lower case.
std::string MediaType(const std::string& content_type) {
  return absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(absl::string_view(content_type).substr(0, content_type.find(';'))));
}

// A state in the API's shape; `made_from_prompt`: CreateNamedState's
// answer, with what making it cost.
nlohmann::json NamedStateJson(const NamedStateInfo& info, bool made_from_prompt) {
  nlohmann::json out = {{"id", info.name},
                        {"object", "state"},
                        {"global", info.global},
                        {"digest", info.digest},
                        {"state_bytes", info.state_bytes},
                        {"created", info.created_unix_ms / 1000}};
  // A listing does not read every state: what it has not read is null, not
  // a value a client could take for the state's.
  out["position"] = info.position >= 0 ? nlohmann::json(info.position) : nlohmann::json();
  out["source"] = info.source.empty() ? nlohmann::json() : nlohmann::json(info.source);
  if (made_from_prompt) {
    out["usage"] = {{"prompt_tokens", info.prompt_tokens}, {"cached_tokens", info.cached_tokens}};
    out["prefill_ms"] = info.prefill_ms;
  }
  return out;
}

}  // namespace

bool HttpHandlers::IsStateUpload(const HttpRequest& head) {
  return head.method == "PUT" && absl::StartsWith(head.path, absl::StrCat(kStatesPath, "/"));
}

std::optional<HttpResponse> HttpHandlers::JudgeStateUpload(const HttpRequest& head) {
  return JudgeStateFileBody(head, "UploadNamedState", absl::StrCat("PUT ", kStatesPath, "/{name}"));
}

std::optional<HttpResponse> HttpHandlers::JudgeStateFileBody(const HttpRequest& head,
                                                             const char* method,
                                                             absl::string_view route) {
  // Refused from the head, so that no caller without a token, and no body
  // that could not be a state file, has up to the route's limit buffered
  // first.
  if (absl::StatusOr<std::string> tenant = Authenticate(head); !tenant.ok()) {
    return ErrorAnswer(method, ToHttpError(tenant.status()));
  }
  const std::string type = head.Header("Content-Type");
  if (MediaType(type) != kUploadType) {
    return Refusal(415, absl::StrCat("Content-Type \"", type, "\" is not accepted by ", route,
                                     ": send the state file's bytes as ", kUploadType));
  }
  return std::nullopt;
}

void HttpHandlers::NamedStates(HttpRequest req, HttpHeaders cors,
                               std::shared_ptr<HttpExchange> exchange) {
  const std::optional<std::string> name = NameInPath(req.path);
  const char* const method = StateMethod(req.method, name.has_value());
  // Every answer, now or from the scheduler's thread, carries the CORS headers.
  auto answer = [this, method, cors, exchange](const absl::StatusOr<nlohmann::json>& body,
                                               const std::string& param = "") {
    HttpResponse response = body.ok() ? JsonAnswer(method, *body)
                                      : ErrorAnswer(method, ToHttpError(body.status(), param));
    response.headers.insert(response.headers.end(), cors.begin(), cors.end());
    exchange->Reply(std::move(response));
  };
  if (method == nullptr) {
    HttpResponse refused = Refusal(404, UnknownEndpointMessage(req.method, req.path));
    refused.headers.insert(refused.headers.end(), cors.begin(), cors.end());
    return exchange->Reply(std::move(refused));
  }
  absl::StatusOr<std::string> tenant = Authenticate(req);
  if (!tenant.ok()) return answer(tenant.status());
  absl::StatusOr<Scheduler*> scheduler = Ready();
  if (!scheduler.ok()) return answer(scheduler.status());
  if (name.has_value()) {
    if (absl::Status valid = ValidateStateName("name", *name); !valid.ok()) {
      return answer(valid, "name");
    }
  }

  // One state's answer, as JSON.
  auto state = [answer](bool made_from_prompt) {
    return [answer, made_from_prompt](absl::StatusOr<NamedStateInfo> info) {
      if (!info.ok()) return answer(info.status());
      answer(NamedStateJson(*info, made_from_prompt));
    };
  };
  const std::string verb = req.method;
  if (!name.has_value() && verb == "GET") {
    return (*scheduler)->ListNamedStates(
        *tenant, [answer](absl::StatusOr<std::vector<NamedStateInfo>> states) {
          if (!states.ok()) return answer(states.status());
          nlohmann::json data = nlohmann::json::array();
          for (const NamedStateInfo& info : *states) data.push_back(NamedStateJson(info, false));
          answer(nlohmann::json{{"object", "list"}, {"data", std::move(data)}});
        });
  }
  if (!name.has_value()) return CreateNamedState(req, *tenant, *scheduler, answer, state(true));
  if (verb == "GET") return (*scheduler)->GetNamedState(*tenant, *name, state(false));
  if (verb == "PUT") {
    // curl --data-binary @FILE with a FILE that is not there sends nothing.
    if (req.body.empty()) {
      return answer(absl::InvalidArgumentError(absl::StrCat(
                        "the body is empty: PUT /v1/states/", *name,
                        " takes a state file's bytes (a session exported by gRPC ExportSession, "
                        "as `linserve-client session export ID --file=PATH` does, or a "
                        "state-tuning file for RWKV-7); with curl, --data-binary @FILE where "
                        "FILE exists")),
                    "body");
    }
    // The head was judged (JudgeStateUpload): the body is the file, whole.
    // A damaged file or another model's is the request's fault here: 400,
    // not the 500 a damaged stored state is, nor gRPC's 409.
    auto uploaded = [done = state(false)](absl::StatusOr<NamedStateInfo> info) {
      if (absl::IsDataLoss(info.status()) || absl::IsFailedPrecondition(info.status())) {
        info = absl::InvalidArgumentError(info.status().message());
      }
      done(std::move(info));
    };
    return (*scheduler)->UploadNamedState(*tenant, *name, std::move(req.body), uploaded);
  }
  (*scheduler)->DeleteNamedState(
      *tenant, *name, [answer, name = *name](absl::StatusOr<bool> deleted) {
        if (!deleted.ok()) return answer(deleted.status());
        answer(nlohmann::json{{"id", name}, {"object", "state"}, {"deleted", *deleted}});
      });
}

void HttpHandlers::CreateNamedState(const HttpRequest& req, const std::string& tenant,
                                    Scheduler* scheduler, const StateAnswer& answer,
                                    Scheduler::Done<NamedStateInfo> done) {
  absl::StatusOr<RequestJson> body = ParseBody(req);
  if (!body.ok()) return answer(body.status(), "");
  // Each field a string; "name" and "prompt" required.
  std::string fields[3];
  const char* const names[3] = {"name", "prompt", "cache_salt"};
  for (int i = 0; i < 3; ++i) {
    const auto it = body->find(names[i]);
    if (it == body->end() || it->is_null()) continue;
    if (!it->is_string()) {
      return answer(absl::InvalidArgumentError(absl::StrCat(names[i], " must be a string")),
                    names[i]);
    }
    fields[i] = it->get<std::string>();
  }
  const RequestLimits& limits = service_->options().limits;
  absl::Status valid = ValidateStateName("name", fields[0]);
  if (!valid.ok()) return answer(valid, "name");
  if (fields[1].empty()) {
    valid = absl::InvalidArgumentError(
        "prompt is empty; a named state is made from a prompt of at least 1 byte");
  } else {
    valid = ValidateSessionPrompt("prompt", fields[1], limits);
  }
  if (!valid.ok()) return answer(valid, "prompt");
  valid = ValidateCacheSalt("cache_salt", fields[2], limits);
  if (!valid.ok()) return answer(valid, "cache_salt");
  scheduler->CreateNamedState(tenant, std::move(fields[0]), std::move(fields[1]),
                              std::move(fields[2]), std::move(done));
}

}  // namespace linserve
