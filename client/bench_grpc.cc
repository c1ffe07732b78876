#include "client/bench_grpc.h"

#include <utility>

#include "linserve/v1/linserve.grpc.pb.h"

namespace linserve {
namespace {

// One Generate call; deletes itself when it is done.
class BenchCall : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  BenchCall(v1::GenerateRequest request, BenchTransport::Done done)
      : request_(std::move(request)), done_(std::move(done)) {}

  void Start(v1::Linserve::Stub& stub, const ConnectionOptions& connection) {
    PrepareCall(connection, request_.session_id(), context_);
    outcome_.session_id = request_.session_id();
    // Until the server's usage says: the ids sent, or one per byte.
    outcome_.prompt_tokens = request_.prompt_tokens_size() > 0
                                 ? request_.prompt_tokens_size()
                                 : static_cast<int64_t>(request_.prompt().size());
    clock_ = PieceClock(absl::Now());
    stub.async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (!response_.text().empty() || response_.tokens_size() > 0) clock_.Piece(outcome_);
    if (response_.has_finished()) {
      outcome_.output_tokens = response_.finished().usage().generated_tokens();
      outcome_.prompt_tokens = response_.finished().usage().prompt_tokens();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    clock_.End(outcome_);
    outcome_.status = StatusCodeName(status.error_code());
    BenchTransport::Done done = std::move(done_);
    BenchOutcome outcome = std::move(outcome_);
    delete this;
    done(std::move(outcome));
  }

 private:
  v1::GenerateRequest request_;
  BenchTransport::Done done_;
  v1::GenerateResponse response_;
  grpc::ClientContext context_;
  BenchOutcome outcome_;
  PieceClock clock_{absl::Now()};
};

class GrpcBenchTransport : public BenchTransport {
 public:
  GrpcBenchTransport(const ConnectionOptions& connection, std::shared_ptr<grpc::Channel> channel)
      : connection_(connection), stub_(v1::Linserve::NewStub(std::move(channel))) {}

  void Start(BenchRequest request, Done done) override {
    v1::GenerateRequest generate;
    if (request.prompt_tokens.empty()) {
      generate.set_prompt(std::move(request.prompt));
    } else {
      generate.mutable_prompt_tokens()->Add(request.prompt_tokens.begin(),
                                            request.prompt_tokens.end());
    }
    generate.set_max_new_tokens(request.max_tokens);
    generate.set_ignore_eos(true);
    v1::SamplingParams& sampling = *generate.mutable_sampling();
    const BenchSampling& s = request.sampling;
    sampling.set_temperature(s.temperature);
    if (s.top_k != 0) sampling.set_top_k(s.top_k);
    if (s.top_p != 1.0f) sampling.set_top_p(s.top_p);
    if (s.min_p != 0.0f) sampling.set_min_p(s.min_p);
    if (s.repetition_penalty != 1.0f) sampling.set_repetition_penalty(s.repetition_penalty);
    if (s.presence_penalty != 0.0f) sampling.set_presence_penalty(s.presence_penalty);
    if (s.frequency_penalty != 0.0f) sampling.set_frequency_penalty(s.frequency_penalty);
    sampling.set_seed(request.seed);
    generate.mutable_logit_bias()->insert(s.logit_bias.begin(), s.logit_bias.end());
    generate.set_session_id(std::move(request.session_id));
    (new BenchCall(std::move(generate), std::move(done)))->Start(*stub_, connection_);
  }

  absl::StatusOr<std::string> CreateSession() override {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::Session session;
    const grpc::Status status =
        stub_->CreateSession(&context, v1::CreateSessionRequest(), &session);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return session.id();
  }

  absl::StatusOr<BenchVocabulary> Vocabulary() override {
    grpc::ClientContext context;
    PrepareCall(connection_, "", context);
    v1::ModelInfo info;
    const grpc::Status status = stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    BenchVocabulary vocabulary;
    vocabulary.vocab_size = info.vocab_size();
    for (const v1::TokenIdRange& range : info.special_token_ranges()) {
      vocabulary.special_ranges.emplace_back(range.begin(), range.end());
    }
    return vocabulary;
  }

 private:
  const ConnectionOptions connection_;
  std::unique_ptr<v1::Linserve::Stub> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BenchTransport>> MakeGrpcBenchTransport(
    const ConnectionOptions& connection) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connection);
  if (!channel.ok()) return channel.status();
  return std::make_unique<GrpcBenchTransport>(connection, *std::move(channel));
}

}  // namespace linserve
