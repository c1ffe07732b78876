// POST /v1/completions and /v1/chat/completions: one request becomes the
// gRPC service's GenerateRequest, passes the same validation and stream
// limit, and runs as one turn of the scheduler; its output is written as one
// JSON body or as server-sent events.

#include <algorithm>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/http/http_handlers.h"
#include "server/http/http_turn_sink.h"
#include "server/common/log.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace linserve {

// One completion request, from parsing to its last byte. Shared between
// the handler and, when streaming, the content provider that outlives it.
class CompletionCall {
 public:
  CompletionCall(HttpHandlers* handlers, OpenAiEndpoint endpoint)
      : handlers_(handlers),
        endpoint_(endpoint),
        method_(endpoint == OpenAiEndpoint::kChatCompletions ? "ChatCompletions" : "Completions") {}

  void Run(const httplib::Request& req, httplib::Response& res,
           std::shared_ptr<CompletionCall> self);

 private:
  // Everything up to the turn's first event; an error answers the request.
  absl::Status Submit(const httplib::Request& req, httplib::Response& res);
  void Fail(httplib::Response& res, const absl::Status& status, const std::string& param = "");
  // The turn's next event; nullopt when the server stops first.
  std::optional<HttpTurnSink::Event> Next();
  void Answer(httplib::Response& res);
  void Stream(httplib::Response& res, std::shared_ptr<CompletionCall> self);
  // Writes one server-sent event; false when the client has gone.
  bool Write(httplib::DataSink& out, const std::string& data);
  void Log(const std::string& code, const std::string& error, const TurnSummary* summary);
  void ForgetNewSession();

  HttpHandlers* const handlers_;
  const OpenAiEndpoint endpoint_;
  const char* const method_;
  std::string tenant_;
  Scheduler* scheduler_ = nullptr;
  OpenAiRequest request_;
  std::string session_id_;  // the session the turn continues ("" stateless)
  StreamLimit::Ticket ticket_;
  std::shared_ptr<HttpTurnSink> sink_;
  std::optional<HttpTurnSink::Event> first_;
  std::unique_ptr<OpenAiResponder> responder_;
  bool fed_turn_end_ = false;  // the prompt starts with the previous chat turn's missing end
  bool logged_ = false;
};

void HttpHandlers::Complete(OpenAiEndpoint endpoint, const httplib::Request& req,
                            httplib::Response& res) {
  auto call = std::make_shared<CompletionCall>(this, endpoint);
  call->Run(req, res, call);
}

void CompletionCall::Fail(httplib::Response& res, const absl::Status& status,
                          const std::string& param) {
  handlers_->Reply(res, method_, ToHttpError(status, param));
  Log(absl::StatusCodeToString(status.code()), std::string(status.message()), nullptr);
}

void CompletionCall::Log(const std::string& code, const std::string& error,
                         const TurnSummary* summary) {
  if (logged_) return;
  logged_ = true;
  LogGenerate("http", code, error, summary);
  if (endpoint_ != OpenAiEndpoint::kChatCompletions || session_id_.empty()) return;
  // A failed or cut turn leaves its session as it was.
  const bool changed = summary != nullptr && !summary->cancelled;
  if (changed) {
    handlers_->chat_turn_ends_.Finished(session_id_, summary->reason == FinishReason::kStop);
  } else if (fed_turn_end_) {
    handlers_->chat_turn_ends_.Finished(session_id_, /*at_stop=*/false);
  }
}

void CompletionCall::ForgetNewSession() {
  // A session this request made for a turn that never ran would only wait
  // for its TTL.
  if (!request_.new_session || session_id_.empty()) return;
  scheduler_->DeleteSession(tenant_, session_id_, [](absl::StatusOr<bool>) {});
}

