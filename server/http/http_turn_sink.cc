#include "server/http/http_turn_sink.h"

#include <utility>

namespace linserve {

HttpTurnSink::HttpTurnSink(std::shared_ptr<HttpExchange> exchange,
                           std::function<void(Event)> deliver)
    : exchange_(std::move(exchange)), deliver_(std::move(deliver)) {}

void HttpTurnSink::Send(TurnPiece piece) {
  Event event;
  event.piece = std::move(piece);
  Push(std::move(event));
}

void HttpTurnSink::Finish(absl::StatusOr<TurnSummary> result) {
  Event event;
  event.done = std::move(result);
  Push(std::move(event));
}

void HttpTurnSink::Push(Event event) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = event.done.has_value();
    if (event.piece.has_value()) ++queued_pieces_;
    events_.push_back(std::move(event));
    if (drain_posted_) return;
    drain_posted_ = true;
  }
  exchange_->Post([self = shared_from_this()] { self->Drain(); });
}

void HttpTurnSink::Drain() {
  std::deque<Event> events;
  std::function<void(Event)> deliver;
  {
    absl::MutexLock lock(&mu_);
    drain_posted_ = false;
    events.swap(events_);
    queued_pieces_ = 0;
    deliver = deliver_;
    if (finished_) deliver_ = nullptr;  // the last event is among these
  }
  if (!deliver) return;
  for (Event& event : events) deliver(std::move(event));
}

bool HttpTurnSink::Cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

int HttpTurnSink::Buffered() const {
  absl::MutexLock lock(&mu_);
  return queued_pieces_ + static_cast<int>(exchange_->UnsentChunks());
}

void HttpTurnSink::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

}  // namespace linserve
