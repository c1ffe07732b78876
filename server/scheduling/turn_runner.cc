#include "server/scheduling/turn_runner.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>


#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/status_macros.h"
#include "engine/cpu/engine_threads.h"
#include "server/common/log.h"
#include "server/scheduling/token_logprobs.h"

namespace linserve {
namespace {

double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }
double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Why a constrained turn found no token to sample: the matcher's bound on
// parses, or a grammar that needs bytes no token has.
absl::Status ConstraintDeadEnd(const Generation& generation, int max_parses) {
  if (generation.parse_bound_hit()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "constraint: after ", generation.generated_tokens(),
        " tokens the grammar needs more parses at once than grammar_max_parses = ", max_parses));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("constraint: after ", generation.generated_tokens(),
                   " tokens the grammar allows no token of this vocabulary and may not end there"));
}

// Choice i of a request samples with its seed + i, so that each choice is
// the request it would be alone with that seed. Without a seed the server
// picks one (StartGeneration): 0 stays 0.
uint64_t ChoiceSeed(const Turn& turn) {
  if (!turn.call.seed_given) return 0;
  return turn.call.sampling.seed + static_cast<uint64_t>(turn.choice);
}

}  // namespace

TurnRunner::TurnRunner(LanguageModel& model, SessionManager& sessions, PrefixCache& prefix_cache,
                       Metrics* metrics, int64_t max_context_tokens, int32_t max_kept_states,
                       const GrammarMaskOptions& grammar_masks, std::function<void()> turn_ended,
                       std::function<void(std::unique_ptr<Turn>)> forked)
    : model_(model),
      tokenizer_(model.tokenizer()),
      sessions_(sessions),
      prefix_cache_(prefix_cache),
      metrics_(metrics),
      max_context_tokens_(model.StateGrowsWithPosition() ? max_context_tokens : 0),
      max_kept_states_(max_kept_states),
      turn_ended_(std::move(turn_ended)),
      forked_(std::move(forked)),
      pool_(model.state_layout()),
      grammar_options_(grammar_masks),
      mask_cache_(std::make_shared<MaskCache>(grammar_masks.cache_bytes)) {}

absl::Status TurnRunner::FitContext(Turn& turn, int64_t position, int64_t prompt_tokens) {
  const int64_t after_prompt = position + prompt_tokens;
  LINSERVE_RETURN_IF_ERROR(FitMemory(turn, after_prompt));
  if (max_context_tokens_ <= 0) return absl::OkStatus();
  if (after_prompt > max_context_tokens_) {
    metrics_->CountRejection("context_full");
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt takes the state to ", after_prompt, " tokens (", prompt_tokens,
        " new at position ", position, "); this model's KV cache holds at most "
        "max_context_tokens = ", max_context_tokens_, " tokens"));
  }
  // The last sampled token is only fed by the next turn: a turn may sample
  // one more token than the cache has room left for. Reaching the bound
  // ends the turn with FINISH_REASON_LENGTH.
  int32_t& max_new_tokens = turn.call.sampling.max_new_tokens;
  max_new_tokens = static_cast<int32_t>(
      std::min<int64_t>(max_new_tokens, max_context_tokens_ - after_prompt + 1));
  return absl::OkStatus();
}

