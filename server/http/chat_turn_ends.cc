#include "server/http/chat_turn_ends.h"

namespace linserve {

void ChatTurnEnds::Finished(const std::string& session_id, bool at_stop) {
  absl::MutexLock lock(&mu_);
  if (at_stop) {
    missing_.erase(session_id);
    return;
  }
  if (!missing_.insert(session_id).second) return;
  order_.push_back(session_id);
  while (missing_.size() > capacity_ || order_.size() > 2 * capacity_) {
    missing_.erase(order_.front());
    order_.pop_front();
  }
}

bool ChatTurnEnds::TakeMissingEnd(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  return missing_.erase(session_id) > 0;
}

void ChatTurnEnds::Forked(const std::string& from, const std::string& to) {
  bool missing;
  {
    absl::MutexLock lock(&mu_);
    missing = missing_.contains(from);
  }
  if (missing) Finished(to, /*at_stop=*/false);
}

void ChatTurnEnds::Forget(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  missing_.erase(session_id);
}

}  // namespace linserve
