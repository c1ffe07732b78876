#include "server/scheduler.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/status_macros.h"
#include "server/log.h"
#include "server/scheduler_impl.h"
#include "server/token_logprobs.h"

namespace linserve {
namespace {

double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Names this server in the session leases it holds: host, process and a
// random part, so a restarted server never mistakes an old lease for its own.
std::string NewLeaseOwner() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  absl::BitGen bits;
  return absl::StrCat(host, "/", ::getpid(), "/", absl::Hex(absl::Uniform<uint64_t>(bits)));
}

}  // namespace

Scheduler::Impl::Impl(std::unique_ptr<LanguageModel> model, StateStore* store, Metrics* metrics,
                      const SchedulerOptions& options)
    : fingerprint_(model->Fingerprint()),
      config_json_(ModelConfigToJson(model->config()).dump()),
      device_(model->device().str()),
      state_bytes_(model->StateBytes(0)),
      attention_kind_(AttentionKindName(model->config().attention.kind)),
      model_(std::move(model)),
      tokenizer_(model_->config()),
      store_(store),
      leases_(store->leases()),
      lease_owner_(NewLeaseOwner()),
      metrics_(metrics),
      options_(options),
      writer_(store, metrics),
      pool_(options.max_sessions, options.max_sessions_in_memory, options.max_sessions_per_tenant) {
  metrics_->state_bytes_per_session().Set(static_cast<double>(state_bytes_));
}

Scheduler::Impl::~Impl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cut_ = true;
  }
  if (thread_.joinable()) thread_.join();
  writer_.Flush();
  // What the writer answered after the engine thread stopped (no thread
  // but this one is left to touch the pool).
  RunTasks();
}

void Scheduler::Impl::StartThread() {
  thread_ = std::thread([this] { Run(); });
}

absl::Status Scheduler::Impl::Submit(std::unique_ptr<Turn> turn) {
  absl::MutexLock lock(&mu_);
  if (draining_) {
    metrics_->CountRejection("draining");
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  const int capacity = options_.max_batch + options_.max_queued_requests;
  if (in_flight_ >= capacity) {
    metrics_->CountRejection("queue_full");
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server is full: max_batch + max_queued_requests = ", capacity,
        " requests are running or queued; retry later"));
  }
  ++in_flight_;
  turn->arrived = absl::Now();
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
  writer_.Flush();
  // A durable checkpoint reaches its stream through the engine thread: wait
  // until everything the writer posted has run.
  absl::Notification answered;
  Post([&answered] { answered.Notify(); });
  answered.WaitForNotification();
}

void Scheduler::Impl::Run() {
  bool busy = false;
  while (WaitForWork(busy)) {
    RunTasks();
    DropCancelled();
    Admit();
    const bool prefilled = Prefill();
    const bool decoded = Decode();
    RenewLeases();
    RemoveDone();
    SweepIdleSessions();
    busy = prefilled || decoded;
  }
  // Stopping: whatever still runs is cut; sessions keep their last turn.
  for (auto& turn : active_) {
    if (!turn->done) FinishTurn(*turn, /*cancelled=*/true);
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
    if (turn->on_created) turn->on_created(absl::UnavailableError("the server stopped"));
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
    bool admit;
  } wake{this, active_.size() < static_cast<size_t>(options_.max_batch)};
  const absl::Condition has_work(
      +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return w->impl->stopping_ || w->impl->cut_ || !w->impl->tasks_.empty() ||
               (w->admit && !w->impl->queue_.empty());
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
        gone.push_back(std::move(*it));
        it = queue_.erase(it);
        --in_flight_;
      } else {
        ++it;
      }
    }
    metrics_->queue_depth().Set(static_cast<double>(queue_.size()));
  }
  for (auto& turn : gone) turn->sink->Finish(absl::CancelledError("cancelled while queued"));
  for (auto& turn : active_) {
    if (!turn->done && (cut || turn->cancelled())) FinishTurn(*turn, /*cancelled=*/true);
  }
}