absl::Status TurnRunner::FitMemory(Turn& turn, int64_t after_prompt) {
  const int64_t limit = sessions_.MaxStateBytesFor(turn.tenant);
  if (limit <= 0) return absl::OkStatus();
  const int64_t bytes = model_.StateBytes(after_prompt);
  if (bytes > limit) {
    metrics_->CountRejection("session_memory");
    return absl::ResourceExhaustedError(absl::StrCat(
        "the prompt takes the state to ", after_prompt, " tokens, ", bytes,
        " bytes; the memory for session states allows one at most ", limit,
        " (max_session_memory_bytes, or max_session_memory_bytes_per_tenant when smaller)"));
  }
  if (!model_.StateGrowsWithPosition()) return absl::OkStatus();
  // As at the context's bound: the turn ends with FINISH_REASON_LENGTH where
  // its state would outgrow the memory (the last sampled token is not fed).
  const int64_t per_token = model_.StateBytes(after_prompt + 1) - bytes;
  if (per_token <= 0) return absl::OkStatus();
  int32_t& max_new_tokens = turn.call.sampling.max_new_tokens;
  max_new_tokens = static_cast<int32_t>(
      std::min<int64_t>(max_new_tokens, (limit - bytes) / per_token + 1));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> TurnRunner::PromptTokens(const GenerateCall& call,
                                                              bool starts_text) const {
  if (!call.prompt_tokens.empty()) return call.prompt_tokens;
  // TryEncode: a Hugging Face tokenizer's regex may hit its limits on a
  // pathological prompt, which the client hears as ResourceExhausted.
  return tokenizer_.TryEncode(call.prompt, starts_text, call.prompt_plain);
}

absl::Status TurnRunner::Begin(Turn& turn) {
  if (turn.makes_named_state()) {
    // Every token of the prompt goes into the state: a turn from it feeds
    // its own text next, as a continued session does.
    turn.state = model_.NewState();
    LINSERVE_ASSIGN_OR_RETURN(turn.prefill,
                              tokenizer_.TryEncode(turn.call.prompt, /*starts_text=*/true));
    LINSERVE_RETURN_IF_ERROR(FitContext(turn, 0, static_cast<int64_t>(turn.prefill.size())));
    UsePrefixCache(turn);
    return absl::OkStatus();
  }
  // From a named state (a copy: it is never advanced) or a fresh one. After
  // a named state the text goes on from where it stood, as a continued
  // session's does: its pending token first, and BOS only at position 0.
  const NamedState* origin = turn.origin.get();
  if (origin != nullptr) turn.origin_digest = origin->info.digest;
  const int64_t position = origin != nullptr ? origin->state.positions[0] : 0;
  const bool starts_text =
      origin == nullptr || (position == 0 && origin->pending_token < 0);
  State start = origin != nullptr ? CloneState(origin->state) : model_.NewState();
  if (origin != nullptr && origin->pending_token >= 0) {
    turn.prefill.push_back(origin->pending_token);
  }
  if (turn.creates_session()) {
    LINSERVE_ASSIGN_OR_RETURN(Session * session,
                              sessions_.AddResident(turn.tenant, std::move(start)));
    session->busy = true;
    session->position = position;
    session->pending_token = origin != nullptr ? origin->pending_token : -1;
    session->origin = turn.origin_digest;
    // A named state's tokens are not known.
    session->tokens_known = origin == nullptr;
    turn.tokens_known = session->tokens_known;
    turn.session_id = session->id;
    turn.state = CloneState(*session->state);
    LINSERVE_ASSIGN_OR_RETURN(const std::vector<int64_t> prompt,
                              tokenizer_.TryEncode(turn.call.prompt, starts_text));
    turn.prefill.insert(turn.prefill.end(), prompt.begin(), prompt.end());
    if (turn.prefill.empty()) {
      return absl::InvalidArgumentError("prompt encodes to no tokens; send at least 1 byte");
    }
    turn.held_back = turn.prefill.back();
    turn.prefill.pop_back();
    UsePrefixCache(turn);
    // The held-back token counts: the first turn feeds it.
    return FitContext(turn, position, static_cast<int64_t>(turn.prefill.size()) + 1);
  }
  if (!turn.call.session_id.empty()) {
    return absl::InternalError("a session's turn begins with BeginSessionTurn");
  }
  turn.state = std::move(start);
  LINSERVE_ASSIGN_OR_RETURN(const std::vector<int64_t> prompt,
                            PromptTokens(turn.call, starts_text));
  turn.prefill.insert(turn.prefill.end(), prompt.begin(), prompt.end());
  LINSERVE_RETURN_IF_ERROR(
      FitContext(turn, position, static_cast<int64_t>(turn.prefill.size())));
  UsePrefixCache(turn);
  StartGeneration(turn, SamplerRngState{ChoiceSeed(turn), 0});
  return absl::OkStatus();
}

absl::Status TurnRunner::BeginSessionTurn(Turn& turn, Session& session, TurnLease lease) {
  // From here on a failure ends the turn through FinishWithError, which
  // frees the session and gives the lease up.
  turn.session_id = session.id;
  turn.lease = lease;
  // A session made from a state-tuned named state stands at position 0
  // too: its origin keeps its prompts apart from fresh states'.
  turn.origin_digest = session.origin;
  if (turn.call.conversation) {
    LINSERVE_RETURN_IF_ERROR(ResumeConversation(turn, session));
  } else {
    if (session.pending_token >= 0) turn.prefill.push_back(session.pending_token);
    const bool fresh = session.position == 0 && session.pending_token < 0;
    LINSERVE_ASSIGN_OR_RETURN(const std::vector<int64_t> prompt, PromptTokens(turn.call, fresh));
    turn.prefill.insert(turn.prefill.end(), prompt.begin(), prompt.end());
    // Nothing to feed: a new session of a model that takes no BOS, or one
    // whose last turn sampled nothing.
    if (turn.prefill.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt is empty and session_id ", session.id,
          " has no pending token to continue from; send at least 1 byte"));
    }
    LINSERVE_RETURN_IF_ERROR(
        FitContext(turn, session.position, static_cast<int64_t>(turn.prefill.size())));
    turn.state = CloneState(*session.state);
    turn.tokens_before = session.tokens;
    turn.tokens_known = session.tokens_known;
    turn.kept = session.kept;
    if (fresh) UsePrefixCache(turn);
  }
  // Without a seed of its own a turn continues the session's random
  // stream, so a conversation replays identically after a restart. A
  // stream has drawn, or has a seed the server picked (never 0); 0 is a
  // seed a client may give.
  SamplerRngState rng{ChoiceSeed(turn), 0};
  if (!turn.call.seed_given && (session.rng.seed != 0 || session.rng.draws != 0)) {
    rng = session.rng;
  }
  StartGeneration(turn, rng);
  return absl::OkStatus();
}

