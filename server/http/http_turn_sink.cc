#include "server/http/http_turn_sink.h"

#include <utility>

namespace linserve {

void HttpTurnSink::Send(TurnPiece piece) {
  absl::MutexLock lock(&mu_);
  if (done_.has_value() || cancelled_) return;
  pieces_.push_back(std::move(piece));
}

void HttpTurnSink::Finish(absl::StatusOr<TurnSummary> result) {
  absl::MutexLock lock(&mu_);
  if (!done_.has_value()) done_ = std::move(result);
}

bool HttpTurnSink::Cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

int HttpTurnSink::Buffered() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pieces_.size());
}

void HttpTurnSink::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

bool HttpTurnSink::Ready() const { return !pieces_.empty() || done_.has_value(); }

std::optional<HttpTurnSink::Event> HttpTurnSink::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(this, &HttpTurnSink::Ready), timeout)) {
    return std::nullopt;
  }
  Event event;
  if (!pieces_.empty()) {
    event.piece = std::move(pieces_.front());
    pieces_.pop_front();
  } else {
    event.done = *done_;
  }
  return event;
}

}  // namespace linserve
