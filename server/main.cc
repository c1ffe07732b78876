// linserve: the gRPC server. Flags live here and become the Options structs
// of the layers below; `linserve --help` lists them.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <memory>
#include <string>

#include <ATen/Parallel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/base/malloc_tuning.h"
#include "engine/cpu/engine_threads.h"
#include "engine/loader/serving_defaults.h"
#include "engine/model/language_model.h"
#include "server/common/auth.h"
#include "server/common/log.h"
#include "server/common/metrics.h"
#include "server/common/metrics_endpoint.h"
#include "server/common/reasoning_split.h"
#include "server/common/startup_banner.h"
#include "server/grpc/connection_options.h"
#include "server/grpc/service.h"
#include "server/http/chat_template.h"
#include "server/http/http_server.h"
#include "server/http/tool_call_parser.h"
#include "server/net/listen_address.h"
#include "server/net/listening_sockets.h"
#include "server/scheduling/scheduler.h"
#include "server/store/disk_state_store.h"
#include "server/store/redis_state_store.h"

ABSL_FLAG(std::string, model, "models/default",
          "Model directory: a linserve transformer (config.json + model.safetensors) or an "
          "RWKV-7 (one .pth or model.safetensors, config.json optional; README, Serving RWKV-7)");
ABSL_FLAG(std::string, chat_template_file, "",
          "A Jinja chat template to render chats with, instead of the model directory's own "
          "(chat_template.jinja, tokenizer_config.json's chat_template, chat_template.json)");
ABSL_FLAG(std::string, reasoning_format, "auto",
          "How an answer's reasoning is told apart (HTTP's reasoning_content, gRPC's "
          "GenerateResponse.reasoning): auto (qwen3 when the model's Jinja chat template writes "
          "</think>, rwkv_g1 when its template has a thinking switch as RWKV-7's built-in one does, "
          "else none), none, qwen3 (<think>...</think>) or rwkv_g1 (RWKV-7 G1's <think ... </think>)");
ABSL_FLAG(std::string, tool_call_format, "auto",
          "How the model writes a tool call (vLLM's --tool-call-parser names): auto (from the chat "
          "template: qwen3_coder where it writes <function=, hermes where it writes <tool_call> "
          "with JSON, else linserve), linserve (chat_template.json's call_start + JSON + "
          "call_end), hermes (Qwen3's <tool_call> JSON) or qwen3_coder (Qwen3.5's XML)");
ABSL_FLAG(std::string, device, "cpu", "Engine device: cpu, cuda or cuda:N (when LibTorch has CUDA)");
ABSL_FLAG(std::string, dtype, "",
          "Weights and matrix products. linserve's transformer (the default model): float32, "
          "or int8 / int4 on the CPU. RWKV-7 on the CPU: float32, bfloat16, int8 or int4 "
          "(quantized at load, or as a file from linserve-quantize holds them); not float16, "
          "which has no CPU matrix products in Debian's LibTorch. RWKV-7 on CUDA: float32, "
          "bfloat16 or float16. Empty picks the architecture's default for the device "
          "(RWKV-7: bfloat16 on CUDA and on CPUs with bfloat16 matrix instructions, else "
          "float32; the transformer: float32); the state is always float32");
ABSL_FLAG(uint32_t, tokenizer_regex_match_limit, 10'000'000,
          "A Hugging Face tokenizer's pre-tokenizer regexes: PCRE2's match limit (backtracking "
          "steps) for one search; a prompt past it is refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(uint32_t, tokenizer_regex_depth_limit, 100'000,
          "A Hugging Face tokenizer's regexes: PCRE2's depth limit for one search");
ABSL_FLAG(int32_t, tokenizer_cache_entries, 10'000,
          "A Hugging Face tokenizer's cache of pre-token encodings, in entries; 0 turns it off");
ABSL_FLAG(int32_t, tokenizer_max_json_depth, 64,
          "Nesting of tokenizer.json past which the file is refused at load");
ABSL_FLAG(int32_t, threads, 0,
          "The engine's thread pool, the engine thread counted: the products, recurrences, fused "
          "passes and sampling split over it, with the same bits at any count; LibTorch's own "
          "loops stay on one thread. 0: the cores this process may run on (its affinity mask); "
          "at most 1024");
ABSL_FLAG(int32_t, malloc_keep_mb, 1024,
          "freed memory malloc keeps for reuse, in MiB (at most 2047): tensors of up to 32 MiB "
          "are made again from it without faulting their pages in (engine/base/malloc_tuning.h); "
          "one malloc arena for every thread; 0 leaves glibc's own bounds and arenas");
// The listen flags take HOST:PORT as users write it: localhost:8080,
// 127.0.0.1:8080, [::1]:8080, 0.0.0.0:8080, a host name, or :8080 for every
// interface. A name binds every address it resolves to.
ABSL_FLAG(std::string, listen, "localhost:50051",
          "gRPC address, HOST:PORT ([IPV6]:PORT; :PORT is every interface); loopback by "
          "default; port 0 picks a free port (in the banner)");
ABSL_FLAG(std::string, http_listen, "localhost:8080",
          "OpenAI-compatible HTTP API address (/v1/completions, /v1/chat/completions, "
          "/v1/models, /tokenize, /detokenize, /health), HOST:PORT as --listen; loopback by "
          "default; port 0 picks a free port (in the banner); empty turns it off");
ABSL_FLAG(std::string, served_model_name, "",
          "The model's id in the HTTP API (/v1/models, the \"model\" field); empty: the "
          "--model directory's name");
ABSL_FLAG(std::string, health_listen, "",
          "Also serve GET /health on this HOST:PORT, from a listener of its own that API "
          "clients cannot fill (for probes: deploy/README.md); empty turns it off");
ABSL_FLAG(int32_t, http_io_threads, 2,
          "Threads that run every HTTP connection's I/O (connections hold no thread)");
ABSL_FLAG(int32_t, http_max_connections, 1024,
          "HTTP connections open at once; one past it is closed as it is accepted");
ABSL_FLAG(int32_t, http_keepalive_requests, 1000,
          "Requests one HTTP connection may carry before the server closes it");
