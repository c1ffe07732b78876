#include "server/grpc/stream_limit.h"

#include "absl/strings/str_cat.h"

namespace linserve {

StreamLimit::Ticket& StreamLimit::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (limit_ != nullptr) limit_->Release();
    limit_ = other.limit_;
    other.limit_ = nullptr;
  }
  return *this;
}

StreamLimit::Ticket::~Ticket() {
  if (limit_ != nullptr) limit_->Release();
}

StreamLimit::StreamLimit(int64_t max_open, prometheus::Gauge* open_streams)
    : max_open_(max_open), gauge_(open_streams) {}

absl::StatusOr<StreamLimit::Ticket> StreamLimit::Acquire() {
  int64_t open = open_.load();
  do {
    if (open >= max_open_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("max_open_streams = ", max_open_,
                       " streams are open; retry later or raise --max_open_streams"));
    }
  } while (!open_.compare_exchange_weak(open, open + 1));
  if (gauge_ != nullptr) gauge_->Increment();
  return Ticket(this);
}

void StreamLimit::Release() {
  open_.fetch_sub(1);
  if (gauge_ != nullptr) gauge_->Decrement();
}

}  // namespace linserve
