// POST /v1/completions and /v1/chat/completions: one request becomes the
// gRPC service's GenerateRequest, passes the same validation and stream
// limit, and runs as one turn of the scheduler (n > 1 or best_of: one turn
// per choice, the prompt prefilled once); its output is written as one JSON
// body or as server-sent events. Nothing here waits: each step runs on the
// connection's strand when the engine's answer arrives there.

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/log.h"
#include "server/http/chat_session_messages.h"
#include "server/http/http_handlers.h"
#include "server/http/http_turn_sink.h"
#include "server/http/openai_response.h"
#include "server/requests/request_validation.h"

namespace linserve {

// One completion request, from parsing to its last byte. The turn's sink
// holds it until the turn's last event has been delivered, so that a turn
// whose client has gone still does its bookkeeping with the turn's summary.
class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  CompletionCall(HttpHandlers* handlers, OpenAiEndpoint endpoint, HttpHeaders cors,
                 std::shared_ptr<HttpExchange> exchange)
      : handlers_(handlers),
        endpoint_(endpoint),
        method_(endpoint == OpenAiEndpoint::kChatCompletions ? "ChatCompletions" : "Completions"),
        cors_(std::move(cors)),
        exchange_(std::move(exchange)) {}

  void Start(const HttpRequest& req);

 private:
  // The caller, the server and the body; CANCELLED when answered.
  absl::Status Receive(const HttpRequest& req);
  // A Jinja chat session's turn that sends only its new messages: they
  // follow the session's stored ones (`chat`), read first.
  void Continue(const absl::StatusOr<SessionChatInfo>* chat);
  // Everything else up to the turn's submission; CANCELLED when answered.
  absl::Status Prepare(const RequestJson* session_messages);
  void Created(const absl::StatusOr<SessionInfo>& info);
  void Submit();
  void Deliver(size_t index, HttpTurnSink::Event event);
  // The first piece: the answer's head (and a stream's opening events).
  void Begin();
  // Choice `index` ended; after the last, Done.
  void Ended(size_t index);
  void Done();
  // A whole answer of several choices (best_of: the n best).
  void ReplyChoices();
  void ClientGone();
  void Fail(const absl::Status& status, const std::string& param = "");
  // Writes one server-sent event.
  void Write(const std::string& data);
  HttpHeaders Headers() const;
  void Log(const std::string& code, const std::string& error, const TurnSummary* summary);
  void ForgetNewSession();

  HttpHandlers* const handlers_;
  const OpenAiEndpoint endpoint_;
  const char* const method_;
  const HttpHeaders cors_;
  const std::shared_ptr<HttpExchange> exchange_;
  std::string tenant_;
  Scheduler* scheduler_ = nullptr;
  RequestJson body_;
  std::string header_session_id_;
  std::string path_;
  OpenAiRequest request_;
  std::optional<GenerateCall> call_;
  std::string session_id_;  // the session the turn continues ("" stateless)
  StreamLimit::Ticket ticket_;
  // One choice's turn: its sink and, until the answer is written, its output.
  struct ChoiceRun {
    std::weak_ptr<HttpTurnSink> sink;
    std::vector<TurnPiece> pieces;  // a whole answer's (or a stream's held ones), until the end
    std::optional<absl::StatusOr<TurnSummary>> done;
  };
  std::vector<ChoiceRun> runs_;  // best_of of them (n unless best_of is sent)
  size_t ended_ = 0;             // runs_ that have their end
  size_t leader_ = 0;            // the run that prefills (and continues the session)
  std::unique_ptr<OpenAiResponder> responder_;
  // A Jinja chat's rendered prompt (the request then carries its tokens).
  std::string rendered_prompt_;
  // A stream with tools: whether the turn is a call, text, or not known yet.
  enum class ToolTurn { kUndecided, kText, kCall };
  // Streaming with tools: holds pieces while the text may still be a call.
  void DeliverWithTools(TurnPiece piece);
  // The held pieces as ordinary chunks.
  void FlushHeld();
  // The answer's malformed calls and unconverted values, in /metrics.
  void CountToolCalls();

  std::string held_text_;          // the text of a stream's held pieces
  ToolTurn tool_turn_ = ToolTurn::kUndecided;
  bool logprobs_ = false;
  bool gone_ = false;              // the client left before the answer ended
  bool fed_turn_end_ = false;  // the prompt starts with the previous chat turn's missing end
  bool logged_ = false;
};