ABSL_FLAG(int32_t, http_keepalive_seconds, 5,
          "An HTTP connection with no request in flight is closed after this");
ABSL_FLAG(int32_t, http_head_timeout_seconds, 10,
          "A request's line and headers must arrive within this (of the connection's start, "
          "or of the request's first byte), or the connection is closed");
ABSL_FLAG(int32_t, http_body_timeout_seconds, 30,
          "A request's body must arrive within this of its headers, or the connection is "
          "closed");
ABSL_FLAG(int32_t, http_write_timeout_seconds, 30,
          "An answer's bytes (or a stream's pending events) must be taken by the client within "
          "this, or the connection is closed and its turn cancelled");
ABSL_FLAG(int64_t, max_http_body_bytes, 1 << 20,
          "Bytes of one HTTP request body, on any framing (Content-Length or chunked); a larger "
          "one is refused with 413");
ABSL_FLAG(int64_t, max_http_header_bytes, 16 << 10,
          "Bytes of one HTTP request's line and headers; more is refused with 431");
ABSL_FLAG(int32_t, max_http_header_count, 64,
          "Header fields of one HTTP request; more is refused with 431");
ABSL_FLAG(bool, playground, true,
          "Serve the playground page (a chat with forks, sessions, export and import, over "
          "the public HTTP API) at GET / on the HTTP port");
ABSL_FLAG(std::string, http_allowed_hosts, "",
          "Host names and addresses (comma-separated, no ports) on which the server's own "
          "page may call the API; empty: localhost, 127.0.0.1, ::1 and --http_listen's host. "
          "A page reached under another name (DNS rebinding) is refused");
ABSL_FLAG(std::string, http_cors_origins, "",
          "Browser origins allowed to call the HTTP API (comma-separated, * for any); empty: "
          "requests carrying an Origin header are refused with 403");
ABSL_FLAG(int32_t, metrics_port, 9464,
          "Prometheus /metrics port; 0 picks a free port (in the banner), -1 is off");
ABSL_FLAG(std::string, metrics_host, "localhost",
          "Host the metrics endpoint listens on: a name, an IPv4 or IPv6 address, or empty for "
          "every interface");
ABSL_FLAG(bool, metrics_on_http, false,
          "Also serve GET /metrics on the HTTP API's port, behind its tokens when "
          "--auth_tokens_file is set (the --metrics_port endpoint stays)");
ABSL_FLAG(std::string, store, "disk",
          "Session store: disk (in --store_dir) or redis://HOST:PORT[/DB][?prefix=NAME], shared "
          "by replicas; entries expire after --session_ttl_seconds");
ABSL_FLAG(std::string, store_dir, "sessions", "Directory of the disk session store");
ABSL_FLAG(double, redis_timeout_seconds, 2,
          "How long one Redis command may take before the store counts as unreachable "
          "(UNAVAILABLE; the connection is then made again)");
ABSL_FLAG(int64_t, session_lease_ms, 10000,
          "With a Redis store: a turn's lease on its session (renewed every third of it while "
          "the turn runs); a replica killed mid-turn blocks the session for at most this");