void Scheduler::Impl::Admit() {
  while (active_.size() < static_cast<size_t>(options_.max_batch)) {
    std::unique_ptr<Turn> turn;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) break;
      turn = std::move(queue_.front());
      queue_.pop_front();
      metrics_->queue_depth().Set(static_cast<double>(queue_.size()));
    }
    turn->admitted = absl::Now();
    metrics_->queue_time_seconds().Observe(Seconds(turn->admitted - turn->arrived));
    active_.push_back(std::move(turn));
    Turn& admitted = *active_.back();
    if (admitted.cancelled()) {
      FinishTurn(admitted, /*cancelled=*/true);
      continue;
    }
    absl::Status began = Begin(admitted);
    if (!began.ok()) FinishWithError(admitted, std::move(began));
  }
  UpdateActiveGauge();
}

void Scheduler::Impl::UpdateActiveGauge() {
  const auto running = std::count_if(active_.begin(), active_.end(),
                                     [](const std::unique_ptr<Turn>& t) { return !t->done; });
  metrics_->active_requests().Set(static_cast<double>(running));
}

absl::Status Scheduler::Impl::Begin(Turn& turn) {
  SamplingParams& params = turn.call.sampling;
  SamplerRngState rng{params.seed, 0};
  if (turn.creates_session()) {
    LINSERVE_ASSIGN_OR_RETURN(Session * session, AddResident(turn.tenant, model_->NewState()));
    session->busy = true;
    turn.session_id = session->id;
    turn.state = CloneState(*session->state);
    turn.prefill = tokenizer_.Encode(turn.call.prompt, /*add_bos=*/true);
    turn.held_back = turn.prefill.back();  // the prompt is not empty here
    turn.prefill.pop_back();
    return absl::OkStatus();
  }
  if (!turn.call.session_id.empty()) {
    LINSERVE_ASSIGN_OR_RETURN(
        Session * session, FindSession(turn.tenant, turn.call.session_id, /*refresh=*/false));
    if (session->busy) {
      metrics_->CountRejection("session_busy");
      return absl::FailedPreconditionError(
          absl::StrCat("session_id ", session->id,
                       " is busy with another turn; a session runs one Generate at a time"));
    }
    LINSERVE_RETURN_IF_ERROR(TakeLease(turn, *session));
    LINSERVE_RETURN_IF_ERROR(MakeResident(*session));
    if (session->pending_token < 0 && session->position > 0 && turn.call.prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt is empty and session_id ", session->id,
          " has no pending token to continue from; send at least 1 byte"));
    }
    session->busy = true;
    turn.session_id = session->id;
    turn.state = CloneState(*session->state);
    if (session->pending_token >= 0) turn.prefill.push_back(session->pending_token);
    const bool fresh = session->position == 0 && session->pending_token < 0;
    const std::vector<int64_t> prompt = tokenizer_.Encode(turn.call.prompt, fresh);
    turn.prefill.insert(turn.prefill.end(), prompt.begin(), prompt.end());
    // Without a seed of its own a turn continues the session's random
    // stream, so a conversation replays identically after a restart.
    if (!turn.call.seed_given && session->rng.seed != 0) rng = session->rng;
  } else {
    turn.state = model_->NewState();
    turn.prefill = tokenizer_.Encode(turn.call.prompt, /*add_bos=*/true);
  }
  if (!turn.call.seed_given && rng.seed == 0) {
    rng.seed = absl::Uniform<uint64_t>(absl::IntervalClosed, bitgen_, 1, UINT64_MAX);
  }
  params.seed = rng.seed;
  turn.seed = rng.seed;
  turn.generation = std::make_unique<Generation>(tokenizer_, params, turn.prefill);
  turn.generation->sampler().set_rng_state(rng);
  return absl::OkStatus();
}

