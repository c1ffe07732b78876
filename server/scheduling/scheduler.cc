// The scheduler: its public face, and the engine loop behind it (the queue,
// admission, which turns prefill and decode in each iteration, drain). The
// parts it drives each have a file of their own:
//   server/scheduling/turn_runner.h       running a turn: prefill, decode, sampling
//   server/scheduling/session_commands.h  the session RPCs
//   server/scheduling/session_manager.h   the session pool, the store and checkpoints
//   server/sessions/session_sharing.h   leases and refreshes with a shared store

#include "server/scheduling/scheduler.h"

#include <array>
#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/model/language_model.h"
#include "engine/base/status_macros.h"
#include "server/common/log.h"
#include "server/scheduling/named_states.h"
#include "server/scheduling/pending_import.h"
#include "server/scheduling/prefill_pieces.h"
#include "server/scheduling/prefix_cache.h"
#include "server/scheduling/session_commands.h"
#include "server/scheduling/session_manager.h"
#include "server/scheduling/stream_emitter.h"
#include "server/scheduling/turn.h"
#include "server/scheduling/turn_runner.h"
#include "server/sessions/state_restore.h"

namespace linserve {
namespace {

ModelFacts FactsOf(const LanguageModel& model, const SchedulerOptions& options) {
  ModelFacts facts;
  facts.fingerprint = model.Fingerprint();
  facts.config_json = model.ConfigJson().dump();
  facts.architecture = model.architecture();
  facts.attention_kind = model.attention_kind();
  facts.tokenizer = model.tokenizer().name();
  facts.compute_dtype = ComputeDtypeName(model.compute_dtype());
  facts.weight_format = model.WeightFormatName();
  facts.device = model.device().str();
  facts.state_bytes_per_session = model.StateBytes(0);
  facts.state_bytes_per_token = model.StateBytes(1) - model.StateBytes(0);
  const WeightFootprint weights = model.weight_footprint();
  facts.weight_elements = weights.elements;
  facts.weight_bytes = weights.bytes;
  facts.state_grows = model.StateGrowsWithPosition();
  facts.vocab_size = model.vocab_size();
  facts.adds_bos = model.tokenizer().add_bos();
  facts.prefill_chunk_tokens = model.prefill_chunk_size();
  facts.token_codec = std::make_shared<const Tokenizer>(model.tokenizer());
  facts.special_token_ranges = model.tokenizer().SpecialIdRanges();
  // A growing state's snapshot (Qwen3.5's KV cache beside its recurrent
  // part) is counted at its own length: the cache's bytes stay true.
  facts.prefix_cache_bytes = options.prefix_cache_bytes;
  return facts;
}

}  // namespace

class Scheduler::Impl {
 public:
  Impl(std::unique_ptr<LanguageModel> model, StateStore* store, Metrics* metrics,
       const SchedulerOptions& options);
  // Cancels what still runs, waits for pending checkpoints, stops the thread.
  ~Impl();

  // Before the thread starts.
  absl::Status Prepare();
  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }

  // Thread-safe.
  absl::Status Submit(std::unique_ptr<Turn> turn);
  StreamEmitter& emitter() { return emitter_; }
  // Runs `task` on the engine thread, between iterations.
  void Post(std::function<void()> task);
  void RefuseNewWork();
  void Drain(absl::Time deadline);
  int InFlight() const;

  SessionCommands& commands() { return commands_; }
  NamedStates& named() { return named_; }
  const LanguageModel& model() const { return *model_; }
  int64_t max_context_tokens() const { return options_.max_context_tokens; }

  // Facts fixed at start (Prepare adds the global named states).
  ModelFacts facts_;

