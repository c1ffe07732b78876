// PendingImport on its own: an import's two outcomes (its state built, its
// file written) arrive in any order, from any thread, and are handed on
// together exactly once.

#include "server/scheduling/pending_import.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace linserve {
namespace {

SessionRecord RecordWithPayload(std::string payload) {
  SessionRecord record;
  record.position = 7;
  record.payload = std::move(payload);
  return record;
}

State StateAt(int64_t position) {
  State state;
  state.positions = {position};
  return state;
}

enum Step { kState, kWritten, kThen };

TEST(PendingImportTest, BothOutcomesReachThenOnceInEveryOrder) {
  std::array<Step, 3> order = {kState, kWritten, kThen};
  std::sort(order.begin(), order.end());
  do {
    PendingImport import(RecordWithPayload("bytes"));
    int calls = 0;
    int64_t position = -1;
    absl::Status written;
    for (size_t i = 0; i < order.size(); ++i) {
      const Step step = order[i];
      if (step == kState) import.SetState(StateAt(7));
      if (step == kWritten) import.SetWritten(absl::UnavailableError("disk gone"));
      if (step == kThen) {
        import.WhenBoth([&](absl::StatusOr<State> state, absl::Status w) {
          ++calls;
          position = state.ok() ? state->positions[0] : -2;
          written = w;
        });
      }
      // Nothing runs before all three are in.
      if (i + 1 < order.size()) EXPECT_EQ(calls, 0);
    }
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(position, 7);
    EXPECT_EQ(written.code(), absl::StatusCode::kUnavailable);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(PendingImportTest, AFailedBuildIsHandedOnAsIs) {
  PendingImport import(RecordWithPayload("bytes"));
  absl::Status built;
  import.WhenBoth([&](absl::StatusOr<State> state, absl::Status) { built = state.status(); });
  import.SetWritten(absl::OkStatus());
  import.SetState(absl::ResourceExhaustedError("no memory"));
  EXPECT_EQ(built.code(), absl::StatusCode::kResourceExhausted);
}

TEST(PendingImportTest, OutcomesFromTwoThreadsAtOnceRunThenExactlyOnce) {
  for (int round = 0; round < 200; ++round) {
    auto import = std::make_shared<PendingImport>(RecordWithPayload("bytes"));
    std::atomic<int> calls{0};
    import->WhenBoth([&](absl::StatusOr<State>, absl::Status) { ++calls; });
    std::thread builder([&] { import->SetState(StateAt(7)); });
    std::thread writer([&] { import->SetWritten(absl::OkStatus()); });
    builder.join();
    writer.join();
    EXPECT_EQ(calls.load(), 1) << "round " << round;
  }
}

TEST(PendingImportTest, ThePayloadOutlivesTheLastOtherOwner) {
  auto import = std::make_shared<PendingImport>(RecordWithPayload(std::string(1000, 'p')));
  std::shared_ptr<const std::string> payload = PendingImport::Payload(import);
  import.reset();
  ASSERT_EQ(payload->size(), 1000u);
  EXPECT_EQ((*payload)[999], 'p');
}

}  // namespace
}  // namespace linserve
