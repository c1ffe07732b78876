#ifndef LINSERVE_SERVER_TURN_H_
#define LINSERVE_SERVER_TURN_H_

// One request's work on the engine, as the scheduler queues it and the turn
// runner advances it. Brings in LibTorch (the turn owns a State): only the
// scheduler's own files include it.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/generation/generation.h"
#include "engine/model/state.h"
#include "server/requests/request_validation.h"
#include "server/scheduling/named_states.h"
#include "server/scheduling/scheduler.h"
#include "server/sessions/session_sharing.h"
#include "server/scheduling/turn_sink.h"

namespace linserve {

// A Generate, or the prefill of a CreateSession or CreateNamedState prompt.
struct Turn {
  std::shared_ptr<TurnSink> sink;           // null for a CreateSession prefill
  Scheduler::Done<SessionInfo> on_created;  // set for a CreateSession prefill only
  // Set for a CreateNamedState prefill only: takes the state once the whole
  // prompt is in (nothing held back), with what it cost.
  std::function<void(absl::StatusOr<State> state, NamedStateInfo cost)> on_state_made;
  // The named state a Generate or CreateSession starts from (call.initial_state).
  std::shared_ptr<const NamedState> origin;
  // The content digest of the named state its state started from ("":
  // fresh), which scopes its prefix-cache keys: `origin`'s, or its
  // session's for the first turn of a session made from one.
  std::string origin_digest;
  std::string tenant;
  GenerateCall call;
  absl::Time arrived;
  absl::Time admitted;
  absl::Time first_token = absl::InfinitePast();
  absl::Time last_token;
  std::string session_id;  // the session it advances; empty: stateless
  // The turn's own copy of the state: the session's changes only when the
  // turn finishes, so a cancelled or failed turn leaves it as it was.
  State state;
  std::vector<int64_t> prefill;  // pending token, BOS if the model takes one, prompt tokens
  size_t prefilled = 0;
  // The prefix-state cache (server/scheduling/prefix_cache.h), for a turn that starts
  // from a fresh state: the chain keys of the prompt's whole blocks, the
  // tokens it resumed past (0: none) and where a snapshot is due (0: none;
  // prefill pieces end there).
  std::vector<std::string> prefix_keys;
  int64_t cached_tokens = 0;
  int64_t snapshot_at = 0;
  // A session's turn: the tokens its session consumed before `prefill`
  // (while known), so that the session knows its tokens after the turn, and
  // the states it keeps (Session::kept), with the one this turn keeps at
  // `keep_state_at` (an index into `prefill`; 0: none) added.
  std::vector<int32_t> tokens_before;
  bool tokens_known = false;
  std::vector<KeptState> kept;
  int64_t keep_state_at = 0;
  // An HTTP chat session's turn (call.chat_context): the text it answered.
  std::string reply_text;
  std::unique_ptr<Generation> generation;  // null for a CreateSession prefill
  uint64_t seed = 0;
  int64_t next_token = -1;  // sampled, fed to the model by the next decode step
  // CreateSession: the prompt's last token, left for the first turn to feed
  // (as a Generate leaves its last sampled token), so that a turn with an
  // empty prompt can start generating right after it.
  int64_t held_back = -1;
  int64_t slot = -1;  // its state is this slot of the runner's decode pool, not `state`
  bool done = false;
  // Names the admitted turn to answers that come back as tasks (its
  // session made ready by SessionManager::Prepare, a lease renewed).
  uint64_t serial = 0;
  // With a store several servers share: the lease on its session.
  TurnLease lease;
  // One of a request's n choices (Scheduler::SubmitChoices): its index,
  // which offsets its seed.
  int32_t choice = 0;
  // The leader's other choices, until its prefill ends: each waits (no
  // state, no sampler) to take a copy of the leader's state and last logits
  // row, then runs as a turn of its own. They count against max_batch and
  // the queue as turns.
  std::vector<std::unique_ptr<Turn>> followers;
  // The sum of the log-probabilities of its sampled tokens (best_of ranks
  // choices by it).
  double cumulative_logprob = 0;

  // Places in the batch and the queue: the turn and its waiting followers.
  int width() const { return 1 + static_cast<int>(followers.size()); }
  bool creates_session() const { return static_cast<bool>(on_created); }
  bool makes_named_state() const { return static_cast<bool>(on_state_made); }
  // Its prompt's logits are never sampled: it may resume past its whole prompt.
  bool only_prefills() const { return creates_session() || makes_named_state(); }
  bool prefilling() const { return prefilled < prefill.size(); }
  // Where its next prefill piece must end (a prefix-cache snapshot or a kept
  // state is due there); 0: nowhere.
  int64_t next_stop() const {
    int64_t stop = 0;
    for (int64_t at : {snapshot_at, keep_state_at}) {
      if (at > static_cast<int64_t>(prefilled) && (stop == 0 || at < stop)) stop = at;
    }
    return stop;
  }
  bool cancelled() const { return sink != nullptr && sink->Cancelled(); }
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_TURN_H_