 private:
  // The engine loop and its steps.
  void Run();
  bool WaitForWork(bool busy);
  void RunTasks();
  void DropCancelled();
  // Moves queued turns into the running set, up to max_batch.
  void Admit();
  // Prefills the turns still prefilling within the iteration's token budget.
  bool Prefill();
  // One decode step for every turn past its prefill whose reader keeps up.
  bool Decode();
  // Begins an admitted turn that does not continue a session.
  void BeginAdmitted(Turn& turn);
  // Its named state found (or not), an admitted turn begins from it.
  void OriginFound(uint64_t serial, absl::StatusOr<std::shared_ptr<const NamedState>> origin);
  // Its session ready (or not), an admitted session turn begins.
  void SessionPrepared(uint64_t serial, absl::StatusOr<Session*> session, TurnLease lease);
  // Queues the renewal of every lease that is due; the outcome comes back as a task.
  void RenewLeases();
  void LeaseRenewed(uint64_t serial, const absl::Status& renewed);
  Turn* ActiveTurn(uint64_t serial);
  // Places in the batch taken by admitted turns (a leader's waiting
  // followers count).
  int Occupied() const;
  // A follower forked from its leader, from now on a turn of its own.
  void Adopt(std::unique_ptr<Turn> turn);
  void RemoveDone();
  // linserve_step_phase_seconds for an iteration that ran the model: the
  // runner's phases, and `scheduling`, the loop's own share of it.
  void ObservePhases(absl::Duration scheduling);
  // Called by the runner when a turn is done: frees its place.
  void TurnEnded();
  // linserve_active_requests: the turns admitted and not yet done.
  void UpdateActiveGauge();

  const std::unique_ptr<LanguageModel> model_;
  Metrics* const metrics_;
  const SchedulerOptions options_;

  // Shared with the RPC threads.
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Turn>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // queued + admitted turns
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool cut_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Before the engine's parts: it outlives them, so what they finish last
  // still reaches its stream.
  StreamEmitter emitter_;

  // Engine thread only.
  PrefixCache prefix_cache_;
  SessionManager sessions_;
  SessionCommands commands_;
  NamedStates named_;
  TurnRunner runner_;
  std::vector<std::unique_ptr<Turn>> active_;  // admission order
  uint64_t next_serial_ = 1;

  std::thread thread_;
};

Scheduler::Impl::Impl(std::unique_ptr<LanguageModel> model, StateStore* store, Metrics* metrics,
                      const SchedulerOptions& options)
    : facts_(FactsOf(*model, options)),
      model_(std::move(model)),
      metrics_(metrics),
      options_(options),
      prefix_cache_({facts_.prefix_cache_bytes, options.prefix_cache_sightings,
                     facts_.prefill_chunk_tokens},
                    metrics),
      sessions_(*model_, facts_.fingerprint, store, metrics, options,
                [this](std::function<void()> task) { Post(std::move(task)); }),
      commands_(*model_, sessions_),
      named_(*model_, facts_.fingerprint, sessions_, metrics, options),
      runner_(*model_, sessions_, prefix_cache_, metrics, options.max_context_tokens,
              options.conversation_kept_states, options.grammar_masks, [this] { TurnEnded(); },
              [this](std::unique_ptr<Turn> turn) { Adopt(std::move(turn)); }) {
  metrics_->state_bytes_per_session().Set(static_cast<double>(facts_.state_bytes_per_session));
  // A growing state's snapshots also grow: how many fit is then an upper
  // bound (snapshots at position 0).
  LogInfo("prefix_cache", {{"bytes", facts_.prefix_cache_bytes},
                           {"block_tokens", facts_.prefill_chunk_tokens},
                           {"snapshots", facts_.state_bytes_per_session > 0
                                             ? facts_.prefix_cache_bytes /
                                                   facts_.state_bytes_per_session
                                             : 0}});
}

Scheduler::Impl::~Impl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cut_ = true;
  }
  if (thread_.joinable()) thread_.join();
  sessions_.Flush();
  // What the writer answered after the engine thread stopped (no thread
  // but this one is left to touch the pool).
  RunTasks();
  emitter_.Flush();
}

absl::Status Scheduler::Impl::Prepare() {
  LINSERVE_RETURN_IF_ERROR(runner_.WarmUp(options_.warmup_steps));
  LINSERVE_RETURN_IF_ERROR(named_.LoadGlobal(options_.states_dir));
  facts_.global_named_states = named_.GlobalInfos();
  return sessions_.LoadStore();
}

absl::Status Scheduler::Impl::Submit(std::unique_ptr<Turn> turn) {
  absl::MutexLock lock(&mu_);
  if (draining_) {
    metrics_->CountRejection("draining");
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  const int capacity = options_.max_batch + options_.max_queued_requests;
  if (turn->width() > options_.max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("n = ", turn->width(), " is more than max_batch = ", options_.max_batch,
                     ": a request's choices decode together"));
  }
  if (in_flight_ + turn->width() > capacity) {
    metrics_->CountRejection("queue_full");
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server is full: max_batch + max_queued_requests = ", capacity,
        " requests are running or queued; retry later"));
  }
  in_flight_ += turn->width();
  turn->arrived = absl::Now();
  for (auto& follower : turn->followers) follower->arrived = turn->arrived;
  queue_.push_back(std::move(turn));
  metrics_->queue_depth().Set(static_cast<double>(queue_.size()));
  return absl::OkStatus();
}

