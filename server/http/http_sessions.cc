// /v1/sessions: sessions over HTTP, the gRPC API's CreateSession,
// ListSessions, GetSession, DeleteSession, ForkSession, ExportSession and
// ImportSession, with their validation, limits, tenants and errors.
//
//   POST   /v1/sessions               {"prompt"?, "initial_state"?, "cache_salt"?}
//   GET    /v1/sessions               ?page_size=N&page_token=T, as ListSessions pages
//   GET    /v1/sessions/{id}
//   DELETE /v1/sessions/{id}
//   POST   /v1/sessions/{id}/fork
//   GET    /v1/sessions/{id}/state    the state file (application/octet-stream)
//   POST   /v1/sessions/import        the body: a state file (application/octet-stream)
//
// Nothing here waits: the scheduler answers on its own thread, and
// HttpExchange::Reply may be called from any thread.

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http/http_handlers.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"
#include "server/store/state_file.h"

namespace linserve {
namespace {

constexpr absl::string_view kSessionsPath = "/v1/sessions";
constexpr absl::string_view kImportPath = "/v1/sessions/import";
constexpr char kStateFileType[] = "application/octet-stream";

// What a request under /v1/sessions is: its gRPC twin's name (counted in
// linserve_requests_total under it), and the id in its path.
struct SessionRoute {
  const char* method = nullptr;  // nullptr: no such route
  std::string id;
  bool takes_id = false;  // the path names a session (checked before use)
};

SessionRoute RouteOf(const std::string& method, const std::string& path) {
  if (path == kSessionsPath) {
    if (method == "GET") return {"ListSessions", ""};
    if (method == "POST") return {"CreateSession", ""};
    return {};
  }
  if (path == kImportPath) return {method == "POST" ? "ImportSession" : nullptr, ""};
  // /v1/sessions/{id}[/fork|/state]; ids are 32 hex digits (checked later):
  // nothing to percent-decode.
  std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(path).substr(kSessionsPath.size() + 1), '/');
  if (parts.size() == 1) {
    if (method == "GET") return {"GetSession", parts[0], true};
    if (method == "DELETE") return {"DeleteSession", parts[0], true};
  } else if (parts.size() == 2) {
    if (parts[1] == "fork" && method == "POST") return {"ForkSession", parts[0], true};
    if (parts[1] == "state" && method == "GET") return {"ExportSession", parts[0], true};
  }
  return {};
}

// A session in the API's shape (the gRPC Session's fields; times in
// seconds, as OpenAI's objects have them, and in milliseconds).
nlohmann::json SessionJson(const SessionInfo& info) {
  return {{"id", info.id},
          {"object", "session"},
          {"position", info.position},
          {"state_bytes", info.state_bytes},
          {"recurrent_state_bytes", info.recurrent_state_bytes},
          {"kv_state_bytes", info.kv_state_bytes},
          {"created", info.created_unix_ms / 1000},
          {"created_unix_ms", info.created_unix_ms},
          {"last_used_unix_ms", info.last_used_unix_ms},
          {"busy", info.busy},
          {"cached_tokens", info.cached_tokens}};
}

// One query parameter's value (percent-decoded), or nullopt.
std::optional<std::string> QueryValue(const std::string& target, absl::string_view name) {
  const size_t question = target.find('?');
  if (question == std::string::npos) return std::nullopt;
  for (absl::string_view pair : absl::StrSplit(absl::string_view(target).substr(question + 1), '&')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first != name) continue;
    std::string value;
    for (size_t i = 0; i < kv.second.size(); ++i) {
      int hex = 0;
      if (kv.second[i] == '%' && i + 2 < kv.second.size() &&
          absl::SimpleHexAtoi(kv.second.substr(i + 1, 2), &hex)) {
        value.push_back(static_cast<char>(hex));
        i += 2;
      } else {
        value.push_back(kv.second[i] == '+' ? ' ' : kv.second[i]);
      }
    }
    return value;
  }
  return std::nullopt;
}

}  // namespace

bool HttpHandlers::IsSessionImport(const HttpRequest& head) {
  return head.method == "POST" && head.path == kImportPath;
}

std::optional<HttpResponse> HttpHandlers::JudgeSessionImport(const HttpRequest& head) {
  return JudgeStateFileBody(head, "ImportSession", absl::StrCat("POST ", kImportPath));
}