void HttpHandlers::Complete(OpenAiEndpoint endpoint, HttpRequest req, HttpHeaders cors,
                            std::shared_ptr<HttpExchange> exchange) {
  auto call = std::make_shared<CompletionCall>(this, endpoint, std::move(cors), std::move(exchange));
  call->Start(req);
}

void CompletionCall::Fail(const absl::Status& status, const std::string& param) {
  HttpResponse answer = handlers_->ErrorAnswer(method_, ToHttpError(status, param));
  answer.headers.insert(answer.headers.end(), cors_.begin(), cors_.end());
  exchange_->Reply(std::move(answer));
  Log(absl::StatusCodeToString(status.code()), std::string(status.message()), nullptr);
}

void CompletionCall::Log(const std::string& code, const std::string& error,
                         const TurnSummary* summary) {
  if (logged_) return;
  logged_ = true;
  ticket_ = StreamLimit::Ticket();  // the stream is over
  LogGenerate("http", code, error, summary);
  if (endpoint_ != OpenAiEndpoint::kChatCompletions || session_id_.empty() ||
      request_.generate.conversation()) {
    return;
  }
  // A failed or cut turn leaves its session as it was; a finished one moved
  // it on, whether or not its client stayed to read the end.
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

absl::Status CompletionCall::Receive(const HttpRequest& req) {
  absl::StatusOr<std::string> tenant = handlers_->Authenticate(req);
  if (!tenant.ok()) return tenant.status();
  tenant_ = *tenant;
  absl::StatusOr<Scheduler*> scheduler = handlers_->Ready();
  if (!scheduler.ok()) return scheduler.status();
  scheduler_ = *scheduler;
  absl::StatusOr<RequestJson> body = handlers_->ParseBody(req);
  if (!body.ok()) return body.status();
  body_ = *std::move(body);
  header_session_id_ = req.Header("x-session-id");
  path_ = req.path;
  return absl::OkStatus();
}

absl::Status CompletionCall::Prepare(const RequestJson* session_messages) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      endpoint_, body_, *handlers_->chat_template(), header_session_id_,
      handlers_->service_->options().limits.grammar, session_messages);
  auto field_error = [&](const absl::Status& status) {
    const OpenAiField field = ToOpenAiField(endpoint_, std::string(status.message()));
    Fail(absl::Status(status.code(), field.message), field.param);
    return absl::CancelledError();  // answered already
  };
  if (!parsed.ok()) return field_error(parsed.status());
  request_ = *std::move(parsed);
  if (request_.ignored_field_count > 0) {
    LogInfo("http_fields_ignored",
            {{"path", path_},
             {"count", request_.ignored_field_count},
             {"fields", absl::StrJoin(request_.ignored_fields, ",")}});
  }
  const std::string& served = handlers_->options_.served_model_name;
  if (!request_.model.empty() && request_.model != served) {
    Fail(absl::NotFoundError(absl::StrCat(
             "model \"", request_.model, "\" does not exist; this server serves \"", served, "\"")),
         "model");
    return absl::CancelledError();
  }

  // A Jinja template writes the special tokens it wants (bos_token among
  // them), so its text is encoded here without the tokenizer's own BOS.
  if (endpoint_ == OpenAiEndpoint::kChatCompletions &&
      handlers_->chat_template()->jinja() != nullptr && request_.generate.prompt_tokens().empty()) {
    const int64_t max_bytes = handlers_->service_->options().limits.max_prompt_bytes;
    const std::string prompt = request_.generate.prompt();
    rendered_prompt_ = prompt;
    if (static_cast<int64_t>(prompt.size()) > max_bytes) {
      return field_error(absl::InvalidArgumentError(
          absl::StrCat("prompt: the chat template renders ", prompt.size(),
                       " bytes; at most max_prompt_bytes = ", max_bytes)));
    }
    absl::StatusOr<std::vector<int64_t>> ids =
        scheduler_->model_facts().token_codec->TryEncode(prompt, /*starts_text=*/false,
                                                         request_.prompt_plain);
    if (!ids.ok()) return field_error(ids.status());
    request_.generate.clear_prompt();
    for (int64_t id : *ids) request_.generate.add_prompt_tokens(static_cast<int32_t>(id));
    if (request_.generate.conversation()) {
      // The session keeps its state where the history's tokens end, as far
      // as they are the conversation's.
      absl::StatusOr<std::vector<int64_t>> history =
          scheduler_->model_facts().token_codec->TryEncode(
              request_.history_prompt, /*starts_text=*/false, request_.history_plain);
      if (!history.ok()) return field_error(history.status());
      size_t keep = 0;
      while (keep < history->size() && keep < ids->size() && (*history)[keep] == (*ids)[keep]) {
        ++keep;
      }
      request_.generate.set_keep_state_at(static_cast<int64_t>(keep));
    }
  }

  // A chat session whose last turn stopped short of the template's turn end
  // gets it first, so that it holds what a stateless chat renders.
  if (const std::string& continued = request_.generate.session_id(); !continued.empty()) {
    session_id_ = continued;
    if (request_.generate.conversation()) {
      // Its whole conversation is rendered: nothing to add.
    } else if (endpoint_ != OpenAiEndpoint::kChatCompletions) {
      handlers_->chat_turn_ends_.Forget(continued);
    } else if (handlers_->chat_turn_ends_.TakeMissingEnd(continued)) {
      fed_turn_end_ = true;
      request_.generate.set_prompt(handlers_->chat_template()->turn_end() +
                                   request_.generate.prompt());
    }
  }

  const RequestLimits& limits = handlers_->service_->options().limits;
  if (request_.tools.active() &&
      request_.generate.grammar().size() > static_cast<size_t>(limits.max_grammar_bytes)) {
    return field_error(absl::InvalidArgumentError(absl::StrCat(
        "tools: their grammar is ", request_.generate.grammar().size(),
        " bytes; at most max_grammar_bytes = ", limits.max_grammar_bytes)));
  }

  // The gRPC path's validation. A new session's id does not exist yet: a
  // well-formed stand-in lets the request be checked before one is made.
  v1::GenerateRequest& generate = request_.generate;
  if (request_.new_session) generate.set_session_id(std::string(32, '0'));
  absl::StatusOr<GenerateCall> call =
      ValidateGenerateRequest(generate, handlers_->service_->options().limits);
  if (!call.ok()) return field_error(call.status());
  // A new session's named state goes to CreateSession, past the validation
  // above: its name is checked here.
  if (!request_.new_session_state.empty()) {
    absl::Status name = ValidateStateName("initial_state", request_.new_session_state);
    if (!name.ok()) return field_error(name);
  }
  call->protocol = Protocol::kHttp;
  // Choices: their bounds are the server's.
  for (const auto& [field, count] :
       {std::pair<const char*, int32_t>{"n", request_.n}, {"best_of", request_.best_of}}) {
    if (count > limits.max_n) {
      return field_error(absl::InvalidArgumentError(
          absl::StrCat(field, " = ", count, " is outside [1, ", limits.max_n, "] (--max_n)")));
    }
    const int32_t max_batch = handlers_->service_->options().scheduler.max_batch;
    if (count > max_batch) {
      return field_error(absl::InvalidArgumentError(
          absl::StrCat(field, " = ", count, " is more than max_batch = ", max_batch,
                       ": a request's choices decode together")));
    }
  }
  call->cumulative_logprob = request_.best_of > request_.n;
  runs_.resize(request_.best_of);
  leader_ = request_.session_choice;
  call_ = *std::move(call);
  // A built-in template's chat: what the request sent stays text (a Jinja
  // template's prompt was encoded above, its own way).
  if (!call_->prompt.empty()) {
    const size_t shift = fed_turn_end_ ? handlers_->chat_template()->turn_end().size() : 0;
    for (const ByteRange& range : request_.prompt_plain) {
      call_->prompt_plain.push_back({range.begin + shift, range.end + shift});
    }
  }
  logprobs_ = call_->logprobs;
  if (request_.generate.conversation() && !rendered_prompt_.empty()) {
    // The session keeps what this turn renders from, for a next turn that
    // sends only its new messages.
    ChatTurnContext context;
    context.messages = std::move(request_.chat_messages);
    if (request_.tools.active()) {
      context.tool_format = request_.tools.format;
      context.functions = request_.tools.functions;
      context.max_calls = request_.tools.max_calls;
    }
    context.reasoning_opened =
        PromptOpensReasoning(handlers_->reasoning_format(), rendered_prompt_);
    std::string encoded = EncodeChatTurnContext(context);
    if (static_cast<int64_t>(encoded.size()) > limits.max_prompt_bytes) {
      return field_error(absl::InvalidArgumentError(absl::StrCat(
          "messages: the session's messages are ", encoded.size(),
          " bytes as JSON; at most max_prompt_bytes = ", limits.max_prompt_bytes)));
    }
    call_->chat_context = std::move(encoded);
  }
  for (const std::string& stop : request_.template_stop) {
    std::vector<std::string>& stops = call_->sampling.stop;
    if (std::find(stops.begin(), stops.end(), stop) == stops.end()) stops.push_back(stop);
  }

  absl::StatusOr<StreamLimit::Ticket> ticket = handlers_->service_->OpenStream(tenant_);
  if (!ticket.ok()) return ticket.status();
  ticket_ = *std::move(ticket);

  return absl::OkStatus();
}

