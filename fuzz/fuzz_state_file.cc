// libFuzzer target: a session's state file on its way in, as ImportSession
// and a restart read it: DecodeStateFileOfModel (sizes, checksum, header),
// then the engine's DeserializeState against a real model (tensor names,
// dtypes and shapes from the model's config), the position and pending-token
// checks, and one decode step from the restored state.
//
// Random bytes almost never carry a valid SHA-256, so by default the input is
// a state file WITHOUT its trailing checksum and the target appends the right
// one: the fuzzer then explores the header and the payload. An input whose
// first byte is '!' is passed on as it is (after that byte), which keeps the
// size and checksum checks covered too.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "engine/base/sha256.h"
#include "fuzz/fuzz_model.h"
#include "server/store/state_file.h"

namespace {

constexpr int64_t kMaxStateBytes = 1 << 20;

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_state_file: broken promise: %s\n", what);
  std::abort();
}

linserve::LanguageModel* model = nullptr;
std::string* fingerprint = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model = linserve::MakeFuzzModel().release();
  fingerprint = new std::string(model->Fingerprint());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string file;
  if (!input.empty() && input[0] == '!') {
    file = std::string(input.substr(1));
  } else {
    file = std::string(input);
    file += linserve::Sha256Digest({input});
  }
  absl::StatusOr<linserve::SessionRecord> record =
      linserve::DecodeStateFileOfModel(file, kMaxStateBytes, *fingerprint);
  if (!record.ok()) {
    const absl::StatusCode code = record.status().code();
    Require(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kFailedPrecondition ||
                code == absl::StatusCode::kResourceExhausted,
            "a refusal with an unexpected code");
    return 0;
  }
  Require(record->position >= 0 && record->pending_token >= -1, "accepted a header out of range");
  // What is accepted is what would be written: encoding it again gives the file.
  Require(linserve::DecodeStateFile(linserve::EncodeStateFile(*record), kMaxStateBytes).ok(),
          "a decoded record does not encode to a valid file");

  absl::StatusOr<linserve::State> state = model->DeserializeState(record->payload);
  // ImportSession decides by the checks alone, in place, before it writes.
  absl::StatusOr<int64_t> checked = model->CheckSerializedState(record->payload);
  Require(checked.status() == state.status(), "the checks alone gave another verdict");
  if (!state.ok()) return 0;
  Require(*checked == state->positions[0], "the checks alone gave another position");
  Require(state->batch_size() == 1, "a state file held more than one session");
  // ImportSession's checks, then the first thing a turn does.
  if (state->positions[0] != record->position) return 0;
  if (record->pending_token >= model->vocab_size()) return 0;
  const int64_t token = record->pending_token >= 0 ? record->pending_token : 0;
  absl::StatusOr<torch::Tensor> logits = model->Step(*state, {token});
  Require(logits.ok(), "a restored state could not take a step");
  Require(state->positions[0] == record->position + 1, "a step did not advance the position");
  return 0;
}