absl::Status TurnRunner::ResumeConversation(Turn& turn, const Session& session) {
  LINSERVE_ASSIGN_OR_RETURN(std::vector<int64_t> conversation,
                            PromptTokens(turn.call, /*starts_text=*/true));
  if (conversation.empty()) {
    return absl::InvalidArgumentError("prompt: the conversation encodes to no tokens");
  }
  LINSERVE_ASSIGN_OR_RETURN(const int64_t keep_at, KeepStateIndex(turn.call, conversation));
  // The logits after its last token are sampled: that token is always fed.
  const auto usable = static_cast<int64_t>(conversation.size()) - 1;
  int64_t common = 0;
  if (session.tokens_known) {
    const int64_t held = std::min(usable, static_cast<int64_t>(session.tokens.size()));
    while (common < held && session.tokens[common] == conversation[common]) ++common;
  }
  // Where it goes on from: the session's own position when the
  // conversation begins with all it consumed (its pending token, never fed,
  // is simply the next token or replaced); else the latest kept state the
  // conversation still begins with; else the start.
  const char* resumed = "start";
  int64_t from = 0;
  turn.tokens_known = true;
  if (session.tokens_known && common == session.position) {
    if (session.position > 0) resumed = "session";
    from = session.position;
    turn.state = CloneState(*session.state);
  } else {
    const KeptState* kept = nullptr;
    for (const KeptState& k : session.kept) {
      if (k.position <= common && (kept == nullptr || k.position > kept->position)) kept = &k;
    }
    if (kept != nullptr) {
      resumed = "kept_state";
      from = kept->position;
      turn.state = ResumeFromKept(*kept->state, *session.state, model_.state_layout());
    } else if (!session.origin.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "conversation: session_id ", session.id, " was made from a named state and its "
          "conversation differs from what it holds; a conversation session starts fresh"));
    } else {
      turn.state = model_.NewState();
    }
  }
  // States kept past `from` hold tokens the conversation replaces.
  for (const KeptState& k : session.kept) {
    if (k.position <= from) turn.kept.push_back(k);
  }
  turn.prefill = std::move(conversation);
  turn.prefilled = static_cast<size_t>(from);
  turn.cached_tokens = from;
  turn.keep_state_at = keep_at > from ? keep_at : 0;
  LINSERVE_RETURN_IF_ERROR(
      FitContext(turn, from, static_cast<int64_t>(turn.prefill.size()) - from));
  if (from == 0) UsePrefixCache(turn);
  metrics_->conversation_turns_total(resumed).Increment();
  metrics_->conversation_prefilled_tokens_total().Increment(
      static_cast<double>(turn.prefill.size() - turn.prefilled));
  if (from < session.position) {
    metrics_->conversation_dropped_tokens_total().Increment(
        static_cast<double>(session.position - from));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TurnRunner::KeepStateIndex(const GenerateCall& call,
                                                   const std::vector<int64_t>& conversation) const {
  if (call.keep_state_at == 0 || !call.prompt_tokens.empty()) return call.keep_state_at;
  // A byte offset: the tokens of the text before it, as far as they are
  // also the conversation's (a token that spans the offset ends the match).
  LINSERVE_ASSIGN_OR_RETURN(
      const std::vector<int64_t> before,
      tokenizer_.TryEncode(std::string_view(call.prompt).substr(0, call.keep_state_at),
                           /*starts_text=*/true));
  size_t index = 0;
  while (index < before.size() && index < conversation.size() &&
         before[index] == conversation[index]) {
    ++index;
  }
  return static_cast<int64_t>(index);
}

void TurnRunner::StartGeneration(Turn& turn, SamplerRngState rng) {
  SamplingParams& params = turn.call.sampling;
  if (!turn.call.seed_given && rng.seed == 0 && rng.draws == 0) {
    rng.seed = absl::Uniform<uint64_t>(absl::IntervalClosed, bitgen_, 1, UINT64_MAX);
  }
  params.seed = rng.seed;
  turn.seed = rng.seed;
  turn.generation = std::make_unique<Generation>(tokenizer_, params, turn.prefill);
  turn.generation->sampler().set_rng_state(rng);
  if (turn.call.grammar) turn.generation->Constrain(GrammarFor(turn.call));
  if (!turn.call.logit_bias.empty()) turn.generation->SetLogitBias(turn.call.logit_bias);
}

std::shared_ptr<GrammarTokenMasks> TurnRunner::GrammarFor(const GenerateCall& call) {
  constexpr size_t kMaxGrammars = 64;
  auto it = grammars_.find(call.grammar_text);
  if (it != grammars_.end()) return it->second;
  if (grammars_.size() >= kMaxGrammars) {
    absl::erase_if(grammars_, [](const auto& entry) { return entry.second.use_count() == 1; });
  }
  if (!token_trie_) token_trie_ = TokenTrieOf(tokenizer_);
  auto grammar = std::make_shared<GrammarTokenMasks>(token_trie_, *call.grammar, grammar_options_,
                                                     mask_cache_);
  grammars_.emplace(call.grammar_text, grammar);
  return grammar;
}

void TurnRunner::UsePrefixCache(Turn& turn) {
  if (!prefix_cache_.enabled()) return;
  const int64_t chunk = prefix_cache_.chunk();
  const auto tokens = static_cast<int64_t>(turn.prefill.size());
  turn.prefix_keys =
      prefix_cache_.Keys(turn.tenant, turn.call.cache_salt, turn.origin_digest, turn.prefill);
  if (turn.prefix_keys.empty()) return;  // shorter than a block: nothing to find or keep
  // A Generate samples its first token from the logits after its prompt's
  // last token, so it prefills at least that one; a CreateSession or
  // CreateNamedState prefill needs no logits and may resume past its whole
  // prompt.
  const int64_t usable = turn.only_prefills() ? tokens / chunk : (tokens - 1) / chunk;
  const PrefixCache::Hit hit = prefix_cache_.Lookup(turn.prefix_keys, usable);
  if (hit.state != nullptr) {
    turn.state = CloneState(*hit.state);
    turn.prefilled = static_cast<size_t>(hit.blocks * chunk);
    turn.cached_tokens = hit.blocks * chunk;
  }
  turn.snapshot_at = prefix_cache_.ChooseSnapshot(turn.prefix_keys, hit.blocks) * chunk;
}

absl::Time TurnRunner::Charge(StepPhase phase, absl::Time since) {
  const absl::Time now = absl::Now();
  phase_times_[static_cast<int>(phase)] += now - since;
  return now;
}

std::array<absl::Duration, kStepPhases> TurnRunner::TakePhaseTimes() {
  std::array<absl::Duration, kStepPhases> taken = phase_times_;
  phase_times_.fill(absl::ZeroDuration());
  return taken;
}

void TurnRunner::PrefillGroup(const std::vector<Turn*>& group, int64_t n) {
  const absl::Time start = absl::Now();
  std::vector<int64_t> tokens;
  std::vector<const State*> states;
  for (Turn* turn : group) {
    const auto first = turn->prefill.begin() + static_cast<std::ptrdiff_t>(turn->prefilled);
    tokens.insert(tokens.end(), first, first + n);
    states.push_back(&turn->state);
  }
  State batch = group.size() == 1 ? group[0]->state : StackStates(states);
  absl::StatusOr<torch::Tensor> logits = model_.PrefillBatch(batch, tokens);
  if (!logits.ok()) {
    for (Turn* turn : group) FinishWithError(*turn, logits.status());
    return;
  }
  if (group.size() == 1) {
    group[0]->state = std::move(batch);
  } else {
    std::vector<State> rows = model_.SplitState(batch);
    for (size_t i = 0; i < group.size(); ++i) group[i]->state = std::move(rows[i]);
  }
  Charge(StepPhase::kPrefill, start);
  metrics_->prompt_tokens_total().Increment(static_cast<double>(n * group.size()));
  std::vector<Turn*> sampling;
  std::vector<int64_t> rows;
  bool shared = false;  // a row that followers sample too
  for (size_t i = 0; i < group.size(); ++i) {
    Turn& turn = *group[i];
    turn.prefilled += static_cast<size_t>(n);
    if (turn.snapshot_at > 0 && static_cast<int64_t>(turn.prefilled) == turn.snapshot_at) {
      // A growing cache is cut to the snapshot's position (SplitState), so
      // the snapshot holds no spare capacity and costs StateBytes of it.
      prefix_cache_.Insert(turn.prefix_keys[turn.snapshot_at / prefix_cache_.chunk() - 1],
                           model_.StateGrowsWithPosition()
                               ? std::move(model_.SplitState(turn.state)[0])
                               : CloneState(turn.state),
                           model_.StateBytes(turn.snapshot_at));
    }
    if (turn.keep_state_at > 0 && static_cast<int64_t>(turn.prefilled) == turn.keep_state_at) {
      KeepState(turn);
    }
    if (turn.prefilling()) continue;
    if (turn.only_prefills()) {
      FinishTurn(turn, /*cancelled=*/false);
      continue;
    }
    sampling.push_back(&turn);
    rows.push_back(static_cast<int64_t>(i));
    // n > 1: the prompt was prefilled once; each other choice samples from
    // the same logits row with its own sampler.
    std::vector<std::unique_ptr<Turn>> followers = std::move(turn.followers);
    turn.followers.clear();
    for (std::unique_ptr<Turn>& follower : followers) {
      if (follower->cancelled()) {
        FinishTurn(*follower, /*cancelled=*/true);
        forked_(std::move(follower));  // done: the scheduler drops it
        continue;
      }
      Fork(turn, *follower);
      shared = true;
      sampling.push_back(follower.get());
      rows.push_back(static_cast<int64_t>(i));
      forked_(std::move(follower));
    }
  }
  if (sampling.empty()) return;
  if (shared) {
    // Rows shared by a leader and its followers: each sampler patches its
    // row in place, so each gets its own copy.
    torch::Tensor copies =
        logits->index_select(0, torch::tensor(rows, torch::kLong)).contiguous();
    std::vector<int64_t> own(rows.size());
    for (size_t k = 0; k < own.size(); ++k) own[k] = static_cast<int64_t>(k);
    return SampleAndEmit(sampling, own, copies);
  }
  SampleAndEmit(sampling, rows, *logits);
}

void TurnRunner::KeepState(Turn& turn) {
  turn.kept.push_back(
      {turn.keep_state_at,
       std::make_shared<const State>(KeepFixedPart(turn.state, model_.state_layout()))});
  // The oldest go first: a later turn most likely differs after the latest.
  const auto excess = static_cast<int64_t>(turn.kept.size()) - max_kept_states_;
  if (excess > 0) turn.kept.erase(turn.kept.begin(), turn.kept.begin() + excess);
}

void TurnRunner::Fork(const Turn& leader, Turn& follower) {
  follower.state = CloneState(leader.state);
  follower.prefill = leader.prefill;
  follower.prefilled = leader.prefilled;
  // Its whole prompt came from the leader's prefill.
  follower.cached_tokens = static_cast<int64_t>(leader.prefilled);
  follower.origin_digest = leader.origin_digest;
  follower.admitted = leader.admitted;
  follower.call.sampling.max_new_tokens = leader.call.sampling.max_new_tokens;  // FitContext's cap
  follower.call.seed_given = true;
  follower.call.sampling.seed =
      leader.seed - static_cast<uint64_t>(leader.choice) + static_cast<uint64_t>(follower.choice);
  StartGeneration(follower, SamplerRngState{follower.call.sampling.seed, 0});
}

void TurnRunner::EndFollowers(Turn& leader, const absl::Status& error) {
  std::vector<std::unique_ptr<Turn>> followers = std::move(leader.followers);
  leader.followers.clear();
  for (std::unique_ptr<Turn>& follower : followers) {
    if (error.ok()) {
      FinishTurn(*follower, /*cancelled=*/true);
    } else {
      FinishWithError(*follower, error);
    }
  }
}

void TurnRunner::DecodeStep(const std::vector<Turn*>& members) {
  absl::Time start = absl::Now();
  bool moved = false;
  for (size_t slot = 0; slot < slots_.size();) {
    if (std::find(members.begin(), members.end(), slots_[slot]) == members.end()) {
      LeaveBatch(*slots_[slot]);  // the last slot's turn moves here
      moved = true;
    } else {
      ++slot;
    }
  }
  for (Turn* turn : members) {
    if (turn->slot >= 0) continue;
    turn->slot = pool_.Join(turn->state);
    turn->state = State{};
    slots_.push_back(turn);
    moved = true;
  }
  if (moved) start = Charge(StepPhase::kRestack, start);
  std::vector<int64_t> tokens;
  for (Turn* turn : slots_) tokens.push_back(turn->next_token);
  metrics_->batch_size().Observe(static_cast<double>(slots_.size()));
  absl::StatusOr<torch::Tensor> logits = model_.Step(pool_.Batch(), tokens);
  if (logits.ok()) pool_.Absorb();
  Charge(StepPhase::kEngine, start);
  // Finishing turns leave the pool: work on the step's own list.
  const std::vector<Turn*> stepped = slots_;
  if (!logits.ok()) {
    LogError("decode_step_failed", {{"error", logits.status().ToString()}});
    for (Turn* turn : stepped) FinishWithError(*turn, logits.status());
    return;
  }
  std::vector<int64_t> rows(stepped.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  SampleAndEmit(stepped, rows, *logits);
}

void TurnRunner::SampleAndEmit(const std::vector<Turn*>& turns, const std::vector<int64_t>& rows,
                               torch::Tensor& logits) {
  const absl::Time start = absl::Now();
  const int64_t vocab = tokenizer_.vocab_size();
  const int64_t stride = logits.size(1);
  float* data = logits.data_ptr<float>();
  auto row = [&](size_t i) { return absl::MakeSpan(data + rows[i] * stride, vocab); };
  // Each turn samples from its own row with its own sampler (in place: the
  // row is patched and put back), so rows run on any thread in any order
  // and give the same tokens. A row of 65,536 logits takes tens of
  // microseconds; below about 2^17 logits a task costs more to hand out than
  // to run.
  // Constrained rows share their grammar's matcher and mask cache, which
  // only this thread may touch: they go first, here.
  std::vector<Generation::Step> steps(turns.size());
  std::vector<int64_t> free_rows;
  for (size_t i = 0; i < turns.size(); ++i) {
    if (turns[i]->generation->constrained()) {
      steps[i] = turns[i]->generation->NextInPlace(row(i));
    } else {
      free_rows.push_back(static_cast<int64_t>(i));
    }
  }
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(vocab, 1));
  ParallelFor(static_cast<int64_t>(free_rows.size()), grain, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t i = free_rows[k];
      steps[i] = turns[i]->generation->NextInPlace(row(i));
    }
  });
  Charge(StepPhase::kSampling, start);
  for (size_t i = 0; i < turns.size(); ++i) Emit(*turns[i], row(i), steps[i]);
}

