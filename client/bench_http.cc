#include "client/bench_http.h"

#include <httplib.h>
#include <signal.h>

#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/sse.h"

namespace linserve {
namespace {

constexpr const char kCompletionsPath[] = "/v1/completions";
constexpr const char kModelsPath[] = "/v1/models";

std::string TransportFailureName(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::Read:
    case httplib::Error::Write:
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLLoadingCerts:
    case httplib::Error::SSLServerVerification:
      return "UNAVAILABLE";  // as gRPC reports a failed handshake
    case httplib::Error::ConnectionTimeout:
      return "DEADLINE_EXCEEDED";
    default:
      return "UNKNOWN";
  }
}

class HttpBenchTransport : public BenchTransport {
 public:
  explicit HttpBenchTransport(const ConnectionOptions& connection)
      : connection_(connection),
        base_url_(absl::StrCat(connection.tls ? "https://" : "http://", connection.server)) {}

  ~HttpBenchTransport() override {
    std::vector<std::thread> workers;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      workers.swap(workers_);
    }
    for (std::thread& worker : workers) worker.join();
  }

  void Start(BenchRequest request, Done done) override {
    absl::MutexLock lock(&mu_);
    queue_.push_back({std::move(request), std::move(done), absl::Now()});
    // A worker that is calling `done` no longer counts as busy, so a closed
    // loop's next request goes to the thread that finished the last one.
    if (++busy_ > static_cast<int64_t>(workers_.size())) workers_.emplace_back([this] { Work(); });
  }

  absl::StatusOr<std::string> CreateSession() override { return std::string(); }

  absl::StatusOr<BenchVocabulary> Vocabulary() override {
    const std::unique_ptr<httplib::Client> client = NewClient();
    const httplib::Result result = client->Get(kModelsPath);
    if (!result) {
      return absl::UnavailableError(absl::StrCat("GET ", kModelsPath, ": ",
                                                 httplib::to_string(result.error())));
    }
    if (result->status != 200) {
      return absl::UnavailableError(
          absl::StrCat("GET ", kModelsPath, " answered ", result->status, ": ", result->body));
    }
    return ParseModelsVocabulary(result->body);
  }

  // Whether a client for this address can be made at all (a bad URL or
  // unreadable TLS files).
  bool Usable() const { return NewClient()->is_valid(); }

 private:
  struct Job {
    BenchRequest request;
    Done done;
    absl::Time started;
  };

  std::unique_ptr<httplib::Client> NewClient() const {
    auto client = connection_.client_cert_file.empty()
                      ? std::make_unique<httplib::Client>(base_url_)
                      : std::make_unique<httplib::Client>(base_url_, connection_.client_cert_file,
                                                          connection_.client_key_file);
    if (connection_.tls && !connection_.ca_cert_file.empty()) {
      client->set_ca_cert_path(connection_.ca_cert_file);
    }
    if (!connection_.token.empty()) client->set_bearer_token_auth(connection_.token);
    const absl::Duration timeout = connection_.timeout;
    client->set_connection_timeout(absl::ToChronoSeconds(timeout));
    client->set_read_timeout(absl::ToChronoSeconds(timeout));
    client->set_write_timeout(absl::ToChronoSeconds(timeout));
    client->set_keep_alive(true);
    client->set_tcp_nodelay(true);
    return client;
  }

  bool HasWorkOrStops() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  }

  void Work() {
    // One connection per thread, kept alive between its requests.
    const std::unique_ptr<httplib::Client> client = NewClient();
    while (true) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &HttpBenchTransport::HasWorkOrStops));
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      BenchOutcome outcome = Complete(*client, job);
      {
        absl::MutexLock lock(&mu_);
        --busy_;
      }
      job.done(std::move(outcome));
    }
  }

  BenchOutcome Complete(httplib::Client& client, const Job& job) const {
    BenchOutcome outcome;
    outcome.session_id = job.request.session_id;
    // Until the server's usage says: the ids sent, or one per byte.
    outcome.prompt_tokens = job.request.prompt_tokens.empty()
                                ? static_cast<int64_t>(job.request.prompt.size())
                                : static_cast<int64_t>(job.request.prompt_tokens.size());
    PieceClock clock(job.started);
    const absl::Time deadline = job.started + connection_.timeout;

    httplib::Request request;
    request.method = "POST";
    request.path = kCompletionsPath;
    request.body = CompletionRequestBody(job.request).dump();
    request.set_header("Content-Type", "application/json");
    request.set_header("Accept", "text/event-stream");
    request.set_header("Accept-Encoding", "identity");  // pieces as they come, not compressed
    if (!job.request.session_id.empty()) request.set_header("x-session-id", job.request.session_id);

    int http_status = 0;
    bool finished = false;
    bool late = false;
    SseReader sse;
    request.response_handler = [&](const httplib::Response& response) {
      http_status = response.status;
      if (outcome.session_id.empty() && response.has_header("x-session-id")) {
        outcome.session_id = response.get_header_value("x-session-id");
      }
      return true;
    };
    request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      if (http_status != 200) return true;  // an error's body: only its status counts
      for (const std::string& event : sse.Feed(std::string_view(data, size))) {
        if (ApplyCompletionEvent(event, clock, outcome)) finished = true;
      }
      late = absl::Now() > deadline;
      return !late;
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client.send(request, response, error);
    clock.End(outcome);
    if (late) {
      outcome.status = "DEADLINE_EXCEEDED";
    } else if (!sent) {
      outcome.status = TransportFailureName(error);
    } else if (response.status != 200) {
      outcome.status = absl::StrCat("HTTP_", response.status);
    } else if (outcome.ok() && !finished) {
      outcome.status = "INCOMPLETE_STREAM";
    }
    return outcome;
  }

  const ConnectionOptions connection_;
  const std::string base_url_;
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  int64_t busy_ ABSL_GUARDED_BY(mu_) = 0;  // jobs queued or being sent
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