void Scheduler::Impl::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

int Scheduler::Impl::InFlight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

void Scheduler::Impl::RefuseNewWork() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

void Scheduler::Impl::Drain(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    struct Idle {
      const int* in_flight;
    } state{&in_flight_};
    const absl::Condition drained(+[](Idle* s) { return *s->in_flight == 0; }, &state);
    if (!mu_.AwaitWithDeadline(drained, deadline)) {
      LogWarning("drain_deadline", {{"cut_requests", in_flight_}});
      cut_ = true;
      mu_.Await(drained);
    }
  }
  sessions_.Flush();
  // A durable checkpoint reaches its stream through the engine thread: wait
  // until everything the writer posted has run.
  absl::Notification answered;
  Post([&answered] { answered.Notify(); });
  answered.WaitForNotification();
}

void Scheduler::Impl::Run() {
  bool busy = false;
  while (WaitForWork(busy)) {
    const absl::Time start = absl::Now();
    RunTasks();
    DropCancelled();
    Admit();
    const absl::Time admitted = absl::Now();
    const bool prefilled = Prefill();
    const bool decoded = Decode();
    const absl::Time stepped = absl::Now();
    RenewLeases();
    RemoveDone();
    sessions_.SweepIdle();
    busy = prefilled || decoded;
    if (busy) ObservePhases((admitted - start) + (absl::Now() - stepped));
  }
  // Stopping: whatever still runs is cut; sessions keep their last turn.
  for (auto& turn : active_) {
    if (!turn->done) runner_.FinishTurn(*turn, /*cancelled=*/true);
  }
  RemoveDone();
  std::deque<std::unique_ptr<Turn>> queued;
  std::vector<std::function<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
    tasks.swap(tasks_);
  }
  // Outside the lock: answering may call back into the scheduler.
  for (auto& turn : queued) {
    if (turn->sink) turn->sink->Finish(absl::UnavailableError("the server stopped"));
    for (auto& follower : turn->followers) {
      follower->sink->Finish(absl::UnavailableError("the server stopped"));
    }
    if (turn->on_created) turn->on_created(absl::UnavailableError("the server stopped"));
    if (turn->on_state_made) {
      turn->on_state_made(absl::UnavailableError("the server stopped"), NamedStateInfo{});
    }
  }
  for (auto& task : tasks) task();
}

bool Scheduler::Impl::WaitForWork(bool busy) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  if (busy) return true;
  // Nothing advanced last time: sleep until a request or task arrives. With
  // turns still active (their readers are slow, so they are paused) wake
  // often to see whether the readers caught up; otherwise once a second for
  // the idle-session sweep.
  struct Wake {
    Impl* impl;
    int room;
  } wake{this, options_.max_batch - Occupied()};
  const absl::Condition has_work(
      +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return w->impl->stopping_ || w->impl->cut_ || !w->impl->tasks_.empty() ||
               (!w->impl->queue_.empty() && w->impl->queue_.front()->width() <= w->room);
      },
      &wake);
  mu_.AwaitWithTimeout(has_work, active_.empty() ? absl::Seconds(1) : absl::Milliseconds(2));
  return !stopping_;
}

void Scheduler::Impl::RunTasks() {
  std::vector<std::function<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
}

void Scheduler::Impl::DropCancelled() {
  bool cut;
  std::vector<std::unique_ptr<Turn>> gone;
  {
    absl::MutexLock lock(&mu_);
    cut = cut_;
    // Cancelled while queued: free the place at once, not at admission.
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->cancelled()) {
        in_flight_ -= (*it)->width();
        gone.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    metrics_->queue_depth().Set(static_cast<double>(queue_.size()));
  }
  for (auto& turn : gone) {
    turn->sink->Finish(absl::CancelledError("cancelled while queued"));
    for (auto& follower : turn->followers) {
      follower->sink->Finish(absl::CancelledError("cancelled while queued"));
    }
  }
  for (auto& turn : active_) {
    if (!turn->done && (cut || turn->cancelled())) runner_.FinishTurn(*turn, /*cancelled=*/true);
  }
}

