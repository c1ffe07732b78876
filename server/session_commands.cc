// The session RPCs on the engine thread, and the Scheduler's public face.

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/status_macros.h"
#include "server/log.h"
#include "server/scheduler.h"
#include "server/scheduler_impl.h"
#include "server/state_restore.h"

namespace linserve {
namespace {

constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;

// A page token names the last session of the previous page by its place in
// the listing order, (created_unix_ms, id), so deleting it loses nothing.
std::string PageToken(const Session& last) {
  return absl::StrCat(last.created_unix_ms, ".", last.id);
}

absl::StatusOr<std::pair<int64_t, std::string>> ParsePageToken(const std::string& token) {
  std::pair<std::string, std::string> parts = absl::StrSplit(token, absl::MaxSplits('.', 1));
  int64_t created = 0;
  if (!absl::SimpleAtoi(parts.first, &created) || parts.second.empty()) {
    return absl::InvalidArgumentError(
        "page_token is malformed: pass the next_page_token of the previous page");
  }
  return std::make_pair(created, parts.second);
}

// A session known from its state file; the state itself stays in the store
// until a turn needs it.
std::unique_ptr<Session> SessionFromRecord(const SessionRecord& record) {
  auto session = std::make_unique<Session>();
  session->tenant = record.tenant;
  session->id = record.session_id;
  session->position = record.position;
  session->pending_token = record.pending_token;
  session->rng = {record.rng_seed, record.rng_draws};
  session->created_unix_ms = record.created_unix_ms;
  session->last_used_unix_ms = record.last_used_unix_ms;
  return session;
}

}  // namespace

int64_t Scheduler::Impl::NowUnixMs() const { return absl::ToUnixMillis(absl::Now()); }

SessionInfo Scheduler::Impl::InfoOf(const Session& session) const {
  return {session.id,
          session.position,
          model_->StateBytes(session.position),
          session.created_unix_ms,
          session.last_used_unix_ms,
          session.busy};
}

SessionRecord Scheduler::Impl::RecordOf(const Session& session) const {
  SessionRecord record;
  record.model_fingerprint = fingerprint_;
  record.tenant = session.tenant;
  record.session_id = session.id;
  record.position = session.position;
  record.pending_token = session.pending_token;
  record.rng_seed = session.rng.seed;
  record.rng_draws = session.rng.draws;
  record.created_unix_ms = session.created_unix_ms;
  record.last_used_unix_ms = session.last_used_unix_ms;
  record.payload = model_->SerializeState(*session.state);
  return record;
}

void Scheduler::Impl::Checkpoint(Session& session, SessionRecord record, bool leased,
                                 std::function<void(absl::Status)> durable) {
  ++session.pending_writes;
  writer_.Put(session.key(), std::move(record), NextFence(session, leased),
              [this, id = session.id, durable = std::move(durable)](absl::Status written) {
                if (!written.ok()) {
                  LogError("checkpoint_failed", {{"error", written.ToString()}});
                }
                // Decrement first: a reply may lead at once to a request
                // that wants to spill this session.
                Post([this, id, failed = !written.ok()] {
                  Session* s = pool_.FindById(id);
                  if (s == nullptr) return;
                  --s->pending_writes;
                  // The store does not hold what this copy says: read it
                  // again before the next use.
                  if (failed && shared_store()) s->store_version = -1;
                });
                durable(std::move(written));
              });
}

absl::StatusOr<Session*> Scheduler::Impl::FindSession(const std::string& tenant,
                                                      const std::string& id, bool refresh) {
  absl::StatusOr<Session*> found = pool_.Find(tenant, id);
  if (found.ok()) {
    if (refresh && !(*found)->busy) LINSERVE_RETURN_IF_ERROR(Refresh(**found));
    return found;
  }
  if (!absl::IsNotFound(found.status()) || deleting_.contains(id)) return found;
  // Another replica sharing the store may have made it, or this server may
  // have restarted since: adopt it from the store.
  absl::StatusOr<VersionedStateFile> stored = store_->GetVersioned({tenant, id});
  if (absl::IsNotFound(stored.status())) return found.status();
  if (!stored.ok()) return stored.status();  // e.g. Redis down: UNAVAILABLE, not a lie
  absl::StatusOr<SessionRecord> record =
      DecodeStateFileOfModel(stored->file, options_.max_state_bytes, fingerprint_);
  if (!record.ok()) return record.status();
  if (record->tenant != tenant || record->session_id != id) return found.status();
  std::unique_ptr<Session> adopted = SessionFromRecord(*record);
  adopted->store_version = stored->version;
  LINSERVE_RETURN_IF_ERROR(pool_.AddStored(std::move(adopted)));
  UpdateSessionGauges();
  return pool_.FindById(id);
}

void Scheduler::Impl::Forget(const std::string& id, std::function<void(absl::Status)> done) {
  Session* session = pool_.FindById(id);
  const StoredSessionKey key = session->key();
  pool_.Remove(id);
  deleting_.insert(id);
  UpdateSessionGauges();
  writer_.Delete(key, [this, id, done = std::move(done)](absl::Status deleted) {
    Post([this, id] { deleting_.erase(id); });
    if (done) done(std::move(deleted));
  });
}

absl::Status Scheduler::Impl::MakeResident(Session& session) {
  pool_.Touch(&session);
  if (session.state) return absl::OkStatus();
  if (absl::Status room = pool_.MakeRoom(&session); !room.ok()) {
    metrics_->CountRejection("sessions_in_memory");
    return room;
  }
  const absl::Time start = absl::Now();
  LINSERVE_ASSIGN_OR_RETURN(VersionedStateFile stored, store_->GetVersioned(session.key()));
  LINSERVE_RETURN_IF_ERROR(Reload(session, stored, /*with_state=*/true));
  metrics_->session_restore_seconds().Observe(absl::ToDoubleSeconds(absl::Now() - start));
  UpdateSessionGauges();
  return absl::OkStatus();
}

absl::StatusOr<Session*> Scheduler::Impl::AddResident(const std::string& tenant, State state) {
  // A new session's state file needs at least its state's bytes: refuse
  // before any work rather than after the turn, when the save would fail.
  if (absl::Status room = store_->CheckRoom(model_->StateBytes(state.positions[0]));
      !room.ok()) {
    metrics_->CountRejection("store_full");
    return room;
  }
  absl::StatusOr<Session*> session = pool_.Add(tenant, NowUnixMs());
  if (!session.ok()) {
    metrics_->CountRejection(pool_.size() >= pool_.max_sessions() ? "session_limit"
                                                                  : "tenant_quota");
    return session.status();
  }
  if (absl::Status room = pool_.MakeRoom(*session); !room.ok()) {
    pool_.Remove((*session)->id);
    metrics_->CountRejection("sessions_in_memory");
    return room;
  }
  (*session)->state = std::make_unique<State>(std::move(state));
  UpdateSessionGauges();
  return session;
}

void Scheduler::Impl::CheckpointThenAnswer(Session& session, const Done<SessionInfo>& done,
                                           const char* what) {
  // A new session exists only once it is durable: busy until then, so that
  // no turn, fork or delete reaches it, and removed when the save fails.
  session.busy = true;
  auto answer = [this, id = session.id, done, what](absl::Status written) {
    Post([this, id, done, what, written] {
      if (!written.ok()) {
        pool_.Remove(id);
        UpdateSessionGauges();
        return done(SaveError(absl::StrCat("saving ", what, " (so it was not created)"), written));
      }
      Session* saved = pool_.FindById(id);  // busy until now: nothing removed it
      saved->busy = false;
      done(InfoOf(*saved));
    });
  };
  Checkpoint(session, RecordOf(session), /*leased=*/false, std::move(answer));
}

absl::Status Scheduler::Impl::SaveError(absl::string_view what, const absl::Status& written) {
  const std::string message = absl::StrCat(what, " failed: ", written.message());
  if (absl::IsResourceExhausted(written)) {
    metrics_->CountRejection("store_full");
    return absl::ResourceExhaustedError(message);
  }
  if (absl::IsAborted(written)) return absl::AbortedError(message);
  return absl::UnavailableError(message);
}

void Scheduler::Impl::UpdateSessionGauges() {
  const int64_t resident = pool_.in_memory();
  metrics_->sessions_on_device().Set(static_cast<double>(resident));
  metrics_->sessions_in_host().Set(0);
  metrics_->sessions_in_store().Set(static_cast<double>(pool_.size() - resident));
}

absl::Status Scheduler::Impl::LoadStore() {
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
    if (shared_store()) session->store_version = -1;
    absl::Status added = pool_.AddStored(std::move(session));
    if (!added.ok()) {
      LogWarning("stored_session_skipped", {{"error", added.ToString()}});
      continue;
    }
    ++loaded;
  }
  LogInfo("store_loaded", {{"sessions", loaded}, {"files", files.size()}});
  UpdateSessionGauges();
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::WarmUp(int32_t steps) {
  if (steps <= 0) return absl::OkStatus();
  const absl::Time start = absl::Now();
  State one = model_->NewState();
  LINSERVE_RETURN_IF_ERROR(
      model_->Prefill(one, tokenizer_.Encode(std::string(128, 'a'), /*add_bos=*/true)).status());
  std::vector<const State*> copies(8, &one);
  State eight = StackStates(copies);
  for (int32_t i = 0; i < steps; ++i) {
    LINSERVE_RETURN_IF_ERROR(model_->Step(one, {'a'}).status());
    LINSERVE_RETURN_IF_ERROR(model_->Step(eight, std::vector<int64_t>(8, 'a')).status());
  }
  LogInfo("warmed_up", {{"steps", steps},
                        {"ms", absl::ToDoubleMilliseconds(absl::Now() - start)}});
  return absl::OkStatus();
}

void Scheduler::Impl::CreateEmptySession(const std::string& tenant,
                                         const Done<SessionInfo>& done) {
  absl::StatusOr<Session*> session = AddResident(tenant, model_->NewState());
  if (!session.ok()) return done(session.status());
  CheckpointThenAnswer(**session, done, "the new session");
}

void Scheduler::Impl::GetSession(const std::string& tenant, const std::string& id,
                                 const Done<SessionInfo>& done) {
  absl::StatusOr<Session*> session = FindSession(tenant, id);
  if (!session.ok()) return done(session.status());
  done(InfoOf(**session));
}

void Scheduler::Impl::ListSessions(const std::string& tenant, int32_t page_size,
                                   const std::string& page_token, const Done<SessionPage>& done) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "page_size = ", page_size, " is outside [0, ", kMaxPageSize, "] (0 means 100)")));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  std::pair<int64_t, std::string> after{INT64_MIN, ""};
  if (!page_token.empty()) {
    absl::StatusOr<std::pair<int64_t, std::string>> parsed = ParsePageToken(page_token);
    if (!parsed.ok()) return done(parsed.status());
    after = *parsed;
  }
  const std::vector<const Session*> all = pool_.ListOf(tenant);
  auto first = std::upper_bound(all.begin(), all.end(), after,
                                [](const std::pair<int64_t, std::string>& key, const Session* s) {
                                  return std::tie(key.first, key.second) < std::tie(s->created_unix_ms, s->id);
                                });
  SessionPage page;
  for (auto it = first; it != all.end() && page.sessions.size() < static_cast<size_t>(page_size);
       ++it) {
    page.sessions.push_back(InfoOf(**it));
    if (page.sessions.size() == static_cast<size_t>(page_size) && std::next(it) != all.end()) {
      page.next_page_token = PageToken(**it);
    }
  }
  done(std::move(page));
}

