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

SessionSharing::SessionSharing(StateStore* store, StoreWorker* worker, const LanguageModel& model,
                               std::string fingerprint, Metrics* metrics, absl::Duration lease,
                               int64_t max_state_bytes)
    : store_(store),
      worker_(worker),
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

StoreAnswer SessionSharing::Ask(const StoreQuestion& question) {
  StoreAnswer answer;
  const StoredSessionKey& key = question.key;
  if (question.lease && shared()) {
    answer.status = leases_->AcquireLease(key, owner_, lease_);
    if (!answer.status.ok()) {
      if (absl::IsAborted(answer.status)) metrics_->CountRejection("session_leased_elsewhere");
      return answer;
    }
    answer.lease = {/*held=*/true, /*renewing=*/false, key, absl::Now() + lease_ / 3};
  }
  bool read = question.file;
  if (question.version && shared()) {
    absl::StatusOr<int64_t> version = store_->VersionOf(key);
    if (!version.ok()) {
      answer.status = version.status();
      return answer;
    }
    // 0: deleted through another server, or expired there.
    if (*version == 0) {
      answer.gone = true;
      return answer;
    }
    read = read || *version != question.known_version;
  }
  if (!read) return answer;
  const absl::Time start = absl::Now();
  absl::StatusOr<VersionedStateFile> stored = store_->GetVersioned(key);
  answer.read_time = absl::Now() - start;
  if (absl::IsNotFound(stored.status())) {
    answer.gone = true;
  } else if (!stored.ok()) {
    answer.status = stored.status();  // e.g. Redis down: UNAVAILABLE, not a lie
  } else {
    answer.stored = *std::move(stored);
  }
  return answer;
}

void SessionSharing::Renew(TurnLease& lease, std::function<void(absl::Status)> renewed) {
  lease.renewing = true;
  worker_->Run([this, key = lease.key, renewed = std::move(renewed)] {
    renewed(leases_->RenewLease(key, owner_, lease_));
  });
}

absl::Status SessionSharing::Renewed(TurnLease& lease, const absl::Status& renewed,
                                     absl::Time now) {
  lease.renewing = false;
  if (!lease.held) return absl::OkStatus();  // released meanwhile
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
  worker_->Run([this, key = lease.key] {
    absl::Status released = leases_->ReleaseLease(key, owner_);
    // Not fatal: the lease expires by itself.
    if (!released.ok()) LogWarning("lease_release_failed", {{"error", released.ToString()}});
  });
}

void SessionSharing::ReleaseLeaseOf(const StoredSessionKey& key) {
  if (shared()) leases_->ReleaseLease(key, owner_).IgnoreError();
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
    // The tokens come with the state they made; states kept for another
    // state's conversation go.
    session.tokens = std::move(record.tokens);
    session.tokens_known = static_cast<int64_t>(session.tokens.size()) == record.position;
    session.kept.clear();
  }
  if (shared()) {
    session.position = record.position;
    session.pending_token = record.pending_token;
    session.rng = {record.rng_seed, record.rng_draws};
    session.last_used_unix_ms = record.last_used_unix_ms;
    session.store_version = stored.version;
    session.chat = std::move(record.chat);
  }
  return absl::OkStatus();
}

}  // namespace linserve
