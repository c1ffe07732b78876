#ifndef LINSERVE_SERVER_GENERATE_STREAM_H_
#define LINSERVE_SERVER_GENERATE_STREAM_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "linserve/v1/linserve.grpc.pb.h"
#include "server/common/reasoning_split.h"
#include "server/grpc/stream_limit.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

class GenerateStream;

// The scheduler's end of one Generate stream: a bounded queue of messages
// with one write in flight, and Finish exactly once after the last one
// (the shape of gRPC's health WatchReactor). It outlives the reactor: the
// engine may still hold it after the client has gone. Thread-safe.
class StreamSink : public TurnSink {
 public:
  // Runs once with the final status and, when the turn ran, its summary (for
  // metrics and logs).
  using OnFinish = std::function<void(const grpc::Status&, const TurnSummary*)>;

  StreamSink(GenerateStream* reactor, OnFinish on_finish);

  // Marks each message's reasoning and answer (GenerateResponse.reasoning,
  // .answer) in `format`; `starts_inside`: the prompt opened the reasoning.
  // Call before the turn is submitted.
  void SplitReasoning(ReasoningFormat format, bool starts_inside);

  void Send(TurnPiece piece) override;
  void Finish(absl::StatusOr<TurnSummary> result) override;
  bool Cancelled() const override { return cancelled_.load(std::memory_order_relaxed); }
  int Buffered() const override;

  // From the reactor.
  void OnWriteDone(bool ok);
  void OnCancel() { cancelled_ = true; }

 private:
  // Starts the next write, or Finish once everything is written; called
  // with mu_ held, releases it before calling into gRPC.
  void Pump() ABSL_UNLOCK_FUNCTION(mu_);

  GenerateStream* const reactor_;
  const OnFinish on_finish_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  v1::GenerateResponse in_flight_;  // the message of the write in flight
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::optional<TurnSummary> summary_ ABSL_GUARDED_BY(mu_);
  std::optional<ReasoningSplitter> reasoning_ ABSL_GUARDED_BY(mu_);
};

// The gRPC reactor of one Generate call; deletes itself in OnDone.
class GenerateStream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit GenerateStream(StreamSink::OnFinish on_finish);

  const std::shared_ptr<StreamSink>& sink() const { return sink_; }
  // The stream's place under --max_open_streams, given back in OnDone.
  void Hold(StreamLimit::Ticket ticket) { ticket_ = std::move(ticket); }

  void OnWriteDone(bool ok) override { sink_->OnWriteDone(ok); }
  void OnCancel() override { sink_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<StreamSink> sink_;
  StreamLimit::Ticket ticket_;
};

// The protobuf of the scheduler's results.
v1::GenerateResponse ToProto(const TurnPiece& piece);
v1::Finished ToProto(const TurnSummary& summary);

// absl and gRPC share the canonical status codes.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace linserve

#endif  // LINSERVE_SERVER_GENERATE_STREAM_H_