ABSL_FLAG(int32_t, max_batch, 64, "Generate requests running at once (prefilling or decoding)");
ABSL_FLAG(int32_t, max_queued_requests, 256,
          "Generate requests waiting beyond max_batch; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int32_t, prefill_token_budget, 512, "Prompt tokens prefilled per engine iteration");
ABSL_FLAG(int32_t, stream_buffer_messages, 32,
          "Unread messages a stream may hold before its request pauses for the reader");
ABSL_FLAG(int64_t, max_sessions, 10000, "Sessions in all (memory and store)");
ABSL_FLAG(int64_t, max_sessions_in_memory, 1024,
          "Sessions whose state is held in memory; the least recently used idle ones spill");
ABSL_FLAG(int64_t, max_sessions_per_tenant, 1000,
          "Sessions one authenticated tenant may hold (--auth_tokens_file); 0 is no quota. "
          "Without auth every client is one tenant, bounded by --max_sessions alone");
ABSL_FLAG(int64_t, max_session_memory_bytes, int64_t{8} << 30,
          "Bytes of session states held in memory (a KV cache weighs by its length); the "
          "least recently used idle ones spill to the store, and a turn whose state alone "
          "would pass it is refused, or ends with finish reason length where it would grow "
          "past it; 0 is no bound");
ABSL_FLAG(int64_t, max_session_memory_bytes_per_tenant, 0,
          "As --max_session_memory_bytes, for one authenticated tenant's sessions; 0 is no "
          "quota");
ABSL_FLAG(int32_t, conversation_kept_states, 4,
          "States a session keeps where its conversation's turns begin "
          "(GenerateRequest.keep_state_at; a hybrid's recurrent part), so that a turn whose "
          "chat template renders an earlier turn anew prefills only from there; the oldest "
          "go first; they count towards --max_session_memory_bytes; 0 keeps none");
ABSL_FLAG(int64_t, max_store_bytes, int64_t{16} << 30,
          "Bytes of state files the disk store may hold (files already there count); a save "
          "past it is refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, session_ttl_seconds, 86400, "Idle sessions are deleted after this; 0 is never");
ABSL_FLAG(int32_t, max_prompt_bytes, -1,
          "UTF-8 bytes of one prompt (the request's size; it becomes at most as many tokens, "
          "plus a BOS where the model takes one); -1: per model, 16384, or 8 bytes per token "
          "of --max_context_tokens for a model with a long context (Qwen3.5)");
ABSL_FLAG(int64_t, max_context_tokens, -1,
          "Tokens one session's KV cache may hold, for models whose state grows with the "
          "position (the softmax baseline, Qwen3.5's attention layers); 0 is no limit, -1 per "
          "model: 8192 for the softmax baseline, min(max_position_embeddings, 32768) for "
          "Qwen3.5, halved until a session at that length fits in an eighth of the machine's "
          "memory. Constant-state kinds have none");
ABSL_FLAG(std::string, kv_dtype, "float32",
          "The KV cache of Qwen3.5's attention layers: float32, or bfloat16 for half the bytes "
          "per token (the state file says which; a state moves only between servers of the "
          "same KV dtype)");
ABSL_FLAG(int64_t, kv_block_tokens, 64,
          "Positions per block of Qwen3.5's KV cache, a multiple of 16 up to 4096: a fork, a "
          "prefix-cache snapshot, a kept or a named state shares the blocks it has in common "
          "with its source, and a session that writes into a shared block copies that one");
ABSL_FLAG(int32_t, max_new_tokens_cap, 4096, "Upper bound of a request's max_new_tokens");
ABSL_FLAG(int32_t, default_max_new_tokens, 256, "max_new_tokens of a request that sets 0");
ABSL_FLAG(int32_t, max_stop_sequences, 8, "Stop sequences per request");
ABSL_FLAG(int32_t, max_stop_bytes, 256, "Bytes of one stop sequence");
ABSL_FLAG(int32_t, max_top_logprobs, 20, "Alternatives per token with logprobs on");
ABSL_FLAG(int64_t, max_state_bytes, -1,
          "Bytes of one state file (import or store); -1: per model, 64 MiB, or a session's "
          "state at --max_context_tokens where that is more (Qwen3.5)");
ABSL_FLAG(int32_t, max_state_chunk_bytes, 64 << 10, "Bytes of one Export/ImportSession chunk");
ABSL_FLAG(int32_t, max_message_bytes, 4 << 20, "Largest gRPC message received");
ABSL_FLAG(int64_t, max_open_streams, 1024,
          "Generate, ExportSession and ImportSession streams open at once over all connections; "
          "more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_open_streams_per_tenant, 256,
          "Of --max_open_streams, those one authenticated tenant (--auth_tokens_file) may hold; "
          "past it is refused with RESOURCE_EXHAUSTED (without tokens only the server-wide bound "
          "applies)");
ABSL_FLAG(int32_t, max_streams_per_connection, 100,
          "Streams one HTTP/2 connection may have open at once; a client's further calls wait "
          "in its channel");
ABSL_FLAG(int32_t, keepalive_time_ms, 60000,
          "Ping a connection quiet for this long (dead peers are found this way)");
ABSL_FLAG(int32_t, keepalive_timeout_ms, 20000,
          "Close a connection whose keepalive ping is not answered within this");
ABSL_FLAG(bool, keepalive_permit_without_calls, true,
          "Send keepalive pings on connections without calls too, so dead idle ones are reaped");
ABSL_FLAG(int32_t, max_connection_idle_ms, 0,
          "Close a connection without calls for this long; 0 is never");
ABSL_FLAG(int32_t, max_connection_age_ms, 0,
          "Close a connection this old (clients reconnect, e.g. to rebalance); 0 is never");
ABSL_FLAG(int32_t, max_connection_age_grace_ms, 30000,
          "Calls running on a connection closed for its age may finish for this long");
ABSL_FLAG(int32_t, http2_min_ping_interval_ms, 10000,
          "Shortest interval between a client's pings without data; faster ones are strikes");
ABSL_FLAG(int32_t, http2_max_ping_strikes, 2,
          "Ping strikes before the connection is closed (GOAWAY too_many_pings); 0 is no limit");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain: serve gRPC over TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA roots: require client certificates signed by them (mTLS)");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Bearer tokens, one \"TOKEN TENANT\" per line (needs TLS); each tenant sees only "
          "its own sessions");
ABSL_FLAG(int64_t, prefix_cache_bytes, int64_t{256} << 20,
          "Bytes of prefix states the prefix-state cache keeps (least recently used go first): "
          "about 500 snapshots of the default model, 100 of an RWKV-7 0.1B; 0 turns it off");
ABSL_FLAG(int64_t, prefix_cache_sightings, 65536,
          "Prefix keys remembered (32 bytes each) to spot a prefix's second sighting, when the "
          "cache keeps its state");
ABSL_FLAG(int32_t, max_cache_salt_bytes, 256, "Bytes of a request's cache_salt");
ABSL_FLAG(int32_t, max_grammar_bytes, 65536,
          "Bytes of a request's constraint: a GBNF grammar (on HTTP, the grammar compiled from its "
          "tools too), a JSON schema, or a choice's strings together");
ABSL_FLAG(int32_t, max_choices, 256, "Strings of a request's choice constraint");
ABSL_FLAG(int32_t, max_logit_bias, 1024, "Entries of a request's logit_bias");
ABSL_FLAG(int32_t, max_n, 16,
          "Choices of one HTTP request (n, best_of); each is a turn of the batch, the prompt "
          "prefilled once");
ABSL_FLAG(int64_t, max_grammar_symbols, 100000,
          "Symbols of a request's compiled grammar, repetitions expanded");
ABSL_FLAG(int32_t, grammar_max_nesting, 64,
          "Nesting of a request's constraint: parentheses inside parentheses in GBNF, schemas "
          "inside schemas in a JSON schema (at least 8)");
ABSL_FLAG(int32_t, grammar_max_repeat, 1000,
          "Largest m and n of {m,n} in a grammar or a JSON schema pattern, and of a JSON schema's "
          "minLength, maxLength, minItems, maxItems (at least 16: the JSON grammar's own counts)");
ABSL_FLAG(int32_t, grammar_max_regex_nesting, 32,
          "Groups inside groups of a JSON schema pattern (below --grammar_max_nesting)");
ABSL_FLAG(int32_t, grammar_max_parses, 4096,
          "Parses of a constraint alive at once: an ambiguous grammar can double them with every "
          "byte; a token that would pass it is not allowed, and a turn left with no token fails");
ABSL_FLAG(int64_t, grammar_mask_cache_bytes, int64_t{64} << 20,
          "Bytes of the token masks kept for every grammar together (vocab_size / 8 bytes each: "
          "31 KiB at 248,320 ids); the least recently used go first, to be walked again when "
          "needed; 0 keeps none");
ABSL_FLAG(std::string, states_dir, "",
          "Directory of the server's own named states, read at start: linserve state files, "
          "RWKV-PEFT state-tuning .pth or ai00 .state files, each named by its file name "
          "without the extension; every tenant may start from them, none may change them");
ABSL_FLAG(int32_t, max_named_states_per_tenant, 100, "Named states one tenant may hold");
ABSL_FLAG(int64_t, max_named_state_bytes_per_tenant, int64_t{1} << 30,
          "Bytes of the state files of one tenant's named states");
ABSL_FLAG(int64_t, max_state_upload_bytes, 16 << 20,
          "Bytes of one named-state upload (gRPC UploadNamedState, HTTP PUT /v1/states/NAME), "
          "counted before it is kept");
ABSL_FLAG(int64_t, named_state_cache_bytes, int64_t{256} << 20,
          "Bytes of tenants' named states kept restored in memory (the server's own always "
          "are); the least recently used go first");
ABSL_FLAG(int32_t, warmup_steps, 16,
          "Decode steps run at start, before health says SERVING; 0 skips the warm-up");
ABSL_FLAG(int32_t, shutdown_grace_seconds, 30,
          "On SIGTERM, running streams may finish for this long before they are cut");

namespace linserve {
namespace {

// --threads' bound: past it a typo, not a machine.
constexpr int32_t kMaxEngineThreads = 1024;

absl::Status CheckPositive(const char* flag, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " = ", value, " must be positive"));
}

absl::StatusOr<ConnectionOptions> ConnectionOptionsFromFlags() {
  ConnectionOptions c;
  c.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  c.keepalive_time_ms = absl::GetFlag(FLAGS_keepalive_time_ms);
  c.keepalive_timeout_ms = absl::GetFlag(FLAGS_keepalive_timeout_ms);
  c.keepalive_permit_without_calls = absl::GetFlag(FLAGS_keepalive_permit_without_calls);
  c.max_connection_idle_ms = absl::GetFlag(FLAGS_max_connection_idle_ms);
  c.max_connection_age_ms = absl::GetFlag(FLAGS_max_connection_age_ms);
  c.max_connection_age_grace_ms = absl::GetFlag(FLAGS_max_connection_age_grace_ms);
  c.http2_min_ping_interval_ms = absl::GetFlag(FLAGS_http2_min_ping_interval_ms);
  c.http2_max_ping_strikes = absl::GetFlag(FLAGS_http2_max_ping_strikes);
  for (auto [flag, value] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"max_streams_per_connection", c.max_streams_per_connection},
           {"keepalive_time_ms", c.keepalive_time_ms},
           {"keepalive_timeout_ms", c.keepalive_timeout_ms}}) {
    if (absl::Status ok = CheckPositive(flag, value); !ok.ok()) return ok;
  }
  if (c.max_connection_idle_ms < 0 || c.max_connection_age_ms < 0 ||
      c.max_connection_age_grace_ms < 0 || c.http2_min_ping_interval_ms < 0 ||
      c.http2_max_ping_strikes < 0) {
    return absl::InvalidArgumentError(
        "--max_connection_idle_ms, --max_connection_age_ms, --max_connection_age_grace_ms, "
        "--http2_min_ping_interval_ms and --http2_max_ping_strikes must not be negative");
  }
  return c;
}