absl::Status CompletionCall::Submit(const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<std::string> tenant = handlers_->Authenticate(req);
  if (!tenant.ok()) return tenant.status();
  tenant_ = *tenant;
  absl::StatusOr<Scheduler*> scheduler = handlers_->Ready();
  if (!scheduler.ok()) return scheduler.status();
  scheduler_ = *scheduler;
  absl::StatusOr<nlohmann::json> body = handlers_->ParseBody(req);
  if (!body.ok()) return body.status();

  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      endpoint_, *body, *handlers_->chat_template(), req.get_header_value("x-session-id"));
  auto field_error = [&](const absl::Status& status) {
    const OpenAiField field = ToOpenAiField(endpoint_, std::string(status.message()));
    Fail(res, absl::Status(status.code(), field.message), field.param);
    return absl::CancelledError();  // answered already
  };
  if (!parsed.ok()) return field_error(parsed.status());
  request_ = *std::move(parsed);
  if (request_.ignored_field_count > 0) {
    LogInfo("http_fields_ignored",
            {{"path", req.path},
             {"count", request_.ignored_field_count},
             {"fields", absl::StrJoin(request_.ignored_fields, ",")}});
  }
  const std::string& served = handlers_->options_.served_model_name;
  if (!request_.model.empty() && request_.model != served) {
    Fail(res,
         absl::NotFoundError(absl::StrCat(
             "model \"", request_.model, "\" does not exist; this server serves \"", served, "\"")),
         "model");
    return absl::CancelledError();
  }

  // A chat session whose last turn stopped short of the template's turn end
  // gets it first, so that it holds what a stateless chat renders.
  if (const std::string& continued = request_.generate.session_id(); !continued.empty()) {
    session_id_ = continued;
    if (endpoint_ != OpenAiEndpoint::kChatCompletions) {
      handlers_->chat_turn_ends_.Forget(continued);
    } else if (handlers_->chat_turn_ends_.TakeMissingEnd(continued)) {
      fed_turn_end_ = true;
      request_.generate.set_prompt(handlers_->chat_template()->turn_end() +
                                   request_.generate.prompt());
    }
  }

  // The gRPC path's validation. A new session's id does not exist yet: a
  // well-formed stand-in lets the request be checked before one is made.
  v1::GenerateRequest& generate = request_.generate;
  if (request_.new_session) generate.set_session_id(std::string(32, '0'));
  absl::StatusOr<GenerateCall> call =
      ValidateGenerateRequest(generate, handlers_->service_->options().limits);
  if (!call.ok()) return field_error(call.status());
  call->protocol = Protocol::kHttp;
  for (const std::string& stop : request_.template_stop) {
    std::vector<std::string>& stops = call->sampling.stop;
    if (std::find(stops.begin(), stops.end(), stop) == stops.end()) stops.push_back(stop);
  }

  absl::StatusOr<StreamLimit::Ticket> ticket = handlers_->service_->OpenStream();
  if (!ticket.ok()) return ticket.status();
  ticket_ = *std::move(ticket);

  if (request_.new_session) {
    // A promise the callback owns a share of, rather than absl::Notification:
    // that one's release happens inside the prebuilt Abseil library, where
    // ThreadSanitizer cannot see it, and the waiter's read of the answer was
    // reported as a race.
    auto created = std::make_shared<std::promise<absl::StatusOr<SessionInfo>>>();
    std::future<absl::StatusOr<SessionInfo>> answer = created->get_future();
    scheduler_->CreateSession(tenant_, "", generate.cache_salt(),
                              [created](absl::StatusOr<SessionInfo> result) {
                                created->set_value(std::move(result));
                              });
    const absl::StatusOr<SessionInfo> info = answer.get();
    if (!info.ok()) return info.status();
    call->session_id = info->id;
  }
  session_id_ = call->session_id;
  const bool logprobs = call->logprobs;
  sink_ = std::make_shared<HttpTurnSink>();
  absl::Status queued = scheduler_->SubmitGenerate(tenant_, *std::move(call), sink_);
  if (!queued.ok()) {
    ForgetNewSession();
    return queued;
  }
  // The status line waits for the turn's first event, so that every refusal
  // (a limit, an unknown session) is an HTTP status, not an error event.
  first_ = Next();
  if (!first_.has_value()) return absl::UnavailableError("the server is shutting down");
  if (first_->done.has_value() && !first_->done->ok()) {
    ForgetNewSession();
    return first_->done->status();
  }
  responder_ = std::make_unique<OpenAiResponder>(endpoint_, served, logprobs, session_id_);
  if (!session_id_.empty()) res.set_header("x-session-id", session_id_);
  return absl::OkStatus();
}