bool Scheduler::Impl::Prefill() {
  std::vector<Turn*> pending;
  for (auto& turn : active_) {
    if (!turn->done && turn->prefilling()) pending.push_back(turn.get());
  }
  int64_t budget = options_.prefill_token_budget;
  bool advanced = false;
  for (size_t next = 0; next < pending.size() && budget > 0; ++next) {
    Turn* lead = pending[next];
    if (lead->done || !lead->prefilling()) continue;  // already went with an earlier group
    const int64_t remaining = static_cast<int64_t>(lead->prefill.size() - lead->prefilled);
    const int64_t n = std::min(remaining, budget);
    // Turns that finish their prefill with exactly as many tokens from the
    // same position go through the model together: one batched call costs
    // about what one session's does.
    std::vector<Turn*> group = {lead};
    for (size_t j = next + 1; n == remaining && j < pending.size(); ++j) {
      Turn* other = pending[j];
      if (static_cast<int64_t>(group.size() + 1) * n > budget) break;
      if (!other->done && other->prefill.size() - other->prefilled == static_cast<size_t>(n) &&
          other->state.positions[0] == lead->state.positions[0]) {
        group.push_back(other);
      }
    }
    budget -= n * static_cast<int64_t>(group.size());
    advanced = true;
    PrefillGroup(group, n);
  }
  return advanced;
}

void Scheduler::Impl::PrefillGroup(const std::vector<Turn*>& group, int64_t n) {
  std::vector<int64_t> tokens;
  std::vector<const State*> states;
  for (Turn* turn : group) {
    const auto first = turn->prefill.begin() + static_cast<std::ptrdiff_t>(turn->prefilled);
    tokens.insert(tokens.end(), first, first + n);
    states.push_back(&turn->state);
  }
  State batch = group.size() == 1 ? group[0]->state : StackStates(states);
  absl::StatusOr<torch::Tensor> logits = model_->PrefillBatch(batch, tokens);
  if (!logits.ok()) {
    for (Turn* turn : group) FinishWithError(*turn, logits.status());
    return;
  }
  if (group.size() == 1) {
    group[0]->state = std::move(batch);
  } else {
    std::vector<State> rows = SplitState(batch);
    for (size_t i = 0; i < group.size(); ++i) group[i]->state = std::move(rows[i]);
  }
  metrics_->prompt_tokens_total().Increment(static_cast<double>(n * group.size()));
  const int64_t vocab = logits->size(1);
  for (size_t i = 0; i < group.size(); ++i) {
    Turn& turn = *group[i];
    turn.prefilled += static_cast<size_t>(n);
    if (turn.prefilling()) continue;
    if (turn.creates_session()) {
      FinishTurn(turn, /*cancelled=*/false);
    } else {
      Emit(turn, logits->data_ptr<float>() + i * vocab);
    }
  }
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
  if (members != batch_members_) {
    DetachBatch();
    std::vector<const State*> states;
    for (Turn* turn : members) states.push_back(&turn->state);
    batch_ = StackStates(states);
    for (Turn* turn : members) turn->in_batch = true;
    batch_members_ = members;
  }
  std::vector<int64_t> tokens;
  for (Turn* turn : members) tokens.push_back(turn->next_token);
  metrics_->batch_size().Observe(static_cast<double>(members.size()));
  absl::StatusOr<torch::Tensor> logits = model_->Step(batch_, tokens);
  if (!logits.ok()) {
    LogError("decode_step_failed", {{"error", logits.status().ToString()}});
    for (Turn* turn : members) FinishWithError(*turn, logits.status());
    return true;
  }
  const int64_t vocab = logits->size(1);
  const float* rows = logits->data_ptr<float>();
  for (size_t i = 0; i < members.size(); ++i) Emit(*members[i], rows + i * vocab);
  return true;
}

