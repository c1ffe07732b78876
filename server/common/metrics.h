#ifndef LINSERVE_SERVER_METRICS_H_
#define LINSERVE_SERVER_METRICS_H_

// The server's Prometheus metrics: families built once,
// each series added once and kept. Labels carry bounded values only (method,
// status code, reason, place), never a session or tenant id. Every method is
// thread-safe (prometheus-cpp's metrics are).

#include <array>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "server/common/protocol.h"

namespace linserve {

// Where an engine iteration's time goes (linserve_step_phase_seconds): turns
// joining and leaving the decode batch (their states copied into and out of
// the slot pool; "restack" from when the batch was restacked), the model's
// decode step ("engine") and prefill calls, sampling the rows, emitting their
// pieces to the streams, finishing turns (a session's state serialized for
// its checkpoint), and the loop's own bookkeeping (tasks, admission,
// cancellations, leases).
enum class StepPhase { kRestack, kEngine, kSampling, kEmission, kFinish, kScheduling, kPrefill };
inline constexpr int kStepPhases = 7;
const char* StepPhaseName(StepPhase phase);

class Metrics {
 public:
  Metrics();

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // One finished request: `method` is the RPC name (gRPC) or the endpoint's
  // ("Completions", "ChatCompletions", "Models", ...: HTTP), `code` the
  // canonical status name (gRPC's; an HTTP status maps to one), `protocol`
  // "grpc" or "http". The latency histograms carry `protocol` too; token
  // counters and the engine's gauges and histograms count both.
  void CountRequest(const std::string& method, const std::string& code,
                    const std::string& protocol);
  // A request refused before any work (or, for "store_full", a save the
  // store refused): "queue_full", "session_limit", "tenant_quota",
  // "sessions_in_memory", "store_full", "open_streams", "session_busy",
  // "draining".
  void CountRejection(const std::string& reason);