void Scheduler::Impl::DeleteSession(const std::string& tenant, const std::string& id,
                                    const Done<bool>& done) {
  absl::StatusOr<Session*> session = FindSession(tenant, id);
  if (!session.ok()) return done(session.status());
  if ((*session)->busy) {
    return done(absl::FailedPreconditionError(
        absl::StrCat("session_id ", id, " is busy with a turn; delete it once the turn ends")));
  }
  if (shared_store()) {
    // Not while another server runs a turn on it; the delete removes the
    // lease with the state.
    absl::Status taken = leases_->AcquireLease((*session)->key(), lease_owner_,
                                               options_.session_lease);
    if (!taken.ok()) return done(taken);
  }
  Forget(id, [done](absl::Status deleted) {
    if (deleted.ok()) return done(true);
    done(absl::UnavailableError(absl::StrCat("deleting the stored state failed: ",
                                             deleted.message())));
  });
}

void Scheduler::Impl::ForkSession(const std::string& tenant, const std::string& id,
                                  const Done<SessionInfo>& done) {
  absl::StatusOr<Session*> source = FindSession(tenant, id);
  if (!source.ok()) return done(source.status());
  absl::Status resident = MakeResident(**source);
  if (!resident.ok()) return done(resident);
  absl::StatusOr<Session*> child = AddResident(tenant, CloneState(*(*source)->state));
  if (!child.ok()) return done(child.status());
  Session& fork = **child;
  fork.position = (*source)->position;
  fork.pending_token = (*source)->pending_token;
  fork.rng = (*source)->rng;
  CheckpointThenAnswer(fork, done, "the fork");
}

