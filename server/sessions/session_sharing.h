#ifndef LINSERVE_SERVER_SESSION_SHARING_H_
#define LINSERVE_SERVER_SESSION_SHARING_H_

// Sessions shared with other servers through the store (Redis): the lease a
// turn holds on its session, the fence on each write, and keeping this
// server's copy of a session up to date with the store. With a store one
// server owns, leases and refreshes are no-ops, since nothing else writes
// that store. Engine thread only, except where a method says otherwise.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/common/metrics.h"
#include "server/store/session_leases.h"
#include "server/sessions/session_pool.h"
#include "server/store/state_store.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h (LibTorch stays out of this header)

// A turn's lease on its session: held from the turn's start until its
// checkpoint is durable, renewed every third of its length meanwhile.
struct TurnLease {
  bool held = false;
  StoredSessionKey key;
  absl::Time renew_at;
};

class SessionSharing {
 public:
  // `lease` is how long a lease lasts unless renewed; `max_state_bytes`
  // bounds a state file read from the store.
  SessionSharing(StateStore* store, const LanguageModel& model, std::string fingerprint,
                 Metrics* metrics, absl::Duration lease, int64_t max_state_bytes);

  // Whether other servers share the store (leases and refreshes apply).
  bool shared() const { return leases_ != nullptr; }

  // Takes `session`'s lease into `lease`; ABORTED when another server holds
  // it. The caller refreshes the session next: holding the lease, nobody
  // else can advance it from there on.
  absl::Status TakeLease(TurnLease& lease, const Session& session);
  // Renews `lease` when it is due. ABORTED (and the lease no longer held)
  // when it was lost: another server may be advancing the session now.
  absl::Status RenewIfDue(TurnLease& lease, absl::Time now);
  void ReleaseLease(TurnLease& lease);
  // Gives up the lease on `key`; thread-safe (the checkpoint writer's thread
  // calls it once a turn is durable).
  void ReleaseLeaseOf(const StoredSessionKey& key);
  // The lease a DeleteSession takes so that it never removes a session a
  // turn on another server is advancing.
  absl::Status LeaseForDelete(const Session& session);

  // Brings the copy up to date when the store holds a newer one. False when
  // the store no longer has the session (deleted or expired through another
  // server): the caller drops its copy.
  absl::StatusOr<bool> Refresh(Session& session);
  // Reads `stored` into the copy: its state (when `with_state`) and, with a
  // store several servers share, its fields and version. DATA_LOSS when the
  // stored state does not fit the model.
  absl::Status Reload(Session& session, const VersionedStateFile& stored, bool with_state);
  // The fence for the session's next checkpoint; counts the write.
  WriteFence NextFence(Session& session, bool leased);

 private:
  StateStore* const store_;
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
