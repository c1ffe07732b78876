#include "server/sessions/session_sharing.h"

#include <unistd.h>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/model/language_model.h"
#include "engine/base/status_macros.h"
#include "server/common/log.h"
#include "server/sessions/state_restore.h"

namespace linserve {
namespace {

// Names this server in the session leases it holds: host, process and a
// random part, so a restarted server never mistakes an old lease for its own.
std::string NewLeaseOwner() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  absl::BitGen bits;
  return absl::StrCat(host, "/", ::getpid(), "/", absl::Hex(absl::Uniform<uint64_t>(bits)));
}

}  // namespace

SessionSharing::SessionSharing(StateStore* store, const LanguageModel& model,
                               std::string fingerprint, Metrics* metrics, absl::Duration lease,
                               int64_t max_state_bytes)
    : store_(store),
      leases_(store->leases()),
      owner_(NewLeaseOwner()),
      model_(model),
      fingerprint_(std::move(fingerprint)),
      metrics_(metrics),
      lease_(lease),
      max_state_bytes_(max_state_bytes) {}

WriteFence SessionSharing::NextFence(Session& session, bool leased) {
  if (!shared()) return WriteFence{/*expected_version=*/-1, ""};
  // Writes of one session land in the order they are queued, so each one
  // expects the version the previous one makes.
  WriteFence fence{session.store_version, leased ? owner_ : ""};
  if (session.store_version >= 0) ++session.store_version;
  return fence;
}

absl::Status SessionSharing::TakeLease(TurnLease& lease, const Session& session) {
  if (!shared()) return absl::OkStatus();
  const StoredSessionKey key = session.key();
  if (absl::Status taken = leases_->AcquireLease(key, owner_, lease_); !taken.ok()) {
    if (absl::IsAborted(taken)) metrics_->CountRejection("session_leased_elsewhere");
    return taken;
  }
  lease.held = true;
  lease.key = key;
  lease.renew_at = absl::Now() + lease_ / 3;
  return absl::OkStatus();
}

absl::Status SessionSharing::RenewIfDue(TurnLease& lease, absl::Time now) {
  if (!lease.held || now < lease.renew_at) return absl::OkStatus();
  absl::Status renewed = leases_->RenewLease(lease.key, owner_, lease_);
  if (absl::IsAborted(renewed)) {
    lease.held = false;
    return renewed;
  }
  if (!renewed.ok()) {
    // Redis hiccup: try again soon; the lease still has two thirds left.
    LogWarning("lease_renewal_failed", {{"error", renewed.ToString()}});
    lease.renew_at = now + absl::Seconds(1);
    return absl::OkStatus();
  }
  lease.renew_at = now + lease_ / 3;
  return absl::OkStatus();
}

void SessionSharing::ReleaseLease(TurnLease& lease) {
  if (!lease.held) return;
  lease.held = false;
  absl::Status released = leases_->ReleaseLease(lease.key, owner_);
  // Not fatal: the lease expires by itself.
  if (!released.ok()) LogWarning("lease_release_failed", {{"error", released.ToString()}});
}

void SessionSharing::ReleaseLeaseOf(const StoredSessionKey& key) {
  if (shared()) leases_->ReleaseLease(key, owner_).IgnoreError();
}

absl::Status SessionSharing::LeaseForDelete(const Session& session) {
  if (!shared()) return absl::OkStatus();
  // The delete removes the lease with the state.
  return leases_->AcquireLease(session.key(), owner_, lease_);
}

absl::StatusOr<bool> SessionSharing::Refresh(Session& session) {
  // Checkpoints of this server still queued: the store will hold what this
  // copy says, or the write fails and marks the copy unknown.
  if (!shared() || session.pending_writes > 0) return true;
  LINSERVE_ASSIGN_OR_RETURN(int64_t version, store_->VersionOf(session.key()));
  if (version == session.store_version) return true;
  if (version == 0) return false;  // deleted through another server, or expired there
  absl::StatusOr<VersionedStateFile> stored = store_->GetVersioned(session.key());
  if (absl::IsNotFound(stored.status())) return false;
  if (!stored.ok()) return stored.status();
  LINSERVE_RETURN_IF_ERROR(Reload(session, *stored, /*with_state=*/session.state != nullptr));
  return true;
}

absl::Status SessionSharing::Reload(Session& session, const VersionedStateFile& stored,
                                    bool with_state) {
  LINSERVE_ASSIGN_OR_RETURN(SessionRecord record,
                            DecodeStateFileOfModel(stored.file, max_state_bytes_, fingerprint_));
  if (record.tenant != session.tenant || record.session_id != session.id) {
    return absl::DataLossError(absl::StrCat("the stored state of session ", session.id,
                                            " names another session"));
  }
  if (with_state) {
    absl::StatusOr<State> state = RestoreState(record, model_);
    if (!state.ok()) {
      return absl::DataLossError(
          absl::StrCat("stored state of session ", session.id, ": ", state.status().message()));
    }
    session.state = std::make_unique<State>(*std::move(state));
  }
  if (shared()) {
    session.position = record.position;
    session.pending_token = record.pending_token;
    session.rng = {record.rng_seed, record.rng_draws};
    session.last_used_unix_ms = record.last_used_unix_ms;
    session.store_version = stored.version;
  }
  return absl::OkStatus();
}

}  // namespace linserve