void Scheduler::Impl::Emit(Turn& turn, const float* logits) {
  const absl::Span<const float> row(logits, tokenizer_.vocab_size());
  const Generation::Step step = turn.generation->Next(row);
  const absl::Time now = absl::Now();
  if (turn.first_token == absl::InfinitePast()) {
    turn.first_token = now;
    metrics_->time_to_first_token_seconds().Observe(Seconds(now - turn.arrived));
  }
  turn.last_token = now;
  metrics_->generated_tokens_total().Increment();
  TurnPiece piece;
  piece.text = step.text;
  if (turn.call.logprobs) {
    piece.tokens.push_back(DescribeToken(row, step.token, turn.call.top_logprobs, tokenizer_));
  }
  if (!piece.text.empty() || !piece.tokens.empty()) turn.sink->Send(std::move(piece));
  if (step.finish != FinishReason::kNone) {
    FinishTurn(turn, /*cancelled=*/false);
  } else {
    turn.next_token = step.token;
  }
}

void Scheduler::Impl::DetachBatch() {
  if (batch_members_.empty()) return;
  std::vector<State> rows = SplitState(batch_);
  for (size_t i = 0; i < batch_members_.size(); ++i) {
    batch_members_[i]->state = std::move(rows[i]);
    batch_members_[i]->in_batch = false;
  }
  batch_members_.clear();
  batch_ = State{};
}

void Scheduler::Impl::FinishWithError(Turn& turn, absl::Status error) {
  if (turn.in_batch) DetachBatch();
  turn.done = true;
  ReleaseLease(turn);
  // Before the stream hears the end, so that a client that reads the
  // gauge next finds its request gone.
  UpdateActiveGauge();
  if (!turn.session_id.empty()) {
    absl::StatusOr<Session*> session = pool_.Find(turn.tenant, turn.session_id);
    if (session.ok() && (*session)->busy) {
      (*session)->busy = false;
      // A session that a failed CreateSession prefill was making never existed.
      if (turn.creates_session()) pool_.Remove(turn.session_id);
    }
    UpdateSessionGauges();
  }
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  if (turn.sink) turn.sink->Finish(std::move(error));
  if (turn.on_created) turn.on_created(std::move(error));
}

