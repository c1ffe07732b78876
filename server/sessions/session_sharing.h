#ifndef LINSERVE_SERVER_SESSION_SHARING_H_
#define LINSERVE_SERVER_SESSION_SHARING_H_

// Sessions shared with other servers through the store (Redis): the lease a
// turn holds on its session, the fence on each write, and keeping this
// server's copy of a session up to date with the store. With a store one
// server owns, leases and refreshes are no-ops, since nothing else writes
// that store. Every store call runs on the store worker, never on the engine
// thread. Engine thread only, except where a method says otherwise.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/metrics.h"
#include "server/store/session_leases.h"
#include "server/sessions/session_pool.h"
#include "server/sessions/store_worker.h"
#include "server/store/state_store.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h (LibTorch stays out of this header)

// A turn's lease on its session: held from the turn's start until its
// checkpoint is durable, renewed every third of its length meanwhile.
struct TurnLease {
  bool held = false;
  bool renewing = false;  // a renewal is queued on the store worker
  StoredSessionKey key;
  absl::Time renew_at;
};

// What the engine asks the store about one session before it uses it.
struct StoreQuestion {
  StoredSessionKey key;
  // Take the session's lease (a turn's, or the one a delete needs).
  bool lease = false;
  // Compare the stored version with `known_version` and read the stored
  // file when they differ (with a store several servers share).
  bool version = false;
  int64_t known_version = -1;
  // Read the stored file in any case (the state is not in memory, or the
  // session is not known here at all).
  bool file = false;
};

// The store's answer, made on the store worker.
struct StoreAnswer {
  absl::Status status;  // ABORTED: leased elsewhere; UNAVAILABLE: the store is unreachable
  bool gone = false;    // the store no longer holds the session
  TurnLease lease;      // held when taken
  std::optional<VersionedStateFile> stored;
  absl::Duration read_time;  // reading the file, for the restore metric
};

class SessionSharing {
 public:
  // `lease` is how long a lease lasts unless renewed; `max_state_bytes`
  // bounds a state file read from the store. Lease calls run on `worker`.
  SessionSharing(StateStore* store, StoreWorker* worker, const LanguageModel& model,
                 std::string fingerprint, Metrics* metrics, absl::Duration lease,
                 int64_t max_state_bytes);

  // Whether other servers share the store (leases and refreshes apply).
  bool shared() const { return leases_ != nullptr; }

  // Store worker only: answers `question` (a refused lease ends the answer).
  StoreAnswer Ask(const StoreQuestion& question);

  // Whether `lease` should be renewed now.
  bool RenewDue(const TurnLease& lease, absl::Time now) const {
    return lease.held && !lease.renewing && now >= lease.renew_at;
  }
  // Queues the renewal of `lease`; `renewed` runs on the store worker.
  void Renew(TurnLease& lease, std::function<void(absl::Status)> renewed);
  // Takes a renewal's outcome in. ABORTED (and the lease no longer held) when
  // it was lost: another server may be advancing the session now.
  absl::Status Renewed(TurnLease& lease, const absl::Status& renewed, absl::Time now);
  // Queues giving up `lease` on the store worker.
  void ReleaseLease(TurnLease& lease);
  // Gives up the lease on `key` now; thread-safe (the checkpoint writer's
  // thread calls it once a turn is durable).
  void ReleaseLeaseOf(const StoredSessionKey& key);

  // Reads `stored` into the copy: its state (when `with_state`) and, with a
  // store several servers share, its fields and version. DATA_LOSS when the
  // stored state does not fit the model.
  absl::Status Reload(Session& session, const VersionedStateFile& stored, bool with_state);
  // The fence for the session's next checkpoint; counts the write.
  WriteFence NextFence(Session& session, bool leased);

 private:
  StateStore* const store_;
  StoreWorker* const worker_;
  SessionLeases* const leases_;  // null: no other server shares the store
  const std::string owner_;      // this server, in the leases it holds
  const LanguageModel& model_;
  const std::string fingerprint_;
  Metrics* const metrics_;
  const absl::Duration lease_;
  const int64_t max_state_bytes_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SESSION_SHARING_H_
