#ifndef LINSERVE_SERVER_SCHEDULER_IMPL_H_
#define LINSERVE_SERVER_SCHEDULER_IMPL_H_

// The scheduler's insides, shared by scheduler.cc (the engine loop) and
// session_commands.cc (the session RPCs). Only those two include it: it
// brings in LibTorch.

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "engine/generation.h"
#include "engine/language_model.h"
#include "engine/state.h"
#include "engine/tokenizer.h"
#include "server/checkpoint_writer.h"
#include "server/scheduler.h"
#include "server/session_leases.h"
#include "server/session_pool.h"

namespace linserve {

// One request's work on the engine: a Generate, or the prefill of a
// CreateSession prompt.
struct Turn {
  std::shared_ptr<TurnSink> sink;           // null for a CreateSession prefill
  Scheduler::Done<SessionInfo> on_created;  // set for a CreateSession prefill only
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
  std::vector<int64_t> prefill;  // pending token, BOS, prompt bytes
  size_t prefilled = 0;
  std::unique_ptr<Generation> generation;  // null for a CreateSession prefill
  uint64_t seed = 0;
  int64_t next_token = -1;  // sampled, fed to the model by the next decode step
  // CreateSession: the prompt's last token, left for the first turn to feed
  // (as a Generate leaves its last sampled token), so that a turn with an
  // empty prompt can start generating right after it.
  int64_t held_back = -1;
  bool in_batch = false;    // its state is a row of the engine's batch
  bool done = false;
  // With a store several servers share: the turn holds its session's lease
  // (key) and renews it from `renew_lease_at` on.
  bool leased = false;
  StoredSessionKey lease_key;
  absl::Time renew_lease_at;

  bool creates_session() const { return static_cast<bool>(on_created); }
  bool prefilling() const { return prefilled < prefill.size(); }
  bool cancelled() const { return sink != nullptr && sink->Cancelled(); }
};

class Scheduler::Impl {
 public:
  Impl(std::unique_ptr<LanguageModel> model, StateStore* store, Metrics* metrics,
       const SchedulerOptions& options);
  ~Impl();

  // Reads the store back into the pool (before the thread starts).
  absl::Status LoadStore();
  // A prefill and `steps` decode steps at batch 1 and 8, results dropped.
  absl::Status WarmUp(int32_t steps);
  void StartThread();

  // Thread-safe.
  absl::Status Submit(std::unique_ptr<Turn> turn);
  void Post(std::function<void()> task);
  void RefuseNewWork();
  void Drain(absl::Time deadline);
  int InFlight() const;

  // Session commands: engine thread only (posted by the Scheduler).
  void CreateEmptySession(const std::string& tenant, const Done<SessionInfo>& done);
  void GetSession(const std::string& tenant, const std::string& id, const Done<SessionInfo>& done);
  void ListSessions(const std::string& tenant, int32_t page_size, const std::string& page_token,
                    const Done<SessionPage>& done);
  void DeleteSession(const std::string& tenant, const std::string& id, const Done<bool>& done);
  void ForkSession(const std::string& tenant, const std::string& id,
                   const Done<SessionInfo>& done);
  void ExportSession(const std::string& tenant, const std::string& id,
                     const Done<std::string>& done);
  void ImportSession(const std::string& tenant, const SessionRecord& record,
                     const Done<SessionInfo>& done);

  const LanguageModel& model() const { return *model_; }
  const std::string fingerprint_;
  const std::string config_json_;
  const std::string device_;
  const int64_t state_bytes_;
  const std::string attention_kind_;

 private:
  // The engine loop and its steps.
  void Run();
  bool WaitForWork(bool busy);
  void RunTasks();
  void Admit();
  absl::Status Begin(Turn& turn);
  void DropCancelled();
  bool Prefill();
  // Prefills the next `n` tokens of every turn of `group` (all at the same
  // position) in one batched call.
  void PrefillGroup(const std::vector<Turn*>& group, int64_t n);
  bool Decode();
  void Emit(Turn& turn, const float* logits);
  void DetachBatch();
  void FinishWithError(Turn& turn, absl::Status error);
  void FinishTurn(Turn& turn, bool cancelled);
  void RemoveDone();
  void SweepIdleSessions();

