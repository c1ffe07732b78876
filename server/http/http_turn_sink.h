#ifndef LINSERVE_SERVER_HTTP_TURN_SINK_H_
#define LINSERVE_SERVER_HTTP_TURN_SINK_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/net/http_exchange.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

// The scheduler's end of one HTTP request. The engine's calls only queue an
// event and, when none is on its way, post one drain to the connection's
// strand, which hands every queued event to `deliver` in order: the engine
// never formats or writes. Pieces not yet delivered and chunks not yet on
// the wire count as Buffered, so a slow reader pauses its turn exactly as an
// unread gRPC stream does. Thread-safe.
class HttpTurnSink : public TurnSink, public std::enable_shared_from_this<HttpTurnSink> {
 public:
  struct Event {
    std::optional<TurnPiece> piece;                   // set: new text
    std::optional<absl::StatusOr<TurnSummary>> done;  // set: the last event
  };

  // `deliver` runs on the exchange's strand; after the last event the sink
  // lets go of it.
  HttpTurnSink(std::shared_ptr<HttpExchange> exchange, std::function<void(Event)> deliver);

  // TurnSink, for the engine.
  void Send(TurnPiece piece) override;
  void Finish(absl::StatusOr<TurnSummary> result) override;
  bool Cancelled() const override;
  int Buffered() const override;

  // The client has gone: the turn stops within a decode step (and still
  // delivers its last event).
  void Cancel();

 private:
  void Push(Event event);
  void Drain();

  const std::shared_ptr<HttpExchange> exchange_;
  mutable absl::Mutex mu_;
  std::function<void(Event)> deliver_ ABSL_GUARDED_BY(mu_);
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
  int queued_pieces_ ABSL_GUARDED_BY(mu_) = 0;  // of events_
  bool drain_posted_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_HTTP_TURN_SINK_H_
