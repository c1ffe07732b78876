#include "server/sessions/session_pool.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/model/state.h"
#include "server/requests/session_id.h"

namespace linserve {

Session::Session() = default;
Session::~Session() = default;

SessionPool::SessionPool(int64_t max_sessions, int64_t max_in_memory, int64_t max_per_tenant)
    : max_sessions_(max_sessions), max_in_memory_(max_in_memory), max_per_tenant_(max_per_tenant) {}

int64_t SessionPool::CountOf(const std::string& tenant) const {
  auto it = per_tenant_.find(tenant);
  return it == per_tenant_.end() ? 0 : it->second;
}

absl::StatusOr<Session*> SessionPool::Find(const std::string& tenant, const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->tenant != tenant) {
    return absl::NotFoundError(absl::StrCat("session_id ", id, " is not a session"));
  }
  return it->second.get();
}

Session* SessionPool::FindById(const std::string& id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

absl::StatusOr<Session*> SessionPool::Add(const std::string& tenant, int64_t now_unix_ms) {
  if (size() >= max_sessions_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "max_sessions = ", max_sessions_, " sessions exist; delete one or raise --max_sessions"));
  }
  if (!tenant.empty() && max_per_tenant_ > 0 && CountOf(tenant) >= max_per_tenant_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant ", tenant, " holds max_sessions_per_tenant = ", max_per_tenant_,
        " sessions; delete one or raise --max_sessions_per_tenant"));
  }
  auto session = std::make_unique<Session>();
  session->tenant = tenant;
  do {
    absl::StatusOr<std::string> id = NewSessionId();
    if (!id.ok()) return id.status();
    session->id = *std::move(id);
  } while (sessions_.contains(session->id));
  session->created_unix_ms = now_unix_ms;
  session->last_used_unix_ms = now_unix_ms;
  Session* raw = session.get();
  sessions_[raw->id] = std::move(session);
  ++per_tenant_[tenant];
  Touch(raw);
  return raw;
}

absl::Status SessionPool::AddStored(std::unique_ptr<Session> session) {
  if (size() >= max_sessions_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("max_sessions = ", max_sessions_, " reached while loading the store"));
  }
  if (sessions_.contains(session->id)) {
    return absl::AlreadyExistsError(absl::StrCat("session ", session->id, " is stored twice"));
  }
  const std::string id = session->id;
  ++per_tenant_[session->tenant];
  sessions_[id] = std::move(session);
  return absl::OkStatus();
}

void SessionPool::Remove(const std::string& id) {
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  auto count = per_tenant_.find(it->second->tenant);
  if (--count->second == 0) per_tenant_.erase(count);
  sessions_.erase(it);
}

void SessionPool::Touch(Session* session) { session->last_touch = ++clock_; }

int64_t SessionPool::in_memory() const {
  int64_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->state != nullptr;
  return n;
}

std::vector<int64_t> SessionPool::ResidentPositions() const {
  std::vector<int64_t> positions;
  for (const auto& [id, s] : sessions_) {
    if (s->state != nullptr) positions.push_back(s->position);
  }
  return positions;
}

absl::Status SessionPool::MakeRoom(const Session* keep) {
  if (in_memory() < max_in_memory_) return absl::OkStatus();
  Session* victim = nullptr;
  for (const auto& [id, s] : sessions_) {
    if (s.get() == keep || !s->state || s->busy || s->pending_writes > 0) continue;
    if (victim == nullptr || s->last_touch < victim->last_touch) victim = s.get();
  }
  if (victim == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("max_sessions_in_memory = ", max_in_memory_,
                     " sessions are in memory and all are busy; retry later"));
  }
  victim->state.reset();
  return absl::OkStatus();
}

std::vector<const Session*> SessionPool::ListOf(const std::string& tenant) const {
  std::vector<const Session*> out;
  for (const auto& [id, s] : sessions_) {
    if (s->tenant == tenant) out.push_back(s.get());
  }
  std::sort(out.begin(), out.end(), [](const Session* a, const Session* b) {
    return std::tie(a->created_unix_ms, a->id) < std::tie(b->created_unix_ms, b->id);
  });
  return out;
}

std::vector<std::string> SessionPool::IdleSince(int64_t cutoff_unix_ms) const {
  std::vector<std::string> out;
  for (const auto& [id, s] : sessions_) {
    if (!s->busy && s->pending_writes == 0 && s->last_used_unix_ms < cutoff_unix_ms) {
      out.push_back(id);
    }
  }
  return out;
}

}  // namespace linserve