  // Session helpers.
  // The pool's session, or one the store has that the pool does not know.
  // With a store several servers share, an idle session is first brought up
  // to date with the store (`refresh`).
  absl::StatusOr<Session*> FindSession(const std::string& tenant, const std::string& id,
                                       bool refresh = true);
  // Removes the session from the pool and the store; `done` runs on the
  // writer thread once the store entry is gone.
  void Forget(const std::string& id, std::function<void(absl::Status)> done);
  absl::Status MakeResident(Session& session);
  SessionRecord RecordOf(const Session& session) const;
  SessionInfo InfoOf(const Session& session) const;
  // A new session of `tenant` holding `state`, with room made in memory;
  // RESOURCE_EXHAUSTED at the session limits.
  absl::StatusOr<Session*> AddResident(const std::string& tenant, State state);
  // Checkpoints a session just made, then answers `done` with its info; when
  // the save fails the session is removed and `done` hears why saving `what`
  // failed.
  void CheckpointThenAnswer(Session& session, const Done<SessionInfo>& done, const char* what);
  // What the client hears when `what` failed to save: RESOURCE_EXHAUSTED
  // stays so (the store is full: retrying will not help until sessions are
  // deleted), ABORTED stays so (another server moved the session: a fenced
  // write), anything else is UNAVAILABLE.
  absl::Status SaveError(absl::string_view what, const absl::Status& written);
  // Queues `record` as the session's checkpoint (fenced by the turn's lease
  // when `leased`); `durable` runs on the writer thread once it is (or failed).
  void Checkpoint(Session& session, SessionRecord record, bool leased,
                  std::function<void(absl::Status)> durable);
  void UpdateSessionGauges();
  // linserve_active_requests: the turns admitted and not yet done.
  void UpdateActiveGauge();
  int64_t NowUnixMs() const;

  // Sharing sessions with other servers through the store (session_sharing.cc);
  // all no-ops for a store one server owns.
  bool shared_store() const { return leases_ != nullptr; }
  // Takes `session`'s lease for `turn`, then brings the session up to date.
  absl::Status TakeLease(Turn& turn, Session& session);
  // Renews the leases of running turns that are due; a turn whose lease was
  // lost ends with ABORTED.
  void RenewLeases();
  void ReleaseLease(Turn& turn);
  // Reads the session again from the store if another server wrote it since
  // this copy; NOT_FOUND (and the copy dropped) when it is gone from there.
  absl::Status Refresh(Session& session);
  // Reads `stored` into the copy: its state (when `with_state`) and, with
  // a store several servers share, its fields and version. DATA_LOSS when
  // the stored state does not fit the model.
  absl::Status Reload(Session& session, const VersionedStateFile& stored, bool with_state);
  // The fence for the session's next checkpoint; counts the write.
  WriteFence NextFence(Session& session, bool leased);

  std::unique_ptr<LanguageModel> model_;
  const Tokenizer tokenizer_;
  StateStore* const store_;
  SessionLeases* const leases_;     // null: no other server shares the store
  const std::string lease_owner_;   // this server, in the leases it holds
  Metrics* const metrics_;
  const SchedulerOptions options_;
  CheckpointWriter writer_;

  // Shared with the RPC threads.
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Turn>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // queued + admitted turns
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Engine thread only.
  SessionPool pool_;
  // Sessions deleted whose store entry the writer has not removed yet: never
  // adopted back from the store meanwhile.
  absl::flat_hash_set<std::string> deleting_;
  std::vector<std::unique_ptr<Turn>> active_;  // admission order
  std::vector<Turn*> batch_members_;           // the rows of batch_, in order
  State batch_;
  absl::BitGen bitgen_;
  absl::Time last_sweep_ = absl::InfinitePast();

  std::thread thread_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SCHEDULER_IMPL_H_