void TurnRunner::Emit(Turn& turn, absl::Span<const float> row, const Generation::Step& step) {
  if (turn.generation->constraint_failed() && step.token < 0) {
    // Nothing was sampled: the turn ends with an error, and a session keeps
    // the state it had before the turn.
    metrics_->CountRejection("constraint");
    FinishWithError(turn, ConstraintDeadEnd(*turn.generation, grammar_options_.max_parses));
    return;
  }
  const absl::Time now = absl::Now();
  if (turn.first_token == absl::InfinitePast()) {
    turn.first_token = now;
    metrics_->time_to_first_token_seconds(turn.call.protocol).Observe(Seconds(now - turn.arrived));
  }
  turn.last_token = now;
  metrics_->generated_tokens_total().Increment();
  TurnPiece piece;
  piece.text = step.text;
  if (turn.call.chat_context) turn.reply_text += step.text;
  if (turn.call.logprobs) {
    piece.tokens.push_back(DescribeToken(row, step.token, turn.call.top_logprobs, tokenizer_));
    turn.cumulative_logprob += piece.tokens.back().token.logprob;
  } else if (turn.call.cumulative_logprob) {
    turn.cumulative_logprob += DescribeToken(row, step.token, 0, tokenizer_).token.logprob;
  }
  if (!piece.text.empty() || !piece.tokens.empty()) turn.sink->Send(std::move(piece));
  const absl::Time emitted = Charge(StepPhase::kEmission, now);
  if (step.finish != FinishReason::kNone) {
    FinishTurn(turn, /*cancelled=*/false);
    Charge(StepPhase::kFinish, emitted);
  } else {
    turn.next_token = step.token;
  }
}

