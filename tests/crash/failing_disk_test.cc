// End to end: a real server whose session store sits on a disk that fails on
// demand (the LD_PRELOAD shim failing_disk_shim.c). While it fails, a turn
// reports an error and is undone: the session, in memory and on disk, stays
// at its last finished turn, and it is free for the next turn. New sessions
// (CreateSession, Fork, Import) are refused without a trace. Once the disk
// is back, the session continues exactly as a twin that never had the
// failed turn, also after a restart from the disk.

#include <signal.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "server/store/atomic_file.h"
#include "server/store/state_store.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

namespace fs = std::filesystem;

class FailingDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = *WriteTinyModel(FreshDir("failing-disk-model"), 21);
    store_ = fs::canonical(FreshDir("failing-disk-store")).string();
    control_ = fs::canonical(FreshDir("failing-disk-control")).string() + "/fail";
  }

  // The server with the shim failing calls under the store while the control
  // file exists.
  std::unique_ptr<ServerProcess> StartFailable() {
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string asan_before = asan != nullptr ? asan : "";
    ::setenv("LD_PRELOAD", LINSERVE_FAILING_DISK_SHIM_PATH, 1);
    ::setenv("LINSERVE_FAIL_DIR", store_.c_str(), 1);
    ::setenv("LINSERVE_FAIL_CONTROL", control_.c_str(), 1);
    // An AddressSanitizer build wants its runtime first; the shim comes first.
    ::setenv("ASAN_OPTIONS", (asan_before + ":verify_asan_link_order=0").c_str(), 1);
    auto server = ServerProcess::Start(Flags());
    ::unsetenv("LD_PRELOAD");
    ::unsetenv("LINSERVE_FAIL_DIR");
    ::unsetenv("LINSERVE_FAIL_CONTROL");
    if (asan != nullptr) {
      ::setenv("ASAN_OPTIONS", asan_before.c_str(), 1);
    } else {
      ::unsetenv("ASAN_OPTIONS");
    }
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }
  std::vector<std::string> Flags() const {
    return {"--model=" + model_, "--store_dir=" + store_, "--warmup_steps=0"};
  }

  void FailWith(const std::string& calls_and_errno) {
    std::ofstream(control_) << calls_and_errno << "\n";
  }
  void Heal() { fs::remove(control_); }

  std::string FileOf(const std::string& id) const {
    return store_ + "/" + StoredSessionName({"", id}) + ".state";
  }
  int FilesInStore() const {
    return static_cast<int>(std::distance(fs::directory_iterator(store_), fs::directory_iterator()));
  }

  std::string model_, store_, control_;
};

grpc::Status Fork(v1::Linserve::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::ForkSessionRequest request;
  request.set_session_id(id);
  v1::Session fork;
  return stub.ForkSession(&context, request, &fork);
}

// One turn; its text, after checking it finished.
std::string Turn(v1::Linserve::Stub& stub, const std::string& id, const std::string& prompt,
                 uint64_t seed) {
  GenerateOutcome outcome = RunGenerate(stub, MakeRequest(prompt, id, 12, seed));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_TRUE(outcome.has_finished);
  return outcome.text;
}

