#include "server/common/metrics.h"

#include <vector>

namespace linserve {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Latency buckets from 1 ms to 60 s: a decode step on the CPU is a few ms,
// a long prefill or a queued request seconds.
Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// Saves and restores of a few hundred KB take well under a millisecond to
// tens of milliseconds (fsync).
Histogram::BucketBoundaries StoreBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
}

Histogram::BucketBoundaries BatchBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256}; }

// A phase of one iteration: microseconds (one row's sampling, the loop's
// bookkeeping) to a prefill chunk's hundreds of milliseconds.
Histogram::BucketBoundaries PhaseBuckets() {
  return {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
          0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   0.5,   1};
}

}  // namespace

const char* StepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kRestack: return "restack";
    case StepPhase::kEngine: return "engine";
    case StepPhase::kSampling: return "sampling";
    case StepPhase::kEmission: return "emission";
    case StepPhase::kFinish: return "finish";
    case StepPhase::kScheduling: return "scheduling";
    case StepPhase::kPrefill: return "prefill";
  }
  return "unknown";
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  requests_ = &BuildCounter()
                   .Name("linserve_requests_total")
                   .Help("Finished requests by method, status code (gRPC's names) and "
                         "protocol (grpc, http)")
                   .Register(r);
  rejections_ = &BuildCounter()
                     .Name("linserve_rejections_total")
                     .Help("Requests refused before any work, by reason")
                     .Register(r);
  auto histogram = [&r](const char* name, const char* help, Histogram::BucketBoundaries buckets) {
    return &BuildHistogram().Name(name).Help(help).Register(r).Add({}, std::move(buckets));
  };
  // One series per protocol, both made now so that dashboards see zeros.
  auto per_protocol = [&r](const char* name, const char* help) {
    prometheus::Family<Histogram>& family = BuildHistogram().Name(name).Help(help).Register(r);
    PerProtocol out;
    for (Protocol p : {Protocol::kGrpc, Protocol::kHttp}) {
      out[Index(p)] = &family.Add({{"protocol", ProtocolName(p)}}, LatencyBuckets());
    }
    return out;
  };
  ttft_ = per_protocol("linserve_time_to_first_token_seconds",
                       "Generate or a completion: from arrival to the first sampled token");
  tpot_ = per_protocol("linserve_time_per_output_token_seconds",
                       "Generate or a completion: mean time between sampled tokens after "
                       "the first");
  e2e_ = per_protocol("linserve_request_duration_seconds",
                      "Generate or a completion: from arrival to the last message");
  queue_time_ = per_protocol("linserve_queue_time_seconds",
                             "Generate or a completion: from arrival to admission into the batch");
  batch_size_ = histogram("linserve_batch_size", "Sessions in each batched decode step",
                          BatchBuckets());
  prometheus::Family<Histogram>& phases =
      BuildHistogram()
          .Name("linserve_step_phase_seconds")
          .Help("Where each engine iteration that ran the model spent its time, by phase: "
                "restack, engine, sampling, emission, finish, scheduling")
          .Register(r);
  for (int i = 0; i < kStepPhases; ++i) {
    step_phase_[i] = &phases.Add({{"phase", StepPhaseName(static_cast<StepPhase>(i))}},
                                 PhaseBuckets());
  }
  save_ = histogram("linserve_session_save_seconds",
                    "Writing one session's state file to the store", StoreBuckets());
  restore_ = histogram("linserve_session_restore_seconds",
                       "Reading one session's state back from the store", StoreBuckets());
  prompt_tokens_ = &BuildCounter()
                        .Name("linserve_prompt_tokens_total")
                        .Help("Tokens prefilled (prompts, pending tokens, BOS)")
                        .Register(r)
                        .Add({});
  generated_tokens_ = &BuildCounter()
                           .Name("linserve_generated_tokens_total")
                           .Help("Tokens sampled")
                           .Register(r)
                           .Add({});
  queue_depth_ = &BuildGauge()
                      .Name("linserve_queue_depth")
                      .Help("Generate requests waiting for admission")
                      .Register(r)
                      .Add({});
  active_requests_ = &BuildGauge()
                          .Name("linserve_active_requests")
                          .Help("Generate requests admitted and not yet finished")
                          .Register(r)
                          .Add({});
  paused_requests_ = &BuildGauge()
                          .Name("linserve_paused_requests")
                          .Help("Generate requests paused until their stream's reader catches up")
                          .Register(r)
                          .Add({});
  open_streams_ = &BuildGauge()
                       .Name("linserve_open_streams")
                       .Help("Generate, ExportSession and ImportSession streams open")
                       .Register(r)
                       .Add({});
  state_bytes_ = &BuildGauge()
                      .Name("linserve_state_bytes_per_session")
                      .Help("Bytes of one session's recurrent state; for the softmax "
                            "baseline, whose cache grows, the mean over sessions in memory")
                      .Register(r)
                      .Add({});
  resident_state_bytes_ = &BuildGauge()
                               .Name("linserve_resident_state_bytes")
                               .Help("Bytes of the session states held in memory")
                               .Register(r)
                               .Add({});
  auto& parts = BuildGauge()
                    .Name("linserve_resident_state_part_bytes")
                    .Help("linserve_resident_state_bytes by part: the recurrent part every "
                          "state holds, and the KV cache that grows with the position (a "
                          "block that several states hold counted once)")
                    .Register(r);
  resident_recurrent_bytes_ = &parts.Add({{"part", "recurrent"}});
  resident_kv_bytes_ = &parts.Add({{"part", "kv"}});
  auto& blocks = BuildGauge()
                     .Name("linserve_kv_blocks")
                     .Help("KV cache blocks of the session states in memory: referenced (by "
                           "each state) and distinct (a block that forks, snapshots and kept "
                           "states hold in common counted once); referenced / distinct is how "
                           "many states hold a block on average")
                     .Register(r);
  kv_block_references_ = &blocks.Add({{"count", "referenced"}});
  kv_blocks_distinct_ = &blocks.Add({{"count", "distinct"}});
  auto counter = [&r](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(r).Add({});
  };
  prefix_lookups_ = counter("linserve_prefix_cache_lookups_total",
                            "Prompts that looked for a cached prefix state");
  prefix_hits_ = counter("linserve_prefix_cache_hits_total",
                         "Prompts that resumed from a cached prefix state");
  prefix_hit_tokens_ = counter("linserve_prefix_cache_hit_tokens_total",
                               "Prompt tokens not prefilled thanks to a cached prefix state");
  prefix_evictions_ = counter("linserve_prefix_cache_evictions_total",
                              "Prefix states dropped to stay within --prefix_cache_bytes");
  conversation_turns_ = &BuildCounter()
                             .Name("linserve_conversation_turns_total")
                             .Help("Conversation turns by where they went on from: the "
                                   "session's position, a state it kept, or the start")
                             .Register(r);
  for (const char* resumed : {"session", "kept_state", "start"}) {
    conversation_turns_->Add({{"resumed", resumed}});
  }
  conversation_prefilled_ =
      counter("linserve_conversation_prefilled_tokens_total",
              "Tokens conversation turns prefilled (the rest their sessions held)");
  conversation_dropped_ =
      counter("linserve_conversation_dropped_tokens_total",
              "Tokens sessions had consumed that a conversation turn went back past, because "
              "its conversation differs there (a template that re-renders an earlier turn)");
  tool_calls_malformed_ =
      counter("linserve_tool_calls_malformed_total",
              "Tool calls in a model's answer that did not parse, left as text");
  tool_call_values_unconverted_ =
      counter("linserve_tool_call_values_unconverted_total",
              "Tool call parameters that did not convert to their schema's type, kept as strings");
  prefix_bytes_ = &BuildGauge()
                       .Name("linserve_prefix_cache_bytes")
                       .Help("Bytes of the prefix states the cache holds")
                       .Register(r)
                       .Add({});
  auto& named = BuildGauge()
                    .Name("linserve_named_states")
                    .Help("Named states: the server's own (scope=global) and the tenants' held "
                          "in this server's memory (scope=tenant)")
                    .Register(r);
  named_global_ = &named.Add({{"scope", "global"}});
  named_tenant_ = &named.Add({{"scope", "tenant"}});
  named_uses_ = &BuildCounter()
                     .Name("linserve_named_state_uses_total")
                     .Help("Turns and sessions started from a named state, by the server's own "
                           "states' names (tenants' states count under scope=tenant, unnamed)")
                     .Register(r);
  auto& sessions = BuildGauge()
                       .Name("linserve_sessions")
                       .Help("Sessions by where their state is: device, host or store")
                       .Register(r);
  sessions_device_ = &sessions.Add({{"place", "device"}});
  sessions_host_ = &sessions.Add({{"place", "host"}});
  sessions_store_ = &sessions.Add({{"place", "store"}});
}

void Metrics::CountRequest(const std::string& method, const std::string& code,
                           const std::string& protocol) {
  requests_->Add({{"method", method}, {"code", code}, {"protocol", protocol}}).Increment();
}

void Metrics::CountNamedStateUse(const std::string& global_name) {
  if (global_name.empty()) {
    named_uses_->Add({{"scope", "tenant"}, {"name", ""}}).Increment();
  } else {
    named_uses_->Add({{"scope", "global"}, {"name", global_name}}).Increment();
  }
}

void Metrics::CountRejection(const std::string& reason) {
  rejections_->Add({{"reason", reason}}).Increment();
}

}  // namespace linserve