void CompletionCall::Start(const HttpRequest& req) {
  absl::Status received = Receive(req);
  if (absl::IsCancelled(received)) return;  // answered
  if (!received.ok()) return Fail(received);
  auto self = shared_from_this();
  exchange_->OnClientGone([self] { self->ClientGone(); });
  const std::string stored = endpoint_ == OpenAiEndpoint::kChatCompletions &&
                                     handlers_->chat_template()->jinja() != nullptr
                                 ? SessionWithStoredMessages(body_, header_session_id_)
                                 : "";
  // A malformed id is refused by the request's validation, naming it.
  if (stored.empty() || !ValidateSessionId("session_id", stored).ok()) return Continue(nullptr);
  scheduler_->GetSessionChat(tenant_, stored, [self](absl::StatusOr<SessionChatInfo> chat) {
    self->exchange_->Post([self, chat = std::move(chat)] { self->Continue(&chat); });
  });
}

void CompletionCall::Continue(const absl::StatusOr<SessionChatInfo>* chat) {
  RequestJson session_messages;
  if (chat != nullptr) {
    if (!chat->ok()) return Fail(chat->status());
    if ((*chat)->chat.empty() && (*chat)->position > 0) {
      return Fail(absl::FailedPreconditionError(
                      "session_messages: the session holds no chat messages (its last turn was "
                      "not a chat turn of this API), so the new ones cannot follow them; send "
                      "its whole conversation with session_messages = \"replace\""),
                  "session_messages");
    }
    absl::StatusOr<RequestJson> messages =
        ChatSessionMessages((*chat)->chat, handlers_->reasoning_format());
    if (!messages.ok()) return Fail(messages.status());
    session_messages = *std::move(messages);
  }
  absl::Status prepared = Prepare(chat != nullptr ? &session_messages : nullptr);
  if (absl::IsCancelled(prepared)) return;  // answered
  if (!prepared.ok()) return Fail(prepared);
  auto self = shared_from_this();
  if (!request_.new_session) return Submit();
  scheduler_->CreateSession(tenant_, "", request_.generate.cache_salt(),
                            request_.new_session_state,
                            [self](absl::StatusOr<SessionInfo> info) {
                              self->exchange_->Post([self, info = std::move(info)] {
                                self->Created(info);
                              });
                            });
}