void Scheduler::Impl::ExportSession(const std::string& tenant, const std::string& id,
                                    const Done<std::string>& done) {
  absl::StatusOr<Session*> session = FindSession(tenant, id);
  if (!session.ok()) return done(session.status());
  if ((*session)->state) return done(EncodeStateFile(RecordOf(**session)));
  // Spilled: the store holds exactly the last finished turn.
  done(store_->Get((*session)->key()));
}

void Scheduler::Impl::ImportSession(const std::string& tenant, const SessionRecord& record,
                                    const Done<SessionInfo>& done) {
  absl::StatusOr<State> state = RestoreState(record, *model_);
  if (!state.ok()) {
    return done(absl::DataLossError(
        absl::StrCat("the imported state file: ", state.status().message())));
  }
  absl::StatusOr<Session*> session = AddResident(tenant, *std::move(state));
  if (!session.ok()) return done(session.status());
  Session& imported = **session;
  imported.position = record.position;
  imported.pending_token = record.pending_token;
  imported.rng = {record.rng_seed, record.rng_draws};
  CheckpointThenAnswer(imported, done, "the imported session");
}

// The public face: post to the engine thread.

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(std::unique_ptr<LanguageModel> model,
                                                            StateStore* store, Metrics* metrics,
                                                            const SchedulerOptions& options) {
  auto impl = std::make_unique<Impl>(std::move(model), store, metrics, options);
  LINSERVE_RETURN_IF_ERROR(impl->WarmUp(options.warmup_steps));
  LINSERVE_RETURN_IF_ERROR(impl->LoadStore());
  impl->StartThread();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

absl::Status Scheduler::SubmitGenerate(std::string tenant, GenerateCall call,
                                       std::shared_ptr<TurnSink> sink) {
  auto turn = std::make_unique<Turn>();
  turn->tenant = std::move(tenant);
  turn->call = std::move(call);
  turn->sink = std::move(sink);
  return impl_->Submit(std::move(turn));
}

void Scheduler::CreateSession(std::string tenant, std::string prompt, Done<SessionInfo> done) {
  if (prompt.empty()) {
    impl_->Post([impl = impl_.get(), tenant = std::move(tenant), done = std::move(done)] {
      impl->CreateEmptySession(tenant, done);
    });
    return;
  }
  auto turn = std::make_unique<Turn>();
  turn->tenant = std::move(tenant);
  turn->call.prompt = std::move(prompt);
  turn->on_created = done;
  absl::Status queued = impl_->Submit(std::move(turn));
  if (!queued.ok()) done(queued);
}

void Scheduler::GetSession(std::string tenant, std::string id, Done<SessionInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->GetSession(tenant, id, done); });
}

