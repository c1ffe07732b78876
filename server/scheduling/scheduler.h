#ifndef LINSERVE_SERVER_SCHEDULER_H_
#define LINSERVE_SERVER_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/grammar/token_masks.h"
#include "engine/text/tokenizer.h"
#include "server/common/metrics.h"
#include "server/requests/request_validation.h"
#include "server/scheduling/turn_sink.h"
#include "server/store/state_file.h"
#include "server/store/state_store.h"

namespace linserve {

class LanguageModel;  // engine/model/language_model.h (LibTorch stays out of this header)

struct SchedulerOptions {
  int32_t max_batch = 64;               // turns admitted (prefilling or decoding) at once
  int32_t max_queued_requests = 256;    // turns waiting beyond those; then RESOURCE_EXHAUSTED
  int32_t prefill_token_budget = 512;   // prompt tokens prefilled per engine iteration
  int32_t stream_buffer_messages = 32;  // unread messages before a stream's session pauses
  // Tokens one session's state may hold, for kinds whose state grows with
  // them (the softmax baseline's KV cache: 8 KiB a token at the default
  // model's shape); 0: no limit. Constant-state kinds have none.
  int64_t max_context_tokens = 8192;
  int64_t max_sessions = 10000;
  int64_t max_sessions_in_memory = 1024;
  int64_t max_sessions_per_tenant = 1000;  // per authenticated tenant; 0: no quota
  // Bytes of the session states held in memory (server/sessions/session_pool.h,
  // SessionMemoryBounds): all of them, and one authenticated tenant's (0: no
  // quota). A growing state (Qwen3.5's KV) weighs by its length.
  int64_t max_session_memory_bytes = int64_t{8} << 30;
  int64_t max_session_memory_bytes_per_tenant = 0;
  // States a session keeps at points of its conversation
  // (GenerateRequest.keep_state_at), the oldest dropped first; 0: none. Each
  // weighs a state's bytes at position 0 (a hybrid's recurrent part).
  int32_t conversation_kept_states = 4;
  absl::Duration session_ttl = absl::Hours(24);  // idle sessions are deleted; zero: never
  int64_t max_state_bytes = 64 << 20;            // a state file read from the store
  // With a store several servers share: how long a turn's lease on its
  // session lasts unless renewed (renewed every third of it while the turn
  // runs), so a server killed mid-turn blocks the session for at most this.
  absl::Duration session_lease = absl::Seconds(10);
  // The prefix-state cache (server/scheduling/prefix_cache.h): bytes of snapshots kept
  // (0: off), and how many prefix keys it remembers to spot a prefix's
  // second sighting.
  int64_t prefix_cache_bytes = 256 << 20;
  int64_t prefix_cache_sightings = 1 << 16;
  // Decode steps run before serving, so the first requests do not pay for
  // LibTorch's lazy initialisation (kernel selection, allocator growth).
  int32_t warmup_steps = 16;
  // Named states (server/scheduling/named_states.h): the server's own, read
  // at start from this directory ("": none), and the bounds on tenants'.
  std::string states_dir;
  int32_t max_named_states_per_tenant = 100;
  int64_t max_named_state_bytes_per_tenant = int64_t{1} << 30;
  int64_t max_state_upload_bytes = 16 << 20;  // one upload, as sent
  // Tenants' named states kept restored in memory (the server's own always are).
  int64_t named_state_cache_bytes = 256 << 20;
  // Structured output: the parses one grammar state may hold
  // (grammar_max_parses), and the bytes of every grammar's token masks
  // together (grammar_mask_cache_bytes; least recently used go first).
  GrammarMaskOptions grammar_masks;
};

// A named state as the API reports it (proto NamedState).
struct NamedStateInfo {
  std::string name;
  bool global = false;  // the server's own: every tenant's, read-only
  std::string digest;   // 64 hex digits: SHA-256 of tensors, position, pending token
  int64_t state_bytes = 0;
  int64_t position = -1;  // -1: a listing that has not read the state
  int64_t created_unix_ms = 0;
  std::string source;  // "prompt", "state_file", "rwkv_peft", "ai00"; "": not read
  // Made from a prompt: what it cost.
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;
  int64_t cached_tokens = 0;
};

// What GetModelInfo and the start log say about the served model; fixed at start.
struct ModelFacts {
  std::string fingerprint;
  std::string config_json;   // given or inferred configuration
  std::string architecture;  // "transformer", "rwkv7"
  std::string attention_kind;
  std::string tokenizer;      // "byte", "rwkv_world", ...
  std::string compute_dtype;  // weights and matrix products
  std::string weight_format;  // "int8", "int4" or compute_dtype
  std::string device;
  int64_t state_bytes_per_session = 0;  // at position 0
  int64_t state_bytes_per_token = 0;    // growth per token (a KV cache); 0 when constant
  int64_t weight_elements = 0;          // the weights' elements (parameters) as held
  int64_t weight_bytes = 0;             // and their bytes in memory
  bool state_grows = false;             // a KV cache (softmax baseline, Qwen3.5)
  int64_t vocab_size = 0;               // rows of the logits
  bool adds_bos = false;                // a fresh state starts with BOS
  int64_t prefill_chunk_tokens = 0;     // L of the chunked prefill
  int64_t prefix_cache_bytes = 0;       // the cache's bound; 0: off
  // The server's own named states (--states_dir), by name.
  std::vector<NamedStateInfo> global_named_states;
  // Ids that carry no text, [begin, end) (Tokenizer::SpecialIdRanges).
  std::vector<std::pair<int64_t, int64_t>> special_token_ranges;
  // The model's tokenizer (immutable, thread-safe), for transports that count
  // or convert tokens themselves (the HTTP API's /tokenize).
  std::shared_ptr<const Tokenizer> token_codec;
};

struct SessionInfo {
  std::string id;
  int64_t position = 0;
  int64_t state_bytes = 0;
  // state_bytes by part: what every state holds (the recurrent part), and
  // what grows with the position (a KV cache; 0 for constant states).
  int64_t recurrent_state_bytes = 0;
  int64_t kv_state_bytes = 0;
  int64_t created_unix_ms = 0;
  int64_t last_used_unix_ms = 0;
  bool busy = false;
  int64_t cached_tokens = 0;  // CreateSession: prompt tokens resumed from the prefix-state cache
};

// A session's chat messages (Session::chat) and the position they are at.
struct SessionChatInfo {
  int64_t position = 0;
  SessionChat chat;
};

struct SessionPage {
  std::vector<SessionInfo> sessions;
  std::string next_page_token;  // empty on the last page
};

// The engine thread and everything it owns: the model, the session pool, the
// batch. It runs continuous batching: each iteration it admits queued turns,
// prefills them within a token budget, runs one batched decode step for every
// decoding turn, samples, and hands the pieces to their streams. Finished
// turns of sessions are checkpointed to the store before their stream hears
// that they finished. Every public method is thread-safe and never touches a
// tensor: work is posted to the engine thread and answered through a
// callback (on the engine, the checkpoint writer's or the store worker's thread).
class Scheduler {
 public:
  template <typename T>
  using Done = std::function<void(absl::StatusOr<T>)>;