void CompletionCall::Created(const absl::StatusOr<SessionInfo>& info) {
  if (!info.ok()) return Fail(info.status());
  session_id_ = info->id;
  if (gone_) {
    ForgetNewSession();
    handlers_->Count(method_, 499);
    exchange_->Abandon();
    return Log("CANCELLED", "the client closed the connection", nullptr);
  }
  call_->session_id = info->id;
  Submit();
}

void CompletionCall::Submit() {
  session_id_ = call_->session_id;
  std::vector<std::shared_ptr<TurnSink>> sinks;
  for (size_t i = 0; i < runs_.size(); ++i) {
    auto sink = std::make_shared<HttpTurnSink>(
        exchange_, [self = shared_from_this(), i](HttpTurnSink::Event event) {
          self->Deliver(i, std::move(event));
        });
    runs_[i].sink = sink;
    if (gone_) sink->Cancel();
    sinks.push_back(std::move(sink));
  }
  absl::Status queued = scheduler_->SubmitChoices(tenant_, *std::move(call_), std::move(sinks),
                                                  static_cast<int32_t>(leader_));
  if (!queued.ok()) {
    ForgetNewSession();
    Fail(queued);
  }
}

void CompletionCall::ClientGone() {
  gone_ = true;
  for (ChoiceRun& run : runs_) {
    if (std::shared_ptr<HttpTurnSink> sink = run.sink.lock()) sink->Cancel();
  }
}

HttpHeaders CompletionCall::Headers() const {
  HttpHeaders headers = cors_;
  if (!session_id_.empty()) headers.emplace_back("x-session-id", session_id_);
  return headers;
}