void Scheduler::ListSessions(std::string tenant, int32_t page_size, std::string page_token,
                             Done<SessionPage> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), page_size,
               page_token = std::move(page_token), done = std::move(done)] {
    impl->ListSessions(tenant, page_size, page_token, done);
  });
}

void Scheduler::DeleteSession(std::string tenant, std::string id, Done<bool> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->DeleteSession(tenant, id, done); });
}

void Scheduler::ForkSession(std::string tenant, std::string id, Done<SessionInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->ForkSession(tenant, id, done); });
}

void Scheduler::ExportSession(std::string tenant, std::string id, Done<std::string> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->ExportSession(tenant, id, done); });
}

void Scheduler::ImportSession(std::string tenant, SessionRecord record, Done<SessionInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), record = std::move(record),
               done = std::move(done)] { impl->ImportSession(tenant, record, done); });
}

void Scheduler::RefuseNewWork() { impl_->RefuseNewWork(); }
void Scheduler::Drain(absl::Time deadline) { impl_->Drain(deadline); }
int Scheduler::InFlight() const { return impl_->InFlight(); }
const std::string& Scheduler::fingerprint() const { return impl_->fingerprint_; }
const std::string& Scheduler::config_json() const { return impl_->config_json_; }
const std::string& Scheduler::device() const { return impl_->device_; }
int64_t Scheduler::state_bytes_per_session() const { return impl_->state_bytes_; }
int64_t Scheduler::vocab_size() const { return impl_->model().config().vocab_size; }
const std::string& Scheduler::attention_kind() const { return impl_->attention_kind_; }

}  // namespace linserve
