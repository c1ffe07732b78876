// End to end: damaged and foreign state files sent to a real server through
// ImportSession are refused with the right code, leave no session behind, and
// the server keeps serving.

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/store/state_file.h"
#include "tests/server/corrupt_state_files.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

constexpr int64_t kMaxStateBytes = 1 << 20;

// The state files under the disk store's directory.
int StateFileCount(const std::string& store) {
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(store)) {
    files += entry.is_regular_file() && entry.path().extension() == ".state";
  }
  return files;
}

struct Case {
  std::string name;
  std::string file;
  grpc::StatusCode code;
  std::string message;  // a piece the error must contain
};

TEST(CorruptImportTest, EveryDamagedFileIsRefusedAndTheServerKeepsServing) {
  const std::string model = *WriteTinyModel(FreshDir("corrupt-import-model"), 11);
  const std::string store = FreshDir("corrupt-import-store");
  auto server = ServerProcess::Start({"--model=" + model, "--store_dir=" + store,
                                      "--warmup_steps=0",
                                      "--max_state_bytes=" + std::to_string(kMaxStateBytes)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  auto session = CreateSession(*stub, "a real session's context");
  ASSERT_TRUE(session.ok()) << session.status();
  GenerateOutcome turn = RunGenerate(*stub, MakeRequest("more", session->id(), 8, 1));
  ASSERT_TRUE(turn.status.ok()) << turn.status.error_message();
  auto file = ExportSession(*stub, session->id());
  ASSERT_TRUE(file.ok()) << file.status();

  std::string flipped = *file;
  flipped[flipped.size() / 3] ^= 0x04;
  auto other = ServerProcess::Start({"--model=" + *WriteTinyModel(FreshDir("other-model"), 12),
                                     "--store_dir=" + FreshDir("other-store"),
                                     "--warmup_steps=0"});
  ASSERT_TRUE(other.ok()) << other.status();
  auto other_stub = (*other)->Stub();
  auto foreign = CreateSession(*other_stub, "another model's context");
  ASSERT_TRUE(foreign.ok());
  auto foreign_file = ExportSession(*other_stub, foreign->id());
  ASSERT_TRUE(foreign_file.ok());

  const grpc::StatusCode data_loss = grpc::StatusCode::DATA_LOSS;
  const std::vector<Case> cases = {
      {"truncated", file->substr(0, file->size() / 2), data_loss, "state file"},
      {"bit flip", flipped, data_loss, "checksum mismatch"},
      {"NaN", WithValueInTensor(*file, "layers.0.S", std::nanf("")), data_loss,
       "'layers.0.S' holds NaN or Inf"},
      {"Inf", WithValueInTensor(*file, "layers.1.z", INFINITY), data_loss,
       "'layers.1.z' holds NaN or Inf"},
      {"F16 tensors", WithTensorsAs(*file, c10::ScalarType::Half), data_loss, "has dtype F16"},
      {"huge tensor claimed", ClaimingHugeTensor(*file, "layers.0.S", uint64_t{1} << 40),
       data_loss, "data section has only"},
      {"format version 4", WithFormatVersion(*file, 4), grpc::StatusCode::FAILED_PRECONDITION,
       "format version 4"},
      {"another model", *foreign_file, grpc::StatusCode::FAILED_PRECONDITION,
       "not the served model"},
      {"over max_state_bytes", *file + std::string(kMaxStateBytes, 'x'),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "max_state_bytes = 1048576"},
  };
  const int sessions_before = SessionCount(*stub);
  const int files_before = StateFileCount(store);
  ASSERT_GT(files_before, 0);
  for (const Case& c : cases) {
    v1::Session imported;
    const grpc::Status status = ImportSession(*stub, c.file, &imported);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.message), std::string::npos)
        << c.name << ": " << status.error_message();
    // Still serving, and nothing half-made was left behind.
    GenerateOutcome after = RunGenerate(*stub, MakeRequest("still there?", "", 4, 2));
    EXPECT_TRUE(after.status.ok()) << c.name << ": " << after.status.error_message();
    EXPECT_EQ(SessionCount(*stub), sessions_before) << c.name;
    // Nor any file: an import is checked whole before its file is written.
    EXPECT_EQ(StateFileCount(store), files_before) << c.name;
  }
  // The sound file imports and continues like its source.
  v1::Session imported;
  ASSERT_TRUE(ImportSession(*stub, *file, &imported).ok());
  EXPECT_EQ(imported.position(), turn.finished.position());
  EXPECT_EQ(StateFileCount(store), files_before + 1);
  EXPECT_EQ(RunGenerate(*stub, MakeRequest("next", imported.id(), 8, 3)).text,
            RunGenerate(*stub, MakeRequest("next", session->id(), 8, 3)).text);
}

}  // namespace
}  // namespace linserve
