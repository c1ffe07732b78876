#ifndef LINSERVE_SERVER_STREAM_LIMIT_H_
#define LINSERVE_SERVER_STREAM_LIMIT_H_

#include <cstdint>
#include <string>

#include <prometheus/gauge.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace linserve {

// The bounds on open streams: server-wide (--max_open_streams) and per
// authenticated tenant (--max_open_streams_per_tenant). Generate,
// ExportSession and ImportSession calls and HTTP completions count from
// their start until their transport is done with them. The turn capacity (max_batch + max_queued_requests) bounds the
// work; this bounds what a stream holds after its work is over, e.g. the
// last messages a reader that never reads leaves buffered, across however
// many connections. Thread-safe.
class StreamLimit {
 public:
  // Held by a stream while it is open; returns its place when destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept
        : limit_(other.limit_), tenant_(std::move(other.tenant_)) {
      other.limit_ = nullptr;
    }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

   private:
    friend class StreamLimit;
    Ticket(StreamLimit* limit, std::string tenant) : limit_(limit), tenant_(std::move(tenant)) {}
    StreamLimit* limit_ = nullptr;
    std::string tenant_;
  };

  // `open_streams` (may be null) follows the count.
  StreamLimit(int64_t max_open, int64_t max_open_per_tenant, prometheus::Gauge* open_streams);

  // A ticket, or RESOURCE_EXHAUSTED naming the flag whose bound is reached.
  // `tenant` "" (no authentication) is bound by the server-wide limit only.
  absl::StatusOr<Ticket> Acquire(const std::string& tenant);
  int64_t open() const;

 private:
  void Release(const std::string& tenant);

  const int64_t max_open_;
  const int64_t max_open_per_tenant_;
  prometheus::Gauge* const gauge_;
  mutable absl::Mutex mu_;
  int64_t open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> open_by_tenant_ ABSL_GUARDED_BY(mu_);
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STREAM_LIMIT_H_