void CompletionCall::Write(const std::string& data) {
  exchange_->SendChunk(absl::StrCat("data: ", data, "\n\n"));
}

void CompletionCall::Deliver(size_t index, HttpTurnSink::Event event) {
  if (event.done.has_value()) {
    runs_[index].done = *std::move(event.done);
    return Ended(index);
  }
  if (gone_) return;
  // The status line waits for the turn's first event, so that every refusal
  // (a limit, an unknown session) is an HTTP status, not an error event.
  if (responder_ == nullptr) Begin();
  // Tools come with one choice only (ParseOpenAiRequest).
  if (request_.stream && request_.tools.active() &&
      request_.tools.format == ToolCallFormat::kLinserve) {
    return DeliverWithTools(*std::move(event.piece));
  }
  if (request_.stream) {
    return Write(DumpJson(responder_->Chunk(*event.piece, static_cast<int32_t>(index))));
  }
  runs_[index].pieces.push_back(*std::move(event.piece));
}

void CompletionCall::Ended(size_t index) {
  ++ended_;
  // A stream of several choices: each ends with its own finish_reason as it
  // ends; one choice's end is written by Done.
  const absl::StatusOr<TurnSummary>& result = *runs_[index].done;
  if (!gone_ && request_.stream && runs_.size() > 1 && result.ok()) {
    if (responder_ == nullptr) Begin();
    Write(DumpJson(responder_->Closing(*result, false, static_cast<int32_t>(index))));
  }
  if (ended_ == runs_.size()) Done();
}

void CompletionCall::DeliverWithTools(TurnPiece piece) {
  if (tool_turn_ == ToolTurn::kText) return Write(DumpJson(responder_->Chunk(piece)));
  held_text_ += piece.text;
  runs_[0].pieces.push_back(std::move(piece));
  if (tool_turn_ == ToolTurn::kCall || request_.tools.choice != OpenAiTools::Choice::kAuto) return;
  // "auto": a call begins with the template's call_start; text that leaves
  // it is an answer, streamed from here on.
  const std::optional<ChatTemplate> chat = handlers_->chat_template();  // a copy: hold it
  if (chat->tools() == nullptr) {
    // A Jinja template whose call format linserve does not read (the model
    // formats go through the responder's parser): the turn streams as text.
    tool_turn_ = ToolTurn::kText;
    FlushHeld();
    return;
  }
  const std::string& start = chat->tools()->call_start;
  if (held_text_.size() >= start.size() && held_text_.compare(0, start.size(), start) == 0) {
    tool_turn_ = ToolTurn::kCall;
  } else if (start.compare(0, held_text_.size(), held_text_) != 0) {
    tool_turn_ = ToolTurn::kText;
    FlushHeld();
  }
}

void CompletionCall::CountToolCalls() {
  if (handlers_->metrics_ == nullptr) return;
  handlers_->metrics_->tool_calls_malformed_total().Increment(
      static_cast<double>(responder_->malformed_tool_calls()));
  handlers_->metrics_->tool_call_values_unconverted_total().Increment(
      static_cast<double>(responder_->unconverted_tool_values()));
}

void CompletionCall::FlushHeld() {
  for (const TurnPiece& held : runs_[0].pieces) Write(DumpJson(responder_->Chunk(held)));
  runs_[0].pieces.clear();
  held_text_.clear();
}

void CompletionCall::Begin() {
  responder_ = std::make_unique<OpenAiResponder>(
      endpoint_, handlers_->options_.served_model_name, logprobs_, session_id_);
  if (endpoint_ == OpenAiEndpoint::kChatCompletions) {
    const ReasoningFormat format = handlers_->reasoning_format();
    const std::string& prompt =
        rendered_prompt_.empty() ? request_.generate.prompt() : rendered_prompt_;
    responder_->SetReasoning(format, PromptOpensReasoning(format, prompt));
    if (request_.tools.active()) {
      responder_->SetToolCalls(request_.tools.format, request_.tools.functions,
                               request_.tools.max_calls);
    }
  }
  if (!request_.stream) return;
  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = Headers();
  head.headers.emplace_back("Cache-Control", "no-cache");
  head.headers.emplace_back("X-Accel-Buffering", "no");  // nginx passes events through at once
  exchange_->StartStream(std::move(head));
  for (const nlohmann::json& chunk : responder_->Opening(static_cast<int32_t>(runs_.size()))) {
    Write(DumpJson(chunk));
  }
}

