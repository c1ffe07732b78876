#ifndef LINSERVE_SERVER_CHAT_TURN_ENDS_H_
#define LINSERVE_SERVER_CHAT_TURN_ENDS_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace linserve {

// The chat sessions whose last assistant turn did not end at the chat
// template's stop string (it ran to max_tokens, hit EOS or was cut): their
// state lacks the turn's end, which a stateless chat of the whole history
// renders after the assistant's message, so the session's next chat turn
// must feed it first. Bounded (the oldest entries go first) and per process:
// behind a router, session affinity keeps a session's turns on one replica.
// Thread-safe.
class ChatTurnEnds {
 public:
  explicit ChatTurnEnds(size_t capacity) : capacity_(capacity) {}

  // A chat turn of `session_id` finished; `at_stop`: at the template's stop.
  void Finished(const std::string& session_id, bool at_stop);
  // True when the session's next chat turn must start with the turn end
  // (and forgets it: the caller feeds it).
  bool TakeMissingEnd(const std::string& session_id);
  // A fork of `from` (its state, so its missing end too) made `to`.
  void Forked(const std::string& from, const std::string& to);
  // A turn that feeds raw text (/v1/completions) decides what follows itself.
  void Forget(const std::string& session_id);

 private:
  const size_t capacity_;
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> missing_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // insertion order, may hold stale ids
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_CHAT_TURN_ENDS_H_
