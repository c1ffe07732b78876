#include "server/grpc/generate_stream.h"

#include <string>
#include <utility>

namespace linserve {
namespace {

v1::FinishReason ReasonToProto(const TurnSummary& summary) {
  if (summary.cancelled) return v1::FINISH_REASON_CANCELLED;
  switch (summary.reason) {
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kGrammar:
      return v1::FINISH_REASON_GRAMMAR;
    case FinishReason::kNone:
      break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void FillLogprob(const TokenLogprob& in, v1::TokenLogprob* out) {
  out->set_token(static_cast<int32_t>(in.token));
  out->set_text(in.bytes);
  out->set_logprob(in.logprob);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

v1::GenerateResponse ToProto(const TurnPiece& piece) {
  v1::GenerateResponse response;
  response.set_text(piece.text);
  for (const SampledToken& token : piece.tokens) {
    v1::SampledToken* out = response.add_tokens();
    FillLogprob(token.token, out->mutable_token());
    for (const TokenLogprob& alt : token.top) FillLogprob(alt, out->add_top());
  }
  return response;
}

v1::Finished ToProto(const TurnSummary& summary) {
  v1::Finished finished;
  finished.set_reason(ReasonToProto(summary));
  finished.mutable_usage()->set_prompt_tokens(summary.prompt_tokens);
  finished.mutable_usage()->set_generated_tokens(summary.generated_tokens);
  finished.mutable_usage()->set_cached_tokens(summary.cached_tokens);
  finished.mutable_timing()->set_queue_ms(summary.queue_ms);
  finished.mutable_timing()->set_prefill_ms(summary.prefill_ms);
  finished.mutable_timing()->set_decode_ms(summary.decode_ms);
  finished.set_position(summary.position);
  finished.set_seed(summary.seed);
  return finished;
}

StreamSink::StreamSink(GenerateStream* reactor, OnFinish on_finish)
    : reactor_(reactor), on_finish_(std::move(on_finish)) {}

void StreamSink::SplitReasoning(ReasoningFormat format, bool starts_inside) {
  absl::MutexLock lock(&mu_);
  if (format != ReasoningFormat::kNone) reasoning_.emplace(format, starts_inside);
}

int StreamSink::Buffered() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size()) + (writing_ ? 1 : 0);
}

void StreamSink::Send(TurnPiece piece) {
  mu_.Lock();
  if (finish_requested_) {
    mu_.Unlock();
    return;
  }
  v1::GenerateResponse response = ToProto(piece);
  if (reasoning_) {
    ReasoningSplitter::Split split = reasoning_->Push(piece.text);
    response.set_reasoning(std::move(split.reasoning));
    response.set_answer(std::move(split.content));
  }
  pending_.push_back(std::move(response));
  Pump();
}

void StreamSink::Finish(absl::StatusOr<TurnSummary> result) {
  mu_.Lock();
  if (finish_requested_) {
    mu_.Unlock();
    return;
  }
  finish_requested_ = true;
  if (result.ok()) {
    v1::GenerateResponse last;
    *last.mutable_finished() = ToProto(*result);
    if (reasoning_) {
      ReasoningSplitter::Split split = reasoning_->Flush();
      last.set_reasoning(std::move(split.reasoning));
      last.set_answer(std::move(split.content));
    }
    pending_.push_back(std::move(last));
    final_status_ = grpc::Status::OK;
    summary_ = *result;
  } else {
    final_status_ = ToGrpcStatus(result.status());
  }
  Pump();
}

void StreamSink::OnWriteDone(bool ok) {
  mu_.Lock();
  writing_ = false;
  if (!ok) {
    // The client has gone: nothing more can be delivered.
    cancelled_ = true;
    pending_.clear();
  }
  Pump();
}

void StreamSink::Pump() {
  if (writing_ || finish_called_) {
    mu_.Unlock();
    return;
  }
  if (!pending_.empty()) {
    in_flight_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    mu_.Unlock();
    reactor_->StartWrite(&in_flight_);
    return;
  }
  if (!finish_requested_) {
    mu_.Unlock();
    return;
  }
  finish_called_ = true;
  grpc::Status status = cancelled_ && final_status_.ok()
                            ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                            : final_status_;
  const std::optional<TurnSummary> summary = summary_;
  mu_.Unlock();
  on_finish_(status, summary ? &*summary : nullptr);
  reactor_->Finish(status);
}

GenerateStream::GenerateStream(StreamSink::OnFinish on_finish)
    : sink_(std::make_shared<StreamSink>(this, std::move(on_finish))) {}

}  // namespace linserve