void CompletionCall::Done() {
  if (runs_.size() > 1) return ReplyChoices();
  const absl::StatusOr<TurnSummary>& result = *runs_[0].done;
  const std::vector<TurnPiece>& pieces = runs_[0].pieces;
  if (gone_) {
    // A client that went away cancels its turn, as a cancelled gRPC stream
    // does; the turn's summary still says what became of its session.
    // Counted before the log line, which tests wait for.
    handlers_->Count(method_, 499);
    exchange_->Abandon();
    return Log("CANCELLED", "the client closed the connection", result.ok() ? &*result : nullptr);
  }
  if (!result.ok() && (responder_ == nullptr || !request_.stream)) {
    if (responder_ == nullptr) ForgetNewSession();
    return Fail(result.status());
  }
  if (responder_ == nullptr) Begin();  // a turn with no text
  std::optional<ParsedToolCall> call;
  if (request_.tools.active() && request_.tools.format == ToolCallFormat::kLinserve &&
      result.ok()) {
    std::string text;
    for (const TurnPiece& piece : pieces) text += piece.text;
    call = ParseToolCall(*handlers_->chat_template(), text);
  }
  if (!request_.stream) {
    HttpResponse answer =
        handlers_->JsonAnswer(method_, responder_->Whole(pieces, *result, call));
    CountToolCalls();
    answer.headers = Headers();
    exchange_->Reply(std::move(answer));
    return Log("OK", "", &*result);
  }
  handlers_->Count(method_, 200);
  if (call) {
    Write(DumpJson(responder_->ToolCallChunk(*call)));
  } else {
    FlushHeld();  // text that looked like the start of a call, or a call cut short
  }
  if (result.ok()) {
    Write(DumpJson(responder_->Closing(*result, call.has_value())));
    CountToolCalls();
    if (request_.include_usage) Write(DumpJson(responder_->UsageChunk(*result)));
    Log("OK", "", &*result);
  } else {
    // Headers are gone: the error travels as an event, as vLLM sends it.
    Write(DumpJson(ToHttpError(result.status()).body));
    Log(absl::StatusCodeToString(result.status().code()), std::string(result.status().message()),
        nullptr);
  }
  Write("[DONE]");
  exchange_->EndStream();
}

void CompletionCall::ReplyChoices() {
  const absl::StatusOr<TurnSummary>& lead = *runs_[leader_].done;
  if (gone_) {
    handlers_->Count(method_, 499);
    exchange_->Abandon();
    return Log("CANCELLED", "the client closed the connection", lead.ok() ? &*lead : nullptr);
  }
  absl::Status failed;
  int64_t completion_tokens = 0;
  for (const ChoiceRun& run : runs_) {
    if (!run.done->ok()) {
      if (failed.ok()) failed = run.done->status();
    } else {
      completion_tokens += (*run.done)->generated_tokens;
    }
  }
  if (!failed.ok() && (responder_ == nullptr || !request_.stream)) {
    if (responder_ == nullptr && !lead.ok()) ForgetNewSession();
    return Fail(failed);
  }
  if (responder_ == nullptr) Begin();  // choices with no text
  const nlohmann::json usage = OpenAiUsage(*lead, completion_tokens);
  if (!request_.stream) {
    // best_of: the n with the highest cumulative logprob, best first (ties:
    // the lower index); otherwise every choice in its order.
    std::vector<size_t> order(runs_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (request_.best_of > request_.n) {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return (*runs_[a].done)->cumulative_logprob > (*runs_[b].done)->cumulative_logprob;
      });
      order.resize(request_.n);
    }
    std::vector<OpenAiResponder::WholeChoice> choices;
    for (size_t i : order) choices.push_back({&runs_[i].pieces, &**runs_[i].done, std::nullopt});
    HttpResponse answer =
        handlers_->JsonAnswer(method_, responder_->Whole(choices, usage, lead->position));
    answer.headers = Headers();
    exchange_->Reply(std::move(answer));
    return Log("OK", "", &*lead);
  }
  handlers_->Count(method_, 200);
  if (failed.ok()) {
    if (request_.include_usage) Write(DumpJson(responder_->UsageChunk(usage, lead->position)));
    Log("OK", "", &*lead);
  } else {
    // Headers are gone: the error travels as an event, as vLLM sends it.
    Write(DumpJson(ToHttpError(failed).body));
    Log(absl::StatusCodeToString(failed.code()), std::string(failed.message()),
        lead.ok() ? &*lead : nullptr);
  }
  Write("[DONE]");
  exchange_->EndStream();
}

}  // namespace linserve