TEST_F(FailingDiskTest, AFailedSaveUndoesTheTurnAndTheServerKeepsServing) {
  auto server = StartFailable();
  ASSERT_NE(server, nullptr);
  auto stub = server->Stub();
  // The session under test and its twin, which never sees a failed turn.
  auto session = CreateSession(*stub, "Once upon a time");
  auto twin = CreateSession(*stub, "Once upon a time");
  ASSERT_TRUE(session.ok() && twin.ok());
  EXPECT_EQ(Turn(*stub, session->id(), " there was", 1), Turn(*stub, twin->id(), " there was", 1));

  // A full disk is RESOURCE_EXHAUSTED (retrying will not help until space is
  // freed); an I/O error is UNAVAILABLE.
  const std::vector<std::pair<std::string, grpc::StatusCode>> failures = {
      {"write ENOSPC", grpc::StatusCode::RESOURCE_EXHAUSTED},
      {"fsync EIO", grpc::StatusCode::UNAVAILABLE},
      {"rename EIO", grpc::StatusCode::UNAVAILABLE}};
  uint64_t seed = 10;
  for (const auto& [failure, code] : failures) {
    SCOPED_TRACE(failure);
    const v1::Session before = GetSession(*stub, session->id());
    absl::StatusOr<std::string> file_before = ReadFile(FileOf(session->id()));
    ASSERT_TRUE(file_before.ok()) << file_before.status();
    auto exported = ExportSession(*stub, session->id());
    ASSERT_TRUE(exported.ok());
    const int sessions = SessionCount(*stub), files = FilesInStore();

    FailWith(failure);
    GenerateOutcome failed =
        RunGenerate(*stub, MakeRequest(" a turn that is lost", session->id(), 12, ++seed));
    EXPECT_EQ(failed.status.error_code(), code) << failed.status.error_message();
    EXPECT_TRUE(absl::StrContains(failed.status.error_message(), "saving the session"))
        << failed.status.error_message();
    EXPECT_FALSE(failed.has_finished) << "the stream never hears the turn finished";
    // The session is where its last finished turn left it, and free.
    const v1::Session after = GetSession(*stub, session->id());
    EXPECT_EQ(after.position(), before.position());
    EXPECT_EQ(after.last_used_unix_ms(), before.last_used_unix_ms());
    EXPECT_FALSE(after.busy());
    EXPECT_EQ(*ExportSession(*stub, session->id()), *exported);
    EXPECT_EQ(*ReadFile(FileOf(session->id())), *file_before) << "the file on disk is the old state";

    // New sessions are refused and leave nothing behind.
    const auto absl_code = static_cast<absl::StatusCode>(code);
    EXPECT_EQ(CreateSession(*stub).status().code(), absl_code);
    EXPECT_EQ(CreateSession(*stub, "with a prompt").status().code(), absl_code);
    EXPECT_EQ(Fork(*stub, session->id()).error_code(), code);
    v1::Session imported;
    EXPECT_EQ(ImportSession(*stub, *exported, &imported).error_code(), code);
    EXPECT_EQ(SessionCount(*stub), sessions);
    EXPECT_EQ(FilesInStore(), files) << "no new state file and no temporary";
    // What needs no disk still works.
    EXPECT_TRUE(RunGenerate(*stub, MakeRequest("stateless", "", 4, 1)).status.ok());

    Heal();
    ++seed;
    EXPECT_EQ(Turn(*stub, session->id(), " and then", seed), Turn(*stub, twin->id(), " and then", seed));
    EXPECT_EQ(GetSession(*stub, session->id()).position(), GetSession(*stub, twin->id()).position());
  }

  // The disk holds what the client was told: after a crash and a restart
  // (without the shim) the session still goes on like its twin.
  const std::string expected = Turn(*stub, twin->id(), " The end.", 99);
  server->Signal(SIGKILL);
  server->Wait();
  auto restarted = ServerProcess::Start(Flags());
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(Turn(*(*restarted)->Stub(), session->id(), " The end.", 99), expected);
}

// A save killed between writing its temporary and renaming it leaves the
// temporary behind; the next start removes it, says so, and serves the
// sessions in the store as they were.
TEST_F(FailingDiskTest, StartRemovesTheTemporariesOfKilledSaves) {
  std::string id, expected;
  {
    auto server = ServerProcess::Start(Flags());
    ASSERT_TRUE(server.ok()) << server.status();
    auto stub = (*server)->Stub();
    auto session = CreateSession(*stub, "Once upon a time");
    auto twin = CreateSession(*stub, "Once upon a time");
    ASSERT_TRUE(session.ok() && twin.ok());
    id = session->id();
    expected = Turn(*stub, twin->id(), " there was", 5);
    (*server)->Signal(SIGKILL);
    (*server)->Wait();
  }
  // What killed saves leave: temporaries beside the state file, torn.
  const std::string file = FileOf(id);
  std::ofstream(file + kTempSuffix + "4242-0") << "torn";
  std::ofstream(file + kTempSuffix + "4242-1") << *ReadFile(file) << "and more";
  ASSERT_EQ(FilesInStore(), 4);
  auto server = ServerProcess::Start(Flags());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE((*server)->WaitForLog("\"stale_temp_files_removed\":2", absl::Seconds(1)));
  EXPECT_EQ(FilesInStore(), 2) << "the two state files, no temporary";
  EXPECT_EQ(Turn(*(*server)->Stub(), id, " there was", 5), expected);
}

}  // namespace
}  // namespace linserve