void Scheduler::Impl::Admit() {
  int occupied = Occupied();
  while (occupied < options_.max_batch) {
    std::unique_ptr<Turn> turn;
    {
      absl::MutexLock lock(&mu_);
      // In order: a wide request waits for room rather than be overtaken.
      if (queue_.empty() || occupied + queue_.front()->width() > options_.max_batch) break;
      turn = std::move(queue_.front());
      queue_.pop_front();
      metrics_->queue_depth().Set(static_cast<double>(queue_.size()));
    }
    turn->admitted = absl::Now();
    metrics_->queue_time_seconds(turn->call.protocol)
        .Observe(absl::ToDoubleSeconds(turn->admitted - turn->arrived));
    occupied += turn->width();
    for (auto& follower : turn->followers) follower->admitted = turn->admitted;
    active_.push_back(std::move(turn));
    Turn& admitted = *active_.back();
    admitted.serial = next_serial_++;
    if (admitted.cancelled()) {
      runner_.FinishTurn(admitted, /*cancelled=*/true);
      continue;
    }
    if (!admitted.call.session_id.empty()) {
      // The store may have to answer first (a session this server does not
      // hold, a spilled state, a lease): the engine goes on meanwhile.
      sessions_.Prepare(admitted.tenant, admitted.call.session_id, SessionManager::Use::kTurn,
                        [this, serial = admitted.serial](absl::StatusOr<Session*> session,
                                                         TurnLease lease) {
                          SessionPrepared(serial, std::move(session), std::move(lease));
                        });
      continue;
    }
    if (!admitted.call.initial_state.empty()) {
      // The named state may have to come from the store first.
      named_.Find(admitted.tenant, admitted.call.initial_state, "initial_state",
                  [this, serial = admitted.serial](
                      absl::StatusOr<std::shared_ptr<const NamedState>> origin) {
                    OriginFound(serial, std::move(origin));
                  });
      continue;
    }
    BeginAdmitted(admitted);
  }
  UpdateActiveGauge();
}

bool Scheduler::Impl::Prefill() {
  std::vector<Turn*> pending;
  for (auto& turn : active_) {
    if (!turn->done && turn->prefilling()) pending.push_back(turn.get());
  }
  const int64_t chunk = facts_.prefill_chunk_tokens;
  // Pieces end on chunk boundaries (server/scheduling/prefill_pieces.h).
  auto piece = [chunk](const Turn& turn, int64_t budget, bool first) {
    return NextPieceLength(static_cast<int64_t>(turn.prefilled),
                           static_cast<int64_t>(turn.prefill.size()), turn.next_stop(), budget,
                           chunk, first);
  };
  int64_t budget = options_.prefill_token_budget;
  bool advanced = false;
  for (size_t next = 0; next < pending.size() && budget > 0; ++next) {
    Turn* lead = pending[next];
    if (lead->done || !lead->prefilling()) continue;  // already went with an earlier group
    const int64_t remaining = static_cast<int64_t>(lead->prefill.size() - lead->prefilled);
    const int64_t n = piece(*lead, budget, /*first=*/!advanced);
    if (n == 0) continue;
    // Turns that finish their prefill with exactly as many tokens from the
    // same position go through the model together: one batched call costs
    // about what one session's does.
    std::vector<Turn*> group = {lead};
    for (size_t j = next + 1; n == remaining && j < pending.size(); ++j) {
      Turn* other = pending[j];
      if (static_cast<int64_t>(group.size() + 1) * n > budget) break;
      if (!other->done && other->prefill.size() - other->prefilled == static_cast<size_t>(n) &&
          piece(*other, n, /*first=*/false) == n &&
          other->state.positions[0] == lead->state.positions[0]) {
        group.push_back(other);
      }
    }
    budget -= n * static_cast<int64_t>(group.size());
    advanced = true;
    runner_.PrefillGroup(group, n);
  }
  return advanced;
}

bool Scheduler::Impl::Decode() {
  std::vector<Turn*> members;
  int paused = 0;
  for (auto& turn : active_) {
    if (turn->done || turn->prefilling() || !turn->generation) continue;
    // A slow reader's turn sits out until its stream drains: the others go on.
    if (turn->sink && turn->sink->Buffered() >= options_.stream_buffer_messages) {
      ++paused;
      continue;
    }
    members.push_back(turn.get());
  }
  metrics_->paused_requests().Set(paused);
  if (members.empty()) return false;
  runner_.DecodeStep(members);
  return true;
}

