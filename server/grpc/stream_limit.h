#ifndef LINSERVE_SERVER_STREAM_LIMIT_H_
#define LINSERVE_SERVER_STREAM_LIMIT_H_

#include <atomic>
#include <cstdint>

#include <prometheus/gauge.h>

#include "absl/status/statusor.h"

namespace linserve {

// The server-wide bound on open streams (--max_open_streams): Generate,
// ExportSession and ImportSession calls from their start until gRPC is done
// with them. The turn capacity (max_batch + max_queued_requests) bounds the
// work; this bounds what a stream holds after its work is over, e.g. the
// last messages a reader that never reads leaves buffered, across however
// many connections. Thread-safe.
class StreamLimit {
 public:
  // Held by a stream while it is open; returns its place when destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept : limit_(other.limit_) { other.limit_ = nullptr; }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

   private:
    friend class StreamLimit;
    explicit Ticket(StreamLimit* limit) : limit_(limit) {}
    StreamLimit* limit_ = nullptr;
  };

  // `open_streams` (may be null) follows the count.
  StreamLimit(int64_t max_open, prometheus::Gauge* open_streams);

  // A ticket, or RESOURCE_EXHAUSTED naming --max_open_streams when that many
  // streams are open.
  absl::StatusOr<Ticket> Acquire();
  int64_t open() const { return open_.load(); }

 private:
  void Release();

  const int64_t max_open_;
  prometheus::Gauge* const gauge_;
  std::atomic<int64_t> open_{0};
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STREAM_LIMIT_H_
