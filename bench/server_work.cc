#include "bench/server_work.h"

#include <torch/types.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "client/bench.h"
#include "engine/cpu/engine_threads.h"
#include "engine/generation/generation.h"
#include "engine/model/slot_pool.h"

namespace linserve {
namespace {

struct Request {
  std::vector<int64_t> prompt;
  std::unique_ptr<Generation> generation;
  int64_t next_token = -1;
};

template <typename T>
T OrDie(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, value.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(value);
}

class Loop {
 public:
  Loop(LanguageModel& model, const ServerWork& work)
      : model_(model), work_(work), pool_(model.state_layout()), rng_(work.seed) {
    const Tokenizer& tokenizer = model.tokenizer();
    BenchVocabulary vocabulary{tokenizer.vocab_size(), tokenizer.SpecialIdRanges()};
    for (int32_t id : OrDie(OrdinaryTokenIds(vocabulary), "prompt ids")) ids_.push_back(id);
    for (int32_t i = 0; i < work.concurrency; ++i) arrived_.push_back(NewRequest());
  }

  ServerWorkResult Run() {
    // The warm-up ends the same way as the window below (no request
    // decoding), within one more round of requests.
    while (finished_ < work_.warmup_requests ||
           (!members_.empty() && finished_ < work_.warmup_requests + work_.concurrency)) {
      Iterate();
    }
    const int64_t tokens_before = tokens_, finished_before = finished_;
    const absl::Time start = absl::Now();
    decode_ = prefill_ = sampling_ = absl::ZeroDuration();
    steps_ = batch_sum_ = 0;
    // The window ends where it began, every request just ended and none
    // decoding, so that it holds whole cycles of the loop: a window cut
    // anywhere holds one prefill of every request more or fewer, about 3%
    // of the figure. A loop that never stands there (arrivals over several
    // iterations, when the budget is short) stops at twice the time.
    const absl::Duration least = absl::Seconds(work_.seconds);
    while (absl::Now() - start < least ||
           (!members_.empty() && absl::Now() - start < 2 * least)) {
      Iterate();
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    ServerWorkResult result;
    result.output_tokens_per_second = static_cast<double>(tokens_ - tokens_before) / seconds;
    result.finished_requests = finished_ - finished_before;
    result.decode_share = absl::ToDoubleSeconds(decode_) / seconds;
    result.prefill_share = absl::ToDoubleSeconds(prefill_) / seconds;
    result.sampling_share = absl::ToDoubleSeconds(sampling_) / seconds;
    result.mean_batch = steps_ == 0 ? 0 : static_cast<double>(batch_sum_) / steps_;
    result.decode_step_ms = steps_ == 0 ? 0 : absl::ToDoubleMilliseconds(decode_) / steps_;
    return result;
  }

 private:
  std::unique_ptr<Request> NewRequest() {
    auto request = std::make_unique<Request>();
    for (int64_t i = 0; i < work_.prompt_tokens; ++i) {
      request->prompt.push_back(ids_[rng_() % ids_.size()]);
    }
    SamplingParams params = work_.sampling;
    params.max_new_tokens = work_.output_tokens;
    params.ignore_eos = true;
    params.seed = rng_();
    request->generation =
        std::make_unique<Generation>(model_.tokenizer(), params, request->prompt);
    return request;
  }

  // The server's iteration: the arrivals' prefills, then a decode step.
  void Iterate() {
    Prefill();
    Decode();
  }

  // Every arrival within the budget, in one batched call (all stand at
  // position 0 with prompts of one length, as the server groups them).
  void Prefill() {
    const int64_t fit = std::max<int64_t>(1, work_.prefill_token_budget / work_.prompt_tokens);
    const auto n = static_cast<size_t>(std::min<int64_t>(fit, arrived_.size()));
    if (n == 0) return;
    const absl::Time start = absl::Now();
    std::vector<std::unique_ptr<Request>> group;
    std::vector<int64_t> tokens;
    for (size_t i = 0; i < n; ++i) {
      group.push_back(std::move(arrived_[i]));
      tokens.insert(tokens.end(), group.back()->prompt.begin(), group.back()->prompt.end());
    }
    arrived_.erase(arrived_.begin(), arrived_.begin() + static_cast<std::ptrdiff_t>(n));
    State batch = model_.NewState(static_cast<int64_t>(n));
    torch::Tensor logits = OrDie(model_.PrefillBatch(batch, tokens), "prefill");
    std::vector<State> states = model_.SplitState(batch);
    prefill_ += absl::Now() - start;
    std::vector<Request*> rows;
    for (auto& request : group) rows.push_back(request.get());
    Sample(rows, logits);
    for (size_t i = 0; i < n; ++i) {
      if (group[i]->generation->finished()) {
        Finish();
        continue;
      }
      pool_.Join(states[i]);
      members_.push_back(std::move(group[i]));
    }
  }

  void Decode() {
    if (members_.empty()) return;
    absl::Time start = absl::Now();
    std::vector<int64_t> tokens;
    for (const auto& request : members_) tokens.push_back(request->next_token);
    torch::Tensor logits = OrDie(model_.Step(pool_.Batch(), tokens), "decode step");
    pool_.Absorb();
    decode_ += absl::Now() - start;
    ++steps_;
    batch_sum_ += static_cast<int64_t>(members_.size());
    std::vector<Request*> rows;
    for (auto& request : members_) rows.push_back(request.get());
    Sample(rows, logits);
    // Leaving moves the last slot into the freed one: go from the end.
    for (size_t slot = members_.size(); slot-- > 0;) {
      if (!members_[slot]->generation->finished()) continue;
      pool_.Leave(static_cast<int64_t>(slot));
      members_[slot] = std::move(members_.back());
      members_.pop_back();
      Finish();
    }
  }

  // As the server samples: each row in place by its own generation, rows
  // spread over the engine's threads.
  void Sample(const std::vector<Request*>& rows, torch::Tensor& logits) {
    const absl::Time start = absl::Now();
    const int64_t vocab = model_.tokenizer().vocab_size();
    const int64_t stride = logits.size(1);
    float* data = logits.data_ptr<float>();
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 17) / std::max<int64_t>(vocab, 1));
    ParallelFor(static_cast<int64_t>(rows.size()), grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Generation::Step step =
            rows[i]->generation->NextInPlace(absl::MakeSpan(data + i * stride, vocab));
        rows[i]->next_token = step.token;
      }
    });
    tokens_ += static_cast<int64_t>(rows.size());
    sampling_ += absl::Now() - start;
  }

  // A request ended: the closed loop sends the next one at once.
  void Finish() {
    ++finished_;
    arrived_.push_back(NewRequest());
  }

  LanguageModel& model_;
  const ServerWork work_;
  SlotPool pool_;
  std::mt19937_64 rng_;
  std::vector<int64_t> ids_;
  std::vector<std::unique_ptr<Request>> arrived_;  // waiting for their prefill
  std::vector<std::unique_ptr<Request>> members_;  // decoding; index = slot
  int64_t tokens_ = 0, finished_ = 0, steps_ = 0, batch_sum_ = 0;
  absl::Duration decode_, prefill_, sampling_;
};

}  // namespace

ServerWorkResult RunServerWork(LanguageModel& model, const ServerWork& work) {
  return Loop(model, work).Run();
}

}  // namespace linserve
