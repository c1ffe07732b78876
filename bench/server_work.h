#ifndef LINSERVE_BENCH_SERVER_WORK_H_
#define LINSERVE_BENCH_SERVER_WORK_H_

// The work a server does for the load tester's closed loop, done by the
// engine alone in this process: `concurrency` requests always in flight, each
// a prompt of random ordinary token ids prefilled, then sampled token by
// token until its exact output length, and replaced by a new one the moment
// it ends. No gRPC, no threads of a server, no streaming, and a scheduler
// with nothing to wait for: the prompts that arrived are prefilled together
// (within the server's budget), then one decode step of everyone else, as
// the server's iteration does.
//
// What it gives: how close any server can come, on this machine and engine,
// to the engine's bare batched decode with this workload. The bare decode
// has no prompts to prefill and no tokens to sample; the closed loop has
// both. Not thread-safe; the timings assume nothing else runs beside it.

#include <cstdint>

#include "engine/generation/sampler.h"
#include "engine/model/language_model.h"

namespace linserve {

struct ServerWork {
  int32_t concurrency = 32;
  int64_t prompt_tokens = 16;
  int32_t output_tokens = 128;
  SamplingParams sampling;  // max_new_tokens and ignore_eos come from above
  int64_t prefill_token_budget = 512;  // the server's --prefill_token_budget
  int32_t warmup_requests = 32;        // finished and not counted, as the load tester's
  double seconds = 20;                 // measured after the warm-up
  uint64_t seed = 1;                   // prompts and per-request sampling seeds
};

struct ServerWorkResult {
  double output_tokens_per_second = 0;
  int64_t finished_requests = 0;  // within the measured window
  // Shares of the measured time: decode steps, prefills, sampling (the rest
  // is bookkeeping: the slot pool's joins and leaves, new requests).
  double decode_share = 0, prefill_share = 0, sampling_share = 0;
  double mean_batch = 0;      // sessions per decode step
  double decode_step_ms = 0;  // mean time of one decode step
};

// Runs `work` on `model`. A failed model call ends the program: this is a
// benchmark of a model that already loaded and decoded.
ServerWorkResult RunServerWork(LanguageModel& model, const ServerWork& work);

}  // namespace linserve

#endif  // LINSERVE_BENCH_SERVER_WORK_H_
