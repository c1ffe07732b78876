#ifndef LINSERVE_SERVER_SESSION_MANAGER_H_
#define LINSERVE_SERVER_SESSION_MANAGER_H_

// The sessions that turns and session commands share: the pool (which ones
// exist, which have their state in memory), the store behind it, and the
// checkpoints that make a session's changes durable. Engine thread only:
// what the checkpoint writer reports comes back through `post`.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/sessions/checkpoint_writer.h"
#include "server/common/metrics.h"
#include "server/scheduling/scheduler.h"
#include "server/sessions/session_pool.h"
#include "server/sessions/session_sharing.h"
#include "server/sessions/store_worker.h"
#include "server/store/state_store.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h (LibTorch stays out of this header)
class PendingImport;  // server/scheduling/pending_import.h (likewise)
struct State;

class SessionManager {
 public:
  // Runs a task on the engine thread.
  using Post = std::function<void(std::function<void()>)>;

  SessionManager(const LanguageModel& model, std::string fingerprint, StateStore* store,
                 Metrics* metrics, const SchedulerOptions& options, Post post);

  // Reads every session of the store made by this model into the pool
  // (states stay in the store); others are logged and left alone.
  absl::Status LoadStore();

  // What a caller is about to do with a session, which decides what
  // Prepare asks the store.
  enum class Use {
    kRead,      // read its fields (GetSession, ExportSession)
    kResident,  // read its state (ForkSession)
    kTurn,      // run a turn: busy from now on, its state in memory, its lease taken
    kDelete,    // delete it: the lease a delete needs taken, and not busy
  };
  // `lease` is the turn's lease (held with a store several servers share);
  // with kTurn the session is busy, and the caller owns both.
  using Prepared = std::function<void(absl::StatusOr<Session*> session, TurnLease lease)>;
  // Finds the tenant's session: the pool's, or one the store has that the
  // pool does not know (made by another server, or before a restart). With a
  // store several servers share, an idle session is brought up to date with
  // the store first. Every store call runs on the store worker; `then` runs
  // on the engine thread, at once when the store is not needed. NOT_FOUND,
  // FAILED_PRECONDITION (busy, for kTurn and kDelete), ABORTED (leased by
  // another server), UNAVAILABLE (the store is unreachable),
  // RESOURCE_EXHAUSTED (no room in memory for its state).
  void Prepare(const std::string& tenant, const std::string& id, Use use, Prepared then);
  // The pool's session only, or null.
  Session* FindById(const std::string& id) { return pool_.FindById(id); }
  // After `grown`'s state grew: spills idle states until the memory's byte
  // bounds hold again (SessionPool::Trim).
  void Trim(const Session& grown) { pool_.Trim(&grown); }
  // The bytes `tenant`'s turn may take a state to in memory: the smaller of
  // the memory bounds that apply to it (0: none).
  int64_t MaxStateBytesFor(const std::string& tenant) const;
  // A session that never existed (its creation failed or was cut) goes.
  void Discard(const std::string& id);
  // Removes the session from the pool and the store; `done` runs on the
  // writer thread once the store entry is gone.
  void Forget(const std::string& id, std::function<void(absl::Status)> done);
  // A new session of `tenant` holding `state`, with room made in memory;
  // RESOURCE_EXHAUSTED at the session limits or when the store is full.
  absl::StatusOr<Session*> AddResident(const std::string& tenant, State state);
  // Marks the session most recently used.
  void Touch(Session& session) { pool_.Touch(&session); }