nlohmann::json CompletionRequestBody(const BenchRequest& request) {
  // A list of ids is a prompt of tokens, as OpenAI's completions API takes it.
  nlohmann::json body = {{"prompt", request.prompt_tokens.empty() ? nlohmann::json(request.prompt)
                                                                  : nlohmann::json(request.prompt_tokens)},
                         {"max_tokens", request.max_tokens},
                         {"ignore_eos", true},
                         {"temperature", request.sampling.temperature},
                         {"seed", request.seed},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  const BenchSampling& s = request.sampling;
  if (s.top_k != 0) body["top_k"] = s.top_k;
  if (s.top_p != 1.0f) body["top_p"] = s.top_p;
  if (s.min_p != 0.0f) body["min_p"] = s.min_p;
  if (s.repetition_penalty != 1.0f) body["repetition_penalty"] = s.repetition_penalty;
  if (s.presence_penalty != 0.0f) body["presence_penalty"] = s.presence_penalty;
  if (s.frequency_penalty != 0.0f) body["frequency_penalty"] = s.frequency_penalty;
  if (!s.logit_bias.empty()) {
    nlohmann::json bias = nlohmann::json::object();
    for (const auto& [id, value] : s.logit_bias) bias[std::to_string(id)] = value;
    body["logit_bias"] = std::move(bias);
  }
  if (!request.session_id.empty()) {
    body["session_id"] = request.session_id;
  } else if (request.new_session) {
    body["session"] = "new";
  }
  return body;
}

absl::StatusOr<BenchVocabulary> ParseModelsVocabulary(const std::string& body) {
  const nlohmann::json models = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* model = nullptr;
  if (models.is_object() && models.contains("data") && models["data"].is_array() &&
      !models["data"].empty() && models["data"][0].is_object()) {
    model = &models["data"][0];
  }
  // llama.cpp's llama-server reports its vocabulary as data[0].meta.n_vocab
  // and no special ids: every id of it may be drawn.
  if (model != nullptr && !model->contains("vocab_size") && model->contains("meta") &&
      (*model)["meta"].is_object() && (*model)["meta"].contains("n_vocab") &&
      (*model)["meta"]["n_vocab"].is_number_integer()) {
    BenchVocabulary vocabulary;
    vocabulary.vocab_size = (*model)["meta"]["n_vocab"].get<int64_t>();
    return vocabulary;
  }
  if (model == nullptr || !model->contains("vocab_size") ||
      !(*model)["vocab_size"].is_number_integer()) {
    return absl::FailedPreconditionError(
        "GET /v1/models reports no data[0].vocab_size (not a linserve server, or an older "
        "one): prompts of token ids need it; use --prompt_mode=text");
  }
  BenchVocabulary vocabulary;
  vocabulary.vocab_size = (*model)["vocab_size"].get<int64_t>();
  const auto ranges = model->find("special_token_ranges");
  if (ranges == model->end()) return vocabulary;
  const char* const kShape =
      "GET /v1/models: data[0].special_token_ranges is not a list of {\"begin\", \"end\"}";
  if (!ranges->is_array()) return absl::FailedPreconditionError(kShape);
  for (const nlohmann::json& range : *ranges) {
    if (!range.is_object() || !range.contains("begin") || !range.contains("end") ||
        !range["begin"].is_number_integer() || !range["end"].is_number_integer()) {
      return absl::FailedPreconditionError(kShape);
    }
    vocabulary.special_ranges.emplace_back(range["begin"].get<int64_t>(),
                                           range["end"].get<int64_t>());
  }
  return vocabulary;
}

bool ApplyCompletionEvent(const std::string& data, PieceClock& clock, BenchOutcome& outcome) {
  if (data == "[DONE]") return true;
  const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) {
    if (outcome.ok()) outcome.status = "UNKNOWN";
    return false;
  }
  if (const auto error = chunk.find("error"); error != chunk.end()) {
    const auto code = error->is_object() ? error->find("code") : error->end();
    if (outcome.ok()) {
      outcome.status = code != error->end() && code->is_number_integer()
                           ? absl::StrCat("HTTP_", code->get<int>())
                           : "UNKNOWN";
    }
    return false;
  }
  if (const auto choices = chunk.find("choices");
      choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const nlohmann::json& choice = (*choices)[0];
    if (const auto text = choice.find("text");
        text != choice.end() && text->is_string() && !text->get_ref<const std::string&>().empty()) {
      clock.Piece(outcome);
    }
  }
  if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    outcome.output_tokens = usage->value("completion_tokens", int64_t{0});
    outcome.prompt_tokens = usage->value("prompt_tokens", outcome.prompt_tokens);
  }
  if (const auto session = chunk.find("session_id");
      session != chunk.end() && session->is_string()) {
    outcome.session_id = session->get<std::string>();
  }
  return false;
}

absl::StatusOr<std::unique_ptr<BenchTransport>> MakeHttpBenchTransport(
    const ConnectionOptions& connection) {
  // A server that closes a connection while a request is written would
  // otherwise end the whole load test with SIGPIPE (cpp-httplib's client
  // does not ignore it; its server does).
  signal(SIGPIPE, SIG_IGN);
  auto transport = std::make_unique<HttpBenchTransport>(connection);
  if (!transport->Usable()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot make an HTTP client for ", connection.server,
                     connection.tls ? " (https; check the certificate files)" : ""));
  }
  return transport;
}

}  // namespace linserve
