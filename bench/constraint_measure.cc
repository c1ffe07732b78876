#include "bench/constraint_measure.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "absl/strings/str_format.h"
#include "engine/generation/generation.h"
#include "engine/grammar/gbnf_parser.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/token_masks.h"
#include "engine/model/language_model.h"

namespace linserve {
namespace {

using Clock = std::chrono::steady_clock;

// A typical schema: ten fields, a nested object, an enum, an array; string
// lengths bounded so that an untrained model's answers end.
constexpr char kSchema[] = R"({"type": "object", "properties": {
  "id": {"type": "integer", "minimum": 1, "maximum": 100000},
  "name": {"type": "string", "maxLength": 16},
  "email": {"type": "string", "maxLength": 24},
  "age": {"type": "integer", "minimum": 0, "maximum": 120},
  "active": {"type": "boolean"},
  "role": {"enum": ["admin", "editor", "viewer"]},
  "score": {"type": "number"},
  "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
  "address": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12},
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["city", "zip"]},
  "note": {"type": ["string", "null"], "maxLength": 20}},
  "required": ["id", "name", "email", "age", "active", "role", "score", "tags", "address", "note"]})";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One answer: prefill, then decode until the generation ends or `budget`
// tokens; returns the tokens and adds the decode time (steps and sampling).
int Answer(LanguageModel& model, const std::vector<int64_t>& prompt, const SamplingParams& params,
           const std::shared_ptr<GrammarTokenMasks>& masks, Clock::duration& spent,
           Clock::duration& sampling) {
  State state = model.NewState();
  absl::StatusOr<std::vector<float>> logits = model.Prefill(state, prompt);
  if (!logits.ok()) return 0;
  Generation generation(model.tokenizer(), params, prompt);
  if (masks) generation.Constrain(masks);
  std::vector<float> row = *std::move(logits);
  int tokens = 0;
  const Clock::time_point start = Clock::now();
  while (true) {
    const Clock::time_point sample = Clock::now();
    const Generation::Step step = generation.NextInPlace(absl::MakeSpan(row));
    sampling += Clock::now() - sample;
    ++tokens;
    if (step.finish != FinishReason::kNone) break;
    absl::StatusOr<torch::Tensor> next = model.Step(state, {step.token});
    if (!next.ok()) break;
    row.assign(next->data_ptr<float>(), next->data_ptr<float>() + next->numel());
  }
  spent += Clock::now() - start;
  return tokens;
}

}  // namespace

ConstraintRow MeasureConstrainedDecode(const std::string& model_dir, int tokens) {
  ConstraintRow row;
  absl::StatusOr<std::unique_ptr<LanguageModel>> loaded =
      LanguageModel::Load(model_dir, LoadOptions{});
  if (!loaded.ok()) {
    std::fprintf(stderr, "--constraint_model: %s\n", loaded.status().ToString().c_str());
    return row;
  }
  LanguageModel& model = **loaded;
  const std::vector<int64_t> prompt =
      model.tokenizer().Encode("Reply with the user's record as JSON.\n", /*starts_text=*/true);
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 7;
  params.ignore_eos = true;
  params.max_new_tokens = tokens;
  Clock::duration free{}, free_sampling{};
  const int free_tokens = Answer(model, prompt, params, nullptr, free, free_sampling);
  row.free_ms = Ms(free) / free_tokens;
  row.free_sampling_ms = Ms(free_sampling) / free_tokens;

  absl::StatusOr<std::string> gbnf = JsonSchemaTextToGbnf(kSchema);
  absl::StatusOr<Grammar> grammar = gbnf.ok() ? ParseGbnf(*gbnf) : gbnf.status();
  if (!grammar.ok()) {
    std::fprintf(stderr, "constraint: %s\n", grammar.status().ToString().c_str());
    return row;
  }
  auto masks = std::make_shared<GrammarTokenMasks>(TokenTrieOf(model.tokenizer()), *grammar);
  params.ignore_eos = false;
  Clock::duration cold{}, warm{}, cold_sampling{}, warm_sampling{};
  int warm_tokens = 0;
  while (row.tokens < tokens) {
    params.seed = 100 + static_cast<uint64_t>(row.answers);
    params.max_new_tokens = tokens;
    const bool first = row.answers == 0;
    const int n = Answer(model, prompt, params, masks, first ? cold : warm,
                         first ? cold_sampling : warm_sampling);
    if (first) {
      row.cold_ms = Ms(cold) / n;
      row.cold_sampling_ms = Ms(cold_sampling) / n;
    } else {
      warm_tokens += n;
    }
    row.tokens += n;
    ++row.answers;
  }
  row.warm_ms = warm_tokens > 0 ? Ms(warm) / warm_tokens : 0;
  row.warm_sampling_ms = warm_tokens > 0 ? Ms(warm_sampling) / warm_tokens : 0;
  // What a mask costs where it is computed: every cached state once more.
  row.masks = static_cast<int>(masks->cached_masks());
  TokenMask scratch;
  const Clock::time_point start = Clock::now();
  for (const GrammarState& state : masks->CachedStates()) masks->Compute(state, scratch);
  row.mask_miss_ms = row.masks > 0 ? Ms(Clock::now() - start) / row.masks : 0;
  return row;
}

void PrintConstraint(const ConstraintRow& row, const std::string& model_dir) {
  absl::PrintF(
      "\n8. Constrained decoding: batch-1 decode of %s, temperature 1, with and without a JSON "
      "schema (10 fields, a nested object, an enum, an array); ms per token, model step and "
      "sampling together\n",
      model_dir);
  absl::PrintF("                                     per token   ratio   of it, sampling and mask\n");
  absl::PrintF("  unconstrained                      %8.2f           %8.3f\n", row.free_ms,
               row.free_sampling_ms);
  absl::PrintF("  constrained, first answer (cold)   %8.2f  %5.2fx   %8.3f\n", row.cold_ms,
               row.cold_ms / row.free_ms, row.cold_sampling_ms);
  absl::PrintF("  constrained, later answers (warm)  %8.2f  %5.2fx   %8.3f  (target <= 1.15x)\n",
               row.warm_ms, row.warm_ms / row.free_ms, row.warm_sampling_ms);
  absl::PrintF("  the constraint's own cost against the unconstrained step: cold %.3fx, warm %.3fx\n",
               (row.free_ms + row.cold_sampling_ms - row.free_sampling_ms) / row.free_ms,
               (row.free_ms + row.warm_sampling_ms - row.free_sampling_ms) / row.free_ms);
  absl::PrintF("  %d answers, %d tokens; %d grammar states met, %.2f ms to compute one's mask\n",
               row.answers, row.tokens, row.masks, row.mask_miss_ms);
}

nlohmann::json ConstraintJson(const ConstraintRow& row) {
  return {{"unconstrained_ms_per_token", row.free_ms},
          {"constrained_cold_ms_per_token", row.cold_ms},
          {"constrained_warm_ms_per_token", row.warm_ms},
          {"unconstrained_sampling_ms_per_token", row.free_sampling_ms},
          {"constrained_cold_sampling_ms_per_token", row.cold_sampling_ms},
          {"constrained_warm_sampling_ms_per_token", row.warm_sampling_ms},
          {"answers", row.answers},
          {"tokens", row.tokens},
          {"grammar_states", row.masks},
          {"mask_compute_ms", row.mask_miss_ms}};
}

}  // namespace linserve