// The machine's memory, for the per-model defaults.
int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t{pages} * page : int64_t{8} << 30;
}

absl::StatusOr<ServiceOptions> OptionsFromFlags() {
  ServiceOptions o;
  // Limits left at -1 take the model's own defaults (read from its config.json).
  absl::StatusOr<ServingDefaults> defaults =
      ServingDefaultsForModel(absl::GetFlag(FLAGS_model), PhysicalMemoryBytes());
  if (!defaults.ok()) return defaults.status();
  auto per_model = [](int64_t flag, int64_t model_default) {
    return flag == -1 ? model_default : flag;
  };
  SchedulerOptions& s = o.scheduler;
  s.max_batch = absl::GetFlag(FLAGS_max_batch);
  s.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  s.prefill_token_budget = absl::GetFlag(FLAGS_prefill_token_budget);
  s.stream_buffer_messages = absl::GetFlag(FLAGS_stream_buffer_messages);
  s.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  s.max_sessions_in_memory = absl::GetFlag(FLAGS_max_sessions_in_memory);
  s.max_sessions_per_tenant = absl::GetFlag(FLAGS_max_sessions_per_tenant);
  s.max_session_memory_bytes = absl::GetFlag(FLAGS_max_session_memory_bytes);
  s.max_session_memory_bytes_per_tenant = absl::GetFlag(FLAGS_max_session_memory_bytes_per_tenant);
  s.conversation_kept_states = absl::GetFlag(FLAGS_conversation_kept_states);
  s.session_ttl = absl::Seconds(absl::GetFlag(FLAGS_session_ttl_seconds));
  s.max_state_bytes = per_model(absl::GetFlag(FLAGS_max_state_bytes), defaults->max_state_bytes);
  s.session_lease = absl::Milliseconds(absl::GetFlag(FLAGS_session_lease_ms));
  s.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  s.max_context_tokens =
      per_model(absl::GetFlag(FLAGS_max_context_tokens), defaults->max_context_tokens);
  s.prefix_cache_bytes = absl::GetFlag(FLAGS_prefix_cache_bytes);
  s.prefix_cache_sightings = absl::GetFlag(FLAGS_prefix_cache_sightings);
  s.states_dir = absl::GetFlag(FLAGS_states_dir);
  s.max_named_states_per_tenant = absl::GetFlag(FLAGS_max_named_states_per_tenant);
  s.max_named_state_bytes_per_tenant = absl::GetFlag(FLAGS_max_named_state_bytes_per_tenant);
  s.max_state_upload_bytes = absl::GetFlag(FLAGS_max_state_upload_bytes);
  s.named_state_cache_bytes = absl::GetFlag(FLAGS_named_state_cache_bytes);
  s.grammar_masks.max_parses = absl::GetFlag(FLAGS_grammar_max_parses);
  s.grammar_masks.cache_bytes = absl::GetFlag(FLAGS_grammar_mask_cache_bytes);
  RequestLimits& l = o.limits;
  l.max_prompt_bytes = static_cast<int32_t>(
      per_model(absl::GetFlag(FLAGS_max_prompt_bytes), defaults->max_prompt_bytes));
  l.default_max_new_tokens = absl::GetFlag(FLAGS_default_max_new_tokens);
  l.max_top_logprobs = absl::GetFlag(FLAGS_max_top_logprobs);
  l.max_cache_salt_bytes = absl::GetFlag(FLAGS_max_cache_salt_bytes);
  l.max_grammar_bytes = absl::GetFlag(FLAGS_max_grammar_bytes);
  l.max_choices = absl::GetFlag(FLAGS_max_choices);
  l.grammar.max_symbols = absl::GetFlag(FLAGS_max_grammar_symbols);
  l.grammar.max_nesting = absl::GetFlag(FLAGS_grammar_max_nesting);
  l.grammar.max_repeat = absl::GetFlag(FLAGS_grammar_max_repeat);
  l.grammar.max_regex_nesting = absl::GetFlag(FLAGS_grammar_max_regex_nesting);
  l.max_logit_bias = absl::GetFlag(FLAGS_max_logit_bias);
  l.max_n = absl::GetFlag(FLAGS_max_n);
  l.sampling.max_new_tokens_cap = absl::GetFlag(FLAGS_max_new_tokens_cap);
  l.sampling.max_stop_sequences = absl::GetFlag(FLAGS_max_stop_sequences);
  l.sampling.max_stop_bytes = absl::GetFlag(FLAGS_max_stop_bytes);
  o.max_state_chunk_bytes = absl::GetFlag(FLAGS_max_state_chunk_bytes);
  o.max_open_streams = absl::GetFlag(FLAGS_max_open_streams);
  o.max_open_streams_per_tenant = absl::GetFlag(FLAGS_max_open_streams_per_tenant);
  for (auto [flag, value] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"max_batch", s.max_batch},
           {"prefill_token_budget", s.prefill_token_budget},
           {"stream_buffer_messages", s.stream_buffer_messages},
           {"max_sessions", s.max_sessions},
           {"max_sessions_in_memory", s.max_sessions_in_memory},
           {"max_state_bytes", s.max_state_bytes},
           {"session_lease_ms", absl::GetFlag(FLAGS_session_lease_ms)},
           {"max_prompt_bytes", l.max_prompt_bytes},
           {"max_new_tokens_cap", l.sampling.max_new_tokens_cap},
           {"default_max_new_tokens", l.default_max_new_tokens},
           {"max_stop_bytes", l.sampling.max_stop_bytes},
           {"max_grammar_bytes", l.max_grammar_bytes},
           {"max_choices", l.max_choices},
           {"max_grammar_symbols", l.grammar.max_symbols},
           {"grammar_max_regex_nesting", l.grammar.max_regex_nesting},
           {"grammar_max_parses", s.grammar_masks.max_parses},
           {"max_logit_bias", l.max_logit_bias},
           {"max_n", l.max_n},
           {"max_state_chunk_bytes", o.max_state_chunk_bytes},
           {"max_named_states_per_tenant", s.max_named_states_per_tenant},
           {"max_named_state_bytes_per_tenant", s.max_named_state_bytes_per_tenant},
           {"max_state_upload_bytes", s.max_state_upload_bytes},
           {"max_open_streams", o.max_open_streams},
           {"max_open_streams_per_tenant", o.max_open_streams_per_tenant},
           {"max_store_bytes", absl::GetFlag(FLAGS_max_store_bytes)},
           {"max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes)}}) {
    if (absl::Status ok = CheckPositive(flag, value); !ok.ok()) return ok;
  }
  if (s.max_queued_requests < 0 || l.sampling.max_stop_sequences < 0 || l.max_top_logprobs < 0 ||
      absl::GetFlag(FLAGS_session_ttl_seconds) < 0 || s.max_sessions_per_tenant < 0 ||
      s.max_context_tokens < 0 || s.prefix_cache_bytes < 0 || s.prefix_cache_sightings < 0 ||
      l.max_cache_salt_bytes < 0 || s.named_state_cache_bytes < 0 ||
      s.max_session_memory_bytes < 0 || s.max_session_memory_bytes_per_tenant < 0 ||
      s.conversation_kept_states < 0) {
    return absl::InvalidArgumentError(
        "--max_queued_requests, --max_stop_sequences, --max_top_logprobs, "
        "--session_ttl_seconds, --max_sessions_per_tenant, --max_context_tokens, "
        "--prefix_cache_bytes, --prefix_cache_sightings, --max_cache_salt_bytes, "
        "--named_state_cache_bytes, --max_session_memory_bytes, "
        "--max_session_memory_bytes_per_tenant and --conversation_kept_states must not be "
        "negative");
  }
  // The JSON grammar every schema builds on nests a few parentheses and
  // counts up to {1,16} itself; a pattern's groups each take a level of the
  // GBNF they compile to, plus one around the whole.
  if (l.grammar.max_nesting < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grammar_max_nesting = ", l.grammar.max_nesting, " must be at least 8"));
  }
  if (l.grammar.max_repeat < 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grammar_max_repeat = ", l.grammar.max_repeat, " must be at least 16"));
  }
  if (l.grammar.max_regex_nesting >= l.grammar.max_nesting) {
    return absl::InvalidArgumentError(
        "--grammar_max_regex_nesting must be below --grammar_max_nesting");
  }
  if (s.grammar_masks.cache_bytes < 0) {
    return absl::InvalidArgumentError("--grammar_mask_cache_bytes must not be negative");
  }
  if (l.default_max_new_tokens > l.sampling.max_new_tokens_cap) {
    return absl::InvalidArgumentError("--default_max_new_tokens exceeds --max_new_tokens_cap");
  }
  return o;
}