  // A request's latencies, by the protocol it came by (label `protocol`).
  prometheus::Histogram& time_to_first_token_seconds(Protocol p) { return *ttft_[Index(p)]; }
  prometheus::Histogram& time_per_output_token_seconds(Protocol p) { return *tpot_[Index(p)]; }
  prometheus::Histogram& request_duration_seconds(Protocol p) { return *e2e_[Index(p)]; }
  prometheus::Histogram& queue_time_seconds(Protocol p) { return *queue_time_[Index(p)]; }
  prometheus::Histogram& batch_size() { return *batch_size_; }
  // One observation per engine iteration that ran the model, per phase that
  // took time in it.
  prometheus::Histogram& step_phase_seconds(StepPhase phase) {
    return *step_phase_[static_cast<int>(phase)];
  }
  prometheus::Histogram& session_save_seconds() { return *save_; }
  prometheus::Histogram& session_restore_seconds() { return *restore_; }
  prometheus::Counter& prompt_tokens_total() { return *prompt_tokens_; }
  prometheus::Counter& generated_tokens_total() { return *generated_tokens_; }
  prometheus::Gauge& queue_depth() { return *queue_depth_; }
  prometheus::Gauge& active_requests() { return *active_requests_; }
  // Admitted Generate requests sitting out this decode step because their
  // stream's reader is --stream_buffer_messages behind (set every engine
  // iteration; a reader that stopped keeps its request here).
  prometheus::Gauge& paused_requests() { return *paused_requests_; }
  // Generate, ExportSession and ImportSession streams gRPC holds open.
  prometheus::Gauge& open_streams() { return *open_streams_; }
  prometheus::Gauge& state_bytes_per_session() { return *state_bytes_; }
  prometheus::Gauge& resident_state_bytes() { return *resident_state_bytes_; }
  prometheus::Gauge& resident_recurrent_bytes() { return *resident_recurrent_bytes_; }
  prometheus::Gauge& resident_kv_bytes() { return *resident_kv_bytes_; }
  // KV blocks the states in memory reference, and the distinct blocks among
  // them (a block that forks, snapshots and kept states share counts once
  // in the second): their ratio is how much sharing saves.
  prometheus::Gauge& kv_block_references() { return *kv_block_references_; }
  prometheus::Gauge& kv_blocks_distinct() { return *kv_blocks_distinct_; }
  // Sessions whose state is on the engine's device, in host memory (a CUDA
  // server's spill tier; on a CPU server device and host are one), or only
  // in the store.
  prometheus::Gauge& sessions_on_device() { return *sessions_device_; }
  prometheus::Gauge& sessions_in_host() { return *sessions_host_; }
  prometheus::Gauge& sessions_in_store() { return *sessions_store_; }
  // The prefix-state cache (server/scheduling/prefix_cache.h).
  prometheus::Counter& prefix_cache_lookups_total() { return *prefix_lookups_; }
  prometheus::Counter& prefix_cache_hits_total() { return *prefix_hits_; }
  prometheus::Counter& prefix_cache_hit_tokens_total() { return *prefix_hit_tokens_; }
  prometheus::Counter& prefix_cache_evictions_total() { return *prefix_evictions_; }
  prometheus::Gauge& prefix_cache_bytes() { return *prefix_bytes_; }
  // Conversation turns (GenerateRequest.conversation), by where they went on
  // from: the session's own position, a state it kept, or the start; the
  // tokens they prefilled, and those the session had consumed and dropped
  // (what it prefills again).
  prometheus::Counter& conversation_turns_total(const std::string& resumed) {
    return conversation_turns_->Add({{"resumed", resumed}});
  }
  prometheus::Counter& conversation_prefilled_tokens_total() { return *conversation_prefilled_; }
  prometheus::Counter& conversation_dropped_tokens_total() { return *conversation_dropped_; }
  // A model's tool calls (server/http/tool_call_parser.h): calls left as
  // text, and parameters kept as strings against their schema's type.
  prometheus::Counter& tool_calls_malformed_total() { return *tool_calls_malformed_; }
  prometheus::Counter& tool_call_values_unconverted_total() {
    return *tool_call_values_unconverted_;
  }
  // Named states (server/scheduling/named_states.h): the server's own, and
  // the tenants' this server holds restored in memory.
  prometheus::Gauge& global_named_states() { return *named_global_; }
  prometheus::Gauge& tenant_named_states() { return *named_tenant_; }
  // A turn or session started from a named state: a global one's name is
  // its label; tenants' names never reach /metrics (name="", scope="tenant").
  void CountNamedStateUse(const std::string& global_name);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* rejections_;
  using PerProtocol = std::array<prometheus::Histogram*, kProtocols>;
  static int Index(Protocol p) { return static_cast<int>(p); }

  PerProtocol ttft_;
  PerProtocol tpot_;
  PerProtocol e2e_;
  PerProtocol queue_time_;
  prometheus::Histogram* batch_size_;
  std::array<prometheus::Histogram*, kStepPhases> step_phase_;
  prometheus::Histogram* save_;
  prometheus::Histogram* restore_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* active_requests_;
  prometheus::Gauge* paused_requests_;
  prometheus::Gauge* open_streams_;
  prometheus::Gauge* state_bytes_;
  prometheus::Gauge* resident_state_bytes_;
  prometheus::Gauge* resident_recurrent_bytes_;
  prometheus::Gauge* resident_kv_bytes_;
  prometheus::Gauge* kv_block_references_;
  prometheus::Gauge* kv_blocks_distinct_;
  prometheus::Gauge* sessions_device_;
  prometheus::Gauge* sessions_host_;
  prometheus::Gauge* sessions_store_;
  prometheus::Counter* prefix_lookups_;
  prometheus::Counter* prefix_hits_;
  prometheus::Counter* prefix_hit_tokens_;
  prometheus::Counter* prefix_evictions_;
  prometheus::Gauge* prefix_bytes_;
  prometheus::Family<prometheus::Counter>* conversation_turns_;
  prometheus::Counter* conversation_prefilled_;
  prometheus::Counter* conversation_dropped_;
  prometheus::Counter* tool_calls_malformed_;
  prometheus::Counter* tool_call_values_unconverted_;
  prometheus::Gauge* named_global_;
  prometheus::Gauge* named_tenant_;
  prometheus::Family<prometheus::Counter>* named_uses_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_METRICS_H_