void Scheduler::Impl::BeginAdmitted(Turn& turn) {
  absl::Status began = runner_.Begin(turn);
  if (!began.ok()) {
    runner_.FinishWithError(turn, std::move(began));
  } else if (turn.only_prefills() && !turn.prefilling()) {
    // A one-token prompt (and no BOS): its token is held back for the
    // first turn, so there is nothing to prefill.
    runner_.FinishTurn(turn, /*cancelled=*/false);
  }
}

void Scheduler::Impl::OriginFound(uint64_t serial,
                                  absl::StatusOr<std::shared_ptr<const NamedState>> origin) {
  Turn* turn = ActiveTurn(serial);
  if (turn == nullptr) return;  // cut while the store answered
  if (!origin.ok()) return runner_.FinishWithError(*turn, origin.status());
  turn->origin = *std::move(origin);
  named_.CountUse(*turn->origin);
  BeginAdmitted(*turn);
  if (turn->cancelled() && !turn->done) runner_.FinishTurn(*turn, /*cancelled=*/true);
}

void Scheduler::Impl::SessionPrepared(uint64_t serial, absl::StatusOr<Session*> session,
                                      TurnLease lease) {
  Turn* turn = ActiveTurn(serial);
  if (turn == nullptr) {
    // Cut while the store answered: the session and the lease go back.
    if (session.ok()) (*session)->busy = false;
    sessions_.sharing().ReleaseLease(lease);
    return;
  }
  if (!session.ok()) return runner_.FinishWithError(*turn, session.status());
  absl::Status began = runner_.BeginSessionTurn(*turn, **session, lease);
  if (!began.ok()) return runner_.FinishWithError(*turn, std::move(began));
  if (turn->cancelled()) runner_.FinishTurn(*turn, /*cancelled=*/true);
}

void Scheduler::Impl::RenewLeases() {
  const absl::Time now = absl::Now();
  SessionSharing& sharing = sessions_.sharing();
  for (auto& turn : active_) {
    if (turn->done || !sharing.RenewDue(turn->lease, now)) continue;
    sharing.Renew(turn->lease, [this, serial = turn->serial](absl::Status renewed) {
      Post([this, serial, renewed] { LeaseRenewed(serial, renewed); });
    });
  }
}

void Scheduler::Impl::LeaseRenewed(uint64_t serial, const absl::Status& renewed) {
  Turn* turn = ActiveTurn(serial);
  if (turn == nullptr) return;  // ended meanwhile, its lease given up after this renewal
  absl::Status kept = sessions_.sharing().Renewed(turn->lease, renewed, absl::Now());
  // Lost: another server may be advancing the session now; this turn's
  // checkpoint would be fenced off anyway, so stop spending on it.
  if (!kept.ok()) runner_.FinishWithError(*turn, kept);
}

int Scheduler::Impl::Occupied() const {
  int occupied = 0;
  for (const auto& turn : active_) occupied += turn->width();
  return occupied;
}

void Scheduler::Impl::Adopt(std::unique_ptr<Turn> turn) {
  turn->serial = next_serial_++;
  active_.push_back(std::move(turn));
}

Turn* Scheduler::Impl::ActiveTurn(uint64_t serial) {
  for (auto& turn : active_) {
    if (turn->serial == serial && !turn->done) return turn.get();
  }
  return nullptr;
}

void Scheduler::Impl::RemoveDone() {
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [](const std::unique_ptr<Turn>& t) { return t->done; }),
                active_.end());
  UpdateActiveGauge();
}

void Scheduler::Impl::ObservePhases(absl::Duration scheduling) {
  std::array<absl::Duration, kStepPhases> phases = runner_.TakePhaseTimes();
  phases[static_cast<int>(StepPhase::kScheduling)] += scheduling;
  for (int i = 0; i < kStepPhases; ++i) {
    if (phases[i] <= absl::ZeroDuration()) continue;  // e.g. no restack this iteration
    metrics_->step_phase_seconds(static_cast<StepPhase>(i))
        .Observe(absl::ToDoubleSeconds(phases[i]));
  }
}

void Scheduler::Impl::TurnEnded() {
  // Before the stream hears the end, so that a client that reads the gauge
  // next finds its request gone.
  UpdateActiveGauge();
  absl::MutexLock lock(&mu_);
  --in_flight_;
}