  // Takes the model, reads back every session of `store` made by this model
  // (others are logged and left alone) and starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Start(std::unique_ptr<LanguageModel> model,
                                                          StateStore* store, Metrics* metrics,
                                                          const SchedulerOptions& options);
  // Cancels what still runs, waits for pending checkpoints, stops the thread.
  ~Scheduler();

  // Queues a turn. RESOURCE_EXHAUSTED at once when max_batch +
  // max_queued_requests turns are already in; UNAVAILABLE while draining.
  // Every later outcome (session errors included) reaches `sink`.
  absl::Status SubmitGenerate(std::string tenant, GenerateCall call,
                              std::shared_ptr<TurnSink> sink);
  // n choices of one prompt (n = sinks.size(), sink i hears choice i): the
  // prompt is prefilled once, by choice `leader` (the one that continues
  // call.session_id, if any); then every other choice takes a copy of its
  // state and last logits row. Choice i samples with seed + i (the call's
  // seed, or the server's pick for the leader), so each choice is what the
  // request alone with that seed gives. The n count as n turns against
  // max_batch and the queue; n > max_batch is INVALID_ARGUMENT.
  absl::Status SubmitChoices(std::string tenant, GenerateCall call,
                             std::vector<std::shared_ptr<TurnSink>> sinks, int32_t leader);

  // A prompt is prefilled as a turn (it counts against the queue);
  // `cache_salt` keeps its prefix apart in the prefix-state cache. A
  // non-empty `initial_state` names the named state it starts from.
  void CreateSession(std::string tenant, std::string prompt, std::string cache_salt,
                     std::string initial_state, Done<SessionInfo> done);
  void GetSession(std::string tenant, std::string id, Done<SessionInfo> done);
  // Its chat messages, for an HTTP chat turn that sends only its new ones.
  void GetSessionChat(std::string tenant, std::string id, Done<SessionChatInfo> done);
  void ListSessions(std::string tenant, int32_t page_size, std::string page_token,
                    Done<SessionPage> done);
  void DeleteSession(std::string tenant, std::string id, Done<bool> done);
  void ForkSession(std::string tenant, std::string id, Done<SessionInfo> done);
  // The session's state file, as the store holds it.
  void ExportSession(std::string tenant, std::string id, Done<std::string> done);
  // `record` has passed DecodeStateFileOfModel; the session gets a new id.
  // Its payload is checked on the calling thread, which hears a damaged one
  // (DATA_LOSS) at once; the state is then built there while the file is
  // written (server/scheduling/pending_import.h).
  void ImportSession(std::string tenant, SessionRecord record, Done<SessionInfo> done);

  // Named states (server/scheduling/named_states.h). Names are checked here
  // (INVALID_ARGUMENT naming the field); another tenant's is NOT_FOUND.
  // A prompt is prefilled whole as a turn (it counts against the queue).
  void CreateNamedState(std::string tenant, std::string name, std::string prompt,
                        std::string cache_salt, Done<NamedStateInfo> done);
  // `bytes`: a state file, an RWKV-PEFT .pth or an ai00 .state, whole
  // (the transport bounds it by max_state_upload_bytes before buffering).
  void UploadNamedState(std::string tenant, std::string name, std::string bytes,
                        Done<NamedStateInfo> done);
  void GetNamedState(std::string tenant, std::string name, Done<NamedStateInfo> done);
  // The server's own, then the tenant's, each by name.
  void ListNamedStates(std::string tenant, Done<std::vector<NamedStateInfo>> done);
  // PERMISSION_DENIED for the server's own.
  void DeleteNamedState(std::string tenant, std::string name, Done<bool> done);

  // From now on new turns are refused with UNAVAILABLE (the start of Drain).
  void RefuseNewWork();
  // Shutdown: refuses new turns (UNAVAILABLE), lets running ones finish until
  // `deadline`, cuts the rest (FINISH_REASON_CANCELLED; their sessions keep
  // their last finished turn) and returns once every checkpoint is durable.
  void Drain(absl::Time deadline);

  // Turns admitted or queued (what the capacity bounds).
  int InFlight() const;

  const ModelFacts& model_facts() const;

  class Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_SCHEDULER_H_