void HttpHandlers::Sessions(HttpRequest req, HttpHeaders cors,
                            std::shared_ptr<HttpExchange> exchange) {
  const SessionRoute route = RouteOf(req.method, req.path);
  auto reply = [this, cors, exchange](HttpResponse response) {
    response.headers.insert(response.headers.end(), cors.begin(), cors.end());
    exchange->Reply(std::move(response));
  };
  if (route.method == nullptr) return reply(Refusal(404, UnknownEndpointMessage(req.method, req.path)));
  const char* const method = route.method;
  auto answer = [this, method, reply](const absl::StatusOr<nlohmann::json>& body,
                                      const std::string& param = "") {
    reply(body.ok() ? JsonAnswer(method, *body)
                    : ErrorAnswer(method, ToHttpError(body.status(), param)));
  };
  auto session = [answer](absl::StatusOr<SessionInfo> info) {
    if (!info.ok()) return answer(info.status());
    answer(SessionJson(*info));
  };
  absl::StatusOr<std::string> tenant = Authenticate(req);
  if (!tenant.ok()) return answer(tenant.status());
  absl::StatusOr<Scheduler*> ready = Ready();
  if (!ready.ok()) return answer(ready.status());
  Scheduler* const scheduler = *ready;
  if (route.takes_id) {
    if (absl::Status valid = ValidateSessionId("session_id", route.id); !valid.ok()) {
      return answer(valid, "session_id");
    }
  }
  const std::string verb = method;
  if (verb == "CreateSession") return CreateSessionFromBody(req, *tenant, scheduler, answer, session);
  if (verb == "GetSession") return scheduler->GetSession(*tenant, route.id, session);
  if (verb == "ForkSession") {
    // The fork holds the source's state, so it lacks the same chat turn end
    // (a turn cut by max_tokens): its next chat turn must feed it as the
    // source's would.
    return scheduler->ForkSession(
        *tenant, route.id, [this, session, from = route.id](absl::StatusOr<SessionInfo> info) {
          if (info.ok()) chat_turn_ends_.Forked(from, info->id);
          session(std::move(info));
        });
  }
  if (verb == "DeleteSession") {
    return scheduler->DeleteSession(*tenant, route.id,
                                    [answer, id = route.id](absl::StatusOr<bool> deleted) {
                                      if (!deleted.ok()) return answer(deleted.status());
                                      answer(nlohmann::json{
                                          {"id", id}, {"object", "session"}, {"deleted", *deleted}});
                                    });
  }
  if (verb == "ListSessions") {
    int32_t page_size = 0;
    if (std::optional<std::string> size = QueryValue(req.target, "page_size")) {
      if (!absl::SimpleAtoi(*size, &page_size) || page_size < 0) {
        return answer(absl::InvalidArgumentError(absl::StrCat(
                          "page_size = \"", *size, "\" is not a non-negative integer")),
                      "page_size");
      }
    }
    return scheduler->ListSessions(
        *tenant, page_size, QueryValue(req.target, "page_token").value_or(""),
        [answer](absl::StatusOr<SessionPage> page) {
          if (!page.ok()) return answer(page.status());
          nlohmann::json data = nlohmann::json::array();
          for (const SessionInfo& info : page->sessions) data.push_back(SessionJson(info));
          answer(nlohmann::json{{"object", "list"},
                                {"data", std::move(data)},
                                {"has_more", !page->next_page_token.empty()},
                                {"next_page_token", page->next_page_token}});
        });
  }
  // Export and import hold one of the open streams, as their gRPC twins do.
  absl::StatusOr<StreamLimit::Ticket> ticket = service_->OpenStream(*tenant);
  if (!ticket.ok()) return answer(ticket.status());
  auto held = std::make_shared<StreamLimit::Ticket>(*std::move(ticket));
  if (verb == "ExportSession") {
    return scheduler->ExportSession(
        *tenant, route.id, [this, reply, answer, held](absl::StatusOr<std::string> file) {
          if (!file.ok()) return answer(file.status());
          HttpResponse response;
          response.content_type = kStateFileType;
          response.body = *std::move(file);
          Count("ExportSession", 200);
          reply(std::move(response));
        });
  }
  // ImportSession: the head was judged (JudgeSessionImport), and the body,
  // whole, is within --max_state_bytes. Checked and checksummed before
  // anything is stored; a damaged or another model's file is the request's
  // fault: 400.
  StateFileAssembler file(req.body.size());
  file.Append(req.body);
  absl::StatusOr<SessionRecord> record =
      file.Decode(service_->options().scheduler.max_state_bytes,
                  scheduler->model_facts().fingerprint);
  if (!record.ok()) {
    return answer(absl::InvalidArgumentError(absl::StrCat(
                      "the body is not a state file of this model: ", record.status().message())),
                  "body");
  }
  scheduler->ImportSession(*tenant, *std::move(record),
                           [session, held](absl::StatusOr<SessionInfo> info) {
                             if (absl::IsDataLoss(info.status())) {
                               info = absl::InvalidArgumentError(info.status().message());
                             }
                             session(std::move(info));
                           });
}

void HttpHandlers::CreateSessionFromBody(const HttpRequest& req, const std::string& tenant,
                                         Scheduler* scheduler, const StateAnswer& answer,
                                         Scheduler::Done<SessionInfo> done) {
  // An empty body is an empty session, as CreateSession without fields.
  RequestJson body = RequestJson::object();
  if (!req.body.empty()) {
    absl::StatusOr<RequestJson> parsed = ParseBody(req);
    if (!parsed.ok()) return answer(parsed.status(), "");
    body = *std::move(parsed);
  }
  std::string fields[3];
  const char* const names[3] = {"prompt", "initial_state", "cache_salt"};
  for (int i = 0; i < 3; ++i) {
    const auto it = body.find(names[i]);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return answer(absl::InvalidArgumentError(absl::StrCat(names[i], " must be a string")),
                    names[i]);
    }
    fields[i] = it->get<std::string>();
  }
  const RequestLimits& limits = service_->options().limits;
  if (absl::Status valid = ValidateSessionPrompt("prompt", fields[0], limits); !valid.ok()) {
    return answer(valid, "prompt");
  }
  if (!fields[1].empty()) {
    if (absl::Status valid = ValidateStateName("initial_state", fields[1]); !valid.ok()) {
      return answer(valid, "initial_state");
    }
  }
  if (absl::Status valid = ValidateCacheSalt("cache_salt", fields[2], limits); !valid.ok()) {
    return answer(valid, "cache_salt");
  }
  scheduler->CreateSession(tenant, std::move(fields[0]), std::move(fields[2]),
                           std::move(fields[1]), std::move(done));
}

}  // namespace linserve