void Scheduler::Impl::UpdateActiveGauge() {
  const auto running = std::count_if(active_.begin(), active_.end(),
                                     [](const std::unique_ptr<Turn>& t) { return !t->done; });
  metrics_->active_requests().Set(static_cast<double>(running));
}

// The public face: post to the engine thread.

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Start(std::unique_ptr<LanguageModel> model,
                                                            StateStore* store, Metrics* metrics,
                                                            const SchedulerOptions& options) {
  auto impl = std::make_unique<Impl>(std::move(model), store, metrics, options);
  LINSERVE_RETURN_IF_ERROR(impl->Prepare());
  impl->StartThread();
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

absl::Status Scheduler::SubmitGenerate(std::string tenant, GenerateCall call,
                                       std::shared_ptr<TurnSink> sink) {
  return SubmitChoices(std::move(tenant), std::move(call), {std::move(sink)}, 0);
}

absl::Status Scheduler::SubmitChoices(std::string tenant, GenerateCall call,
                                      std::vector<std::shared_ptr<TurnSink>> sinks,
                                      int32_t leader) {
  if (sinks.empty() || leader < 0 || leader >= static_cast<int32_t>(sinks.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the choice that continues the session, ", leader, ", is not one of the ", sinks.size()));
  }
  auto turn = std::make_unique<Turn>();
  for (int32_t i = 0; i < static_cast<int32_t>(sinks.size()); ++i) {
    if (i == leader) continue;
    // A follower starts from the leader's state: it continues no session
    // and needs no named state of its own.
    auto follower = std::make_unique<Turn>();
    follower->tenant = tenant;
    follower->call = call;
    follower->call.session_id.clear();
    follower->call.initial_state.clear();
    follower->choice = i;
    follower->sink = impl_->emitter().Wrap(std::move(sinks[i]));
    turn->followers.push_back(std::move(follower));
  }
  turn->tenant = std::move(tenant);
  turn->call = std::move(call);
  turn->choice = leader;
  turn->sink = impl_->emitter().Wrap(std::move(sinks[leader]));
  return impl_->Submit(std::move(turn));
}

void Scheduler::CreateSession(std::string tenant, std::string prompt, std::string cache_salt,
                              std::string initial_state, Done<SessionInfo> done) {
  if (prompt.empty() && initial_state.empty()) {
    impl_->Post([impl = impl_.get(), tenant = std::move(tenant), done = std::move(done)] {
      impl->commands().CreateEmpty(tenant, done);
    });
    return;
  }
  if (prompt.empty()) {
    impl_->Post([impl = impl_.get(), tenant = std::move(tenant),
                 initial_state = std::move(initial_state), done = std::move(done)] {
      impl->named().Find(
          tenant, initial_state, "initial_state",
          [impl, tenant, done](absl::StatusOr<std::shared_ptr<const NamedState>> origin) {
            if (!origin.ok()) return done(origin.status());
            impl->named().CountUse(**origin);
            impl->commands().CreateFrom(tenant, CloneState((*origin)->state),
                                        (*origin)->pending_token, (*origin)->info.digest, done);
          });
    });
    return;
  }
  auto turn = std::make_unique<Turn>();
  turn->tenant = std::move(tenant);
  turn->call.prompt = std::move(prompt);
  turn->call.cache_salt = std::move(cache_salt);
  turn->call.initial_state = std::move(initial_state);
  turn->on_created = done;
  absl::Status queued = impl_->Submit(std::move(turn));
  if (!queued.ok()) done(queued);
}

void Scheduler::CreateNamedState(std::string tenant, std::string name, std::string prompt,
                                 std::string cache_salt, Done<NamedStateInfo> done) {
  if (absl::Status valid = ValidateStateName("name", name); !valid.ok()) return done(valid);
  if (prompt.empty()) {
    return done(absl::InvalidArgumentError(
        "prompt is empty; a named state is made from at least 1 byte (or upload one)"));
  }
  auto turn = std::make_shared<std::unique_ptr<Turn>>(std::make_unique<Turn>());
  (*turn)->tenant = tenant;
  (*turn)->call.prompt = std::move(prompt);
  (*turn)->call.cache_salt = std::move(cache_salt);
  Impl* impl = impl_.get();
  (*turn)->on_state_made = [impl, tenant, name, done](absl::StatusOr<State> state,
                                                      NamedStateInfo cost) {
    if (!state.ok()) return done(state.status());
    impl->named().Add(tenant, name, *std::move(state), /*pending_token=*/-1, std::move(cost),
                      std::nullopt, done);
  };
  // The name and the tenant's room are checked before the prefill, so that
  // no prompt is prefilled for nothing (and again when it is stored).
  impl_->Post([impl, tenant, name, turn, done] {
    impl->named().CheckNew(tenant, name, [impl, turn, done](absl::Status free) {
      if (!free.ok()) return done(free);
      absl::Status queued = impl->Submit(std::move(*turn));
      if (!queued.ok()) done(queued);
    });
  });
}

void Scheduler::UploadNamedState(std::string tenant, std::string name, std::string bytes,
                                 Done<NamedStateInfo> done) {
  if (absl::Status valid = ValidateStateName("name", name); !valid.ok()) return done(valid);
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), name = std::move(name),
               bytes = std::move(bytes), done = std::move(done)] {
    impl->named().Upload(tenant, name, bytes, done);
  });
}