std::optional<HttpTurnSink::Event> CompletionCall::Next() {
  while (!handlers_->stopping_) {
    if (std::optional<HttpTurnSink::Event> event = sink_->Next(absl::Milliseconds(200))) {
      return event;
    }
  }
  sink_->Cancel();
  return std::nullopt;
}

void CompletionCall::Run(const httplib::Request& req, httplib::Response& res,
                         std::shared_ptr<CompletionCall> self) {
  absl::Status submitted = Submit(req, res);
  if (absl::IsCancelled(submitted)) return;  // answered
  if (!submitted.ok()) return Fail(res, submitted);
  if (request_.stream) return Stream(res, std::move(self));
  Answer(res);
}

void CompletionCall::Answer(httplib::Response& res) {
  std::vector<TurnPiece> pieces;
  std::optional<HttpTurnSink::Event> event = std::move(first_);
  while (event.has_value() && !event->done.has_value()) {
    pieces.push_back(*std::move(event->piece));
    event = Next();
  }
  if (!event.has_value()) return Fail(res, absl::UnavailableError("the server is shutting down"));
  const absl::StatusOr<TurnSummary>& done = *event->done;
  if (!done.ok()) return Fail(res, done.status());
  handlers_->ReplyJson(res, method_, responder_->Whole(pieces, *done));
  Log("OK", "", &*done);
}

bool CompletionCall::Write(httplib::DataSink& out, const std::string& data) {
  const std::string event = absl::StrCat("data: ", data, "\n\n");
  return out.write(event.data(), event.size());
}

void CompletionCall::Stream(httplib::Response& res, std::shared_ptr<CompletionCall> self) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // nginx passes events through at once
  // The provider runs after this handler returns, on the same connection
  // thread, once per event, until it calls done() or fails.
  res.set_chunked_content_provider(
      "text/event-stream",
      [self](size_t, httplib::DataSink& out) {
        CompletionCall& call = *self;
        std::optional<HttpTurnSink::Event> event;
        if (call.first_.has_value()) {
          for (const nlohmann::json& chunk : call.responder_->Opening()) {
            if (!call.Write(out, DumpJson(chunk))) return false;
          }
          event = std::exchange(call.first_, std::nullopt);
        } else {
          event = call.Next();
        }
        if (!event.has_value()) return false;  // shutting down: cut the stream
        if (event->piece.has_value())
          return call.Write(out, DumpJson(call.responder_->Chunk(*event->piece)));
        const absl::StatusOr<TurnSummary>& done = *event->done;
        if (done.ok()) {
          if (!call.Write(out, DumpJson(call.responder_->Closing(*done)))) return false;
          if (call.request_.include_usage &&
              !call.Write(out, DumpJson(call.responder_->UsageChunk(*done)))) {
            return false;
          }
          call.Log("OK", "", &*done);
        } else {
          // Headers are gone: the error travels as an event, as vLLM sends it.
          if (!call.Write(out, DumpJson(ToHttpError(done.status()).body))) return false;
          call.Log(absl::StatusCodeToString(done.status().code()),
                   std::string(done.status().message()), nullptr);
        }
        if (!call.Write(out, "[DONE]")) return false;
        out.done();
        return true;
      },
      [self](bool success) {
        // A client that went away mid-stream cancels its turn, as a
        // cancelled gRPC stream does.
        // Counted before the log line, which tests wait for.
        self->handlers_->Count(self->method_, success ? 200 : 499);
        if (!success) {
          self->sink_->Cancel();
          self->Log("CANCELLED", "the client closed the stream", nullptr);
        }
      });
}

}  // namespace linserve
