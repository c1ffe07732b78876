#include "server/grpc/stream_limit.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace linserve {

StreamLimit::Ticket& StreamLimit::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    if (limit_ != nullptr) limit_->Release(tenant_);
    limit_ = other.limit_;
    tenant_ = std::move(other.tenant_);
    other.limit_ = nullptr;
  }
  return *this;
}

StreamLimit::Ticket::~Ticket() {
  if (limit_ != nullptr) limit_->Release(tenant_);
}

StreamLimit::StreamLimit(int64_t max_open, int64_t max_open_per_tenant,
                         prometheus::Gauge* open_streams)
    : max_open_(max_open), max_open_per_tenant_(max_open_per_tenant), gauge_(open_streams) {}

absl::StatusOr<StreamLimit::Ticket> StreamLimit::Acquire(const std::string& tenant) {
  {
    absl::MutexLock lock(&mu_);
    if (open_ >= max_open_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("max_open_streams = ", max_open_,
                       " streams are open; retry later or raise --max_open_streams"));
    }
    if (!tenant.empty()) {
      int64_t& mine = open_by_tenant_[tenant];
      if (mine >= max_open_per_tenant_) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "max_open_streams_per_tenant = ", max_open_per_tenant_,
            " of this tenant's streams are open; retry later or raise "
            "--max_open_streams_per_tenant"));
      }
      ++mine;
    }
    ++open_;
  }
  if (gauge_ != nullptr) gauge_->Increment();
  return Ticket(this, tenant);
}

int64_t StreamLimit::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

void StreamLimit::Release(const std::string& tenant) {
  {
    absl::MutexLock lock(&mu_);
    --open_;
    if (!tenant.empty()) {
      auto mine = open_by_tenant_.find(tenant);
      if (--mine->second == 0) open_by_tenant_.erase(mine);
    }
  }
  if (gauge_ != nullptr) gauge_->Decrement();
}

}  // namespace linserve