void Scheduler::GetNamedState(std::string tenant, std::string name, Done<NamedStateInfo> done) {
  if (absl::Status valid = ValidateStateName("name", name); !valid.ok()) return done(valid);
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), name = std::move(name),
               done = std::move(done)] { impl->named().Get(tenant, name, done); });
}

void Scheduler::ListNamedStates(std::string tenant, Done<std::vector<NamedStateInfo>> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), done = std::move(done)] {
    impl->named().List(tenant, done);
  });
}

void Scheduler::DeleteNamedState(std::string tenant, std::string name, Done<bool> done) {
  if (absl::Status valid = ValidateStateName("name", name); !valid.ok()) return done(valid);
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), name = std::move(name),
               done = std::move(done)] { impl->named().Delete(tenant, name, done); });
}

void Scheduler::GetSession(std::string tenant, std::string id, Done<SessionInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->commands().Get(tenant, id, done); });
}

void Scheduler::GetSessionChat(std::string tenant, std::string id, Done<SessionChatInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->commands().GetChat(tenant, id, done); });
}

void Scheduler::ListSessions(std::string tenant, int32_t page_size, std::string page_token,
                             Done<SessionPage> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), page_size,
               page_token = std::move(page_token), done = std::move(done)] {
    impl->commands().List(tenant, page_size, page_token, done);
  });
}

void Scheduler::DeleteSession(std::string tenant, std::string id, Done<bool> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->commands().Delete(tenant, id, done); });
}

void Scheduler::ForkSession(std::string tenant, std::string id, Done<SessionInfo> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->commands().Fork(tenant, id, done); });
}

void Scheduler::ExportSession(std::string tenant, std::string id, Done<std::string> done) {
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), id = std::move(id),
               done = std::move(done)] { impl->commands().Export(tenant, id, done); });
}

void Scheduler::ImportSession(std::string tenant, SessionRecord record, Done<SessionInfo> done) {
  // Every check first, on the caller's thread, reading the payload where it
  // lies: only a file that restores is ever written. Then the file's durable
  // write (the engine thread hands it to the checkpoint writer) and the
  // build of its state (here) run at once; the answer waits for both.
  if (absl::Status sound = CheckRestorable(record, impl_->model()); !sound.ok()) {
    return done(
        absl::DataLossError(absl::StrCat("the imported state file: ", sound.message())));
  }
  // A KV cache past this server's context could never take another token.
  const int64_t max_context = impl_->max_context_tokens();
  if (impl_->facts_.state_grows && max_context > 0 && record.position > max_context) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("the imported state file stands at position ", record.position,
                     ", past this server's max_context_tokens = ", max_context)));
  }
  auto import = std::make_shared<PendingImport>(std::move(record));
  impl_->Post([impl = impl_.get(), tenant = std::move(tenant), import, done = std::move(done)] {
    impl->commands().Import(tenant, import, done);
  });
  import->SetState(RestoreState(import->record(), impl_->model()));
}

void Scheduler::RefuseNewWork() { impl_->RefuseNewWork(); }
void Scheduler::Drain(absl::Time deadline) { impl_->Drain(deadline); }
int Scheduler::InFlight() const { return impl_->InFlight(); }
const ModelFacts& Scheduler::model_facts() const { return impl_->facts_; }

}  // namespace linserve
