#ifndef LINSERVE_SERVER_TURN_RUNNER_H_
#define LINSERVE_SERVER_TURN_RUNNER_H_

// Runs admitted turns on the model: starts each from its session (or a new
// state), prefills groups of turns, runs batched decode steps, samples and
// hands the pieces to the streams, and finishes turns, checkpointing their
// sessions before their streams hear the end. Which turns run in each step
// is the scheduler's choice (server/scheduling/scheduler.cc). Engine thread only.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/grammar/token_masks.h"
#include "engine/model/language_model.h"
#include "engine/model/slot_pool.h"
#include "engine/model/state.h"
#include "engine/text/tokenizer.h"
#include "server/common/metrics.h"
#include "server/scheduling/prefix_cache.h"
#include "server/scheduling/session_manager.h"
#include "server/scheduling/turn.h"

namespace linserve {

class TurnRunner {
 public:
  // `turn_ended` runs once per turn, when it is done and before its stream
  // or CreateSession hears the end (the scheduler frees its place there).
  // `forked` takes a follower once it has its copy of the leader's state
  // (the scheduler runs it from then on as any turn). `max_context_tokens`
  // bounds a growing state (0: no bound; see SchedulerOptions);
  // `max_kept_states` the states a session keeps for its conversation;
  // `grammar_masks` the grammars' parses and masks.
  TurnRunner(LanguageModel& model, SessionManager& sessions, PrefixCache& prefix_cache,
             Metrics* metrics, int64_t max_context_tokens, int32_t max_kept_states,
             const GrammarMaskOptions& grammar_masks,
             std::function<void()> turn_ended, std::function<void(std::unique_ptr<Turn>)> forked);

  // Sets up an admitted stateless or CreateSession turn: its session (made),
  // its state, the tokens to prefill, its sampler and seed.
  absl::Status Begin(Turn& turn);
  // The same for a turn of an existing session, once SessionManager::Prepare
  // made it ready (busy, its state in memory) and took `lease`. From the call
  // on, the turn owns both: FinishWithError gives them back.
  absl::Status BeginSessionTurn(Turn& turn, Session& session, TurnLease lease);
  // Prefills the next `n` tokens of every turn of `group` (all at the same
  // position) in one batched call; a turn whose prompt is done samples its
  // first token (or, creating a session, finishes).
  void PrefillGroup(const std::vector<Turn*>& group, int64_t n);
  // One batched decode step for `members` (turns past their prefill), each
  // sampling its next token. The members' states live in the slot pool
  // while they decode: a turn joining or leaving moves its own state only.
  void DecodeStep(const std::vector<Turn*>& members);

  void FinishWithError(Turn& turn, absl::Status error);
  // A turn that ended (or was cut, `cancelled`): a session's turn is
  // checkpointed first, and its stream hears the end once that is durable.
  void FinishTurn(Turn& turn, bool cancelled);

  // The time each phase took since the last call (linserve_step_phase_seconds;
  // the scheduler adds its own bookkeeping and observes once per iteration).
  std::array<absl::Duration, kStepPhases> TakePhaseTimes();

  // A prefill and `steps` decode steps at batch 1 and 8, results dropped, so
  // the first requests do not pay for LibTorch's lazy initialisation.
  absl::Status WarmUp(int32_t steps);

 private:
  // Samples each turn's next token from its row of `logits` (turn i, row
  // rows[i]), in parallel across the engine's threads when the rows are big
  // enough to pay for it, then streams each turn's text in order.
  void SampleAndEmit(const std::vector<Turn*>& turns, const std::vector<int64_t>& rows,
                     torch::Tensor& logits);
  // Streams one turn's sampled token and ends the turn if it finished.
  void Emit(Turn& turn, absl::Span<const float> row, const Generation::Step& step);
  // For a turn starting from a fresh state: resumes it from the longest
  // cached prefix of its prompt, and picks the boundary where it leaves a
  // snapshot (server/scheduling/prefix_cache.h).
  void UsePrefixCache(Turn& turn);
  // A conversation turn (GenerateCall::conversation): its prompt is the
  // session's whole conversation; it goes on from the session's position, a
  // state the session kept, or the start, whichever the conversation
  // still begins with, and prefills the rest.
  absl::Status ResumeConversation(Turn& turn, const Session& session);
  // GenerateCall::keep_state_at as an index into the conversation's tokens.
  absl::StatusOr<int64_t> KeepStateIndex(const GenerateCall& call,
                                         const std::vector<int64_t>& conversation) const;
  // The turn keeps its state's fixed part at keep_state_at (it is there now).
  void KeepState(Turn& turn);
  // The turn's sampler, continuing `rng` (a seed is picked when it has none).
  void StartGeneration(Turn& turn, SamplerRngState rng);
  // The shared matcher and masks of the turn's grammar, made at its first
  // use (the vocabulary's trie at the first of all).
  std::shared_ptr<GrammarTokenMasks> GrammarFor(const GenerateCall& call);
  // The request's token ids as given, or its text encoded (with BOS when it
  // `starts_text` and the model takes one). ResourceExhausted when the
  // tokenizer's regex limits stop the encoding.
  absl::StatusOr<std::vector<int64_t>> PromptTokens(const GenerateCall& call,
                                                    bool starts_text) const;
  // A follower of `leader` (whose prefill just ended) takes a copy of its
  // state and prompt, and its own sampler: seeded with the leader's seed
  // moved by the difference of their choices.
  void Fork(const Turn& leader, Turn& follower);
  // A leader that ends before its prefill does ends its waiting followers
  // with it: cut (`error` OK) or failed with `error`.
  void EndFollowers(Turn& leader, const absl::Status& error);
  // Takes a turn's state out of the decode pool, if it is there.
  void LeaveBatch(Turn& turn);
  // Adds the time from `since` to now to `phase`; returns now.
  absl::Time Charge(StepPhase phase, absl::Time since);
  // For a model whose state grows: INVALID_ARGUMENT when the prompt takes a
  // state at `position` past max_context_tokens, else caps the turn's
  // max_new_tokens so that its state stays within it.
  // First FitMemory.
  absl::Status FitContext(Turn& turn, int64_t position, int64_t prompt_tokens);
  // RESOURCE_EXHAUSTED naming the bound when the state after the prompt is
  // larger than the memory bounds allow one state (max_session_memory_bytes,
  // the tenant's quota); for a growing state, caps max_new_tokens so that the
  // state stays within them.
  absl::Status FitMemory(Turn& turn, int64_t after_prompt);

  LanguageModel& model_;
  const Tokenizer tokenizer_;
  SessionManager& sessions_;
  PrefixCache& prefix_cache_;
  Metrics* const metrics_;
  const int64_t max_context_tokens_;  // 0: the state does not grow, or no bound
  const int64_t max_kept_states_;
  const std::function<void()> turn_ended_;
  const std::function<void(std::unique_ptr<Turn>)> forked_;

  SlotPool pool_;
  std::vector<Turn*> slots_;  // the turn in each slot of pool_
  absl::BitGen bitgen_;
  std::array<absl::Duration, kStepPhases> phase_times_{};
  std::shared_ptr<const TokenTrie> token_trie_;
  const GrammarMaskOptions grammar_options_;
  // Every grammar's masks, in grammar_masks.cache_bytes together.
  const std::shared_ptr<MaskCache> mask_cache_;
  // Grammars by their GBNF text: generations of the same grammar share its
  // interned parses and cached masks. Past kMaxGrammars, those no turn uses
  // are dropped.
  absl::flat_hash_map<std::string, std::shared_ptr<GrammarTokenMasks>> grammars_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_TURN_RUNNER_H_