absl::StatusOr<std::unique_ptr<StateStore>> OpenStore(absl::Duration ttl) {
  const std::string store = absl::GetFlag(FLAGS_store);
  if (store == "disk") {
    absl::StatusOr<std::unique_ptr<DiskStateStore>> disk =
        DiskStateStore::Open(absl::GetFlag(FLAGS_store_dir), absl::GetFlag(FLAGS_max_store_bytes));
    if (!disk.ok()) return disk.status();
    LogInfo("store_opened", {{"store", "disk"},
                             {"dir", absl::GetFlag(FLAGS_store_dir)},
                             {"stale_temp_files_removed", (*disk)->stale_temp_files_removed()}});
    return std::unique_ptr<StateStore>(*std::move(disk));
  }
  absl::StatusOr<RedisAddress> address = ParseRedisUrl(store);
  if (!address.ok()) return address.status();
  const double timeout = absl::GetFlag(FLAGS_redis_timeout_seconds);
  if (!(timeout > 0 && timeout <= 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--redis_timeout_seconds = ", timeout, " is outside (0, 3600]"));
  }
  absl::StatusOr<std::unique_ptr<RedisStateStore>> redis =
      RedisStateStore::Open(*address, ttl, absl::Seconds(timeout));
  if (!redis.ok()) return redis.status();
  return std::unique_ptr<StateStore>(*std::move(redis));
}

// --served_model_name, or the --model directory's name.
std::string ServedModelName() {
  if (std::string name = absl::GetFlag(FLAGS_served_model_name); !name.empty()) return name;
  std::filesystem::path model(absl::GetFlag(FLAGS_model));
  if (!model.has_filename()) model = model.parent_path();  // "models/x/"
  return std::filesystem::is_directory(model) ? model.filename().string() : model.stem().string();
}

// The HTTP API's options; `listen` is set (non-empty).
absl::StatusOr<HttpOptions> HttpOptionsFromFlags(std::shared_ptr<prometheus::Registry> metrics) {
  HttpOptions h;
  absl::StatusOr<ListenAddress> listen =
      ParseListenAddress("http_listen", absl::GetFlag(FLAGS_http_listen));
  if (!listen.ok()) return listen.status();
  h.listen = *std::move(listen);
  h.io_threads = absl::GetFlag(FLAGS_http_io_threads);
  h.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  h.max_body_bytes = absl::GetFlag(FLAGS_max_http_body_bytes);
  h.max_state_upload_bytes = absl::GetFlag(FLAGS_max_state_upload_bytes);
  HttpLimits& l = h.limits;
  l.keepalive_requests = absl::GetFlag(FLAGS_http_keepalive_requests);
  l.max_header_bytes = absl::GetFlag(FLAGS_max_http_header_bytes);
  l.max_header_count = absl::GetFlag(FLAGS_max_http_header_count);
  const int32_t idle = absl::GetFlag(FLAGS_http_keepalive_seconds);
  const int32_t head = absl::GetFlag(FLAGS_http_head_timeout_seconds);
  const int32_t body = absl::GetFlag(FLAGS_http_body_timeout_seconds);
  const int32_t write = absl::GetFlag(FLAGS_http_write_timeout_seconds);
  l.idle_timeout = absl::Seconds(idle);
  l.head_timeout = absl::Seconds(head);
  l.body_timeout = absl::Seconds(body);
  l.write_timeout = absl::Seconds(write);
  for (auto [flag, value] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"http_io_threads", h.io_threads},
           {"http_max_connections", h.max_connections},
           {"http_keepalive_requests", l.keepalive_requests},
           {"http_keepalive_seconds", idle},
           {"http_head_timeout_seconds", head},
           {"http_body_timeout_seconds", body},
           {"http_write_timeout_seconds", write},
           {"max_http_body_bytes", h.max_body_bytes},
           {"max_http_header_bytes", l.max_header_bytes},
           {"max_http_header_count", l.max_header_count}}) {
    if (absl::Status ok = CheckPositive(flag, value); !ok.ok()) return ok;
  }
  if (l.max_header_bytes > (1 << 30)) {
    return absl::InvalidArgumentError("--max_http_header_bytes must be at most 1 GiB");
  }
  if (const std::string health = absl::GetFlag(FLAGS_health_listen); !health.empty()) {
    absl::StatusOr<ListenAddress> health_listen = ParseListenAddress("health_listen", health);
    if (!health_listen.ok()) return health_listen.status();
    h.health_listen = *std::move(health_listen);
  }
  for (absl::string_view origin :
       absl::StrSplit(absl::GetFlag(FLAGS_http_cors_origins), ',', absl::SkipWhitespace())) {
    h.cors_origins.emplace_back(absl::StripAsciiWhitespace(origin));
  }
  for (absl::string_view host :
       absl::StrSplit(absl::GetFlag(FLAGS_http_allowed_hosts), ',', absl::SkipWhitespace())) {
    std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(host));
    if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
    h.allowed_hosts.push_back(std::move(name));
  }
  h.playground = absl::GetFlag(FLAGS_playground);
  h.served_model_name = ServedModelName();
  h.reasoning_format = absl::GetFlag(FLAGS_reasoning_format);
  if (h.reasoning_format != "auto") {
    if (absl::Status known = ParseReasoningFormat(h.reasoning_format).status(); !known.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--reasoning_format: ", known.message()));
    }
  }
  h.tool_call_format = absl::GetFlag(FLAGS_tool_call_format);
  if (h.tool_call_format != "auto") {
    if (absl::Status known = ParseToolCallFormat(h.tool_call_format).status(); !known.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tool_call_format: ", known.message()));
    }
  }
  h.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  h.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  h.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  if (const std::string tokens = absl::GetFlag(FLAGS_auth_tokens_file); !tokens.empty()) {
    absl::StatusOr<std::vector<TokenEntry>> entries = ReadTokenFile(tokens);
    if (!entries.ok()) return entries.status();
    h.tokens = *std::move(entries);
  }
  if (absl::GetFlag(FLAGS_metrics_on_http)) h.metrics_registry = std::move(metrics);
  return h;
}