void Scheduler::Impl::FinishTurn(Turn& turn, bool cancelled) {
  if (turn.in_batch) DetachBatch();
  turn.done = true;
  // Before the stream hears the end, so that a client that reads the
  // gauge next finds its request gone.
  UpdateActiveGauge();
  const absl::Time now = absl::Now();
  TurnSummary summary;
  summary.cancelled = cancelled;
  summary.reason = turn.generation ? turn.generation->finish_reason() : FinishReason::kNone;
  summary.prompt_tokens = static_cast<int32_t>(turn.prefilled);
  summary.generated_tokens = turn.generation ? turn.generation->generated_tokens() : 0;
  summary.queue_ms = Millis(turn.admitted - turn.arrived);
  const bool sampled = turn.first_token != absl::InfinitePast();
  summary.prefill_ms = Millis((sampled ? turn.first_token : now) - turn.admitted);
  summary.decode_ms = sampled ? Millis(turn.last_token - turn.first_token) : 0;
  summary.seed = turn.seed;
  metrics_->request_duration_seconds().Observe(Seconds(now - turn.arrived));
  if (summary.generated_tokens > 1) {
    metrics_->time_per_output_token_seconds().Observe(
        Seconds(turn.last_token - turn.first_token) / (summary.generated_tokens - 1));
  }
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }

  Session* session = nullptr;
  if (!turn.session_id.empty()) {
    absl::StatusOr<Session*> found = pool_.Find(turn.tenant, turn.session_id);
    if (found.ok()) session = *found;
  }
  if (session == nullptr) {
    if (turn.sink) turn.sink->Finish(summary);
    return;
  }
  if (cancelled) {
    ReleaseLease(turn);
    session->busy = false;
    // The session keeps its last finished turn; a session whose creating
    // prefill was cut never existed.
    if (turn.creates_session()) pool_.Remove(session->id);
    UpdateSessionGauges();
    if (turn.sink) turn.sink->Finish(summary);
    if (turn.on_created) turn.on_created(absl::CancelledError("CreateSession was cancelled"));
    return;
  }
  // The session takes the turn's state only once that is durable. Until then
  // it stays busy and as it was, so a failed save leaves it exactly at its
  // last finished turn, in memory and in the store, and usable again. The
  // stream hears that the turn finished only once it is durable, after the
  // session moved on (so that its next turn finds it free).
  auto next = std::make_shared<Session>();
  next->tenant = session->tenant;
  next->id = session->id;
  next->created_unix_ms = session->created_unix_ms;
  next->position = turn.state.positions[0];
  next->pending_token = turn.creates_session() ? turn.held_back
                        : summary.generated_tokens > 0 ? turn.generation->history().back()
                                                       : -1;
  next->rng = turn.generation ? turn.generation->sampler().rng_state() : session->rng;
  next->last_used_unix_ms = NowUnixMs();
  next->state = std::make_unique<State>(std::move(turn.state));
  summary.position = next->position;
  // The lease goes before the stream hears anything, so that the session's
  // next turn may go to any server.
  Checkpoint(*session, RecordOf(*next), turn.leased,
             [this, next, sink = turn.sink, on_created = turn.on_created, summary,
              leased = turn.leased, lease_key = turn.lease_key](absl::Status written) {
               if (leased) leases_->ReleaseLease(lease_key, lease_owner_).IgnoreError();
               Post([this, next, sink, on_created, summary, written] {
                 Session* session = pool_.FindById(next->id);  // busy: still there
                 if (session != nullptr) {
                   session->busy = false;
                   if (written.ok()) {
                     session->state = std::move(next->state);
                     session->position = next->position;
                     session->pending_token = next->pending_token;
                     session->rng = next->rng;
                     session->last_used_unix_ms = next->last_used_unix_ms;
                     pool_.Touch(session);
                   } else if (on_created) {
                     pool_.Remove(next->id);  // a session never saved never existed
                   }
                   UpdateSessionGauges();
                 }
                 if (!written.ok()) {
                   const absl::Status error = SaveError(
                       on_created ? "saving the new session (so it was not created)"
                                  : "saving the session after the turn (so the turn was undone: "
                                    "the session stays at its last finished turn)",
                       written);
                   if (sink) sink->Finish(error);
                   if (on_created) on_created(error);
                   return;
                 }
                 if (sink) sink->Finish(summary);
                 if (on_created && session != nullptr) on_created(InfoOf(*session));
               });
             });
}

void Scheduler::Impl::RemoveDone() {
  active_.erase(std::remove_if(active_.begin(), active_.end(),
                               [](const std::unique_ptr<Turn>& t) { return t->done; }),
                active_.end());
  UpdateActiveGauge();
}

void Scheduler::Impl::SweepIdleSessions() {
  const absl::Time now = absl::Now();
  if (options_.session_ttl <= absl::ZeroDuration() || now - last_sweep_ < absl::Seconds(1)) return;
  last_sweep_ = now;
  const int64_t cutoff = NowUnixMs() - absl::ToInt64Milliseconds(options_.session_ttl);
  const std::vector<std::string> expired = pool_.IdleSince(cutoff);
  if (expired.empty()) return;
  for (const std::string& id : expired) {
    // A shared store expires entries itself (the same TTL from the last
    // write, by any server); this server's copy may just be the idle one.
    if (shared_store()) {
      pool_.Remove(id);
    } else {
      Forget(id, nullptr);
    }
  }
  if (shared_store()) UpdateSessionGauges();
  LogInfo("sessions_expired", {{"count", expired.size()},
                               {"idle_ttl_s", absl::ToInt64Seconds(options_.session_ttl)}});
}

}  // namespace linserve