  // Queues `record` as the session's checkpoint (fenced by the turn's lease
  // when `leased`); `durable` runs on the writer thread once it is (or failed).
  // `payload`, unless null, is written in place of the record's own.
  void Checkpoint(Session& session, SessionRecord record, bool leased,
                  std::function<void(absl::Status)> durable,
                  std::shared_ptr<const std::string> payload = nullptr);
  // Checkpoints a session just made, then answers `done` with its info; when
  // the save fails the session is removed and `done` hears why saving `what`
  // failed.
  void CheckpointThenAnswer(Session& session, const Scheduler::Done<SessionInfo>& done,
                            const char* what);
  // The same for `fork`, just made from `source` with its state and fields.
  // Where the store keeps forks by reference and `source`'s stored file is
  // its state (no write of it queued, one server on the store), the fork is
  // saved as a reference to that file (StateStore::PutFork): no state is
  // serialized or written, whatever the session's length.
  void CheckpointForkThenAnswer(Session& fork, const Session& source,
                                const Scheduler::Done<SessionInfo>& done);
  // A new session of `tenant` whose state is still being built elsewhere (an
  // import's): busy, and without a state until CheckpointImported gives it one.
  // RESOURCE_EXHAUSTED at the session limits or when the store is full.
  absl::StatusOr<Session*> AddPending(const std::string& tenant, int64_t position);
  // Writes the imported file's payload as the pending session's checkpoint
  // while `import`'s state is built, then answers `done`: with the session's
  // info once both are done (its state in memory when there is room, else in
  // the store alone), or with why not (the session removed, and its file too
  // when the write had landed).
  void CheckpointImported(Session& session, std::shared_ptr<PendingImport> import,
                          const Scheduler::Done<SessionInfo>& done);
  // What the client hears when `what` failed to save: RESOURCE_EXHAUSTED
  // stays so (the store is full: retrying will not help until sessions are
  // deleted), ABORTED stays so (another server moved the session: a fenced
  // write), anything else is UNAVAILABLE.
  absl::Status SaveError(absl::string_view what, const absl::Status& written);
  // Returns once every queued store call, checkpoint and delete is done.
  void Flush() {
    store_worker_.Flush();
    writer_.Flush();
  }
  // Runs `job` on the store worker (store reads off the engine thread).
  void RunOnStoreWorker(std::function<void()> job) { store_worker_.Run(std::move(job)); }

  SessionRecord RecordOf(const Session& session) const;
  // The same with `payload` standing for the serialized state.
  SessionRecord RecordOf(const Session& session, std::string payload) const;
  SessionInfo InfoOf(const Session& session) const;
  // The tenant's sessions, oldest first.
  std::vector<const Session*> ListOf(const std::string& tenant) const {
    return pool_.ListOf(tenant);
  }
  // Deletes sessions idle for the session TTL (checked once a second).
  void SweepIdle();
  void UpdateGauges();
  int64_t NowUnixMs() const;

  SessionSharing& sharing() { return sharing_; }
  StateStore& store() { return *store_; }
  const Post& post() const { return post_; }

 private:
  // What runs once a checkpoint of session `id` is durable (or failed): its
  // count of queued writes goes down, then `durable` runs.
  std::function<void(absl::Status)> AfterWrite(const std::string& id,
                                               std::function<void(absl::Status)> durable);
  // Marks a session just made busy and returns what answers `done` once it
  // is saved (or removes it when the save of `what` failed).
  std::function<void(absl::Status)> AnswerOnceSaved(Session& session,
                                                    const Scheduler::Done<SessionInfo>& done,
                                                    const char* what);
  // Drops the copy of a session the store no longer has.
  absl::Status Gone(const std::string& id);
  // A new session of `tenant` in the pool, with no state, once the store has
  // room for a state at `position` and the limits allow one more (each
  // refusal counted).
  absl::StatusOr<Session*> AddSession(const std::string& tenant, int64_t position);
  // Prepare, once the store's answer is in; `fresh`: just read from the store.
  void Prepare(const std::string& tenant, const std::string& id, Use use, bool fresh,
               Prepared then);
  void TakeAnswer(const std::string& id, Use use, StoreAnswer answer, const Prepared& then);
  // A session the store holds and the pool does not know, into the pool.
  absl::Status Adopt(const StoredSessionKey& key,
                     const absl::StatusOr<VersionedStateFile>& stored);

  const LanguageModel& model_;
  const std::string fingerprint_;
  StateStore* const store_;
  Metrics* const metrics_;
  const SchedulerOptions options_;
  const Post post_;
  SessionSharing sharing_;
  SessionPool pool_;
  // Sessions deleted whose store entry the writer has not removed yet: never
  // adopted back from the store meanwhile.
  absl::flat_hash_set<std::string> deleting_;
  absl::Time last_sweep_ = absl::InfinitePast();
  CheckpointWriter writer_;
  // Last: destroyed first, running what is queued while everything its jobs
  // use still exists.
  StoreWorker store_worker_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_MANAGER_H_
