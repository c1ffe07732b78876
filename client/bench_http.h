#ifndef LINSERVE_CLIENT_BENCH_HTTP_H_
#define LINSERVE_CLIENT_BENCH_HTTP_H_

// The load test over the OpenAI-compatible HTTP API: each request is a
// streamed POST /v1/completions, read by a thread of its own that blocks on
// the socket (one thread per request in flight; threads and their keep-alive
// connections are reused). A session's first turn sends "session":"new" and
// later turns its session_id.
//
// Statuses: "OK" for a 200 stream that ended in [DONE]; "HTTP_<status>" for
// any other answer (HTTP_429, HTTP_503, ...) and for an error event inside a
// stream (its code); "INCOMPLETE_STREAM" for a 200 stream that ended without
// [DONE]; as gRPC would name them, "UNAVAILABLE" when the connection could
// not be made (TLS handshake included) or broke, "DEADLINE_EXCEEDED" past the timeout, "UNKNOWN" for
// anything else.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "client/bench_transport.h"
#include "client/connection.h"

namespace linserve {

// `connection.server` is the HTTP address; --tls makes it https.
absl::StatusOr<std::unique_ptr<BenchTransport>> MakeHttpBenchTransport(
    const ConnectionOptions& connection);

// The body of a request's POST /v1/completions.
nlohmann::json CompletionRequestBody(const BenchRequest& request);

// The vocabulary GET /v1/models reports (data[0].vocab_size and
// special_token_ranges; from llama.cpp's llama-server, data[0].meta.n_vocab
// with no special ranges); FAILED_PRECONDITION when it reports none.
absl::StatusOr<BenchVocabulary> ParseModelsVocabulary(const std::string& body);

// Folds one event of a completion stream (its data) into `outcome`: a piece
// for `clock`, usage, the session; true when it was [DONE].
bool ApplyCompletionEvent(const std::string& data, PieceClock& clock, BenchOutcome& outcome);

}  // namespace linserve

#endif  // LINSERVE_CLIENT_BENCH_HTTP_H_
