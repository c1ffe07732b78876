#ifndef LINSERVE_TESTS_SERVER_E2E_HELPERS_H_
#define LINSERVE_TESTS_SERVER_E2E_HELPERS_H_

// Calls and fixtures shared by the end-to-end server tests.

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/base/model_config.h"
#include "linserve/v1/linserve.grpc.pb.h"

namespace linserve {

// Writes a tiny random-weight model (linear_elu + token shift, d32 L2) into
// `dir` and returns `dir`. Different seeds give different fingerprints.
// `add_bos`: the model takes a BOS at the start of a text (config's switch).
absl::StatusOr<std::string> WriteTinyModel(const std::string& dir, uint64_t seed,
                                           bool add_bos = false);
// A random-weight model of `config` written into `dir`; returns `dir`.
absl::StatusOr<std::string> WriteModel(const std::string& dir, const ModelConfig& config,
                                       uint64_t seed);

// A fresh empty directory under the test's temporary directory; removed
// when the program ends if every test passed.
std::string FreshDir(const std::string& name);

// How many seeds a test that repeats one request over seeds runs: `full`,
// or fewer when LINSERVE_TEST_SEEDS says so. The sanitizer runs set it: they
// look for memory and thread errors, which a few dozen seeds reach as well as
// hundreds, at ~30x the cost per seed.
int SeedsForThisRun(int full);

// Path of the shipped default model (a real trained model that writes
// ASCII), for the tests that compare texts across turns.
std::string DefaultModelDir();

// A copy of the model in `model_dir` whose config.json is a FIFO: a server
// started on `dir` blocks loading it until ReleaseModel writes the config,
// so a test decides when loading ends.
struct HeldModel {
  std::string dir;
  std::string config;  // what to write into the FIFO
};
HeldModel HoldModel(const std::string& model_dir, const std::string& name);
void ReleaseModel(const HeldModel& held);

// seed 0: no seed (the server picks one, or a session's turn continues its
// stream); the field is left unset, as a client without a seed sends it.
v1::GenerateRequest MakeRequest(const std::string& prompt, const std::string& session_id,
                                int32_t max_new_tokens, uint64_t seed, float temperature = 0.8f);

struct GenerateOutcome {
  grpc::Status status;
  std::vector<v1::GenerateResponse> messages;
  std::string text;  // every message's text, concatenated
  v1::Finished finished;
  bool has_finished = false;
};

// A real client on a connection of its own whose HTTP/2 receive window stays
// at 1 KB (BDP probing, which grows a default client's window to megabytes,
// is off). A Generate stream it does not read takes about 1 KB of messages and
// then stalls; every message costs at least 8 bytes of window (gRPC's 5-byte
// prefix and the text field), so a turn of a few thousand tokens, left
// unread, cannot finish however fast the machine is. (Left unread on a
// default client, the same turn fits in the window and finishes at once.)
std::unique_ptr<v1::Linserve::Stub> NarrowWindowStub(const std::string& address);

// One Generate call read to the end.
GenerateOutcome RunGenerate(v1::Linserve::Stub& stub, const v1::GenerateRequest& request,
                            absl::Duration deadline = absl::Seconds(120));

// Sessions the server lists (first page of up to 1000; a failed call is a
// test failure).
int SessionCount(v1::Linserve::Stub& stub);

// GetSession; a failed call is a test failure (and an empty Session).
v1::Session GetSession(v1::Linserve::Stub& stub, const std::string& id);

absl::StatusOr<v1::Session> CreateSession(v1::Linserve::Stub& stub, const std::string& prompt = "",
                                          const std::string& cache_salt = "");

// The state file of a session, via ExportSession.
absl::StatusOr<std::string> ExportSession(v1::Linserve::Stub& stub, const std::string& id);
// ImportSession in chunks of `chunk_bytes`.
grpc::Status ImportSession(v1::Linserve::Stub& stub, const std::string& file,
                           v1::Session* session, size_t chunk_bytes = 65536);

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_E2E_HELPERS_H_