void TurnRunner::LeaveBatch(Turn& turn) {
  if (turn.slot < 0) return;
  const int64_t slot = turn.slot;
  turn.state = pool_.Leave(slot);
  slots_[slot] = slots_.back();  // the pool moved its last slot here
  slots_[slot]->slot = slot;
  slots_.pop_back();
  turn.slot = -1;
}

void TurnRunner::FinishWithError(Turn& turn, absl::Status error) {
  EndFollowers(turn, error);
  LeaveBatch(turn);
  turn.done = true;
  sessions_.sharing().ReleaseLease(turn.lease);
  if (!turn.session_id.empty()) {
    Session* session = sessions_.FindById(turn.session_id);
    if (session != nullptr && session->busy) {
      session->busy = false;
      // A session that a failed CreateSession prefill was making never existed.
      if (turn.creates_session()) sessions_.Discard(turn.session_id);
    }
    sessions_.UpdateGauges();
  }
  turn_ended_();
  if (turn.sink) turn.sink->Finish(std::move(error));
  if (turn.on_created) turn.on_created(error);
  if (turn.on_state_made) turn.on_state_made(std::move(error), NamedStateInfo{});
}

void TurnRunner::FinishTurn(Turn& turn, bool cancelled) {
  EndFollowers(turn, absl::OkStatus());
  LeaveBatch(turn);
  turn.done = true;
  turn_ended_();
  const absl::Time now = absl::Now();
  TurnSummary summary;
  summary.cancelled = cancelled;
  summary.reason = turn.generation ? turn.generation->finish_reason() : FinishReason::kNone;
  summary.prompt_tokens = static_cast<int32_t>(turn.prefilled);
  summary.cached_tokens = static_cast<int32_t>(turn.cached_tokens);
  summary.generated_tokens = turn.generation ? turn.generation->generated_tokens() : 0;
  summary.queue_ms = Millis(turn.admitted - turn.arrived);
  const bool sampled = turn.first_token != absl::InfinitePast();
  summary.prefill_ms = Millis((sampled ? turn.first_token : now) - turn.admitted);
  summary.decode_ms = sampled ? Millis(turn.last_token - turn.first_token) : 0;
  summary.seed = turn.seed;
  summary.cumulative_logprob = turn.cumulative_logprob;
  metrics_->request_duration_seconds(turn.call.protocol).Observe(Seconds(now - turn.arrived));
  if (summary.generated_tokens > 1) {
    metrics_->time_per_output_token_seconds(turn.call.protocol).Observe(
        Seconds(turn.last_token - turn.first_token) / (summary.generated_tokens - 1));
  }

  if (turn.makes_named_state()) {
    if (cancelled) return turn.on_state_made(absl::CancelledError("cancelled"), NamedStateInfo{});
    NamedStateInfo cost;
    cost.source = "prompt";
    cost.prompt_tokens = summary.prompt_tokens;
    cost.cached_tokens = summary.cached_tokens;
    cost.prefill_ms = summary.prefill_ms;
    return turn.on_state_made(std::move(turn.state), std::move(cost));
  }
  Session* session = turn.session_id.empty() ? nullptr : sessions_.FindById(turn.session_id);
  if (session == nullptr) {
    if (turn.sink) turn.sink->Finish(summary);
    return;
  }
  if (cancelled) {
    sessions_.sharing().ReleaseLease(turn.lease);
    session->busy = false;
    // The session keeps its last finished turn; a session whose creating
    // prefill was cut never existed.
    if (turn.creates_session()) sessions_.Discard(session->id);
    sessions_.UpdateGauges();
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
  next->origin = session->origin;
  next->pending_token = turn.creates_session() ? turn.held_back
                        : summary.generated_tokens > 0 ? turn.generation->history().back()
                                                       : -1;
  next->rng = turn.generation ? turn.generation->sampler().rng_state() : session->rng;
  next->last_used_unix_ms = sessions_.NowUnixMs();
  next->state = std::make_unique<State>(std::move(turn.state));
  next->kept = std::move(turn.kept);
  if (turn.call.chat_context) {
    next->chat = {*std::move(turn.call.chat_context), std::move(turn.reply_text)};
  }
  // The tokens it consumed: those before the turn, its prefill, and what it
  // generated but the last token (pending, not fed).
  next->tokens_known = turn.tokens_known;
  if (next->tokens_known) {
    next->tokens = std::move(turn.tokens_before);
    next->tokens.insert(next->tokens.end(), turn.prefill.begin(), turn.prefill.end());
    if (summary.generated_tokens > 0) {
      const std::vector<int64_t>& history = turn.generation->history();
      next->tokens.insert(next->tokens.end(), history.begin() + turn.prefill.size(),
                          history.end() - 1);
    }
    // A path this bookkeeping does not know of must not let a conversation
    // trust tokens the state did not consume.
    if (static_cast<int64_t>(next->tokens.size()) != next->position) {
      next->tokens_known = false;
      next->tokens.clear();
    }
  }
  summary.position = next->position;
  // The lease goes before the stream hears anything, so that the session's
  // next turn may go to any server.
  const bool leased = turn.lease.held;
  sessions_.Checkpoint(
      *session, sessions_.RecordOf(*next), leased,
      [this, next, sink = turn.sink, on_created = turn.on_created, summary, leased,
       lease_key = turn.lease.key](absl::Status written) {
        if (leased) sessions_.sharing().ReleaseLeaseOf(lease_key);
        sessions_.post()([this, next, sink, on_created, summary, written] {
          Session* session = sessions_.FindById(next->id);  // busy: still there
          if (session != nullptr) {
            session->busy = false;
            if (written.ok()) {
              session->state = std::move(next->state);
              session->position = next->position;
              session->pending_token = next->pending_token;
              session->rng = next->rng;
              session->tokens = std::move(next->tokens);
              session->tokens_known = next->tokens_known;
              session->kept = std::move(next->kept);
              session->chat = std::move(next->chat);
              session->last_used_unix_ms = next->last_used_unix_ms;
              sessions_.Touch(*session);
              sessions_.Trim(*session);
            } else if (on_created) {
              sessions_.Discard(next->id);  // a session never saved never existed
            }
            sessions_.UpdateGauges();
          }
          if (!written.ok()) {
            const absl::Status error = sessions_.SaveError(
                on_created ? "saving the new session (so it was not created)"
                           : "saving the session after the turn (so the turn was undone: "
                             "the session stays at its last finished turn)",
                written);
            if (sink) sink->Finish(error);
            if (on_created) on_created(error);
            return;
          }
          if (sink) sink->Finish(summary);
          if (on_created && session != nullptr) {
            SessionInfo info = sessions_.InfoOf(*session);
            info.cached_tokens = summary.cached_tokens;
            on_created(std::move(info));
          }
        });
      });
}

absl::Status TurnRunner::WarmUp(int32_t steps) {
  if (steps <= 0) return absl::OkStatus();
  const absl::Time start = absl::Now();
  State one = model_.NewState();
  LINSERVE_RETURN_IF_ERROR(
      model_.Prefill(one, tokenizer_.Encode(std::string(128, 'a'), /*starts_text=*/true)).status());
  std::vector<const State*> copies(8, &one);
  State eight = StackStates(copies);
  for (int32_t i = 0; i < steps; ++i) {
    LINSERVE_RETURN_IF_ERROR(model_.Step(one, {'a'}).status());
    LINSERVE_RETURN_IF_ERROR(model_.Step(eight, std::vector<int64_t>(8, 'a')).status());
  }
  LogInfo("warmed_up", {{"steps", steps}, {"ms", Millis(absl::Now() - start)}});
  return absl::OkStatus();
}

}  // namespace linserve
