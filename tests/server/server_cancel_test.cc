// End to end: 200 Generate streams cancelled at random points. Afterwards
// every slot, session and gauge comes back where it was, and no session is
// left busy: a turn on each one succeeds. How long the gauges took is
// printed (tests/chaos/chaos.sh reports it), not judged: a cancel reaches the
// server when its threads run, which a loaded or instrumented machine delays.

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/server/e2e_helpers.h"
#include "tests/server/server_process.h"

namespace linserve {
namespace {

constexpr int kStreams = 200;
constexpr int kClients = 20;

struct Gauges {
  double active = -1, queued = -1, open_streams = -1, sessions = -1;
  bool operator==(const Gauges& o) const {
    return active == o.active && queued == o.queued && open_streams == o.open_streams &&
           sessions == o.sessions;
  }
};

Gauges Read(const ServerProcess& server) {
  Gauges g;
  absl::StatusOr<std::string> m = ScrapeMetrics(server.metrics_port());
  if (!m.ok()) return g;
  g.active = MetricValue(*m, "linserve_active_requests");
  g.queued = MetricValue(*m, "linserve_queue_depth");
  g.open_streams = MetricValue(*m, "linserve_open_streams");
  g.sessions = MetricValue(*m, "linserve_sessions{place=\"device\"}") +
               MetricValue(*m, "linserve_sessions{place=\"host\"}") +
               MetricValue(*m, "linserve_sessions{place=\"store\"}");
  return g;
}

TEST(CancelTest, StreamsCancelledAtRandomPointsLeaveNothingBehind) {
  auto server = ServerProcess::Start(
      {"--model=" + *WriteTinyModel(FreshDir("cancel-model"), 13),
       "--store_dir=" + FreshDir("cancel-store"), "--warmup_steps=0", "--max_batch=16",
       "--max_queued_requests=256", "--stream_buffer_messages=4"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = (*server)->Stub();
  // Half the streams advance a session of their own, half are stateless.
  std::vector<v1::Session> sessions;
  for (int i = 0; i < kStreams / 2; ++i) {
    auto session = CreateSession(*stub, "context " + std::to_string(i));
    ASSERT_TRUE(session.ok()) << session.status();
    sessions.push_back(*session);
  }
  const Gauges baseline = Read(**server);
  ASSERT_EQ(baseline.active, 0);
  ASSERT_EQ(baseline.sessions, kStreams / 2);

  // Each stream is cancelled at one of: before reading, after a random
  // number of messages, or after a random delay (possibly while queued).
  std::atomic<int> cancelled{0}, other{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 random(1000 + c);
      for (int s = c; s < kStreams; s += kClients) {
        const std::string session_id = s % 2 == 0 ? sessions[s / 2].id() : "";
        grpc::ClientContext context;
        auto reader = stub->Generate(&context, MakeRequest("go", session_id, 4096, s));
        v1::GenerateResponse response;
        switch (random() % 3) {
          case 0:
            break;
          case 1:
            for (int n = static_cast<int>(random() % 40); n > 0 && reader->Read(&response); --n) {
            }
            break;
          case 2:
            absl::SleepFor(absl::Microseconds(random() % 30000));
            break;
        }
        context.TryCancel();
        while (reader->Read(&response)) {
        }
        (reader->Finish().error_code() == grpc::StatusCode::CANCELLED ? cancelled : other)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  const absl::Time all_cancelled = absl::Now();
  EXPECT_EQ(cancelled.load(), kStreams);
  EXPECT_EQ(other.load(), 0);

  // Only a leak (a gauge that never comes back) waits the whole minute.
  Gauges now = Read(**server);
  while (!(now == baseline) && absl::Now() - all_cancelled < absl::Seconds(60)) {
    absl::SleepFor(absl::Milliseconds(2));
    now = Read(**server);
  }
  const absl::Duration settled = absl::Now() - all_cancelled;
  std::printf("cancelled %d streams; gauges at baseline %.1f ms after the last cancel\n", kStreams,
              absl::ToDoubleMilliseconds(settled));
  EXPECT_TRUE(now == baseline) << "active " << now.active << " queued " << now.queued
                               << " open " << now.open_streams << " sessions " << now.sessions;

  // No session is left busy, and none moved: a cancelled turn leaves its
  // session as the last finished turn left it. A turn on each succeeds.
  for (const v1::Session& before : sessions) {
    grpc::ClientContext c;
    v1::GetSessionRequest r;
    r.set_session_id(before.id());
    v1::Session after;
    ASSERT_TRUE(stub->GetSession(&c, r, &after).ok());
    EXPECT_FALSE(after.busy()) << before.id();
    EXPECT_EQ(after.position(), before.position()) << before.id();
    GenerateOutcome turn = RunGenerate(*stub, MakeRequest("", before.id(), 3, 1));
    EXPECT_TRUE(turn.status.ok()) << before.id() << ": " << turn.status.error_message();
  }
}

}  // namespace
}  // namespace linserve
