// Sessions shared with other servers through the store (Redis): the lease a
// turn holds on its session, and keeping this server's copy of a session up
// to date with the store. With a store one server owns every function here
// is a no-op, since nothing else writes that store.

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/status_macros.h"
#include "server/log.h"
#include "server/scheduler_impl.h"
#include "server/state_restore.h"

namespace linserve {

WriteFence Scheduler::Impl::NextFence(Session& session, bool leased) {
  if (!shared_store()) return WriteFence{/*expected_version=*/-1, ""};
  // Writes of one session land in the order they are queued, so each one
  // expects the version the previous one makes.
  WriteFence fence{session.store_version, leased ? lease_owner_ : ""};
  if (session.store_version >= 0) ++session.store_version;
  return fence;
}

absl::Status Scheduler::Impl::TakeLease(Turn& turn, Session& session) {
  if (!shared_store()) return absl::OkStatus();
  const StoredSessionKey key = session.key();
  if (absl::Status taken = leases_->AcquireLease(key, lease_owner_, options_.session_lease);
      !taken.ok()) {
    if (absl::IsAborted(taken)) metrics_->CountRejection("session_leased_elsewhere");
    return taken;
  }
  turn.leased = true;
  turn.lease_key = key;
  turn.renew_lease_at = absl::Now() + options_.session_lease / 3;
  // Another server may have advanced the session since this copy was made;
  // holding the lease, nobody else can from here on.
  return Refresh(session);
}

void Scheduler::Impl::ReleaseLease(Turn& turn) {
  if (!turn.leased) return;
  turn.leased = false;
  absl::Status released = leases_->ReleaseLease(turn.lease_key, lease_owner_);
  // Not fatal: the lease expires by itself.
  if (!released.ok()) LogWarning("lease_release_failed", {{"error", released.ToString()}});
}

void Scheduler::Impl::RenewLeases() {
  if (!shared_store()) return;
  const absl::Time now = absl::Now();
  for (auto& turn : active_) {
    if (turn->done || !turn->leased || now < turn->renew_lease_at) continue;
    absl::Status renewed = leases_->RenewLease(turn->lease_key, lease_owner_, options_.session_lease);
    if (absl::IsAborted(renewed)) {
      // Another server may be advancing the session now; this turn's
      // checkpoint would be fenced off anyway, so stop spending on it.
      turn->leased = false;
      FinishWithError(*turn, renewed);
      continue;
    }
    if (!renewed.ok()) {
      // Redis hiccup: try again soon; the lease still has two thirds left.
      LogWarning("lease_renewal_failed", {{"error", renewed.ToString()}});
      turn->renew_lease_at = now + absl::Seconds(1);
      continue;
    }
    turn->renew_lease_at = now + options_.session_lease / 3;
  }
}

absl::Status Scheduler::Impl::Refresh(Session& session) {
  // Checkpoints of this server still queued: the store will hold what this
  // copy says, or the write fails and marks the copy unknown.
  if (!shared_store() || session.pending_writes > 0) return absl::OkStatus();
  LINSERVE_ASSIGN_OR_RETURN(int64_t version, store_->VersionOf(session.key()));
  if (version == session.store_version) return absl::OkStatus();
  if (version == 0) {
    // Deleted through another server, or expired there.
    const std::string id = session.id;
    pool_.Remove(id);
    UpdateSessionGauges();
    return absl::NotFoundError(absl::StrCat("session_id ", id, " not found"));
  }
  absl::StatusOr<VersionedStateFile> stored = store_->GetVersioned(session.key());
  if (absl::IsNotFound(stored.status())) {
    const std::string id = session.id;
    pool_.Remove(id);
    UpdateSessionGauges();
    return absl::NotFoundError(absl::StrCat("session_id ", id, " not found"));
  }
  if (!stored.ok()) return stored.status();
  return Reload(session, *stored, /*with_state=*/session.state != nullptr);
}

absl::Status Scheduler::Impl::Reload(Session& session, const VersionedStateFile& stored,
                                     bool with_state) {
  LINSERVE_ASSIGN_OR_RETURN(
      SessionRecord record,
      DecodeStateFileOfModel(stored.file, options_.max_state_bytes, fingerprint_));
  if (record.tenant != session.tenant || record.session_id != session.id) {
    return absl::DataLossError(absl::StrCat("the stored state of session ", session.id,
                                            " names another session"));
  }
  if (with_state) {
    absl::StatusOr<State> state = RestoreState(record, *model_);
    if (!state.ok()) {
      return absl::DataLossError(
          absl::StrCat("stored state of session ", session.id, ": ", state.status().message()));
    }
    session.state = std::make_unique<State>(*std::move(state));
  }
  if (shared_store()) {
    session.position = record.position;
    session.pending_token = record.pending_token;
    session.rng = {record.rng_seed, record.rng_draws};
    session.last_used_unix_ms = record.last_used_unix_ms;
    session.store_version = stored.version;
  }
  return absl::OkStatus();
}

}  // namespace linserve
