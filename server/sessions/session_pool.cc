#include "server/sessions/session_pool.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/model/state.h"
#include "server/requests/session_id.h"

namespace linserve {

Session::Session() = default;
Session::~Session() = default;

SessionPool::SessionPool(int64_t max_sessions, int64_t max_in_memory, int64_t max_per_tenant,
                         SessionMemoryBounds memory)
    : max_sessions_(max_sessions),
      max_in_memory_(max_in_memory),
      max_per_tenant_(max_per_tenant),
      memory_(std::move(memory)) {}

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

void SessionPool::Spill(Session& session) {
  session.state.reset();
  session.kept.clear();
  // The store holds them with the state (read back together).
  session.tokens.clear();
  session.tokens.shrink_to_fit();
  session.tokens_known = false;
}

namespace {

// `session`'s resident states: its own and those it kept.
void AddStatesOf(const Session& session, std::vector<const State*>& states) {
  if (!session.state) return;
  states.push_back(session.state.get());
  for (const KeptState& kept : session.kept) states.push_back(kept.state.get());
}

}  // namespace

int64_t SessionPool::BytesOf(const Session& session) const {
  if (!memory_.state_bytes || !session.state) return 0;
  const int64_t tokens = static_cast<int64_t>(session.tokens.size() * sizeof(int32_t));
  if (memory_.resident_bytes) {
    std::vector<const State*> states;
    AddStatesOf(session, states);
    return memory_.resident_bytes(states) + tokens;
  }
  // A kept state is the part that does not grow: a state's bytes at 0.
  return memory_.state_bytes(session.position) +
         static_cast<int64_t>(session.kept.size()) * memory_.state_bytes(0) + tokens;
}

std::vector<const State*> SessionPool::ResidentStates() const {
  std::vector<const State*> states;
  for (const auto& [id, s] : sessions_) AddStatesOf(*s, states);
  return states;
}

int64_t SessionPool::BytesOfSessions(const std::string* tenant) const {
  int64_t bytes = 0;
  std::vector<const State*> states;
  for (const auto& [id, s] : sessions_) {
    if (tenant != nullptr && s->tenant != *tenant) continue;
    if (!memory_.resident_bytes) {
      bytes += BytesOf(*s);
    } else if (s->state) {
      AddStatesOf(*s, states);
      bytes += static_cast<int64_t>(s->tokens.size() * sizeof(int32_t));
    }
  }
  if (memory_.resident_bytes && !states.empty()) bytes += memory_.resident_bytes(states);
  return bytes;
}

int64_t SessionPool::ResidentBytes() const { return BytesOfSessions(nullptr); }

int64_t SessionPool::ResidentBytesOf(const std::string& tenant) const {
  return BytesOfSessions(&tenant);
}

Session* SessionPool::SpillCandidate(const Session* keep, const std::string* tenant) const {
  Session* victim = nullptr;
  for (const auto& [id, s] : sessions_) {
    if (s.get() == keep || !s->state || s->busy || s->pending_writes > 0) continue;
    if (tenant != nullptr && s->tenant != *tenant) continue;
    if (victim == nullptr || s->last_touch < victim->last_touch) victim = s.get();
  }
  return victim;
}

std::string SessionPool::ByteBoundCrossed(const Session* keep, int64_t extra,
                                          int64_t* bound) const {
  if (!memory_.state_bytes) return "";
  if (memory_.max_bytes > 0 && ResidentBytes() + extra > memory_.max_bytes) {
    *bound = memory_.max_bytes;
    return "max_session_memory_bytes";
  }
  if (memory_.max_bytes_per_tenant > 0 && !keep->tenant.empty() &&
      ResidentBytesOf(keep->tenant) + extra > memory_.max_bytes_per_tenant) {
    *bound = memory_.max_bytes_per_tenant;
    return "max_session_memory_bytes_per_tenant";
  }
  return "";
}

absl::Status SessionPool::MakeRoom(const Session* keep) {
  // The state keep is about to hold (it holds none yet).
  const int64_t incoming = memory_.state_bytes ? memory_.state_bytes(keep->position) : 0;
  int64_t bound = 0;
  for (const auto& [flag, limit] :
       {std::pair<const char*, int64_t>{"max_session_memory_bytes", memory_.max_bytes},
        {"max_session_memory_bytes_per_tenant",
         keep->tenant.empty() ? 0 : memory_.max_bytes_per_tenant}}) {
    if (memory_.state_bytes && limit > 0 && incoming > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session ", keep->id, "'s state takes ", incoming, " bytes at position ",
          keep->position, ", more than ", flag, " = ", limit, " allows in memory"));
    }
  }
  while (true) {
    const bool count_full = in_memory() >= max_in_memory_;
    const std::string crossed = ByteBoundCrossed(keep, incoming, &bound);
    if (!count_full && crossed.empty()) return absl::OkStatus();
    // Over a tenant's quota only that tenant's states go.
    const bool tenant_only = !count_full && crossed == "max_session_memory_bytes_per_tenant";
    Session* victim = SpillCandidate(keep, tenant_only ? &keep->tenant : nullptr);
    if (victim == nullptr) {
      return absl::ResourceExhaustedError(
          count_full ? absl::StrCat("max_sessions_in_memory = ", max_in_memory_,
                                    " sessions are in memory and all are busy; retry later")
                     : absl::StrCat(crossed, " = ", bound, " bytes of session states are in "
                                    "memory and every one is busy; retry later"));
    }
    Spill(*victim);
  }
}

void SessionPool::Trim(const Session* keep) {
  int64_t bound = 0;
  while (!ByteBoundCrossed(keep, 0, &bound).empty()) {
    const bool tenant_only =
        ByteBoundCrossed(keep, 0, &bound) == "max_session_memory_bytes_per_tenant";
    Session* victim = SpillCandidate(keep, tenant_only ? &keep->tenant : nullptr);
    if (victim == nullptr) return;
    Spill(*victim);
  }
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
