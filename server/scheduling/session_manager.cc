#include "server/scheduling/session_manager.h"

#include <algorithm>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/model/language_model.h"
#include "engine/base/status_macros.h"
#include "server/common/log.h"
#include "server/scheduling/pending_import.h"

namespace linserve {
namespace {

// A session known from its state file; the state itself stays in the store
// until a turn needs it.
std::unique_ptr<Session> SessionFromRecord(const SessionRecord& record) {
  auto session = std::make_unique<Session>();
  session->tenant = record.tenant;
  session->id = record.session_id;
  session->position = record.position;
  session->pending_token = record.pending_token;
  session->origin = record.origin;
  session->rng = {record.rng_seed, record.rng_draws};
  session->created_unix_ms = record.created_unix_ms;
  session->last_used_unix_ms = record.last_used_unix_ms;
  session->tokens_known = false;  // read with the state, when a turn needs it
  session->chat = record.chat;
  return session;
}

}  // namespace

SessionManager::SessionManager(const LanguageModel& model, std::string fingerprint,
                               StateStore* store, Metrics* metrics,
                               const SchedulerOptions& options, Post post)
    : model_(model),
      fingerprint_(std::move(fingerprint)),
      store_(store),
      metrics_(metrics),
      options_(options),
      post_(std::move(post)),
      sharing_(store, &store_worker_, model, fingerprint_, metrics, options.session_lease,
               options.max_state_bytes),
      pool_(options.max_sessions, options.max_sessions_in_memory, options.max_sessions_per_tenant,
            SessionMemoryBounds{options.max_session_memory_bytes,
                                options.max_session_memory_bytes_per_tenant,
                                [model = &model](int64_t position) { return model->StateBytes(position); },
                                [](const std::vector<const State*>& states) {
                                  return MeasureResidentStates(states).bytes;
                                }}),
      writer_(store, metrics) {}

int64_t SessionManager::NowUnixMs() const { return absl::ToUnixMillis(absl::Now()); }

absl::Status SessionManager::LoadStore() {
  LINSERVE_ASSIGN_OR_RETURN(std::vector<std::string> files, store_->LoadAll());
  int loaded = 0;
  for (const std::string& file : files) {
    absl::StatusOr<SessionRecord> record =
        DecodeStateFileOfModel(file, options_.max_state_bytes, fingerprint_);
    if (!record.ok()) {
      LogWarning("stored_session_skipped", {{"error", record.status().ToString()}});
      continue;
    }
    std::unique_ptr<Session> session = SessionFromRecord(*record);
    // Read without its version: checked against the store before first use.
    if (sharing_.shared()) session->store_version = -1;
    absl::Status added = pool_.AddStored(std::move(session));
    if (!added.ok()) {
      LogWarning("stored_session_skipped", {{"error", added.ToString()}});
      continue;
    }
    ++loaded;
  }
  LogInfo("store_loaded", {{"sessions", loaded}, {"files", files.size()}});
  UpdateGauges();
  return absl::OkStatus();
}

void SessionManager::Prepare(const std::string& tenant, const std::string& id, Use use,
                             Prepared then) {
  Prepare(tenant, id, use, /*fresh=*/false, std::move(then));
}

void SessionManager::Prepare(const std::string& tenant, const std::string& id, Use use,
                             bool fresh, Prepared then) {
  absl::StatusOr<Session*> found = pool_.Find(tenant, id);
  if (!found.ok()) {
    if (!absl::IsNotFound(found.status()) || deleting_.contains(id)) {
      return then(found.status(), {});
    }
    // Another replica sharing the store may have made it, or this server may
    // have restarted since: adopt it from the store, then prepare it.
    store_worker_.Run([this, key = StoredSessionKey{tenant, id}, use, then = std::move(then)] {
      absl::StatusOr<VersionedStateFile> stored = store_->GetVersioned(key);
      post_([this, key, use, then, stored = std::move(stored)] {
        if (absl::Status adopted = Adopt(key, stored); !adopted.ok()) return then(adopted, {});
        Prepare(key.tenant, key.session_id, use, /*fresh=*/true, then);
      });
    });
    return;
  }
  Session& session = **found;
  const bool claims = use == Use::kTurn || use == Use::kDelete;
  if (claims && session.busy) {
    if (use == Use::kTurn) {
      metrics_->CountRejection("session_busy");
      return then(absl::FailedPreconditionError(absl::StrCat(
                      "session_id ", id,
                      " is busy with another turn; a session runs one Generate at a time")),
                  {});
    }
    return then(absl::FailedPreconditionError(absl::StrCat(
                    "session_id ", id, " is busy with a turn; delete it once the turn ends")),
                {});
  }
  StoreQuestion question;
  question.key = session.key();
  question.lease = claims && sharing_.shared();
  // Checkpoints of this server still queued: the store will hold what this
  // copy says, or the write fails and marks the copy unknown. A busy
  // session's copy is ahead of the store until its turn is durable.
  question.version = sharing_.shared() && !fresh && !session.busy && session.pending_writes == 0;
  question.known_version = session.store_version;
  question.file = (use == Use::kResident || use == Use::kTurn) && !session.state;
  // Busy from now on, so that no turn, fork or delete reaches it while the
  // store answers; TakeAnswer clears it again on failure.
  if (use == Use::kTurn) session.busy = true;
  if (!question.lease && !question.version && !question.file) {
    if (use == Use::kTurn) pool_.Touch(&session);
    return then(&session, {});
  }
  if (use == Use::kDelete) session.busy = true;
  store_worker_.Run([this, question, id, use, then = std::move(then)] {
    StoreAnswer answer = sharing_.Ask(question);
    post_([this, id, use, then, answer = std::move(answer)]() mutable {
      TakeAnswer(id, use, std::move(answer), then);
    });
  });
}

void SessionManager::TakeAnswer(const std::string& id, Use use, StoreAnswer answer,
                                const Prepared& then) {
  Session* session = pool_.FindById(id);
  const bool claimed = use == Use::kTurn || use == Use::kDelete;
  auto fail = [&](absl::Status error) {
    if (session != nullptr && claimed) session->busy = false;
    sharing_.ReleaseLease(answer.lease);
    then(std::move(error), {});
  };
  // Claimed sessions stay in the pool meanwhile (busy: nothing removes them).
  if (session == nullptr) {
    return fail(absl::NotFoundError(absl::StrCat("session_id ", id, " is not a session")));
  }
  if (!answer.status.ok()) return fail(answer.status);
  if (answer.gone) {
    sharing_.ReleaseLease(answer.lease);
    return then(Gone(id), {});
  }
  const bool wants_state = use == Use::kTurn || use == Use::kResident;
  if (wants_state && !session->state && !answer.stored) {
    // Spilled while the store answered (only an unclaimed session can be):
    // ask again, for its state this time.
    return Prepare(session->tenant, id, use, /*fresh=*/false, then);
  }
  if (answer.stored) {
    // A copy that moved on while the store answered (a turn of this server
    // finished) is newer than what was read: only the state it lacks is taken.
    const bool newer = answer.stored->version > session->store_version ||
                       session->store_version < 0;
    const bool lacks_state = wants_state && !session->state;
    if (lacks_state || (newer && session->pending_writes == 0 && (claimed || !session->busy))) {
      const absl::Time start = absl::Now();
      if (lacks_state) {
        if (absl::Status room = pool_.MakeRoom(session); !room.ok()) {
          metrics_->CountRejection("sessions_in_memory");
          return fail(room);
        }
      }
      absl::Status reloaded = sharing_.Reload(*session, *answer.stored,
                                              /*with_state=*/lacks_state || session->state);
      if (!reloaded.ok()) return fail(reloaded);
      if (lacks_state) {
        metrics_->session_restore_seconds().Observe(
            absl::ToDoubleSeconds(answer.read_time + (absl::Now() - start)));
      }
    }
  }
  if (wants_state) pool_.Touch(session);
  UpdateGauges();
  then(session, answer.lease);
}

absl::Status SessionManager::Adopt(const StoredSessionKey& key,
                                   const absl::StatusOr<VersionedStateFile>& stored) {
  const std::string not_found = absl::StrCat("session_id ", key.session_id, " is not a session");
  // Adopted meanwhile (two requests for the same unknown session).
  if (pool_.Find(key.tenant, key.session_id).ok()) return absl::OkStatus();
  if (deleting_.contains(key.session_id)) return absl::NotFoundError(not_found);
  if (absl::IsNotFound(stored.status())) return absl::NotFoundError(not_found);
  if (!stored.ok()) return stored.status();  // e.g. Redis down: UNAVAILABLE, not a lie
  absl::StatusOr<SessionRecord> record =
      DecodeStateFileOfModel(stored->file, options_.max_state_bytes, fingerprint_);
  if (!record.ok()) return record.status();
  if (record->tenant != key.tenant || record->session_id != key.session_id) {
    return absl::NotFoundError(not_found);
  }
  std::unique_ptr<Session> adopted = SessionFromRecord(*record);
  adopted->store_version = stored->version;
  LINSERVE_RETURN_IF_ERROR(pool_.AddStored(std::move(adopted)));
  UpdateGauges();
  return absl::OkStatus();
}

absl::Status SessionManager::Gone(const std::string& id) {
  pool_.Remove(id);
  UpdateGauges();
  return absl::NotFoundError(absl::StrCat("session_id ", id, " not found"));
}

void SessionManager::Discard(const std::string& id) {
  pool_.Remove(id);
  UpdateGauges();
}

void SessionManager::Forget(const std::string& id, std::function<void(absl::Status)> done) {
  Session* session = pool_.FindById(id);
  const StoredSessionKey key = session->key();
  pool_.Remove(id);
  deleting_.insert(id);
  UpdateGauges();
  writer_.Delete(key, [this, id, done = std::move(done)](absl::Status deleted) {
    post_([this, id] { deleting_.erase(id); });
    if (done) done(std::move(deleted));
  });
}

absl::StatusOr<Session*> SessionManager::AddSession(const std::string& tenant,
                                                    int64_t position) {
  // A new session's state file needs at least its state's bytes: refuse
  // before any work rather than after the turn, when the save would fail.
  if (absl::Status room = store_->CheckRoom(model_.StateBytes(position)); !room.ok()) {
    metrics_->CountRejection("store_full");
    return room;
  }
  absl::StatusOr<Session*> session = pool_.Add(tenant, NowUnixMs());
  if (!session.ok()) {
    metrics_->CountRejection(pool_.size() >= pool_.max_sessions() ? "session_limit"
                                                                  : "tenant_quota");
  }
  return session;
}

absl::StatusOr<Session*> SessionManager::AddResident(const std::string& tenant, State state) {
  absl::StatusOr<Session*> session = AddSession(tenant, state.positions[0]);
  if (!session.ok()) return session;
  if (absl::Status room = pool_.MakeRoom(*session); !room.ok()) {
    pool_.Remove((*session)->id);
    metrics_->CountRejection("sessions_in_memory");
    return room;
  }
  (*session)->state = std::make_unique<State>(std::move(state));
  UpdateGauges();
  return session;
}

std::function<void(absl::Status)> SessionManager::AfterWrite(
    const std::string& id, std::function<void(absl::Status)> durable) {
  return [this, id, durable = std::move(durable)](absl::Status written) {
    if (!written.ok()) {
      LogError("checkpoint_failed", {{"error", written.ToString()}});
    }
    // Decrement first: a reply may lead at once to a request
    // that wants to spill this session.
    post_([this, id, failed = !written.ok()] {
      Session* s = pool_.FindById(id);
      if (s == nullptr) return;
      --s->pending_writes;
      // The store does not hold what this copy says: read it
      // again before the next use.
      if (failed && sharing_.shared()) s->store_version = -1;
    });
    durable(std::move(written));
  };
}

void SessionManager::Checkpoint(Session& session, SessionRecord record, bool leased,
                                std::function<void(absl::Status)> durable,
                                std::shared_ptr<const std::string> payload) {
  ++session.pending_writes;
  writer_.Put(session.key(), std::move(record), std::move(payload),
              sharing_.NextFence(session, leased), AfterWrite(session.id, std::move(durable)));
}

std::function<void(absl::Status)> SessionManager::AnswerOnceSaved(
    Session& session, const Scheduler::Done<SessionInfo>& done, const char* what) {
  // A new session exists only once it is durable: busy until then, so that
  // no turn, fork or delete reaches it, and removed when the save fails.
  session.busy = true;
  return [this, id = session.id, done, what](absl::Status written) {
    post_([this, id, done, what, written] {
      if (!written.ok()) {
        Discard(id);
        return done(SaveError(absl::StrCat("saving ", what, " (so it was not created)"), written));
      }
      Session* saved = pool_.FindById(id);  // busy until now: nothing removed it
      saved->busy = false;
      done(InfoOf(*saved));
    });
  };
}

void SessionManager::CheckpointThenAnswer(Session& session,
                                          const Scheduler::Done<SessionInfo>& done,
                                          const char* what) {
  std::function<void(absl::Status)> answer = AnswerOnceSaved(session, done, what);
  Checkpoint(session, RecordOf(session), /*leased=*/false, std::move(answer));
}

void SessionManager::CheckpointForkThenAnswer(Session& fork, const Session& source,
                                              const Scheduler::Done<SessionInfo>& done) {
  // The source's stored file is its state when no write of it is queued: a
  // turn's result replaces the state in memory only once its write landed,
  // and a failed write leaves the old file (docs/DESIGN.md, section 5).
  // Several servers on one store: another may have moved the source on.
  if (!store_->StoresForksByReference() || sharing_.shared() || source.pending_writes > 0) {
    return CheckpointThenAnswer(fork, done, "the fork");
  }
  std::function<void(absl::Status)> answer = AnswerOnceSaved(fork, done, "the fork");
  ++fork.pending_writes;
  writer_.PutFork(fork.key(), source.key(), RecordOf(fork, std::string()),
                  AfterWrite(fork.id, std::move(answer)));
}

absl::StatusOr<Session*> SessionManager::AddPending(const std::string& tenant, int64_t position) {
  absl::StatusOr<Session*> session = AddSession(tenant, position);
  if (!session.ok()) return session;
  // Until CheckpointImported answers, no turn, fork or delete reaches it.
  (*session)->busy = true;
  UpdateGauges();
  return session;
}

void SessionManager::CheckpointImported(Session& session, std::shared_ptr<PendingImport> import,
                                        const Scheduler::Done<SessionInfo>& done) {
  import->WhenBoth([this, id = session.id, done](absl::StatusOr<State> state,
                                                 absl::Status written) {
    post_([this, id, done, state = std::move(state), written = std::move(written)]() mutable {
      Session* imported = pool_.FindById(id);  // busy until now: nothing removed it
      if (!written.ok()) {
        Discard(id);
        return done(SaveError("saving the imported session (so it was not created)", written));
      }
      if (!state.ok()) {
        // Checked before the write, so only memory fails here; the file
        // that landed goes with the session.
        Forget(id, nullptr);
        return done(absl::Status(state.status().code(),
                                 absl::StrCat("the imported state: ", state.status().message())));
      }
      imported->busy = false;
      // Durable already: without room in memory it stays in the store, as an
      // idle session would.
      if (pool_.MakeRoom(imported).ok()) {
        imported->state = std::make_unique<State>(*std::move(state));
      } else {
        imported->tokens.clear();  // they go with the state (Session::tokens)
        imported->tokens_known = false;
      }
      UpdateGauges();
      done(InfoOf(*imported));
    });
  });
  // The file is the import's own payload under this session's header: the
  // state is not serialized again.
  Checkpoint(session, RecordOf(session, std::string()), /*leased=*/false,
             [import](absl::Status written) { import->SetWritten(std::move(written)); },
             PendingImport::Payload(import));
}

absl::Status SessionManager::SaveError(absl::string_view what, const absl::Status& written) {
  const std::string message = absl::StrCat(what, " failed: ", written.message());
  if (absl::IsResourceExhausted(written)) {
    metrics_->CountRejection("store_full");
    return absl::ResourceExhaustedError(message);
  }
  if (absl::IsAborted(written)) return absl::AbortedError(message);
  return absl::UnavailableError(message);
}

int64_t SessionManager::MaxStateBytesFor(const std::string& tenant) const {
  const SessionMemoryBounds& bounds = pool_.memory_bounds();
  int64_t limit = bounds.max_bytes;
  if (!tenant.empty() && bounds.max_bytes_per_tenant > 0) {
    limit = limit > 0 ? std::min(limit, bounds.max_bytes_per_tenant) : bounds.max_bytes_per_tenant;
  }
  return limit;
}

SessionInfo SessionManager::InfoOf(const Session& session) const {
  SessionInfo info;
  info.id = session.id;
  info.position = session.position;
  info.state_bytes = model_.StateBytes(session.position);
  info.recurrent_state_bytes = model_.StateBytes(0);
  info.kv_state_bytes = info.state_bytes - info.recurrent_state_bytes;
  info.created_unix_ms = session.created_unix_ms;
  info.last_used_unix_ms = session.last_used_unix_ms;
  info.busy = session.busy;
  return info;
}

SessionRecord SessionManager::RecordOf(const Session& session) const {
  return RecordOf(session, model_.SerializeState(*session.state));
}

SessionRecord SessionManager::RecordOf(const Session& session, std::string payload) const {
  SessionRecord record;
  record.model_fingerprint = fingerprint_;
  record.tenant = session.tenant;
  record.session_id = session.id;
  record.position = session.position;
  record.pending_token = session.pending_token;
  record.origin = session.origin;
  record.rng_seed = session.rng.seed;
  record.rng_draws = session.rng.draws;
  record.created_unix_ms = session.created_unix_ms;
  record.last_used_unix_ms = session.last_used_unix_ms;
  record.payload = std::move(payload);
  if (session.tokens_known) record.tokens = session.tokens;
  record.chat = session.chat;
  return record;
}

void SessionManager::SweepIdle() {
  const absl::Time now = absl::Now();
  if (options_.session_ttl <= absl::ZeroDuration() || now - last_sweep_ < absl::Seconds(1)) return;
  last_sweep_ = now;
  const int64_t cutoff = NowUnixMs() - absl::ToInt64Milliseconds(options_.session_ttl);
  const std::vector<std::string> expired = pool_.IdleSince(cutoff);
  if (expired.empty()) return;
  for (const std::string& id : expired) {
    // A shared store expires entries itself (the same TTL from the last
    // write, by any server); this server's copy may just be the idle one.
    if (sharing_.shared()) {
      pool_.Remove(id);
    } else {
      Forget(id, nullptr);
    }
  }
  if (sharing_.shared()) UpdateGauges();
  LogInfo("sessions_expired", {{"count", expired.size()},
                               {"idle_ttl_s", absl::ToInt64Seconds(options_.session_ttl)}});
}

void SessionManager::UpdateGauges() {
  const std::vector<const State*> states = pool_.ResidentStates();
  const int64_t resident = pool_.in_memory();
  // Real bytes, a tensor or KV block several states share (a fork's, a kept
  // state's) once: a constant-state kind's are the same at every position; a
  // KV cache (Qwen3.5's, the softmax baseline's) grows with each session's.
  const ResidentStates measured = MeasureResidentStates(states);
  metrics_->state_bytes_per_session().Set(
      model_.StateGrowsWithPosition() && resident > 0
          ? static_cast<double>(measured.bytes) / static_cast<double>(resident)
          : static_cast<double>(model_.StateBytes(0)));
  metrics_->resident_state_bytes().Set(static_cast<double>(measured.bytes));
  // Each distinct set of fixed tensors holds the recurrent part whole.
  const int64_t recurrent = measured.fixed_parts * model_.StateBytes(0);
  metrics_->resident_recurrent_bytes().Set(static_cast<double>(recurrent));
  metrics_->resident_kv_bytes().Set(static_cast<double>(measured.bytes - recurrent));
  metrics_->kv_block_references().Set(static_cast<double>(measured.block_references));
  metrics_->kv_blocks_distinct().Set(static_cast<double>(measured.distinct_blocks));
  metrics_->sessions_on_device().Set(static_cast<double>(resident));
  metrics_->sessions_in_host().Set(0);
  metrics_->sessions_in_store().Set(static_cast<double>(pool_.size() - resident));
}

}  // namespace linserve
