#ifndef LINSERVE_SERVER_HTTP_TURN_SINK_H_
#define LINSERVE_SERVER_HTTP_TURN_SINK_H_

#include <deque>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

// The scheduler's end of one HTTP request: a queue the connection's thread
// drains, blocking, while the engine fills it (gRPC's StreamSink does the
// same through reactors). Pieces not yet taken count as Buffered, so a slow
// reader pauses its turn exactly as an unread gRPC stream does. Thread-safe.
class HttpTurnSink : public TurnSink {
 public:
  struct Event {
    std::optional<TurnPiece> piece;                   // set: new text
    std::optional<absl::StatusOr<TurnSummary>> done;  // set: the last event
  };

  // TurnSink, for the engine.
  void Send(TurnPiece piece) override;
  void Finish(absl::StatusOr<TurnSummary> result) override;
  bool Cancelled() const override;
  int Buffered() const override;

  // For the connection: the next event, or nullopt when none came within
  // `timeout`.
  std::optional<Event> Next(absl::Duration timeout);
  // The client has gone: the turn stops within a decode step.
  void Cancel();

 private:
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<TurnPiece> pieces_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<TurnSummary>> done_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_TURN_SINK_H_