int Fail(const char* event, const absl::Status& status) {
  LogError(event, {{"error", status.ToString()}});
  return 1;
}

// What gRPC's AddListeningPort takes for `address`: "[::]:PORT" for every
// interface (gRPC binds IPv4 too there), a bracketed IPv6 literal, or the
// host as written (gRPC binds every address a name resolves to, on one port).
std::string GrpcListenTarget(const ListenAddress& address) {
  if (address.host.empty()) return absl::StrCat("[::]:", address.port);
  return JoinHostPort(address.host, address.port);
}

// gRPC says only that it could not start: binding the addresses ourselves
// finds the reason ("Address already in use") and names the flag.
absl::Status WhyGrpcCannotListen(const ListenAddress& address) {
  absl::StatusOr<std::vector<ListeningSocket>> probe = OpenListeningSockets(address);
  if (!probe.ok()) return probe.status();
  CloseListeningSockets(*probe);
  return absl::UnavailableError(
      absl::StrCat("--", address.flag, "=", address.ToString(), ": gRPC cannot listen there"));
}

int Serve() {
  if (const int32_t keep_mb = absl::GetFlag(FLAGS_malloc_keep_mb); keep_mb < 0 || keep_mb > 2047) {
    return Fail("bad_flags", absl::InvalidArgumentError(absl::StrCat(
                                 "--malloc_keep_mb = ", keep_mb, " is outside [0, 2047]")));
  } else if (absl::Status kept = KeepFreedMemory(int64_t{keep_mb} << 20); !kept.ok()) {
    return Fail("bad_flags", kept);
  }
  absl::StatusOr<ServiceOptions> options = OptionsFromFlags();
  if (!options.ok()) return Fail("bad_flags", options.status());
  absl::StatusOr<ConnectionOptions> connection = ConnectionOptionsFromFlags();
  if (!connection.ok()) return Fail("bad_flags", connection.status());

  // A reader of stdout that went away (`linserve | head -1`) must not take
  // the server down with it when the banner is written: writes to a closed
  // pipe fail with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  // SIGTERM and SIGINT are taken by sigwait below; block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const int32_t threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0 || threads > kMaxEngineThreads) {
    return Fail("bad_flags", absl::InvalidArgumentError(absl::StrCat(
                                 "--threads=", threads, ": 0 (every core this process may run "
                                 "on) or 1 to ", kMaxEngineThreads)));
  }
  // One pool: the engine's. LibTorch's intra-op loops (OpenMP) would spin on
  // the same cores between the pool's jobs, and their split of a tensor
  // changes the bits of an elementwise loop's scalar tail.
  at::set_num_threads(1);
  SetEngineThreads(threads > 0 ? threads : AvailableCores());

  absl::StatusOr<ListenAddress> grpc_listen =
      ParseListenAddress("listen", absl::GetFlag(FLAGS_listen));
  if (!grpc_listen.ok()) return Fail("bad_flags", grpc_listen.status());
  // Resolved here, so that a name that does not resolve is an error naming
  // the flag rather than gRPC's own.
  absl::StatusOr<std::vector<BindAddress>> grpc_addresses = ResolveListenAddress(*grpc_listen);
  if (!grpc_addresses.ok()) return Fail("listen_failed", grpc_addresses.status());

  Metrics metrics;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  int metrics_port = -1;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    absl::StatusOr<ListenAddress> metrics_listen = ListenAddressOf(
        "metrics_host", absl::GetFlag(FLAGS_metrics_host), absl::GetFlag(FLAGS_metrics_port));
    if (!metrics_listen.ok()) return Fail("bad_flags", metrics_listen.status());
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start(*metrics_listen, metrics.registry());
    if (!endpoint.ok()) return Fail("metrics_listen_failed", endpoint.status());
    metrics_endpoint = *std::move(endpoint);
    metrics_port = metrics_endpoint->port();
  }

  LinserveService service(&metrics, *options);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      MakeServerCredentials({absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
                             absl::GetFlag(FLAGS_tls_client_ca_file),
                             absl::GetFlag(FLAGS_auth_tokens_file)});
  if (!credentials.ok()) return Fail("bad_flags", credentials.status());
  builder.AddListeningPort(GrpcListenTarget(*grpc_listen), *credentials, &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  ApplyConnectionOptions(*connection, builder);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return Fail("listen_failed", WhyGrpcCannotListen(*grpc_listen));
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);  // until the model is loaded
  std::unique_ptr<HttpServer> http;
  if (!absl::GetFlag(FLAGS_http_listen).empty()) {
    absl::StatusOr<HttpOptions> http_options = HttpOptionsFromFlags(metrics.registry());
    if (!http_options.ok()) return Fail("bad_flags", http_options.status());
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(*std::move(http_options), &service, &metrics);
    if (!started.ok()) return Fail("listen_failed", started.status());
    http = *std::move(started);
  }
  LogInfo("listening", {{"port", port},
                        {"http_port", http == nullptr ? 0 : http->port()},
                        {"health_port", http == nullptr ? 0 : http->health_port()},
                        {"metrics_port", metrics_port},
                        {"tls", !absl::GetFlag(FLAGS_tls_cert_file).empty()},
                        {"mtls", !absl::GetFlag(FLAGS_tls_client_ca_file).empty()},
                        {"tokens", !absl::GetFlag(FLAGS_auth_tokens_file).empty()}});

  absl::StatusOr<torch::Device> device = ParseDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) return Fail("bad_flags", device.status());
  LoadOptions load;
  load.device = *device;
  load.tokenizer.regex.match_limit = absl::GetFlag(FLAGS_tokenizer_regex_match_limit);
  load.tokenizer.regex.depth_limit = absl::GetFlag(FLAGS_tokenizer_regex_depth_limit);
  if (absl::GetFlag(FLAGS_tokenizer_cache_entries) < 0 ||
      absl::GetFlag(FLAGS_tokenizer_max_json_depth) <= 0 ||
      absl::GetFlag(FLAGS_tokenizer_regex_match_limit) == 0 ||
      absl::GetFlag(FLAGS_tokenizer_regex_depth_limit) == 0) {
    return Fail("bad_flags", absl::InvalidArgumentError(
                                 "--tokenizer_cache_entries must not be negative, and "
                                 "--tokenizer_max_json_depth, --tokenizer_regex_match_limit and "
                                 "--tokenizer_regex_depth_limit must be positive"));
  }
  load.tokenizer.cache_capacity = static_cast<size_t>(absl::GetFlag(FLAGS_tokenizer_cache_entries));
  load.tokenizer.max_json_depth = absl::GetFlag(FLAGS_tokenizer_max_json_depth);
  if (const std::string dtype = absl::GetFlag(FLAGS_dtype); !dtype.empty()) {
    if (absl::Status applied = ApplyDtypeFlag(dtype, load); !applied.ok()) {
      return Fail("bad_flags", applied);
    }
  }
  {
    absl::StatusOr<torch::ScalarType> kv_dtype = ParseComputeDtype(absl::GetFlag(FLAGS_kv_dtype));
    if (!kv_dtype.ok() || (*kv_dtype != torch::kFloat32 && *kv_dtype != torch::kBFloat16)) {
      return Fail("bad_flags", absl::InvalidArgumentError(absl::StrCat(
                                   "--kv_dtype = \"", absl::GetFlag(FLAGS_kv_dtype),
                                   "\" is not float32 or bfloat16")));
    }
    load.kv_dtype = *kv_dtype;
  }
  if (const int64_t block = absl::GetFlag(FLAGS_kv_block_tokens);
      block <= 0 || block % 16 != 0 || block > 4096) {
    return Fail("bad_flags", absl::InvalidArgumentError(absl::StrCat(
                                 "--kv_block_tokens = ", block,
                                 " is not a multiple of 16 between 16 and 4096")));
  }
  load.kv_block_tokens = absl::GetFlag(FLAGS_kv_block_tokens);
  const absl::Time load_start = absl::Now();
  absl::StatusOr<std::unique_ptr<LanguageModel>> model =
      LanguageModel::Load(absl::GetFlag(FLAGS_model), load);
  if (!model.ok()) return Fail("model_load_failed", model.status());
  absl::StatusOr<std::unique_ptr<StateStore>> store = OpenStore(options->scheduler.session_ttl);
  if (!store.ok()) return Fail("store_open_failed", store.status());
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler =
      Scheduler::Start(*std::move(model), store->get(), &metrics, options->scheduler);
  if (!scheduler.ok()) return Fail("scheduler_start_failed", scheduler.status());
  const ModelFacts& facts = (*scheduler)->model_facts();
  // The chat template also decides how gRPC marks reasoning.
  absl::StatusOr<ChatTemplate> chat_template =
      ChatTemplate::ForModel(absl::GetFlag(FLAGS_model), facts.architecture,
                             absl::GetFlag(FLAGS_chat_template_file));
  if (!chat_template.ok()) return Fail("model_load_failed", chat_template.status());
  chat_template->set_special_texts(facts.token_codec->SpecialTexts());
  LogInfo("chat_template", {{"source", chat_template->source()}});
  const ReasoningFormat reasoning_format =
      ResolveReasoningFormat(absl::GetFlag(FLAGS_reasoning_format), &*chat_template);
  if (http != nullptr) http->SetServing(*std::move(chat_template));
  service.SetScheduler(scheduler->get(), reasoning_format);
  health->SetServingStatus(true);
  // Beyond loopback without tokens, anyone who reaches the machine may use
  // the server: said once, as it starts serving.
  std::vector<std::string> grpc_bound;
  for (const BindAddress& a : *grpc_addresses) grpc_bound.push_back(JoinHostPort(a.ip, port));
  const bool open_beyond_loopback =
      std::any_of(grpc_addresses->begin(), grpc_addresses->end(),
                  [](const BindAddress& a) { return !IsLoopbackIp(a.ip); }) ||
      (http != nullptr && (BeyondLoopback(http->sockets()) || BeyondLoopback(http->health_sockets()))) ||
      (metrics_endpoint != nullptr && BeyondLoopback(metrics_endpoint->sockets()));
  if (open_beyond_loopback && absl::GetFlag(FLAGS_auth_tokens_file).empty()) {
    LogWarning("listening_beyond_loopback",
               {{"message",
                 "the server listens on addresses beyond loopback without --auth_tokens_file: "
                 "anyone who can reach this machine can use it"}});
  }
  LogInfo("serving", {{"model", absl::GetFlag(FLAGS_model)},
                      {"architecture", facts.architecture},
                      {"tokenizer", facts.tokenizer},
                      {"dtype", facts.compute_dtype},
                      {"weight_format", facts.weight_format},
                      {"fingerprint", facts.fingerprint},
                      {"device", facts.device},
                      {"state_bytes_per_session", facts.state_bytes_per_session},
                      {"load_ms", absl::ToDoubleMilliseconds(absl::Now() - load_start)}});

  StartupFacts banner;
  banner.served_model_name = ServedModelName();
  banner.architecture = facts.architecture;
  banner.weight_elements = facts.weight_elements;
  banner.weight_bytes = facts.weight_bytes;
  banner.grpc = grpc_bound;
  if (http != nullptr) {
    banner.http = HostPorts(http->sockets());
    banner.health = HostPorts(http->health_sockets());
  }
  if (metrics_endpoint != nullptr) banner.metrics = HostPorts(metrics_endpoint->sockets());
  banner.tls = !absl::GetFlag(FLAGS_tls_cert_file).empty();
  std::cout << StartupBanner(banner) << std::endl;

  int received = 0;
  sigwait(&signals, &received);
  // First stop advertising and accepting, then say so: whoever reads the
  // log line may rely on both.
  health->Shutdown();  // NOT_SERVING from now on
  if (http != nullptr) http->SetDraining();
  (*scheduler)->RefuseNewWork();
  LogInfo("shutting_down", {{"signal", received == SIGTERM ? "SIGTERM" : "SIGINT"},
                            {"running_requests", (*scheduler)->InFlight()}});
  (*scheduler)->Drain(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  http.reset();  // its handlers use the scheduler
  scheduler->reset();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace linserve

int main(int argc, char** argv) {
  // --help lists the flags of this file (absl's default looks for a file
  // named after the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "linserve: streams text from a linear-attention model over gRPC.\n"
      "  linserve --model=models/default --listen=localhost:50051 --store_dir=sessions");
  absl::ParseCommandLine(argc, argv);
  return linserve::Serve();
}
